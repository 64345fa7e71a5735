/// How fast the relay reads one connection: at most twice its SEND allowance, in frames and in bytes
/// (`RelayLimits.inboundPaceFactor` times the rate and the burst). A client within its SEND limits never meets
/// it. One sending faster than the relay will forward is read no faster than this — the relay stops reading and
/// TCP pushes back — so refusing what it cannot forward (RECEIPT 5) costs the relay a bounded share of its one
/// thread per connection, instead of whatever the client can push (issue 23: four connections flooding maximal
/// frames kept the relay reading 1.5 GB/s of frames it then refused).
///
/// Pure: the caller passes the time and stops reading for as long as `received` says.
public struct InboundPacer: Sendable {
    private var frames: TokenBucket
    private var bytes: TokenBucket

    public init(limits: RelayLimits, nowMs: UInt64) {
        let factor = RelayLimits.inboundPaceFactor
        self.frames = TokenBucket(ratePerSecond: limits.sendFramesPerSecond * factor,
                                  capacity: limits.sendFramesBurst * factor, nowMs: nowMs)
        self.bytes = TokenBucket(ratePerSecond: limits.sendBytesPerSecond * factor,
                                 capacity: limits.sendBytesBurst * factor, nowMs: nowMs)
    }

    /// Accounts one message read from the connection (`byteCount` on the wire, roughly). Returns how many
    /// milliseconds to stop reading it, or nil while it is within its pace.
    public mutating func received(byteCount: Int, nowMs: UInt64) -> UInt64? {
        let wait = max(self.frames.spend(1, nowMs: nowMs), self.bytes.spend(Double(byteCount), nowMs: nowMs))
        return wait > 0 ? wait : nil
    }
}
