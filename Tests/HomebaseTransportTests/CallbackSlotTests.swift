import HomebaseTransport
import Synchronization
import Testing

/// The address of a local of the caller's frame: how deep the stack is where it is called.
@inline(never)
func stackDepthMarker() -> Int {
    var local = 0
    return withUnsafeMutablePointer(to: &local) { Int(bitPattern: $0) }
}

private final class Depths: Sendable {
    let values = Mutex<[Int]>([])
    func record() { let depth = stackDepthMarker(); self.values.withLock { $0.append(depth) } }
}

@Suite struct CallbackSlotTests {
    @Test func readingTheCallbackManyTimesDoesNotDeepenItsCalls() {
        // The slot's promise. (Inside this generic class a Mutex of the closure would not show the thunk chain:
        // that needs a concrete closure type, as at the call sites; their tests are the ones that failed.)
        let slot = CallbackSlot<Int, Bool>()
        let depths = Depths()
        slot.set { _ in depths.record(); return true }
        for i in 0..<10_000 {
            #expect(slot.current?(i) == true)
        }
        let seen = depths.values.withLock { $0 }
        #expect(seen.count == 10_000)
        #expect(abs(seen[0] - seen[9_999]) < 1_024, "the call sank \(seen[0] - seen[9_999]) bytes deeper")
    }

    @Test func aNewCallbackReplacesTheOldAndNilClearsIt() {
        let slot = CallbackSlot<String, Int>()
        #expect(slot.current == nil)
        slot.set { $0.count }
        #expect(slot.current?("abc") == 3)
        slot.set { _ in -1 }
        #expect(slot.current?("abc") == -1)
        slot.set(nil)
        #expect(slot.current == nil)
    }
}
