import Foundation
@testable import HomebaseTransport
import Synchronization
import Testing

/// Wake-ups asked for inside a batch run once per target at its end; outside a batch, at once.
@Suite struct DeferredWakesTests {
    final class Target {}

    @Test func outsideABatchAWakeRunsAtOnce() {
        var log: [String] = []
        DeferredWakes.wake(Target()) { log.append("woke") }
        #expect(log == ["woke"])
    }

    @Test func insideABatchWakesRunOncePerTargetAtTheEndInOrder() {
        let a = Target()
        let b = Target()
        var log: [String] = []
        let result = DeferredWakes.batch { () -> Int in
            DeferredWakes.wake(a) { log.append("a") }
            DeferredWakes.wake(b) { log.append("b") }
            DeferredWakes.wake(a) { log.append("a again") }
            // Nested: joins the outer batch.
            DeferredWakes.batch { DeferredWakes.wake(b) { log.append("b again") } }
            #expect(log.isEmpty)
            return 7
        }
        #expect(result == 7)
        #expect(log == ["a", "b"])
        // The batch is over: the next wake runs at once.
        DeferredWakes.wake(a) { log.append("after") }
        #expect(log == ["a", "b", "after"])
    }

    @Test func aThrowingBatchStillWakes() {
        struct Failure: Error {}
        var log: [String] = []
        #expect(throws: Failure.self) {
            try DeferredWakes.batch {
                DeferredWakes.wake(Target()) { log.append("woke") }
                throw Failure()
            }
        }
        #expect(log == ["woke"])
    }

    @Test func batchesArePerThread() async {
        let log = Mutex<[String]>([])
        let inside = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let target = Target()
        let thread = Thread {
            DeferredWakes.batch {
                inside.signal()
                proceed.wait()
            }
        }
        thread.start()
        inside.wait()
        // Another thread's batch does not hold this thread's wake-ups.
        DeferredWakes.wake(target) { log.withLock { $0.append("here") } }
        #expect(log.withLock { $0 } == ["here"])
        proceed.signal()
    }
}

/// The pacing grid: reads resume on shared ticks, never closer than half an interval after a pause.
@Suite struct PacingGridTests {
    static let ms: UInt64 = 1_000_000

    @Test func resumeIsOnTheGridAndAtLeastHalfAnIntervalAway() {
        let interval = 30 * Self.ms
        var now: UInt64 = 123_456_789_012
        for _ in 0..<500 {
            now += UInt64.random(in: 0..<40 * Self.ms)
            let resume = CurlMultiLoop.resumeTick(after: now, interval: interval)
            #expect(resume - now > 15 * Self.ms)
            #expect(resume - now <= interval + 17 * Self.ms)
            #expect(resume % interval == 0)
        }
    }

    @Test func transfersPausedCloseTogetherResumeTogether() {
        let interval = 30 * Self.ms
        let tick = CurlMultiLoop.nextTick(after: 987_654_321_000, interval: interval)
        #expect(tick % interval == 0 && tick > 987_654_321_000 && tick - 987_654_321_000 <= interval)
        // Paused 1 ms and 10 ms after a tick: both resume on the next one (29 and 20 ms later).
        let a = CurlMultiLoop.resumeTick(after: tick + 1 * Self.ms, interval: interval)
        let b = CurlMultiLoop.resumeTick(after: tick + 10 * Self.ms, interval: interval)
        #expect(a == b)
        #expect(a == tick + interval)
        // Paused 14 ms after: 16 ms to that tick is not enough (>= 17), so the one after.
        #expect(CurlMultiLoop.resumeTick(after: tick + 14 * Self.ms, interval: interval) == tick + 2 * interval)
    }

    @Test func tinyIntervalStillAdvances() {
        #expect(CurlMultiLoop.resumeTick(after: 5, interval: 1) > 5)
        #expect(CurlMultiLoop.nextTick(after: 0, interval: 7) == 7)
    }
}
