@testable import HomebaseService
import Testing

/// The status page's lists (finished requests, events) keep the newest items, oldest first, in a ring.
@Suite struct NewestListTests {
    @Test func keepsTheNewestInOrderAcrossManyWraps() {
        var list = NewestList<Int>(capacity: 3)
        #expect(list.oldestFirst.isEmpty)
        list.append(1)
        list.append(2)
        #expect(list.oldestFirst == [1, 2] && list.count == 2)
        for n in 3...10 {
            list.append(n)
            #expect(list.oldestFirst == Array(max(1, n - 2)...n), "after \(n)")
            #expect(list.count == min(n, 3))
        }
    }

    @Test func aCapacityBelowOneKeepsOne() {
        var list = NewestList<String>(capacity: 0)
        list.append("a")
        list.append("b")
        #expect(list.oldestFirst == ["b"])
    }
}
