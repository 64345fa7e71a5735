/// The rules of the Homebase's local status page (`homebase run --ui`), decided on the request head alone: which
/// route a request names, and whether it may have it. Pure: the HTTP shell passes the head and the body's size,
/// then serves the route or sends the refusal, and holds no rule of its own.
///
/// In order, a request is refused:
/// 1. `400` without a Host header, `403` when its host is not a loopback name or address (`localhost`,
///    `127.0.0.0/8`, `::1`), one the owner configured (`allowedHosts`), or, with an access token set, one of the
///    machine's own addresses and names (`ownHosts`): a page of another site whose name resolves to 127.0.0.1
///    (DNS rebinding) sends its own name, and gets nothing; it cannot carry the token either, so with a token
///    the machine's own names are safe to allow (`--ui 0.0.0.0 --ui-token` works from the LAN as it is);
/// 2. `413` when its body (declared or read) is larger than `maxBodyBytes`;
/// 3. `404` for an unknown path, `405` for a known path with another method;
/// 4. `401` when an access token is set and the request carries it neither as `Authorization: Bearer` nor in the
///    `homebase_ui` cookie (`GET /?token=…` sets that cookie: `.login`);
/// 5. for a POST (an action): `403` when its `Origin` is not the page's own origin, or its `X-CSRF-Token` is not
///    this daemon's token; `415` unless the body is JSON. The CSRF token is embedded in the page, and another
///    origin can neither read it nor send a custom header without a CORS preflight, which the page never allows.
public struct StatusPageGate: Sendable {
    /// What a request asks for.
    public enum Route: Equatable, Sendable {
        /// `GET /`: the page, with the CSRF token embedded.
        case page
        /// `GET /app.css`, `GET /app.js`: an embedded asset, by its path.
        case asset(String)
        /// `GET /api/status`: the status as JSON (`homebase status --json` reads it too).
        case status
        /// `GET /api/events`: the status again at each change, as Server-Sent Events.
        case events
        /// `POST /api/<action>`.
        case action(Action)
    }

    /// The owner's actions, each a POST with a JSON body.
    public enum Action: String, Equatable, Sendable, CaseIterable {
        /// `{"guest": hex, "models": [tags] or ["*"], "expires_hours": n or null}`
        case grant
        /// `{"guest": hex}`
        case revoke
        /// `{"guest": hex}`: forgets a pending join.
        case decline
        /// `{"peer": hex, "id": request id}`: stops one request without revoking anyone.
        case stop
        /// `{}`: a new pairing code (as `homebase pair`), answered with its text and QR code.
        case pair
        /// `{"model": tag, "pinned": bool}`
        case pin
    }

    public enum Decision: Equatable, Sendable {
        case serve(Route)
        /// `GET /?token=T` with the right token: set the cookie and redirect to `/` (the token leaves the URL bar).
        case login
        case refuse(status: Int, reason: String)

        /// The refusal of a Host this page does not answer to (DNS rebinding): the server may ask the machine for
        /// its addresses again before it believes it.
        public static let hostNotAllowed = Decision.refuse(status: 403, reason: "host not allowed")
    }

    public struct Configuration: Sendable, Equatable {
        /// Host names (or addresses) accepted besides the loopback ones, lower-case, without port.
        public var allowedHosts: [String]
        /// Required on every request when set (`--ui-token`); a page on a non-loopback address must have one.
        public var accessToken: String?
        /// This daemon's CSRF token, random per start.
        public var csrfToken: String
        /// The largest action body: actions are a few hundred bytes of JSON.
        public var maxBodyBytes: Int
        /// The machine's own addresses and host names, lower-case: accepted as hosts when `accessToken` is set.
        public var ownHosts: [String]

        public init(allowedHosts: [String] = [], accessToken: String?, csrfToken: String,
                    maxBodyBytes: Int = 16 * 1024, ownHosts: [String] = []) {
            precondition(!csrfToken.isEmpty, "the CSRF token must not be empty")
            self.allowedHosts = allowedHosts.map { $0.lowercased() }
            self.ownHosts = ownHosts.map { $0.lowercased() }
            self.accessToken = accessToken
            self.csrfToken = csrfToken
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// The cookie that carries the access token after `GET /?token=…`.
    public static let cookieName = "homebase_ui"
    /// The header that carries the CSRF token on a POST.
    public static let csrfHeader = "X-CSRF-Token"

    public let configuration: Configuration

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// Why the page may not be served so: a non-loopback address needs an access token, and a token must be
    /// 16 or more letters, digits or `-._~` (it goes into a cookie and a URL as it is).
    public static func bindProblem(host: String, accessToken: String?) -> String? {
        if let accessToken {
            let allowed = accessToken.unicodeScalars.allSatisfy { c in
                c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "-._~".unicodeScalars.contains(c))
            }
            guard accessToken.utf8.count >= 16, allowed else {
                return "--ui-token must be 16 or more letters, digits or -._~"
            }
            return nil
        }
        if Self.isLoopback(host: host.lowercased()) { return nil }
        return "--ui \(host) is not a loopback address: set --ui-token (16 characters or more) to serve it there"
    }

