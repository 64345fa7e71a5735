/// Batches streamed text into `infer.chunk` messages so a fast model does not cost one relay frame per token,
/// without delaying the first chunk (Protocol/messages.md §2, chunking).
///
/// Pure: the caller passes the time. The first text is emitted at once; later text is held until either
/// `maxDelayMs` has passed since the last emitted chunk or `maxBytes` are pending. Text that arrives less than
/// `toleranceMs` before it would be due goes at once: a producer that already delivers about once per
/// `maxDelayMs` (paced reads) then costs no hold timer for a few milliseconds of jitter.
public struct ChunkCoalescer: Sendable {
    public let maxDelayMs: UInt64
    public let maxBytes: Int
    public let toleranceMs: UInt64
    private var pending = ""
    private var pendingBytes = 0
    private var lastEmitMs: UInt64?

    public init(maxDelayMs: UInt64 = 30, maxBytes: Int = 1024, toleranceMs: UInt64 = 0) {
        self.maxDelayMs = maxDelayMs
        self.maxBytes = maxBytes
        self.toleranceMs = min(toleranceMs, maxDelayMs)
    }

    public enum Decision: Equatable, Sendable {
        /// Send this text now.
        case emit(String)
        /// Hold; call `flushDue(nowMs:)` at this time if nothing else arrives.
        case holdUntil(UInt64)
        case none
    }

    public var hasPending: Bool { !self.pending.isEmpty }

    public mutating func textArrived(_ text: String, nowMs: UInt64) -> Decision {
        guard !text.isEmpty else { return .none }
        self.pending += text
        self.pendingBytes += text.utf8.count
        guard let last = self.lastEmitMs else { return self.emit(nowMs: nowMs) }
        if self.pendingBytes >= self.maxBytes || nowMs + self.toleranceMs >= last + self.maxDelayMs {
            return self.emit(nowMs: nowMs)
        }
        return .holdUntil(last + self.maxDelayMs)
    }

    /// The hold timer fired.
    public mutating func flushDue(nowMs: UInt64) -> Decision {
        guard self.hasPending, let last = self.lastEmitMs, nowMs >= last + self.maxDelayMs else {
            return self.hasPending ? .holdUntil((self.lastEmitMs ?? nowMs) + self.maxDelayMs) : .none
        }
        return self.emit(nowMs: nowMs)
    }

    /// The stream ended: whatever is pending goes now.
    public mutating func finish(nowMs: UInt64) -> Decision {
        self.hasPending ? self.emit(nowMs: nowMs) : .none
    }

    /// `text` cut into pieces of at most `maxBytes` UTF-8 bytes, on Unicode scalar boundaries, for a sender
    /// that got more at once than one chunk should carry (one read of a fast runtime). The pieces joined are
    /// `text`; a grapheme may span two pieces, which the receiver joins back.
    public static func pieces(of text: String, maxBytes: Int) -> [String] {
        precondition(maxBytes >= 4, "a piece must hold any Unicode scalar")
        guard text.utf8.count > maxBytes else { return [text] }
        var out: [String] = []
        var current = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            let size = UTF8.width(scalar)
            if bytes + size > maxBytes {
                out.append(String(current))
                current = String.UnicodeScalarView()
                bytes = 0
            }
            current.append(scalar)
            bytes += size
        }
        if !current.isEmpty { out.append(String(current)) }
        return out
    }

    private mutating func emit(nowMs: UInt64) -> Decision {
        let text = self.pending
        self.pending = ""
        self.pendingBytes = 0
        self.lastEmitMs = nowMs
        return .emit(text)
    }
}
