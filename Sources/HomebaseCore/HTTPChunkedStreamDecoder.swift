#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Incremental, pure decoder of a chunked body (RFC 9112 §7.1) that appends each read's chunk data to the
/// caller's buffer: no allocation per chunk, and between calls it keeps at most one partial size or trailer
/// line. For a client whose HTTP library hands it the raw body once per read (libcurl with
/// CURLOPT_HTTP_TRANSFER_DECODING off), where the library's own decoder called back once per chunk — once per
/// token for a runtime that flushes every token.
///
/// Its rules are `HTTPChunkedDecoder`'s: hex sizes of at most 15 digits, extensions ignored, lines ending in
/// CRLF or a bare LF, chunk data followed by an empty line, trailers read and dropped up to an empty line.
public struct HTTPChunkedStreamDecoder: Sendable {
    private enum State: Sendable, Equatable {
        case size
        case data(remaining: Int)
        /// The empty line after a chunk's data.
        case dataEnd
        case trailers
        case done
    }

    /// Longest size or trailer line accepted, terminator excluded.
    public let maxLineBytes: Int
    private var state = State.size
    /// The part of a line that arrived so far (size, data end or trailer).
    private var line: [UInt8] = []

    public init(maxLineBytes: Int = 4096) {
        self.maxLineBytes = maxLineBytes
    }

    /// The last chunk and the trailers arrived.
    public var isFinished: Bool { self.state == .done }

    /// Decodes `input`, appending its chunk data to `output`. Returns whether the body has ended (bytes after its
    /// end are ignored: an HTTP library hands over one response's bytes only).
    /// - Throws: `.malformed` for a bad size, a line over `maxLineBytes`, or data not followed by an empty line;
    ///   the decoder is then unusable.
    public mutating func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(HTTPParseError)
        -> Bool
    {
        var i = 0
        let count = input.count
        while i < count {
            switch self.state {
            case .done:
                return true
            case .data(let remaining):
                let n = min(remaining, count - i)
                output.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<(i + n)]))
                i += n
                self.state = n == remaining ? .dataEnd : .data(remaining: remaining - n)
            case .size, .dataEnd, .trailers:
                // Up to the line's end: the rest of the input when it has none yet.
                guard let lf = Self.firstNewline(in: input, from: i) else {
                    // One byte over the limit only if it is a CR, which the next read's LF may make a CRLF.
                    let held = self.line.count + (count - i)
                    guard held <= self.maxLineBytes || (held == self.maxLineBytes + 1 && input[count - 1] == 13) else {
                        throw .malformed("chunk line too long")
                    }
                    self.line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i...]))
                    return false
                }
                if self.line.isEmpty {
                    // The whole line is in this input (the common case: a runtime's chunk arrives whole): read it
                    // where it lies, without copying it into `line`.
                    var end = lf
                    if end > i && input[end - 1] == 13 { end -= 1 }
                    guard end - i <= self.maxLineBytes else { throw .malformed("chunk line too long") }
                    try self.lineEnded(UnsafeRawBufferPointer(rebasing: input[i..<end]))
                    i = lf + 1
                    continue
                }
                self.line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<lf]))
                i = lf + 1
                if self.line.last == 13 { self.line.removeLast() }
                guard self.line.count <= self.maxLineBytes else { throw .malformed("chunk line too long") }
                try self.lineEnded(self.line)
                self.line.removeAll(keepingCapacity: true)
            }
        }
        return self.state == .done
    }

    /// `line`: the line that ended, without its terminator.
    private mutating func lineEnded(_ line: some Collection<UInt8>) throws(HTTPParseError) {
        switch self.state {
        case .size:
            let size = try HTTPChunkedDecoder.chunkSize(line)
            self.state = size == 0 ? .trailers : .data(remaining: size)
        case .dataEnd:
            guard line.isEmpty else { throw .malformed("missing CRLF after chunk data") }
            self.state = .size
        case .trailers:
            if line.isEmpty { self.state = .done }
        case .data, .done:
            break
        }
    }

    private static func firstNewline(in input: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < input.count, let base = input.baseAddress,
            let found = memchr(base + start, 10, input.count - start)
        else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }
}
