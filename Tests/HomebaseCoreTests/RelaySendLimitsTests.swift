import Testing
@testable import HomebaseCore

/// The relay's announced SEND limits (Protocol/relay.md §6) and the client's pacer under them.
@Suite struct RelaySendLimitsTests {
    @Test func headerRoundTripsAndTheDefaultsAreTheSpecs() {
        let d = RelaySendLimits.defaults
        #expect(d.headerValue == "frames=2000; frame-burst=4000; bytes=16777216; byte-burst=33554432")
        #expect(RelaySendLimits(headerValue: d.headerValue) == d)
        #expect(RelaySendLimits(RelayLimits()) == d)
        let odd = RelaySendLimits(framesPerSecond: 0.5, framesBurst: 1.25, bytesPerSecond: 1000.125, bytesBurst: 7)
        #expect(odd.headerValue == "frames=0.5; frame-burst=1.25; bytes=1000.125; byte-burst=7")
        #expect(RelaySendLimits(headerValue: odd.headerValue) == odd)
        // Values a configuration could hold but the header cannot carry are clamped into what it reads back.
        let wild = RelaySendLimits(framesPerSecond: .infinity, framesBurst: 1e300, bytesPerSecond: .nan,
                                   bytesBurst: 0.00001)
        #expect(RelaySendLimits(headerValue: wild.headerValue) != nil)
    }

    @Test func unknownKeysAreSkippedAndOrderDoesNotMatter() {
        let v = "byte-burst=4; future=1; bytes=3;frame-burst=2 ;  frames=1"
        #expect(RelaySendLimits(headerValue: v)
                == RelaySendLimits(framesPerSecond: 1, framesBurst: 2, bytesPerSecond: 3, bytesBurst: 4))
    }

    @Test(arguments: [
        "", "frames=1", "frames=1; frame-burst=2; bytes=3",  // missing keys
        "frames=1; frame-burst=2; bytes=3; byte-burst=0",  // zero
        "frames=-1; frame-burst=2; bytes=3; byte-burst=4",  // sign
        "frames=1e3; frame-burst=2; bytes=3; byte-burst=4",  // exponent
        "frames=inf; frame-burst=2; bytes=3; byte-burst=4", "frames=nan; frame-burst=2; bytes=3; byte-burst=4",
        "frames=1.; frame-burst=2; bytes=3; byte-burst=4", "frames=.5; frame-burst=2; bytes=3; byte-burst=4",
        "frames=1.2345; frame-burst=2; bytes=3; byte-burst=4",  // too many decimals
        "frames=1234567890123; frame-burst=2; bytes=3; byte-burst=4",  // 13 digits
        "frames=1; frames=2; frame-burst=2; bytes=3; byte-burst=4",  // duplicate
        "frames=1; frame-burst=2; bytes=3; byte-burst=4;",  // empty part
        "frames 1; frame-burst=2; bytes=3; byte-burst=4", "=1; frames=1; frame-burst=2; bytes=3; byte-burst=4",
        "frames=1; frame-burst=2; bytes=3; byte-burst=4; pad=" + String(repeating: "9", count: 300),
    ])
    func malformedValuesAreRefused(_ value: String) {
        #expect(RelaySendLimits(headerValue: value) == nil)
    }

    @Test func theHeaderIsFoundByNameInAnyCase() {
        let fields = [HTTPHeaderField(name: "Upgrade", value: "websocket"),
                      HTTPHeaderField(name: "homebase-relay-limits", value: "frames=5; frame-burst=6; bytes=7; byte-burst=8")]
        #expect(RelaySendLimits(announcedIn: fields)?.framesPerSecond == 5)
        #expect(RelaySendLimits(announcedIn: [HTTPHeaderField(name: "Upgrade", value: "websocket")]) == nil)
    }

    @Test func thePacerKeepsUnderTheRelaysBucketsAndSaysWhenToSendAgain() {
        let limits = RelaySendLimits(framesPerSecond: 50, framesBurst: 100, bytesPerSecond: 1_000_000,
                                     bytesBurst: 2_000_000)
        var pacer = SendPacer(limits: limits, nowMs: 0)
        var relay = TokenBucket(ratePerSecond: 50, capacity: 100, nowMs: 0)
        // Offer a frame every millisecond for 10 s: every frame the pacer lets go, the relay's bucket takes.
        var sent = 0
        for ms in UInt64(0)..<10_000 where pacer.take(payloadBytes: 300, nowMs: ms) {
            let taken = relay.take(1, nowMs: ms)
            #expect(taken, "the relay would refuse a frame sent at \(ms) ms")
            sent += 1
        }
        // Half the burst at once, then 90 % of the rate: 50 + 45 × 10 s.
        #expect(sent >= 495 && sent <= 501, "sent \(sent)")
        // Empty: it says how long until the next frame may go, and that long is enough.
        var empty = SendPacer(limits: limits, nowMs: 0)
        while empty.take(payloadBytes: 1, nowMs: 0) {}
        let wait = empty.waitMs(payloadBytes: 1, nowMs: 0)
        #expect(wait == 23)  // 1 frame at 45 frames/s: 22.2 ms, rounded up
        let early = empty.take(payloadBytes: 1, nowMs: wait - 1)
        let onTime = empty.take(payloadBytes: 1, nowMs: wait)
        #expect(!early && onTime)
    }

    @Test func theByteBucketPacesLargeFrames() {
        let limits = RelaySendLimits(framesPerSecond: 1_000, framesBurst: 2_000, bytesPerSecond: 100_000,
                                     bytesBurst: 200_000)
        var pacer = SendPacer(limits: limits, nowMs: 0)
        let first = pacer.take(payloadBytes: 100_000, nowMs: 0)  // the half burst
        let second = pacer.take(payloadBytes: 100_000, nowMs: 0)
        #expect(first && !second)
        #expect(pacer.waitMs(payloadBytes: 100_000, nowMs: 0) == 1_112)  // 100 kB at 90 kB/s
    }
}