    /// Decides one request. `bodyBytes` is the body's size as read (0 before reading it: the declared
    /// `Content-Length` is checked too).
    public func decide(_ head: HTTPRequestHead, bodyBytes: Int = 0) -> Decision {
        guard let hostHeader = head.header("Host") else { return .refuse(status: 400, reason: "no Host header") }
        guard let host = Self.hostName(hostHeader), self.hostAllowed(host) else {
            return .hostNotAllowed
        }
        if max(bodyBytes, head.contentLength ?? 0) > self.configuration.maxBodyBytes {
            return .refuse(status: 413, reason: "request body too large")
        }
        let route: Route
        switch self.route(head.path) {
        case nil:
            return .refuse(status: 404, reason: "not found")
        case .action(let action)?:
            guard head.method == "POST" else { return .refuse(status: 405, reason: "use POST") }
            route = .action(action)
        case .events?:
            // An event stream is the body: HEAD would hold a connection open for nothing.
            guard head.method == "GET" else { return .refuse(status: 405, reason: "use GET") }
            route = .events
        case let other?:
            guard head.method == "GET" || head.method == "HEAD" else { return .refuse(status: 405, reason: "use GET") }
            route = other
        }
        if let token = self.configuration.accessToken, !self.authenticated(head, token: token) {
            if route == .page, let offered = head.queryValue("token"), Self.constantTimeEquals(offered, token) {
                return .login
            }
            return .refuse(status: 401, reason: "this page needs its access token")
        }
        if case .action = route {
            if let origin = head.header("Origin"), !Self.sameOrigin(origin, host: hostHeader) {
                return .refuse(status: 403, reason: "cross-origin request refused")
            }
            guard let offered = head.header(Self.csrfHeader),
                  Self.constantTimeEquals(offered, self.configuration.csrfToken)
            else { return .refuse(status: 403, reason: "missing or wrong CSRF token") }
            let type = head.header("Content-Type")?.split(separator: ";").first.map {
                $0.trimmingSpaces.lowercased()
            }
            guard type == "application/json" else { return .refuse(status: 415, reason: "send JSON") }
        }
        return .serve(route)
    }

    /// The route table.
    func route(_ path: String) -> Route? {
        switch path {
        case "/", "/index.html": .page
        case "/app.css", "/app.js": .asset(path)
        case "/api/status": .status
        case "/api/events": .events
        default:
            path.hasPrefix("/api/") ? Action(rawValue: String(path.dropFirst(5))).map { .action($0) } : nil
        }
    }

    private func authenticated(_ head: HTTPRequestHead, token: String) -> Bool {
        if let authorization = head.header("Authorization"), authorization.hasPrefix("Bearer "),
           Self.constantTimeEquals(String(authorization.dropFirst(7)), token) {
            return true
        }
        for header in head.headerValues("Cookie") {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingSpaces == Self.cookieName,
                   Self.constantTimeEquals(parts[1].trimmingSpaces, token) {
                    return true
                }
            }
        }
        return false
    }

    private func hostAllowed(_ host: String) -> Bool {
        Self.isLoopback(host: host) || self.configuration.allowedHosts.contains(host)
            || (self.configuration.accessToken != nil && self.configuration.ownHosts.contains(host))
    }

    /// The host of a Host header, lower-case, without port or IPv6 brackets; nil when it is malformed.
    static func hostName(_ header: String) -> String? {
        let value = header.trimmingSpaces.lowercased()
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return nil }
            let rest = value[value.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && Self.isPort(rest.dropFirst())) else { return nil }
            return String(value[value.index(after: value.startIndex)..<close])
        }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, let name = parts.first, !name.isEmpty else { return nil }
        if parts.count == 2, !Self.isPort(parts[1]) { return nil }
        return String(name)
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `localhost`, any address of 127.0.0.0/8, or `::1`. Names that merely end in `localhost` are not loopback.
    public static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { o in o.count <= 3 && !o.isEmpty && o.allSatisfy(\.isASCII) && UInt8(o) != nil }
    }

    /// Whether an Origin header names the page's own origin (`http://` plus the Host header).
    static func sameOrigin(_ origin: String, host: String) -> Bool {
        origin.lowercased() == "http://" + host.trimmingSpaces.lowercased()
    }

    /// Compares secrets in time that depends on their lengths only, not on where they first differ.
    public static func constantTimeEquals<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
