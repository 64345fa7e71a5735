/// The RFC 6455 opening handshake (§4) for both roles, on already-parsed HTTP heads. Pure: the HTTP parser and
/// the socket live elsewhere; the client key's randomness is passed in.
///
/// Header names are compared case-insensitively; a header that appears more than once is treated as one
/// comma-separated list (RFC 9110 §5.3), except `Sec-WebSocket-Key` and `Sec-WebSocket-Version`, which must appear
/// exactly once (RFC 6455 §11.3.1, §11.3.5).
public enum WebSocketHandshake {
    /// The GUID appended to the client key before hashing (§1.3).
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// The only protocol version spoken (§4.1).
    public static let version = "13"

    /// The server's verdict on an upgrade request.
    public enum Decision: Equatable, Sendable {
        /// Upgrade. `key` is the client's `Sec-WebSocket-Key`; `subprotocol` is the one to echo in
        /// `Sec-WebSocket-Protocol`, or `nil` when the client offered none (then the header is omitted).
        case accept(key: String, subprotocol: String?)
        /// Answer with this HTTP status and close. Build the response with `serverRejectionBytes(status:reason:)`,
        /// which adds `Sec-WebSocket-Version: 13` to a 426 as §4.4 requires.
        case reject(status: Int, reason: String)
    }

    /// `base64(SHA-1(key || guid))`, the `Sec-WebSocket-Accept` value for `key` (§4.2.2).
    public static func acceptValue(forKey key: String) -> String {
        Base64.encode(SHA1.hash(Array((key + Self.guid).utf8)))
    }

    /// Whether `key` is a valid `Sec-WebSocket-Key`: canonical base64 of exactly 16 bytes (§4.1).
    public static func validateClientKey(_ key: String) -> Bool {
        key.utf8.count == 24 && Base64.decode(key)?.count == 16
    }

    // MARK: Server

    /// Decides whether to upgrade an HTTP request to a WebSocket (§4.2.1), checking in this order:
    /// 1. method `GET`, else 405;
    /// 2. request path (query string ignored; origin- or absolute-form) equal to `expectedPath`, else 404;
    /// 3. a non-empty `Host`, else 400;
    /// 4. `Upgrade` containing the token `websocket` and `Connection` containing the token `upgrade`
    ///    (case-insensitive, comma lists), else 400;
    /// 5. exactly one `Sec-WebSocket-Version` equal to `13`, else 426 (with `Sec-WebSocket-Version: 13`);
    /// 6. exactly one valid `Sec-WebSocket-Key`, else 400;
    /// 7. subprotocol: if the client offers `subprotocol` it is selected. A client that offers no
    ///    `Sec-WebSocket-Protocol` at all is accepted without one, for tolerance (RFC 6455 allows it). A client
    ///    that offers only other subprotocols is rejected with 400: it expects a protocol we do not speak, and
    ///    protocol-v1 §2 names `homebase-relay.v1` as the one spoken on `/v1/relay`.
    ///
    /// Subprotocol names are compared exactly (they are case-sensitive tokens, §4.1). Other headers
    /// (`Origin`, `Authorization`, `Sec-WebSocket-Extensions`) are the caller's business; no extension is ever
    /// accepted because the response never echoes one.
    public static func serverDecision(
        method: String,
        target: String,
        headers: [(String, String)],
        expectedPath: String,
        subprotocol: String
    ) -> Decision {
        guard method == "GET" else {
            return .reject(status: 405, reason: "WebSocket upgrade requires GET")
        }
        guard Self.path(ofTarget: target) == expectedPath else {
            return .reject(status: 404, reason: "no WebSocket endpoint at this path")
        }
        let host = Self.values(of: "host", in: headers)
        guard host.count == 1, !Self.trimmed(host[0]).isEmpty else {
            return .reject(status: 400, reason: "missing or repeated Host header")
        }
        guard Self.tokens(of: "upgrade", in: headers).contains(where: { Self.equalsIgnoringCase($0, "websocket") })
        else {
            return .reject(status: 400, reason: "missing Upgrade: websocket")
        }
        guard Self.tokens(of: "connection", in: headers).contains(where: { Self.equalsIgnoringCase($0, "upgrade") })
        else {
            return .reject(status: 400, reason: "missing Connection: Upgrade")
        }
        let versions = Self.values(of: "sec-websocket-version", in: headers)
        guard versions.count == 1, Self.trimmed(versions[0]) == Self.version else {
            return .reject(status: 426, reason: "unsupported Sec-WebSocket-Version; only 13 is supported")
        }
        let keys = Self.values(of: "sec-websocket-key", in: headers)
        guard keys.count == 1, case let key = String(Self.trimmed(keys[0])), Self.validateClientKey(key) else {
            return .reject(status: 400, reason: "missing or invalid Sec-WebSocket-Key")
        }
        let offered = Self.tokens(of: "sec-websocket-protocol", in: headers)
        if offered.isEmpty {
            return .accept(key: key, subprotocol: nil)
        }
        guard offered.contains(where: { $0 == subprotocol }) else {
            return .reject(status: 400, reason: "unsupported subprotocol; this endpoint speaks \(subprotocol)")
        }
        return .accept(key: key, subprotocol: subprotocol)
    }

