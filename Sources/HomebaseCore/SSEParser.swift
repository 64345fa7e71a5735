#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One dispatched server-sent event.
public struct SSEEvent: Sendable, Equatable {
    /// The `event:` field, or `nil` when the event had none (the HTML spec then calls it "message").
    /// Anthropic names every event (`message_start`, …); OpenAI and Ollama's `/v1` send none.
    public var event: String?
    /// The `data:` lines of the event joined with `\n` (OpenAI's stream ends with the data `[DONE]`).
    public var data: String

    public init(event: String?, data: String) {
        self.event = event
        self.data = data
    }
}

/// Incremental `text/event-stream` parser: the subset of the HTML Living Standard §9.2.6 that model APIs use.
///
/// Feed bytes as they arrive with `append(_:)`; it returns the events completed so far. Lines end with `\r\n`,
/// `\n` or `\r`, and a chunk boundary may fall anywhere, `\r\n` and UTF-8 sequences included. Fields:
/// `event` sets the event name, each `data` line adds one line to the data, `id` sets `lastEventID`, and
/// `retry` and unknown fields are ignored; lines starting with `:` are comments. A blank line dispatches the
/// event, unless it has no `data` line (then the spec discards it). A leading byte-order mark is skipped.
/// Invalid UTF-8 becomes U+FFFD rather than an error: the JSON inside is checked by its own decoder.
///
/// Memory is bounded: an event whose buffered bytes (current line, data so far, event name) exceed
/// `maxEventBytes` throws `eventTooLarge`, and the parser stays failed, because the framing is lost.
/// At end of stream an unfinished event is discarded, as the spec says; `hasPartialEvent` tells whether one was.
public struct SSEParser: Sendable {
    /// Why the stream cannot be parsed.
    public enum Error: Swift.Error, Equatable, Sendable {
        /// One event outgrew `maxEventBytes`; the stream is unusable from here on.
        case eventTooLarge(limit: Int)
    }

    /// Largest event accepted, counting its event name, its data and the line being read.
    public let maxEventBytes: Int
    /// The last `id:` field seen (spec: kept across events, used to resume with `Last-Event-ID`).
    public private(set) var lastEventID: String = ""

    private var line: [UInt8] = []
    private var eventName: [UInt8] = []
    /// Data lines, each followed by `\n`; the final `\n` is dropped on dispatch (spec step "remove the last LF").
    private var data: [UInt8] = []
    private var lastWasCR = false
    private var isFirstLine = true
    private var failed = false

    /// - Parameter maxEventBytes: largest event accepted. The default, 1 MiB, is far above any single chunk
    ///   OpenAI, Anthropic or Ollama send, and bounds what a hostile server can make us hold.
    public init(maxEventBytes: Int = 1024 * 1024) {
        precondition(maxEventBytes > 0, "maxEventBytes must be positive")
        self.maxEventBytes = maxEventBytes
    }

    /// Whether bytes of an event not yet dispatched are buffered (at end of stream: the stream was cut short).
    public var hasPartialEvent: Bool { !self.line.isEmpty || !self.data.isEmpty || !self.eventName.isEmpty }

