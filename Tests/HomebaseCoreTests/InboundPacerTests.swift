import HomebaseCore
import Testing

/// `InboundPacer` and `TokenBucket.spend`: how long the relay stops reading a connection that sends faster than
/// twice its SEND limits (issue 23).
struct InboundPacerTests {
    @Test func spendGoesIntoDebtAndSaysHowLongItLasts() {
        var b = TokenBucket(ratePerSecond: 100, capacity: 10, nowMs: 0)
        #expect(b.spend(10, nowMs: 0) == 0)
        #expect(b.spend(5, nowMs: 0) == 50)  // 5 tokens of debt at 100 a second
        #expect(b.tokens == -5)
        #expect(b.spend(0, nowMs: 50) == 0)  // repaid
        #expect(b.spend(1, nowMs: 50) == 10)
    }

    static func limits() -> RelayLimits {
        var l = RelayLimits()
        l.sendFramesPerSecond = 100
        l.sendFramesBurst = 50
        l.sendBytesPerSecond = 10_000
        l.sendBytesBurst = 20_000
        return l
    }

    @Test func aClientWithinTwiceItsLimitsIsNeverPaced() {
        var p = InboundPacer(limits: Self.limits(), nowMs: 0)
        // The whole doubled burst at once, then twice the rate for ten seconds.
        for _ in 0..<100 { #expect(p.received(byteCount: 10, nowMs: 0) == nil) }
        for ms in stride(from: UInt64(5), through: 10_000, by: 5) {
            #expect(p.received(byteCount: 10, nowMs: ms) == nil)
        }
    }

    @Test func framesOverTwiceTheBurstArePaced() {
        var p = InboundPacer(limits: Self.limits(), nowMs: 0)
        for _ in 0..<100 { _ = p.received(byteCount: 1, nowMs: 0) }
        // One frame of debt at 200 frames a second: 5 ms.
        #expect(p.received(byteCount: 1, nowMs: 0) == 5)
        #expect(p.received(byteCount: 1, nowMs: 10) == nil)
    }

    @Test func bytesOverTwiceTheBurstArePacedByTheByteRate() {
        var p = InboundPacer(limits: Self.limits(), nowMs: 0)
        #expect(p.received(byteCount: 40_000, nowMs: 0) == nil)
        // 20,000 bytes of debt at 20,000 a second.
        #expect(p.received(byteCount: 20_000, nowMs: 0) == 1_000)
    }
}
