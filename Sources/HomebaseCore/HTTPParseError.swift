/// Why an HTTP/1.1 head was refused (RFC 9112). Each case says which status a server answers with.
public enum HTTPParseError: Error, Equatable, Sendable {
    /// The head grew past `HTTPHeadLimits.maxHeadBytes` before its blank line arrived. Answer 431 and close.
    case headTooLarge
    /// The head carries more than `HTTPHeadLimits.maxHeaderCount` fields. Answer 431 and close.
    case tooManyHeaders
    /// The peer broke the grammar (bad start line, bad field, obsolete folding, control bytes, bad version,
    /// conflicting framing). Answer 400 and close: the framing of anything after it cannot be trusted.
    case malformed(String)

    /// The status a server sends back for this error.
    public var status: Int {
        switch self {
        case .headTooLarge, .tooManyHeaders: 431
        case .malformed: 400
        }
    }
}

/// Bounds on one request or response head. Defaults follow h11 and node.js (16 KiB) and Apache (100 fields).
public struct HTTPHeadLimits: Sendable, Equatable {
    /// Start line plus all fields plus line endings. A head is buffered whole, so this bounds memory per connection.
    public var maxHeadBytes = 16 * 1024
    /// Header fields in one head.
    public var maxHeaderCount = 100

    public init(maxHeadBytes: Int = 16 * 1024, maxHeaderCount: Int = 100) {
        precondition(maxHeadBytes > 0 && maxHeaderCount > 0, "HTTP head limits must be positive")
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
    }
}

/// The protocol version of a start line. Only HTTP/1.0 and HTTP/1.1 are accepted.
public struct HTTPVersion: Sendable, Equatable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(self.major).\(self.minor)" }
}

/// One header field as it arrived: the name keeps its case, the value has its surrounding whitespace removed.
public struct HTTPHeaderField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// Case-insensitive lookups and framing shared by request and response heads.
public protocol HTTPHeadFields {
    /// Fields in arrival order.
    var headers: [HTTPHeaderField] { get }
}

extension HTTPHeadFields {
    /// The first value of the named field (case-insensitive), or `nil`.
    public func header(_ name: String) -> String? {
        self.headers.first { HTTPSyntax.equalsIgnoringCase($0.name, name) }?.value
    }

    /// Every value of the named field, in order.
    public func headerValues(_ name: String) -> [String] {
        self.headers.filter { HTTPSyntax.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// `Content-Length` as a number. The parsers have already rejected bad or conflicting values.
    public var contentLength: Int? {
        self.header("Content-Length").flatMap { Int($0) }
    }

    /// True when the last transfer coding is `chunked` (RFC 9112 §6.3).
    public var isChunked: Bool {
        let codings = self.headerValues("Transfer-Encoding")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingSpaces().lowercased() }
        return codings.last == "chunked"
    }

    /// Comma-separated tokens of the `Connection` field, lower-cased.
    public var connectionTokens: [String] {
        self.headerValues("Connection")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingSpaces().lowercased() }
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
