/// The SEND rate limits a relay enforces per connection, as it announces them in its WebSocket upgrade response
/// (Protocol/relay.md §6): `Homebase-Relay-Limits: frames=2000; frame-burst=4000; bytes=16777216; byte-burst=33554432`.
///
/// A header rather than a field of READY: READY's size is fixed in v1, and every client ignores a response header
/// it does not know, so an older client talks to a newer relay and a newer client to an older one (which sends no
/// header: the client then assumes `defaults`).
public struct RelaySendLimits: Sendable, Equatable {
    public static let headerName = "Homebase-Relay-Limits"
    /// Longest header value parsed; a longer one is ignored as malformed.
    public static let maxHeaderValueBytes = 256

    /// SEND frames per second (the token bucket's refill) and the bucket's size.
    public var framesPerSecond: Double
    public var framesBurst: Double
    /// SEND payload bytes per second and that bucket's size.
    public var bytesPerSecond: Double
    public var bytesBurst: Double

    public init(framesPerSecond: Double, framesBurst: Double, bytesPerSecond: Double, bytesBurst: Double) {
        self.framesPerSecond = framesPerSecond
        self.framesBurst = framesBurst
        self.bytesPerSecond = bytesPerSecond
        self.bytesBurst = bytesBurst
    }

    /// What a relay that announces nothing is assumed to enforce: the defaults of Protocol/relay.md §6.
    public static let defaults = RelaySendLimits(framesPerSecond: 2_000, framesBurst: 4_000,
                                                 bytesPerSecond: 16 * 1024 * 1024, bytesBurst: 32 * 1024 * 1024)

    public init(_ limits: RelayLimits) {
        self.init(framesPerSecond: limits.sendFramesPerSecond, framesBurst: limits.sendFramesBurst,
                  bytesPerSecond: limits.sendBytesPerSecond, bytesBurst: limits.sendBytesBurst)
    }

    /// The limits announced in a response's header fields; nil when absent or malformed (the first field of
    /// the name counts).
    public init?(announcedIn headers: [HTTPHeaderField]) {
        guard let field = headers.first(where: { HTTPSyntax.equalsIgnoringCase($0.name, Self.headerName) }) else {
            return nil
        }
        self.init(headerValue: field.value)
    }

    /// The header's value: `key=number` pairs joined by `; `, numbers with at most three decimals.
    public var headerValue: String {
        [("frames", self.framesPerSecond), ("frame-burst", self.framesBurst), ("bytes", self.bytesPerSecond),
         ("byte-burst", self.bytesBurst)].map { "\($0.0)=\(Self.format($0.1))" }.joined(separator: "; ")
    }

    /// Parses a header value. All four keys are required, each a positive decimal number (digits, an optional
    /// fraction); unknown keys are skipped, so a relay may announce more later. Nil for anything else, and the
    /// client then assumes `defaults`.
    public init?(headerValue: String) {
        guard headerValue.utf8.count <= Self.maxHeaderValueBytes else { return nil }
        var values: [String: Double] = [:]
        for part in headerValue.split(separator: ";", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { return nil }
            let key = String(pair[0].trimmingASCIISpaces)
            guard !key.isEmpty, values[key] == nil, let number = Self.number(pair[1].trimmingASCIISpaces) else {
                return nil
            }
            values[key] = number
        }
        guard let fps = values["frames"], let fburst = values["frame-burst"], let bps = values["bytes"],
              let bburst = values["byte-burst"] else { return nil }
        self.init(framesPerSecond: fps, framesBurst: fburst, bytesPerSecond: bps, bytesBurst: bburst)
    }

    /// A positive decimal: 1-12 digits, optionally `.` and 1-3 digits. Nothing else (no sign, exponent, inf).
    private static func number(_ text: Substring) -> Double? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, (1...12).contains(whole.count), whole.allSatisfy(\.isASCIIDigit) else {
            return nil
        }
        if parts.count == 2 {
            guard (1...3).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigit) else { return nil }
        }
        guard let value = Double(text), value > 0 else { return nil }
        return value
    }

    /// At most 12 whole digits and 3 decimals, positive (what `init(headerValue:)` reads back): other values are
    /// clamped into that range.
    private static func format(_ value: Double) -> String {
        let value = value.isNaN ? 0.001 : min(max(value, 0.001), 999_999_999_999)
        let thousandths = (value * 1000).rounded()
        let whole = Int64(thousandths / 1000)
        let fraction = Int64(thousandths) - whole * 1000
        guard fraction != 0 else { return "\(whole)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self >= "0" && self <= "9" }
}

extension Substring {
    fileprivate var trimmingASCIISpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return s
    }
}

/// Paces a client's SENDs under a relay's limits (`RelaySendLimits`), so that the relay's token buckets never
/// refuse one (RECEIPT 5 drops the frame: a chunk lost that way breaks its stream). Pure: time is passed in.
///
/// Its buckets refill at `rateShare` of the relay's rates and hold `burstShare` of its bursts: frames sent
/// evenly can reach the relay bunched (scheduling, the network), and the margin absorbs up to about half a burst
/// of such bunching. A frame waits (the caller keeps it queued, in order) until both buckets hold its cost.
public struct SendPacer: Sendable, Equatable {
    public static let rateShare = 0.9
    public static let burstShare = 0.5

    private var frames: TokenBucket
    private var bytes: TokenBucket

    public init(limits: RelaySendLimits, nowMs: UInt64) {
        self.frames = TokenBucket(ratePerSecond: limits.framesPerSecond * Self.rateShare,
                                  capacity: max(1, limits.framesBurst * Self.burstShare), nowMs: nowMs)
        self.bytes = TokenBucket(ratePerSecond: limits.bytesPerSecond * Self.rateShare,
                                 capacity: max(1, limits.bytesBurst * Self.burstShare), nowMs: nowMs)
    }

    /// Takes one SEND of `payloadBytes` if both buckets allow it now; false leaves both untouched.
    public mutating func take(payloadBytes: Int, nowMs: UInt64) -> Bool {
        let cost = Double(payloadBytes)
        guard self.frames.waitMs(for: 1, nowMs: nowMs) == 0, self.bytes.waitMs(for: cost, nowMs: nowMs) == 0 else {
            return false
        }
        _ = self.frames.take(1, nowMs: nowMs)
        _ = self.bytes.take(cost, nowMs: nowMs)
        return true
    }

    /// How long until a SEND of `payloadBytes` may go (0: now).
    public func waitMs(payloadBytes: Int, nowMs: UInt64) -> UInt64 {
        max(self.frames.waitMs(for: 1, nowMs: nowMs), self.bytes.waitMs(for: Double(payloadBytes), nowMs: nowMs))
    }
}
