/// The rules of the local API's door (issue 36), decided on the request head alone. Pure: the HTTP shell passes
/// the head (and the body's size), then serves the endpoint or sends the refusal; it holds no rule of its own.
///
/// In order, a request is refused:
/// 1. `403 host_not_allowed` when its Host header is missing or names a host other than `localhost`,
///    `127.0.0.1`, `[::1]` (with or without the port), the `--listen` host or an `--allow-host` name: a page of
///    another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own name, and gets nothing;
/// 2. an `OPTIONS` preflight is answered 204 with the CORS headers when `--cors ORIGIN` is set and the request's
///    Origin is that origin, else 403 (browsers send no credentials on a preflight, so it comes before the token);
/// 3. `401 invalid_api_key` when a token is set and the request does not carry `Authorization: Bearer T`;
/// 4. `413` when its declared body is larger than `maxBodyBytes`;
/// 5. `404` for an unknown path, `405` for a known path with another method.
///
/// CORS: no `Access-Control-*` header at all unless `--cors ORIGIN` is set, then only for that origin.
public struct LocalAPIGate: Sendable {
    /// What a request asks for.
    public enum Endpoint: Sendable, Equatable {
        /// `GET /`: a plain "Homebase is running" (Ollama answers its root so; some apps probe it).
        case root
        /// `GET /v1/models`.
        case models
        /// `GET /v1/models/{id}`.
        case model(String)
        /// `POST /v1/chat/completions`.
        case chatCompletions
        /// `GET /api/version`.
        case ollamaVersion
        /// `GET /api/tags`.
        case ollamaTags
        /// `POST /api/show`.
        case ollamaShow
        /// `POST /api/chat`.
        case ollamaChat
        /// `GET /api/ps`.
        case ollamaPS

        /// Whether errors on it take Ollama's shape `{"error": "…"}` (body errors only; the door's refusals are
        /// OpenAI-shaped everywhere).
        public var isOllama: Bool {
            switch self {
            case .ollamaVersion, .ollamaTags, .ollamaShow, .ollamaChat, .ollamaPS: true
            default: false
            }
        }
    }

    public enum Decision: Sendable, Equatable {
        case serve(Endpoint)
        /// A CORS preflight from the allowed origin: answer 204 with `corsHeaders`.
        case preflight
        case refuse(LocalAPIError)
    }

    public struct Configuration: Sendable, Equatable {
        /// Required on every request when set: `Authorization: Bearer T`.
        public var token: String?
        /// The `--listen` host, accepted as a Host name.
        public var listenHost: String
        /// `--allow-host` names, accepted as Host names.
        public var allowedHosts: [String]
        /// `--cors ORIGIN`: the only origin given CORS headers; nil: none at all.
        public var corsOrigin: String?
        /// The largest request body.
        public var maxBodyBytes: Int

        public init(token: String? = nil, listenHost: String = "127.0.0.1", allowedHosts: [String] = [],
                    corsOrigin: String? = nil, maxBodyBytes: Int = 1 << 20) {
            self.token = token
            self.listenHost = listenHost
            self.allowedHosts = allowedHosts
            self.corsOrigin = corsOrigin
            self.maxBodyBytes = maxBodyBytes
        }
    }

