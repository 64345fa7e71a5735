/// Finds the end of an HTTP head in a growing buffer and splits it into lines (RFC 9112 §2.2).
///
/// Shared by `HTTPRequestHeadParser` and `HTTPResponseHeadParser`. Limits are enforced while scanning, so a
/// peer that never sends a blank line is refused as soon as it passes `maxHeadBytes`, never later. Each byte is
/// judged once, where it stands in the head, so the verdict never depends on where a read ended: a CR is
/// judged with the byte after it (a bare CR is malformed, a CRLF's LF counts against the limit, and the
/// blank line that ends a head never does). Waiting for more, the scanner holds at most `maxHeadBytes + 1`
/// bytes (the last one a CR). Blank lines skipped before a start line count toward the limit too: a peer
/// sending nothing but CRLF forever is refused like any other endless head (they used to be skipped for free,
/// and the buffer grew with every one).
///
/// Line endings: CRLF, and also a bare LF, which RFC 9112 §2.2 allows a recipient to accept (h11, node.js and
/// nginx do). A bare CR not followed by LF is refused: that is the smuggling vector the RFC warns about.
struct HTTPHeadScanner: Sendable {
    let limits: HTTPHeadLimits
    /// Received bytes; the unconsumed part starts at `start`.
    private(set) var buffer: [UInt8] = []
    private(set) var start = 0
    /// Scan position inside the current head (absolute index into `buffer`).
    private var scanIndex = 0
    private var lineStart = 0
    private var lines: [Range<Int>] = []
    /// Bytes of blank lines skipped before the current head's start line (they count toward `maxHeadBytes`).
    private var skippedBlankBytes = 0
    /// Set once an error was thrown; every later call throws it again.
    private var failure: HTTPParseError?

    init(limits: HTTPHeadLimits) {
        self.limits = limits
    }

    var bufferedCount: Int { self.buffer.count - self.start }

    mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.buffer.append(contentsOf: bytes)
    }

    /// Removes up to `maxBytes` unconsumed bytes (a body, or frames after an upgrade) and returns them.
    mutating func take(maxBytes: Int) -> [UInt8] {
        precondition(self.scanIndex == self.start, "take(maxBytes:) called while a head is partially scanned")
        let count = min(maxBytes, self.bufferedCount)
        let taken = Array(self.buffer[self.start..<(self.start + count)])
        self.start += count
        self.scanIndex = self.start
        self.lineStart = self.start
        self.compact()
        return taken
    }

    /// Returns the lines of the next complete head (without line endings, leading blank lines skipped),
    /// or `nil` when more bytes are needed.
    mutating func nextHead() throws(HTTPParseError) -> [ArraySlice<UInt8>]? {
        if let failure = self.failure { throw failure }
        do {
            return try self.scan()
        } catch {
            self.failure = error
            throw error
        }
    }

    private mutating func scan() throws(HTTPParseError) -> [ArraySlice<UInt8>]? {
        while self.scanIndex < self.buffer.count {
            let byte = self.buffer[self.scanIndex]
            let i = self.scanIndex
            self.scanIndex += 1
            if byte == 0 {
                throw .malformed("NUL byte in head")
            }
            if byte == UInt8(ascii: "\r") {
                // CR must be followed by LF; wait for the next byte before judging.
                if self.scanIndex == self.buffer.count {
                    self.scanIndex -= 1
                    break
                }
                guard self.buffer[self.scanIndex] == UInt8(ascii: "\n") else {
                    throw .malformed("bare CR in head")
                }
                continue
            }
            guard byte == UInt8(ascii: "\n") else {
                if i + 1 - self.start + self.skippedBlankBytes > self.limits.maxHeadBytes { throw .headTooLarge }
                continue
            }
            var end = i
            if end > self.lineStart, self.buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let line = self.lineStart..<end
            self.lineStart = i + 1
            if line.isEmpty {
                if self.lines.isEmpty {
                    // RFC 9112 §2.2: ignore blank lines before the start line (left over from a previous body);
                    // they count toward the head's limit.
                    self.skippedBlankBytes += self.lineStart - self.start
                    if self.skippedBlankBytes > self.limits.maxHeadBytes { throw .headTooLarge }
                    self.start = self.lineStart
                    continue
                }
                let head = self.lines.map { self.buffer[$0] }
                self.lines.removeAll(keepingCapacity: true)
                self.skippedBlankBytes = 0
                self.start = self.lineStart
                self.scanIndex = self.start
                return head
            }
            self.lines.append(line)
            if self.lines.count - 1 > self.limits.maxHeaderCount { throw .tooManyHeaders }
            if i + 1 - self.start + self.skippedBlankBytes > self.limits.maxHeadBytes { throw .headTooLarge }
        }
        // Every byte before `scanIndex` has passed the limit; a CR at the end waits for the next read. (Judging
        // the bytes held, that CR included, refused a head whose blank line's CR ended a read at the limit,
        // which the same bytes in one read pass.)
        return nil
    }

    private mutating func compact() {
        // Shift only when the consumed prefix dominates, so steady pipelining costs amortised O(1).
        guard self.start > 4096, self.start * 2 > self.buffer.count else { return }
        self.buffer.removeFirst(self.start)
        self.scanIndex -= self.start
        self.lineStart -= self.start
        self.lines = self.lines.map { ($0.lowerBound - self.start)..<($0.upperBound - self.start) }
        self.start = 0
    }

    /// Called after a head was returned, so consumed bytes do not pile up.
    mutating func didReturnHead() {
        self.compact()
    }
}
