import Testing
@testable import HomebaseService

@Suite struct RuntimeProbeScheduleTests {
    static func schedule() -> RuntimeProbeSchedule {
        RuntimeProbeSchedule(probeInterval: .seconds(30), reverifyDelay: .milliseconds(500),
                             firstRetryDelay: .seconds(1), maxRetryDelay: .seconds(60))
    }

    @Test func firstProbeIsDueAtOnce() {
        #expect(Self.schedule().nextProbeAtMs == 0)
    }

    @Test(arguments: [
        (0, 30_000), (1, 1_000), (2, 2_000), (3, 4_000), (4, 8_000), (5, 16_000), (6, 32_000), (7, 60_000),
        (8, 60_000), (64, 60_000), (10_000, 60_000),
    ] as [(Int, UInt64)])
    func delayDoublesPerFailureUpToTheCap(failures: Int, expectedMs: UInt64) {
        #expect(RuntimeProbeSchedule.ms(Self.schedule().delayAfter(failures: failures)) == expectedMs)
    }

    @Test func successfulProbeSchedulesTheNextAfterTheInterval() {
        var s = Self.schedule()
        s.probeStarted()
        s.probeFinished(succeeded: true, atMs: 1_000)
        #expect(s.nextProbeAtMs == 31_000)
        #expect(s.consecutiveFailures == 0)
    }

    @Test func reverifyWhileHealthyBringsTheProbeForwardAndCoalesces() {
        var s = Self.schedule()
        s.probeStarted()
        s.probeFinished(succeeded: true, atMs: 1_000)
        s.reverifyRequested(atMs: 2_000)
        #expect(s.nextProbeAtMs == 2_500)
        // A burst of requests keeps the first due time: one probe answers them all.
        s.reverifyRequested(atMs: 2_100)
        s.reverifyRequested(atMs: 2_400)
        #expect(s.nextProbeAtMs == 2_500)
    }

    @Test func reverifyWhileFailingWaitsForTheBackoff() {
        var s = Self.schedule()
        var now: UInt64 = 10_000
        var expected: [UInt64] = []
        var seen: [UInt64] = []
        for failure in 1...8 {
            s.probeStarted()
            s.probeFinished(succeeded: false, atMs: now)
            s.reverifyRequested(atMs: now + 1)
            seen.append(s.nextProbeAtMs - now)
            expected.append(min(1_000 << UInt64(failure - 1), 60_000))
            now = s.nextProbeAtMs
        }
        #expect(seen == expected)
        #expect(s.consecutiveFailures == 8)
    }

    @Test func successAfterFailuresResetsTheBackoff() {
        var s = Self.schedule()
        for _ in 0..<5 {
            s.probeStarted()
            s.probeFinished(succeeded: false, atMs: 0)
        }
        s.probeStarted()
        s.probeFinished(succeeded: true, atMs: 100_000)
        #expect(s.consecutiveFailures == 0)
        #expect(s.nextProbeAtMs == 130_000)
        s.probeStarted()
        s.probeFinished(succeeded: false, atMs: 130_000)
        #expect(s.nextProbeAtMs == 131_000)
    }

    @Test func reverifyDuringAProbeIsAppliedWhenItFinishes() {
        var s = Self.schedule()
        s.probeStarted()
        s.reverifyRequested(atMs: 500)
        #expect(s.nextProbeAtMs == 0)
        s.probeFinished(succeeded: true, atMs: 1_000)
        // Not 31 000: the request may report a failure the finished probe ran too early to see.
        #expect(s.nextProbeAtMs == 1_500)
        // Applied once, not at every later probe.
        s.probeStarted()
        s.probeFinished(succeeded: true, atMs: 2_000)
        #expect(s.nextProbeAtMs == 32_000)
    }
}