    public let configuration: Configuration
    private let hosts: Set<String>

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        var hosts: Set<String> = ["localhost", "127.0.0.1", "::1"]
        for name in [configuration.listenHost] + configuration.allowedHosts {
            if let host = Self.hostName(name) { hosts.insert(host) }
        }
        self.hosts = hosts
    }

    /// Why `serve` may not start with these settings: a non-loopback listen address needs a token.
    public static func bindProblem(tool: String, listenHost: String, token: String?) -> String? {
        if let token, token.isEmpty || token.contains(where: { $0.isWhitespace || !$0.isASCII }) {
            return "\(tool) serve: --token must be printable ASCII without spaces"
        }
        guard token == nil else { return nil }
        let host = Self.hostName(listenHost) ?? listenHost
        if host == "localhost" || host == "::1" || StatusPageGate.isLoopback(host: host) { return nil }
        return "\(tool) serve: a non-loopback --listen needs --token T"
    }

    /// Decides one request.
    public func decide(_ head: HTTPRequestHead, bodyBytes: Int = 0) -> Decision {
        guard let header = head.header("Host"), let host = Self.hostName(header), self.hosts.contains(host) else {
            return .refuse(LocalAPIError(
                status: 403, message: "this Host is not allowed (start serve with --allow-host NAME to allow it)",
                code: "host_not_allowed"))
        }
        if head.method == "OPTIONS" {
            guard let allowed = self.configuration.corsOrigin, head.header("Origin") == allowed else {
                return .refuse(LocalAPIError(status: 403, message: "cross-origin requests are not allowed here",
                                             code: "cors_not_allowed"))
            }
            return .preflight
        }
        if let token = self.configuration.token {
            let offered = head.header("Authorization").flatMap { value -> String? in
                let parts = value.split(separator: " ", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
                return String(parts[1])
            }
            guard let offered, StatusPageGate.constantTimeEquals(offered, token) else {
                return .refuse(LocalAPIError(
                    status: 401, message: "missing or wrong API key: send 'Authorization: Bearer' with serve's --token",
                    code: "invalid_api_key"))
            }
        }
        if max(bodyBytes, head.contentLength ?? 0) > self.configuration.maxBodyBytes {
            return .refuse(LocalAPIError(status: 413, message: "the request body is larger than "
                                         + "\(self.configuration.maxBodyBytes) bytes", code: "request_too_large"))
        }
        guard let (endpoint, methods) = Self.route(head.path) else {
            return .refuse(LocalAPIError(status: 404, message: "no such endpoint: \(Self.clip(head.path))",
                                         code: "not_found"))
        }
        guard methods.contains(head.method) else {
            return .refuse(LocalAPIError(status: 405, message: "use \(methods[0]) for \(Self.clip(head.path))",
                                         code: "method_not_allowed"))
        }
        return .serve(endpoint)
    }

    /// The CORS headers for a response to `head`: none unless `--cors` is set and the request comes from it.
    public func corsHeaders(_ head: HTTPRequestHead) -> [(String, String)] {
        guard let allowed = self.configuration.corsOrigin, head.header("Origin") == allowed else { return [] }
        var headers = [("Access-Control-Allow-Origin", allowed), ("Vary", "Origin")]
        if head.method == "OPTIONS" {
            headers += [("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                        ("Access-Control-Allow-Headers", "Authorization, Content-Type"),
                        ("Access-Control-Max-Age", "600")]
        } else {
            headers.append(("Access-Control-Expose-Headers",
                            "X-Homebase-Route, X-Homebase-Provider, X-Homebase-Fallback"))
        }
        return headers
    }

    /// The route table: an endpoint and its methods (the first one named in a 405).
    static func route(_ path: String) -> (Endpoint, [String])? {
        switch path {
        case "/": return (.root, ["GET", "HEAD"])
        case "/v1/models": return (.models, ["GET"])
        case "/v1/chat/completions": return (.chatCompletions, ["POST"])
        case "/api/version": return (.ollamaVersion, ["GET"])
        case "/api/tags": return (.ollamaTags, ["GET"])
        case "/api/show": return (.ollamaShow, ["POST"])
        case "/api/chat": return (.ollamaChat, ["POST"])
        case "/api/ps": return (.ollamaPS, ["GET"])
        default:
            let prefix = "/v1/models/"
            guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count, path.utf8.count <= 300 else {
                return nil
            }
            let id = Self.percentDecoded(String(path.dropFirst(prefix.count)))
            return id.map { (.model($0), ["GET"]) }
        }
    }

    /// The host of a Host header (or `--listen` host), lower-case, without port or IPv6 brackets; nil when malformed.
    static func hostName(_ header: String) -> String? {
        let value = header.lowercased().filter { $0 != " " && $0 != "\t" }
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return nil }
            let rest = value[value.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && Self.isPort(rest.dropFirst())) else { return nil }
            let inner = value[value.index(after: value.startIndex)..<close]
            return inner.isEmpty ? nil : String(inner)
        }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count > 2 { return value.contains("::") || parts.count <= 8 ? (value.isEmpty ? nil : value) : nil }
        guard let name = parts.first, !name.isEmpty else { return nil }
        if parts.count == 2, !Self.isPort(parts[1]) { return nil }
        return String(name)
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `%XX` decoding of a path segment; nil for a bad escape or invalid UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var it = Array(text.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%") {
                guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else {
                    return nil
                }
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// A hostile value quoted back in an error, cut to at most `maxBytes` bytes of UTF-8 (whole characters).
    public static func clip(_ text: String, maxBytes: Int = 60) -> String {
        guard text.utf8.count > maxBytes else { return text }
        var out = ""
        var bytes = 0
        for character in text {
            bytes += character.utf8.count
            if bytes > maxBytes { break }
            out.append(character)
        }
        return out + "…"
    }
}
