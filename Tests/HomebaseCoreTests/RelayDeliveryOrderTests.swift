import Testing
@testable import HomebaseCore

/// relay.md §5's order for one recipient, on the pure machine: no sockets, no mailbox, no loop.
@Suite struct RelayDeliveryOrderTests {
    static func frame(_ tag: UInt8, _ count: Int = 3) -> [UInt8] { [UInt8](repeating: tag, count: count) }

    /// A connection that is READY with nothing stored.
    static func ready() -> RelayDeliveryOrder {
        var o = RelayDeliveryOrder()
        #expect(o.readyWritten(stored: 0, backlogged: false) == nil)
        #expect(o.releasable().isEmpty)
        return o
    }

    @Test func liveFramesWaitForReadyAndThenGoInOrder() {
        var o = RelayDeliveryOrder()
        #expect(!o.canWriteLiveNow)
        o.hold(Self.frame(1))
        o.hold(Self.frame(2, 5))
        #expect(o.heldBytes == 8)
        #expect(o.releasable().isEmpty, "nothing may go before READY")
        #expect(o.readyWritten(stored: 0, backlogged: false) == nil)
        #expect(o.releasable() == [Self.frame(1), Self.frame(2, 5)])
        #expect(o.heldBytes == 0)
        #expect(o.canWriteLiveNow)
    }

    @Test func aLiveFrameWaitsForTheStoreSentBeforeItToBeCommittedAndWritten() {
        var o = Self.ready()
        let seq = o.storeIssued()
        #expect(!o.canWriteLiveNow, "a STORE is in flight")
        o.hold(Self.frame(7))
        o.storeCompleted(seq: seq, deliveryID: 40)
        #expect(o.releasable().isEmpty, "committed, but its frame is not written yet")
        #expect(o.requestDrain(backlogged: false) == 0)
        o.pageStarted()
        #expect(o.delivered(40) == [Self.frame(7)])
        #expect(o.pageFinished(full: false, backlogged: false) == nil)
        #expect(o.canWriteLiveNow)
    }

    @Test func aRefusedStoreReleasesWhatWaitedBehindIt() {
        var o = Self.ready()
        let seq = o.storeIssued()
        o.hold(Self.frame(1))
        o.storeCompleted(seq: seq, deliveryID: nil)
        #expect(o.releasable() == [Self.frame(1)])
        #expect(o.canWriteLiveNow)
    }

    @Test func liveFramesBetweenTwoStoresGoBetweenTheirStoredFrames() {
        var o = Self.ready()
        let s1 = o.storeIssued()
        o.hold(Self.frame(0xA))
        let s2 = o.storeIssued()
        o.hold(Self.frame(0xB))
        o.storeCompleted(seq: s1, deliveryID: 10)
        o.storeCompleted(seq: s2, deliveryID: 11)
        #expect(o.requestDrain(backlogged: false) == 0)
        o.pageStarted()
        #expect(o.delivered(10) == [Self.frame(0xA)])
        #expect(o.delivered(11) == [Self.frame(0xB)])
        #expect(o.releasable().isEmpty)
        #expect(o.heldCount == 0)
    }

    @Test func onePageReadAtATimeAndAWishMadeMeanwhileIsKept() {
        var o = RelayDeliveryOrder()
        #expect(o.requestDrain(backlogged: false) == nil, "not before READY")
        #expect(o.wantsDrain)
        // READY announced nothing, but a page was wished for before it (a store notice).
        #expect(o.readyWritten(stored: 0, backlogged: false) == 0)
        #expect(o.isDraining)
        #expect(o.requestDrain(backlogged: false) == nil, "a page is in flight")
        o.pageStarted()
        _ = o.delivered(5)
        #expect(o.pageFinished(full: false, backlogged: false) == 5, "the wish made during the read")
        o.pageStarted()
        #expect(o.pageFinished(full: false, backlogged: false) == nil, "a short page with no wish: done")
    }

