/// A parsed HTTP/1.x request head (RFC 9112 §3).
public struct HTTPRequestHead: Sendable, Equatable, HTTPHeadFields {
    /// The method token as sent (`GET`, `POST`, …); methods are case-sensitive.
    public var method: String
    /// The request target exactly as sent, query included.
    public var target: String
    /// The target up to `?`, not percent-decoded (routing compares it raw).
    public var path: String
    /// Query parameters in order, percent-decoded, `+` read as a space. A key without `=` has an empty value.
    public var query: [QueryItem]
    public var version: HTTPVersion
    public var headers: [HTTPHeaderField]

    /// One `name=value` pair of the query.
    public struct QueryItem: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(method: String, target: String, version: HTTPVersion = .http1_1, headers: [HTTPHeaderField] = []) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        if let q = target.firstIndex(of: "?") {
            self.path = String(target[..<q])
            self.query = target[target.index(after: q)...].split(separator: "&").map { pair in
                if let eq = pair.firstIndex(of: "=") {
                    return QueryItem(
                        name: HTTPSyntax.percentDecode(pair[..<eq], plusIsSpace: true),
                        value: HTTPSyntax.percentDecode(pair[pair.index(after: eq)...], plusIsSpace: true))
                }
                return QueryItem(name: HTTPSyntax.percentDecode(pair, plusIsSpace: true), value: "")
            }
        } else {
            self.path = target
            self.query = []
        }
    }

    /// The first value of a query parameter.
    public func queryValue(_ name: String) -> String? {
        self.query.first { $0.name == name }?.value
    }

    /// Whether the connection stays open after this exchange (RFC 9112 §9.3): HTTP/1.1 unless
    /// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool {
        let tokens = self.connectionTokens
        if self.version == .http1_0 { return tokens.contains("keep-alive") }
        return !tokens.contains("close")
    }
}

/// Incremental, pure parser of HTTP/1.1 request heads (Sans-IO, after h11).
///
/// Feed bytes with `append(_:)`, then call `next()` until it returns `nil` (more bytes needed). Bytes after a
/// head (a body, WebSocket frames) stay buffered: the caller removes them with `takeBuffered(maxBytes:)` before
/// asking for the next pipelined head. Once `next()` throws, it throws the same error forever: answer with
/// `error.status` and close.
///
/// Accepted leniencies: bare-LF line endings (RFC 9112 §2.2 "MAY"), blank lines before the request line.
public struct HTTPRequestHeadParser: Sendable {
    private var scanner: HTTPHeadScanner

    public init(limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.scanner = HTTPHeadScanner(limits: limits)
    }

    /// Adds received bytes. Cheap: limits are enforced by the next `next()`.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.scanner.append(bytes)
    }

    /// Bytes received but not yet consumed by a head or by `takeBuffered`.
    public var bufferedCount: Int { self.scanner.bufferedCount }

    /// Removes and returns up to `maxBytes` of the bytes after the last returned head.
    public mutating func takeBuffered(maxBytes: Int = .max) -> [UInt8] {
        self.scanner.take(maxBytes: maxBytes)
    }

    /// The next complete request head, or `nil` when more bytes are needed.
    public mutating func next() throws(HTTPParseError) -> HTTPRequestHead? {
        guard let lines = try self.scanner.nextHead() else { return nil }
        defer { self.scanner.didReturnHead() }
        return try Self.parse(lines)
    }

    static func parse(_ lines: [ArraySlice<UInt8>]) throws(HTTPParseError) -> HTTPRequestHead {
        let requestLine = lines[0]
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("bad request line") }
        let method = parts[0], target = parts[1]
        guard !method.isEmpty, method.allSatisfy(HTTPSyntax.isTokenChar) else { throw .malformed("bad method") }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .malformed("bad request target")
        }
        let version = try HTTPSyntax.version(parts[2])
        let fields = try HTTPSyntax.fields(lines[1...])
        try HTTPSyntax.validateFraming(fields, isRequest: true)
        if version == .http1_1 && !fields.contains(where: { HTTPSyntax.equalsIgnoringCase($0.name, "Host") }) {
            // RFC 9112 §3.2 requires 400 for an HTTP/1.1 request without Host.
            throw .malformed("missing Host header")
        }
        return HTTPRequestHead(
            method: HTTPSyntax.string(method), target: HTTPSyntax.string(target), version: version, headers: fields)
    }
}
