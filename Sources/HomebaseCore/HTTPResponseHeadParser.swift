/// A parsed HTTP/1.x response head (RFC 9112 §4).
public struct HTTPResponseHead: Sendable, Equatable, HTTPHeadFields {
    public var version: HTTPVersion
    /// The three-digit status code.
    public var status: Int
    /// The reason phrase, possibly empty; clients must not rely on it.
    public var reason: String
    public var headers: [HTTPHeaderField]

    public init(version: HTTPVersion = .http1_1, status: Int, reason: String, headers: [HTTPHeaderField] = []) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
    }
}

/// Incremental, pure parser of HTTP/1.1 response heads, for clients. Same contract as `HTTPRequestHeadParser`:
/// `append`, then `next()` until `nil`; the body stays buffered for `takeBuffered(maxBytes:)`.
///
/// A 1xx head (`100 Continue`) is returned like any other; the caller skips it and asks again.
public struct HTTPResponseHeadParser: Sendable {
    private var scanner: HTTPHeadScanner

    public init(limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.scanner = HTTPHeadScanner(limits: limits)
    }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.scanner.append(bytes)
    }

    public var bufferedCount: Int { self.scanner.bufferedCount }

    public mutating func takeBuffered(maxBytes: Int = .max) -> [UInt8] {
        self.scanner.take(maxBytes: maxBytes)
    }

    /// The next complete response head, or `nil` when more bytes are needed.
    public mutating func next() throws(HTTPParseError) -> HTTPResponseHead? {
        guard let lines = try self.scanner.nextHead() else { return nil }
        defer { self.scanner.didReturnHead() }
        let statusLine = lines[0]
        // status-line = HTTP-version SP status-code SP [ reason-phrase ]; tolerate a missing final SP.
        let parts = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2 else { throw .malformed("bad status line") }
        let version = try HTTPSyntax.version(parts[0])
        let code = parts[1]
        guard code.count == 3, code.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let status = Int(HTTPSyntax.string(code)),
            status >= 100
        else { throw .malformed("bad status code") }
        let reason = parts.count == 3 ? parts[2] : []
        guard reason.allSatisfy(HTTPSyntax.isFieldValueChar) else { throw .malformed("bad reason phrase") }
        let fields = try HTTPSyntax.fields(lines[1...])
        try HTTPSyntax.validateFraming(fields, isRequest: false)
        return HTTPResponseHead(version: version, status: status, reason: HTTPSyntax.string(reason), headers: fields)
    }
}