    @Test func aFullPageReadsOnAndACutPageReadsOnFromTheCursor() {
        var o = RelayDeliveryOrder()
        #expect(o.readyWritten(stored: 130, backlogged: false) == 0)
        o.pageStarted()
        for id in UInt64(1)...64 { _ = o.delivered(id) }
        #expect(o.pageFinished(full: true, backlogged: false) == 64)
        o.pageStarted()
        _ = o.delivered(65)
        o.pageCut()
        #expect(o.pageFinished(full: false, backlogged: false) == 65)
    }

    @Test func aBackloggedConnectionWaitsUntilItIsWritable() {
        var o = RelayDeliveryOrder()
        #expect(o.readyWritten(stored: 3, backlogged: true) == nil)
        #expect(o.wantsDrain)
        #expect(o.writable(backlogged: true) == nil)
        #expect(o.writable(backlogged: false) == 0)
        #expect(o.writable(backlogged: false) == nil, "already reading")
    }

    /// A fleet: another edge's STORE is announced while one made here is still in flight. The announced one takes
    /// the next number, already complete; the live frame after it waits for both.
    @Test func anAnnouncedStoreCompletesAheadOfAnEarlierOneMadeHere() {
        var o = Self.ready()
        let local = o.storeIssued()
        o.storeAnnounced(deliveryID: 21)
        o.hold(Self.frame(9))
        #expect(o.releasable().isEmpty, "STORE 1 is in flight")
        o.storeCompleted(seq: local, deliveryID: 20)
        #expect(o.storesInFlight == 0)
        #expect(o.releasable().isEmpty, "committed but not written")
        #expect(o.requestDrain(backlogged: false) == 0)
        o.pageStarted()
        #expect(o.delivered(20).isEmpty, "the announced frame 21 comes first")
        #expect(o.delivered(21) == [Self.frame(9)])
    }

    @Test func manyHeldFramesAreReleasedInOrderAcrossCompactions() {
        var o = Self.ready()
        var expected: [[UInt8]] = []
        for round in 0..<5 {
            let seq = o.storeIssued()
            for i in 0..<100 {
                let f = [UInt8(round), UInt8(i)]
                o.hold(f)
                expected.append(f)
            }
            o.storeCompleted(seq: seq, deliveryID: nil)
        }
        var got: [[UInt8]] = []
        got += o.releasable()
        #expect(got == expected)
        #expect(o.heldBytes == 0)
    }
}

/// The sender's side on a fleet: live frames to other edges wait for the sender's earlier STOREs, bounded.
@Suite struct FleetSendOrderTests {
    @Test func liveFramesWaitForEveryStoreIssuedBeforeThem() {
        var o = FleetSendOrder<String>(maxHeldBytes: 100)
        #expect(o.live("a", bytes: 10) == .sendNow)
        o.storeIssued()
        #expect(o.live("b", bytes: 10) == .held)
        o.storeIssued()
        #expect(o.live("c", bytes: 10) == .held)
        #expect(o.storeCompleted() == ["b"], "c waits for the second STORE")
        #expect(o.heldBytes == 10)
        #expect(o.storeCompleted() == ["c"])
        #expect(o.live("d", bytes: 10) == .sendNow)
    }

    @Test func heldFramesAreBoundedAndAFrameIsOnlyMadeWhenHeld() {
        var o = FleetSendOrder<[UInt8]>(maxHeldBytes: 25)
        var made = 0
        func frame() -> [UInt8] { made += 1; return [1] }
        #expect(o.live(frame(), bytes: 10) == .sendNow)
        #expect(made == 0)
        o.storeIssued()
        #expect(o.live(frame(), bytes: 10) == .held)
        #expect(o.live(frame(), bytes: 10) == .held)
        #expect(o.live(frame(), bytes: 10) == .refused, "30 bytes would pass the 25-byte bound")
        #expect(made == 2)
        #expect(o.heldCount == 2)
        #expect(o.storeCompleted().count == 2)
        #expect(o.heldBytes == 0)
    }
}
