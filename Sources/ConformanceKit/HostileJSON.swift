import HomebaseCore

/// Plaintexts that are deep or huge JSON, each filling up to `budget` bytes (the largest plaintext an envelope
/// under max_payload carries). A receiver must refuse them without overflowing its stack or holding more than a
/// bounded amount of memory. Where a shape looks like a message a peer may send, it ends as our writer ends that
/// message (keys sorted, `"type"` last), so a receiver's fast path for that type is tried too.
enum HostileJSON {
    struct Shape {
        var name: String
        var channel: Channel
        var bytes: [UInt8]
        /// A granted guest must get `infer.error bad_request` for this one (a rule of messages.md §2).
        var mustBeRefused = false
    }

    static func nested(_ open: String, _ close: String, depth: Int, inner: String = "") -> String {
        String(repeating: open, count: depth) + inner + String(repeating: close, count: depth)
    }

    /// Deep shapes: nesting far past any parser's depth limit. A request's id is `requestID` (a granted guest may
    /// get `infer.error bad_request` for it).
    static func deep(budget: Int, requestID: String) -> [Shape] {
        let room = budget - 200
        let arrays = Self.nested("[", "]", depth: room / 2)
        return [
            Shape(name: "nested arrays", channel: .contact, bytes: Array(arrays.utf8)),
            Shape(name: "nested objects", channel: .sibling,
                  bytes: Array(Self.nested(#"{"a":"#, "}", depth: room / 6, inner: "0").utf8)),
            Shape(name: "unclosed arrays", channel: .contact, bytes: Array(String(repeating: "[", count: room).utf8)),
            Shape(name: "deep infer.request", channel: .contact,
                  bytes: Array(#"{"id":"\#(requestID)","messages":\#(arrays),"model":"m","type":"infer.request"}"#.utf8)),
            Shape(name: "deep contact.join", channel: .contact,
                  bytes: Array(#"{"name":"deep","pad":\#(arrays),"type":"contact.join"}"#.utf8)),
            Shape(name: "deep pair.request", channel: .sibling,
                  bytes: Array(#"{"name":"deep","pad":\#(arrays),"secret":"00","type":"pair.request"}"#.utf8)),
        ]
    }

    /// Huge shapes: as many values as fit, each cheap to write and not so cheap to parse.
    static func huge(budget: Int, requestID: String) -> [Shape] {
        let room = budget - 200
        let zeros = "[" + Array(repeating: "0", count: room / 2).joined(separator: ",") + "]"
        let keys = (0..<(room / 12)).map { #""k\#($0)":0"# }.joined(separator: ",")
        let escapes = String(repeating: #"\u00e9"#, count: room / 6)
        let message = #"{"content":"","role":"user"}"#
        let messages = "[" + Array(repeating: message, count: min(room / (message.utf8.count + 1), 5_000))
            .joined(separator: ",") + "]"
        // The joins last: a stranger whose huge join a host accepts is a pending guest from then on, and its
        // request would be answered `not_granted`.
        return [
            Shape(name: "wide object", channel: .contact, bytes: Array(#"{\#(keys),"type":"advert.request"}"#.utf8)),
            Shape(name: "repeated type keys", channel: .sibling,
                  bytes: Array(("{" + Array(repeating: #""type":"advert.request""#, count: room / 25)
                      .joined(separator: ",") + "}").utf8)),
            Shape(name: "infer.request over the message limit", channel: .contact,
                  bytes: Array(#"{"id":"\#(requestID)","messages":\#(messages),"model":"m","type":"infer.request"}"#.utf8),
                  mustBeRefused: true),
            Shape(name: "wide array", channel: .contact,
                  bytes: Array(#"{"name":"wide","pad":\#(zeros),"type":"contact.join"}"#.utf8)),
            Shape(name: "long escaped string", channel: .contact,
                  bytes: Array(#"{"name":"\#(escapes)","type":"contact.join"}"#.utf8)),
        ]
    }
}
