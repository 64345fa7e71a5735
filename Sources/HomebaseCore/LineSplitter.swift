/// Splits a byte stream into lines, incrementally (NDJSON framing, e.g. Ollama's `/api/chat`).
///
/// Feed bytes as they arrive with `append(_:)`; it returns every line completed so far, without its
/// terminator (`\n` or `\r\n`). Bytes after the last terminator are kept until more arrive. A line longer than
/// `maxLineBytes` throws instead of growing the buffer, so a peer that never sends `\n` costs at most
/// `maxLineBytes + 1` bytes of memory. After an error the splitter stays failed: the framing is lost.
public struct LineSplitter: Sendable {
    /// Why the stream cannot be split.
    public enum Error: Swift.Error, Equatable, Sendable {
        /// A line (without its terminator) exceeded `maxLineBytes`; the stream is unusable from here on.
        case lineTooLong(limit: Int)
    }

    /// Longest accepted line, terminator excluded.
    public let maxLineBytes: Int
    /// Bytes of the current, unterminated line.
    private var pending: [UInt8] = []
    private var failed = false

    /// - Parameter maxLineBytes: longest line accepted. The default, 1 MiB, fits any single Ollama chunk
    ///   (a tool call with large arguments included) with a wide margin.
    public init(maxLineBytes: Int = 1024 * 1024) {
        precondition(maxLineBytes > 0, "maxLineBytes must be positive")
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes received but not yet part of a complete line.
    public var bufferedByteCount: Int { self.pending.count }

    /// Appends `bytes` and returns the lines they complete, in order, terminators stripped.
    public mutating func append<C: Collection>(_ bytes: C) throws(LineSplitter.Error) -> [[UInt8]]
    where C.Element == UInt8 {
        guard !self.failed else { throw .lineTooLong(limit: self.maxLineBytes) }
        var lines: [[UInt8]] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if self.pending.last == UInt8(ascii: "\r") {
                    self.pending.removeLast()
                }
                guard self.pending.count <= self.maxLineBytes else { try self.fail() }
                lines.append(self.pending)
                self.pending.removeAll(keepingCapacity: true)
            } else {
                self.pending.append(byte)
                // One byte of slack: a trailing `\r` may still turn out to be half of `\r\n`.
                if self.pending.count > self.maxLineBytes + 1
                    || (self.pending.count == self.maxLineBytes + 1 && byte != UInt8(ascii: "\r"))
                {
                    try self.fail()
                }
            }
        }
        return lines
    }

    /// Ends the stream: returns the final line if the stream did not end with a terminator, else `nil`.
    ///
    /// Whether an unterminated last line is data or truncation is the caller's call (NDJSON writers
    /// normally end every line with `\n`).
    public mutating func finish() throws(LineSplitter.Error) -> [UInt8]? {
        guard !self.failed else { throw .lineTooLong(limit: self.maxLineBytes) }
        guard !self.pending.isEmpty else { return nil }
        var line = self.pending
        self.pending = []
        if line.last == UInt8(ascii: "\r") {
            line.removeLast()
        }
        guard line.count <= self.maxLineBytes else { try self.fail() }
        return line
    }

    private mutating func fail() throws(LineSplitter.Error) -> Never {
        self.failed = true
        self.pending = []
        throw .lineTooLong(limit: self.maxLineBytes)
    }
}
