import Foundation
import Synchronization
import Testing

/// Threads taking turns on one contended `Mutex`, as the relay link's thread and the HTTP loop do on a link's state.
///
/// Under `tools/test --sanitize thread` this is the regression test for ThreadSanitizer's view of `Mutex`: a
/// contended lock goes through the futex slow path of the toolchain's uninstrumented Synchronization library, and
/// before `TSanVisibleMutex` every value handed over that way was reported as a race (here, the array).
@Suite struct ContendedMutexTests {
    @Test func appendsFromManyThreadsArriveWholeAndInOrder() {
        let threads = 4
        let perThread = 5_000
        let log = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for i in 0..<perThread {
                log.withLock { $0.append(thread * perThread + i) }
            }
        }
        let all = log.withLock { $0 }
        #expect(all.count == threads * perThread)
        for thread in 0..<threads {
            let mine = all.filter { $0 / perThread == thread }
            #expect(mine == Array(thread * perThread..<(thread + 1) * perThread))
        }
    }

    @Test func aLockTakenOnlyIfFreeStillHandsTheValueOver() {
        let threads = 4
        let counts = Mutex<[Int]>(Array(repeating: 0, count: threads))
        let taken = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for _ in 0..<5_000 {
                if counts.withLockIfAvailable({ $0[thread] += 1 }) != nil { taken.add(1, ordering: .relaxed) }
            }
        }
        #expect(counts.withLock { $0.reduce(0, +) } == taken.load(ordering: .relaxed))
    }
}
