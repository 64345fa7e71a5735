import Testing
@testable import HomebaseCore

@Suite struct ConnectionSlotsTests {
    @Test func freeSlotsAdmitAndReleasedOnesAreFreeAgain() {
        var s = ConnectionSlots(.init(maxConnections: 3, perAddress: 3))
        #expect(s.admit(1, address: "a") == .admit)
        #expect(s.admit(2, address: "b") == .admit)
        #expect(s.count == 2)
        s.release(1)
        #expect(s.count == 1 && !s.holds(1) && s.holds(2))
        s.release(1)  // twice: harmless
        #expect(s.count == 1)
    }

    /// One address holds at most `perAddress` unproven slots: its oldest makes room for its newest, even with
    /// slots free, so strangers elsewhere keep theirs.
    @Test func oneAddressHoldsAtMostPerAddressUnprovenSlots() {
        var s = ConnectionSlots(.init(maxConnections: 32, perAddress: 3))
        for id in 1...3 { #expect(s.admit(id, address: "attacker") == .admit) }
        #expect(s.admit(4, address: "attacker") == .admitEvicting(1))
        #expect(s.admit(5, address: "attacker") == .admitEvicting(2))
        #expect(s.count == 3)
        #expect(s.admit(6, address: "owner") == .admit)
        // Authenticated connections do not count against the address.
        var t = ConnectionSlots(.init(maxConnections: 32, perAddress: 2))
        #expect(t.admit(1, address: "owner") == .admit)
        t.authenticate(1)
        #expect(t.admit(2, address: "owner") == .admit)
        #expect(t.admit(3, address: "owner") == .admit)
        #expect(t.admit(4, address: "owner") == .admitEvicting(2))
        #expect(t.holds(1) && t.isAuthenticated(1))
    }

    /// Full: the most crowding address loses its oldest unproven connection; an authenticated one is never taken.
    @Test func whenFullTheMostCrowdingAddressMakesRoom() {
        var s = ConnectionSlots(.init(maxConnections: 5, perAddress: 4))
        #expect(s.admit(1, address: "owner") == .admit)
        s.authenticate(1)
        #expect(s.admit(2, address: "b") == .admit)
        #expect(s.admit(3, address: "c") == .admit)
        #expect(s.admit(4, address: "c") == .admit)
        #expect(s.admit(5, address: "c") == .admit)
        #expect(s.admit(6, address: "b") == .admitEvicting(3), "c holds the most, and 3 is its oldest")
        #expect(s.admit(7, address: "d") == .admitEvicting(2), "a tie: b and c hold two each, b's 2 is oldest")
        #expect(s.holds(1))
        #expect(s.count == 5)
    }

    /// The owner's new connection always gets a slot while any slot is a stranger's, and the owner is refused only
    /// when every slot is authenticated.
    @Test func theOwnerIsNeverStarvedByStrangers() {
        var s = ConnectionSlots(.init(maxConnections: 32, perAddress: 8))
        var id = 0
        // 34 unfinished heads from four addresses, and then from the owner's own address.
        for address in ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.1"] {
            for _ in 0..<34 {
                id += 1
                #expect(s.admit(id, address: address) != .refuse)
            }
        }
        #expect(s.count == 32)
        id += 1
        let owner = id
        #expect(s.admit(owner, address: "10.0.0.1") != .refuse)
        s.authenticate(owner)
        // However many strangers follow, the authenticated owner keeps its slot.
        for _ in 0..<200 {
            id += 1
            _ = s.admit(id, address: "10.0.0.\(id % 7)")
        }
        #expect(s.holds(owner))
        // Every slot authenticated: a stranger is refused, and nobody is evicted.
        var full = ConnectionSlots(.init(maxConnections: 2, perAddress: 2))
        _ = full.admit(1, address: "a")
        _ = full.admit(2, address: "b")
        full.authenticate(1)
        full.authenticate(2)
        #expect(full.admit(3, address: "c") == .refuse)
        #expect(full.count == 2 && !full.holds(3))
    }

    /// An evicted connection's release (when its thread ends) does not free anyone else's slot.
    @Test func releasingAnEvictedConnectionChangesNothing() {
        var s = ConnectionSlots(.init(maxConnections: 2, perAddress: 2))
        _ = s.admit(1, address: "a")
        _ = s.admit(2, address: "a")
        #expect(s.admit(3, address: "a") == .admitEvicting(1))
        s.release(1)
        #expect(s.count == 2 && s.holds(2) && s.holds(3))
    }
}
