/// Incremental, pure decoder of a chunked message body (RFC 9112 §7.1).
///
/// Feed bytes with `append(_:)`; `next()` returns `.data` pieces, then `.end` once the last chunk and trailers
/// arrived, or `nil` when it needs more. Chunk extensions are ignored; trailers are read and discarded.
/// Bytes after the end stay buffered for `takeBuffered()` (the next pipelined request).
public struct HTTPChunkedDecoder: Sendable {
    public enum Event: Sendable, Equatable {
        case data([UInt8])
        case end
    }

    private enum State: Sendable {
        case size
        case data(remaining: Int)
        case dataCRLF
        case trailers
        case done
    }

    /// Longest size line (hex digits plus extensions) or trailer line accepted.
    public let maxLineBytes: Int
    /// Largest body accepted in total; more is `.malformed("chunked body too large")`.
    public let maxBodyBytes: Int
    private var state = State.size
    private var buffer: [UInt8] = []
    private var start = 0
    private var total = 0

    public init(maxBodyBytes: Int, maxLineBytes: Int = 4096) {
        self.maxBodyBytes = maxBodyBytes
        self.maxLineBytes = maxLineBytes
    }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if self.start > 0 && self.start == self.buffer.count {
            self.buffer.removeAll(keepingCapacity: true)
            self.start = 0
        }
        self.buffer.append(contentsOf: bytes)
    }

    /// Bytes after the end of the body.
    public mutating func takeBuffered() -> [UInt8] {
        defer {
            self.buffer.removeAll()
            self.start = 0
        }
        return Array(self.buffer[self.start...])
    }

    public mutating func next() throws(HTTPParseError) -> Event? {
        while true {
            switch self.state {
            case .done:
                return nil
            case .size:
                guard let line = try self.readLine() else { return nil }
                let size = try Self.chunkSize(line)
                if size == 0 {
                    self.state = .trailers
                } else {
                    guard size <= self.maxBodyBytes - self.total else { throw .malformed("chunked body too large") }
                    self.total += size
                    self.state = .data(remaining: size)
                }
            case .data(let remaining):
                let available = self.buffer.count - self.start
                guard available > 0 else { return nil }
                let n = min(available, remaining)
                let piece = Array(self.buffer[self.start..<(self.start + n)])
                self.start += n
                self.state = remaining == n ? .dataCRLF : .data(remaining: remaining - n)
                return .data(piece)
            case .dataCRLF:
                guard let line = try self.readLine() else { return nil }
                guard line.isEmpty else { throw .malformed("missing CRLF after chunk data") }
                self.state = .size
            case .trailers:
                guard let line = try self.readLine() else { return nil }
                if line.isEmpty {
                    self.state = .done
                    return .end
                }
            }
        }
    }

    /// A line without its CRLF (or bare LF), or `nil` if incomplete.
    private mutating func readLine() throws(HTTPParseError) -> ArraySlice<UInt8>? {
        guard let lf = self.buffer[self.start...].firstIndex(of: 10) else {
            // A CR one past the limit may still be the line's CRLF: judged when the LF comes, as in one read.
            let held = self.buffer.count - self.start
            if held > self.maxLineBytes + 1 || (held == self.maxLineBytes + 1 && self.buffer.last != 13) {
                throw .malformed("chunk line too long")
            }
            return nil
        }
        var end = lf
        if end > self.start && self.buffer[end - 1] == 13 { end -= 1 }
        let line = self.buffer[self.start..<end]
        guard line.count <= self.maxLineBytes else { throw .malformed("chunk line too long") }
        self.start = lf + 1
        return line
    }

    /// The size a chunk's size line gives: hex digits (at most 15, so no overflow), extensions ignored.
    static func chunkSize(_ line: some Collection<UInt8>) throws(HTTPParseError) -> Int {
        let hex = line.prefix { $0 != UInt8(ascii: ";") && $0 != 0x20 && $0 != 0x09 }
        guard !hex.isEmpty, hex.count <= 15 else { throw .malformed("bad chunk size") }
        var size = 0
        for b in hex {
            guard let v = HTTPSyntax.hexValue(b) else { throw .malformed("bad chunk size") }
            size = size << 4 | Int(v)
        }
        return size
    }
}
