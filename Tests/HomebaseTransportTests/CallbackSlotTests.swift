import HomebaseTransport
import Testing

/// The slot's reason to exist, that a read does not deepen the callback's calls, is tested where it showed: at the
/// call sites, whose closure types are concrete (RelayMessengerTests, LoopbackMessengerTests, RelationBoxTests).
/// Inside this generic class a Mutex of the closure would not reabstract, so a depth test here could not fail.
@Suite struct CallbackSlotTests {
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