    /// Appends `bytes` and returns the events they complete, in order.
    public mutating func append<C: Collection>(_ bytes: C) throws(SSEParser.Error) -> [SSEEvent]
    where C.Element == UInt8 {
        guard !self.failed else { throw .eventTooLarge(limit: self.maxEventBytes) }
        let result = bytes.withContiguousStorageIfAvailable { buffer in self.append(contiguous: buffer) }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in self.append(contiguous: buffer) }
        return try result.get()
    }

    /// The work of `append`: runs of bytes between line ends are copied in one piece.
    private mutating func append(contiguous bytes: UnsafeBufferPointer<UInt8>) -> Result<[SSEEvent], SSEParser.Error> {
        var events: [SSEEvent] = []
        var index = 0
        let count = bytes.count
        while index < count {
            if self.lastWasCR {
                self.lastWasCR = false
                if bytes[index] == UInt8(ascii: "\n") {
                    index += 1  // second half of a `\r\n` whose `\r` already ended the line
                    continue
                }
            }
            var end = index
            while end < count, bytes[end] != UInt8(ascii: "\n"), bytes[end] != UInt8(ascii: "\r") { end += 1 }
            if end > index {
                self.line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<end]))
                do { try self.checkSize() } catch { return .failure(error) }
            }
            guard end < count else { break }
            self.lastWasCR = bytes[end] == UInt8(ascii: "\r")
            index = end + 1
            if let event = self.lineCompleted() {
                events.append(event)
            }
            do { try self.checkSize() } catch { return .failure(error) }
        }
        return .success(events)
    }

    /// A fast lane for the commonest framing, one event per model token: while nothing is buffered, takes the
    /// complete events at the start of `bytes` that have exactly the shape `data:VALUE\n\n` or
    /// `data: VALUE\n\n` (one data line, no other field, `\n` line ends) and hands each one's data, VALUE, to
    /// `each` in place, without copying it. It stops at the first byte that is not such an event (an `event:`
    /// field, a `\r`, a comment, an unfinished event, an oversized line), or after an event for which `each`
    /// returns false.
    ///
    /// - Returns: how many bytes were consumed; the caller passes the rest to `append`.
    ///
    /// The events taken are the ones `append` would have dispatched, with the same data (`append` decodes it as
    /// a String, `each` gets its bytes), and taking them leaves the parser as `append` would: such an event
    /// sets no state (but one: the stream's first line, which may begin with a byte order mark, has then been
    /// read, and a `d` is no such mark). So `takeSimpleEvents` then `append` of the rest is `append` of the whole, except that
    /// `append` checks every event's size before dispatching any, while the lane has handed some on before
    /// `append` sees the rest; a caller that needs the difference drops what the lane gave when `append` throws.
    public mutating func takeSimpleEvents(
        _ bytes: UnsafeBufferPointer<UInt8>, _ each: (UnsafeBufferPointer<UInt8>) -> Bool
    ) -> Int {
        guard !self.failed, !self.lastWasCR, self.line.isEmpty, self.data.isEmpty,
            self.eventName.isEmpty, let base = bytes.baseAddress
        else { return 0 }
        let count = bytes.count
        var index = 0
        while count - index >= 7 {  // the shortest event, `data:\n\n`
            guard base[index] == UInt8(ascii: "d"), base[index + 1] == UInt8(ascii: "a"),
                base[index + 2] == UInt8(ascii: "t"), base[index + 3] == UInt8(ascii: "a"),
                base[index + 4] == UInt8(ascii: ":")
            else { return index }
            var start = index + 5
            if base[start] == UInt8(ascii: " ") { start += 1 }
            // The line's end: its first `\n`, with no `\r` before it (memchr: this runs once per token).
            guard let newline = memchr(base + start, 0x0A, count - start) else { return index }
            let end = base.distance(to: newline.assumingMemoryBound(to: UInt8.self))
            if memchr(base + start, 0x0D, end - start) != nil { return index }
            // The next line must be blank (`\n`): anything else is `append`'s.
            guard end + 1 < count, base[end + 1] == UInt8(ascii: "\n") else { return index }
            // `append` refuses a line longer than the limit (the data it leaves is shorter than the line).
            guard end - index <= self.maxEventBytes else { return index }
            self.isFirstLine = false  // the stream's first line, if this is it, had no byte order mark
            let more = each(UnsafeBufferPointer(start: base + start, count: end - start))
            index = end + 2
            if !more { return index }
        }
        return index
    }

    private mutating func checkSize() throws(SSEParser.Error) {
        guard self.line.count + self.data.count + self.eventName.count > self.maxEventBytes else { return }
        self.failed = true
        self.line = []
        self.data = []
        self.eventName = []
        throw .eventTooLarge(limit: self.maxEventBytes)
    }

    /// Interprets `self.line` (spec: "process the line") and clears it; returns an event on a blank line.
    private mutating func lineCompleted() -> SSEEvent? {
        defer { self.line.removeAll(keepingCapacity: true) }
        if self.isFirstLine {
            self.isFirstLine = false
            if self.line.starts(with: [0xEF, 0xBB, 0xBF]) {
                self.line.removeFirst(3)
            }
        }
        guard let first = self.line.first else { return self.dispatch() }
        if first == UInt8(ascii: ":") {
            return nil
        }
        let name: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = self.line.firstIndex(of: UInt8(ascii: ":")) {
            name = self.line[..<colon]
            value = self.line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") {
                value = value.dropFirst()
            }
        } else {
            name = self.line[...]
            value = []
        }
        switch String(decoding: name, as: UTF8.self) {
        case "event":
            self.eventName = Array(value)
        case "data":
            self.data.append(contentsOf: value)
            self.data.append(UInt8(ascii: "\n"))
        case "id":
            if !value.contains(0) {
                self.lastEventID = String(decoding: value, as: UTF8.self)
            }
        default:
            break  // `retry` and unknown fields: the spec ignores unknown ones, and we never reconnect by ourselves
        }
        return nil
    }

    private mutating func dispatch() -> SSEEvent? {
        defer {
            self.data.removeAll(keepingCapacity: true)
            self.eventName.removeAll(keepingCapacity: true)
        }
        guard !self.data.isEmpty else { return nil }
        let name = self.eventName.isEmpty ? nil : String(decoding: self.eventName, as: UTF8.self)
        return SSEEvent(event: name, data: String(decoding: self.data.dropLast(), as: UTF8.self))
    }
}
