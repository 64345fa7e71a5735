import Testing
@testable import RelayService

/// The pool of idle connections' input storage: bounded in count and in each buffer's size.
@Suite struct SpareStorageTests {
    static func buffer(capacity: Int) -> [UInt8] {
        var b: [UInt8] = []
        b.reserveCapacity(capacity)
        return b
    }

    @Test func keepsAtMostItsCountOfBuffers() {
        var pool = SpareStorage(maxCount: 4, maxCapacity: 1024)
        let kept = (0..<10).map { _ in pool.give(Self.buffer(capacity: 512)) }
        #expect(kept == [true, true, true, true, false, false, false, false, false, false])
        #expect(pool.count == 4)
        #expect(pool.heldCapacity <= 4 * 1024)
    }

    @Test func freesABufferOverItsCapacity() {
        var pool = SpareStorage(maxCount: 4, maxCapacity: 64 * 1024)
        // A connection that once read a 1 MiB frame keeps a 1 MiB buffer: the pool does not.
        let large = pool.give(Self.buffer(capacity: 1 << 20))
        let small = pool.give(Self.buffer(capacity: 64 * 1024 - 64))
        #expect(!large && small)
        #expect(pool.count == 1)
    }

    @Test func lendsWhatItKeptAndThenNothing() {
        var pool = SpareStorage(maxCount: 2, maxCapacity: 4096)
        #expect(pool.take() == nil)
        pool.give(Self.buffer(capacity: 100))
        pool.give(Self.buffer(capacity: 200))
        let first = pool.take()
        let second = pool.take()
        #expect(first != nil && second != nil)
        #expect(first!.capacity >= 100 && second!.capacity >= 100)
        #expect(pool.take() == nil)
        #expect(pool.count == 0)
        // Taken buffers make room again.
        let again = pool.give(Self.buffer(capacity: 300))
        #expect(again)
    }
}
