import Testing
@testable import HomebaseNode

@Suite struct PendingReceiptsTests {
    @Test func idsAreSequentialAndCompleteOnce() {
        var p = PendingReceipts<Int>(capacity: 4)
        #expect(p.register(10).id == 1)
        #expect(p.register(20).id == 2)
        #expect(p.complete(1) == 10)
        #expect(p.complete(1) == nil)
        #expect(p.count == 1)
    }

    /// A relay that never sends receipts cannot make the table grow past its capacity.
    @Test func silentRelayIsBoundedByEvictingTheOldest() {
        var p = PendingReceipts<Int>(capacity: 4)
        var evicted: [Int] = []
        for i in 1...10 {
            if let e = p.register(i).evicted { evicted.append(e) }
            #expect(p.count <= 4)
        }
        #expect(evicted == [1, 2, 3, 4, 5, 6])
        #expect(p.drain().sorted() == [7, 8, 9, 10])
        #expect(p.count == 0)
    }
}