    /// The `101 Switching Protocols` response (§4.2.2). `acceptKey` is the `Sec-WebSocket-Accept` value, i.e.
    /// `acceptValue(forKey:)` of the client's key; see `serverResponseBytes(forClientKey:subprotocol:)`.
    /// `extraHeaders` follow the handshake's own (the relay announces its limits there, `RelaySendLimits`).
    public static func serverResponseBytes(acceptKey: String, subprotocol: String?,
                                           extraHeaders: [(String, String)] = []) -> [UInt8] {
        var lines = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Accept: \(acceptKey)",
        ]
        if let subprotocol {
            lines.append("Sec-WebSocket-Protocol: \(subprotocol)")
        }
        for (name, value) in extraHeaders {
            lines.append("\(name): \(value)")
        }
        return Self.head(lines)
    }

    /// The `101 Switching Protocols` response for a client key taken from `Decision.accept`.
    public static func serverResponseBytes(forClientKey key: String, subprotocol: String?,
                                           extraHeaders: [(String, String)] = []) -> [UInt8] {
        Self.serverResponseBytes(acceptKey: Self.acceptValue(forKey: key), subprotocol: subprotocol,
                                 extraHeaders: extraHeaders)
    }

    /// A complete response for `Decision.reject`: the status, a plain-text `reason` body, `Connection: close`,
    /// and `Sec-WebSocket-Version: 13` when the status is 426 (§4.4).
    public static func serverRejectionBytes(status: Int, reason: String) -> [UInt8] {
        let body = reason + "\n"
        var lines = [
            "HTTP/1.1 \(status) \(Self.reasonPhrase(status))",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Length: \(body.utf8.count)",
            "Connection: close",
        ]
        if status == 426 {
            lines.append("Sec-WebSocket-Version: \(Self.version)")
        }
        return Self.head(lines) + Array(body.utf8)
    }

    // MARK: Client

    /// The client's upgrade request (§4.1). `key` is base64 of 16 random bytes the caller generated.
    /// - Precondition: no argument contains CR or LF (they would split the request; that is a caller bug).
    public static func clientRequestBytes(
        host: String,
        path: String,
        key: String,
        subprotocol: String?,
        extraHeaders: [(String, String)] = []
    ) -> [UInt8] {
        var lines = [
            "GET \(path) HTTP/1.1",
            "Host: \(host)",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: \(key)",
            "Sec-WebSocket-Version: \(Self.version)",
        ]
        if let subprotocol {
            lines.append("Sec-WebSocket-Protocol: \(subprotocol)")
        }
        for (name, value) in extraHeaders {
            lines.append("\(name): \(value)")
        }
        return Self.head(lines)
    }

    /// Checks the server's answer to `clientRequestBytes` (§4.1, "the client MUST validate").
    ///
    /// Requires status 101, `Upgrade: websocket`, `Connection: upgrade`, exactly one `Sec-WebSocket-Accept`
    /// matching `sentKey`, no `Sec-WebSocket-Extensions` (none were offered), and a `Sec-WebSocket-Protocol`, if
    /// present, equal to `subprotocol`.
    /// - Returns: the subprotocol the server selected, or `nil` if it sent none.
    public static func validateServerResponse(
        status: Int,
        headers: [(String, String)],
        sentKey: String,
        subprotocol: String
    ) -> Result<String?, WebSocketHandshakeError> {
        guard status == 101 else { return .failure(.unexpectedStatus(status)) }
        guard Self.tokens(of: "upgrade", in: headers).contains(where: { Self.equalsIgnoringCase($0, "websocket") })
        else {
            return .failure(.missingUpgrade)
        }
        guard Self.tokens(of: "connection", in: headers).contains(where: { Self.equalsIgnoringCase($0, "upgrade") })
        else {
            return .failure(.missingConnectionUpgrade)
        }
        let accepts = Self.values(of: "sec-websocket-accept", in: headers)
        guard accepts.count == 1, Self.trimmed(accepts[0]) == Self.acceptValue(forKey: sentKey) else {
            return .failure(.acceptMismatch)
        }
        guard Self.values(of: "sec-websocket-extensions", in: headers).isEmpty else {
            return .failure(.unexpectedExtensions)
        }
        let selected = Self.tokens(of: "sec-websocket-protocol", in: headers)
        switch selected.count {
        case 0:
            return .success(nil)
        case 1 where selected[0] == subprotocol:
            return .success(subprotocol)
        default:
            return .failure(.unexpectedSubprotocol(selected.joined(separator: ", ")))
        }
    }

    // MARK: Helpers

    /// The path part of a request target: origin-form `/p?q`, or absolute-form `http://host/p?q`.
    static func path(ofTarget target: String) -> Substring {
        var rest = Substring(target)
        if !rest.hasPrefix("/"), let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let authority = rest[rest.index(colon, offsetBy: 3)...]
            rest = authority.firstIndex(of: "/").map { authority[$0...] } ?? "/"
        }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            rest = rest[..<end]
        }
        return rest
    }

    /// Raw values of every header named `name` (lowercase).
    private static func values(of name: String, in headers: [(String, String)]) -> [String] {
        headers.compactMap { Self.equalsIgnoringCase($0.0, name) ? $0.1 : nil }
    }

    /// Non-empty, trimmed comma-separated tokens across every header named `name` (lowercase).
    private static func tokens(of name: String, in headers: [(String, String)]) -> [Substring] {
        Self.values(of: name, in: headers).flatMap { value in
            value.split(separator: ",").map { Self.trimmed($0) }.filter { !$0.isEmpty }
        }
    }

    private static func trimmed<S: StringProtocol>(_ value: S) -> Substring {
        let whitespace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let sub = Substring(value)
        guard let start = sub.firstIndex(where: { !whitespace($0) }) else { return sub[sub.endIndex...] }
        let end = sub.lastIndex(where: { !whitespace($0) })!
        return sub[start...end]
    }

    /// ASCII case-insensitive comparison (HTTP tokens are ASCII; no locale rules apply).
    private static func equalsIgnoringCase<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        return zip(a.utf8, b.utf8).allSatisfy { x, y in Self.asciiLower(x) == Self.asciiLower(y) }
    }

    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    private static func head(_ lines: [String]) -> [UInt8] {
        for line in lines {
            precondition(!line.utf8.contains(13) && !line.utf8.contains(10), "CR/LF inside an HTTP header line")
        }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 503: return "Service Unavailable"
        default: return "Error"
        }
    }
}

/// Why a client refuses the server's handshake response (RFC 6455 §4.1); the connection is then dropped.
public enum WebSocketHandshakeError: Error, Equatable, Sendable {
    /// The status was not 101 (e.g. 401 without a token, 426 on a version mismatch).
    case unexpectedStatus(Int)
    /// No `Upgrade: websocket`.
    case missingUpgrade
    /// No `upgrade` token in `Connection`.
    case missingConnectionUpgrade
    /// `Sec-WebSocket-Accept` missing, repeated or not derived from our key.
    case acceptMismatch
    /// The server selected an extension we never offered.
    case unexpectedExtensions
    /// The server selected a subprotocol other than ours (the selected value is attached).
    case unexpectedSubprotocol(String)
}
