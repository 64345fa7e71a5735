import HomebaseCore

/// One request as the simple server hands it to a handler: the parsed head and the whole body.
public struct HTTPServerRequest: Sendable {
    public var head: HTTPRequestHead
    /// The body, de-chunked if it came chunked; empty when there was none.
    public var body: [UInt8]

    public init(head: HTTPRequestHead, body: [UInt8] = []) {
        self.head = head
        self.body = body
    }

    public var method: String { self.head.method }
    /// The target without its query, not percent-decoded.
    public var path: String { self.head.path }

    /// The first value of a header (case-insensitive).
    public func header(_ name: String) -> String? { self.head.header(name) }
}
