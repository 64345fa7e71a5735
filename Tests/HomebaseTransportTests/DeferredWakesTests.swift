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
    @Test func resumeIsOnTheGridAndAtLeastHalfAnIntervalAway() {
        let interval = Duration.milliseconds(30)
        var now = ContinuousClock.now
        for _ in 0..<200 {
            now += .microseconds(Int64.random(in: 0..<40_000))
            let resume = CurlMultiLoop.resumeTick(after: now, interval: interval)
            #expect(resume - now > .milliseconds(15))
            #expect(resume - now <= interval + .milliseconds(17))
            // On the grid: the same tick as any other transfer paused within the same stretch.
            #expect(CurlMultiLoop.nextTick(after: resume - .nanoseconds(1), interval: interval) == resume)
        }
    }

    @Test func transfersPausedCloseTogetherResumeTogether() {
        let interval = Duration.milliseconds(30)
        let start = CurlMultiLoop.nextTick(after: .now, interval: interval)
        // Paused 1 ms and 10 ms after a tick: both resume on the next one (17 and 20 ms later).
        let a = CurlMultiLoop.resumeTick(after: start + .milliseconds(1), interval: interval)
        let b = CurlMultiLoop.resumeTick(after: start + .milliseconds(10), interval: interval)
        #expect(a == b)
        #expect(a == start + interval)
    }
}
