import Testing
@testable import RelayService

/// READY waits for the stored count and, on a fleet edge, for the key's claim to settle (relay.md §3, the fleet's
/// takeover rule): whichever comes last lets it go, once.
@Suite struct ReadyGateTests {
    @Test func aSingleRelaySendsReadyWithTheCount() {
        let gate = ReadyGate(waitingForClaim: false)
        #expect(gate.counted(3) == 3)
    }

    @Test func onAFleetEdgeTheCountWaitsForTheClaim() {
        let gate = ReadyGate(waitingForClaim: true)
        #expect(gate.counted(2) == nil)
        #expect(gate.claimSettled() == 2)
    }

    @Test func aClaimSettledBeforeTheCountLetsTheCountGo() {
        let gate = ReadyGate(waitingForClaim: true)
        #expect(gate.claimSettled() == nil)
        #expect(gate.counted(0) == 0)
    }
}
