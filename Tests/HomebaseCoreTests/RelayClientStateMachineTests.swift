import Testing
@testable import HomebaseCore

@Suite struct RelayClientStateMachineTests {
    static let me = PublicKey(bytes: [UInt8](repeating: 1, count: 32))!
    static let peer = PublicKey(bytes: [UInt8](repeating: 2, count: 32))!
    static let nonce = [UInt8](repeating: 0xAA, count: 32)

    func loggedIn() -> RelayClientStateMachine {
        var m = RelayClientStateMachine(publicKey: Self.me)
        _ = m.messageReceived(RelayFrame.challenge(version: 1, nonce: Self.nonce, relayTimeMs: 1).encoded()[...])
        _ = m.challengeSigned(signature: [UInt8](repeating: 5, count: 64))
        _ = m.messageReceived(RelayFrame.ready(stored: 0, maxPayload: 1000).encoded()[...])
        return m
    }

    @Test func loginSequence() {
        var m = RelayClientStateMachine(publicKey: Self.me)
        let a1 = m.messageReceived(RelayFrame.challenge(version: 1, nonce: Self.nonce, relayTimeMs: 7).encoded()[...])
        #expect(a1 == .signChallenge(nonce: Self.nonce, relayTimeMs: 7))
        let sig = [UInt8](repeating: 5, count: 64)
        let a2 = m.challengeSigned(signature: sig)
        #expect(a2 == .send(.auth(publicKey: Self.me, signature: sig)))
        let a3 = m.messageReceived(RelayFrame.ready(stored: 3, maxPayload: 262_144).encoded()[...])
        #expect(a3 == .ready(stored: 3, maxPayload: 262_144))
        #expect(m.state == .ready(maxPayload: 262_144))
    }

    @Test func otherVersionsAreRefused() {
        var m = RelayClientStateMachine(publicKey: Self.me)
        let a = m.messageReceived(RelayFrame.challenge(version: 2, nonce: Self.nonce, relayTimeMs: 7).encoded()[...])
        guard case .close(1002, _) = a else { Issue.record("\(a)"); return }
    }

    @Test func deliverBeforeReadyIsAProtocolError() {
        var m = RelayClientStateMachine(publicKey: Self.me)
        let a = m.messageReceived(RelayFrame.deliver(sender: Self.peer, deliveryID: 0, payload: [][...]).encoded()[...])
        guard case .close(1002, _) = a else { Issue.record("\(a)"); return }
    }

    @Test func deliverAndReceiptAfterReady() {
        var m = loggedIn()
        let d = m.messageReceived(RelayFrame.deliver(sender: Self.peer, deliveryID: 4, payload: [1][...]).encoded()[...])
        #expect(d == .deliver(sender: Self.peer, deliveryID: 4, payload: [1][...]))
        let r = m.messageReceived(RelayFrame.receipt(sendID: 9, status: .recipientOffline).encoded()[...])
        #expect(r == .receipt(sendID: 9, status: .recipientOffline))
    }

    @Test func errorFrameIsReportedInAnyState() {
        var m = RelayClientStateMachine(publicKey: Self.me)
        let a = m.messageReceived(RelayFrame.error(code: 1008, message: "not admitted").encoded()[...])
        #expect(a == .relayError(code: 1008, message: "not admitted"))
    }

    @Test func garbageClosesOnce() {
        var m = loggedIn()
        guard case .close = m.messageReceived([0x55][...]) else { Issue.record(); return }
        #expect(m.messageReceived([0x55][...]) == .none)
    }

    @Test func backoffGrowsCapsAndResets() {
        var b = ReconnectBackoff()
        var last: UInt64 = 0
        for _ in 0..<6 {
            let d = b.nextDelayMs(closeCode: nil, random: 0.999)
            #expect(d >= last)
            last = d
        }
        for _ in 0..<20 { _ = b.nextDelayMs(closeCode: nil, random: 0.999) }
        #expect(b.nextDelayMs(closeCode: nil, random: 0.999) < 30_000)
        #expect(b.nextDelayMs(closeCode: nil, random: 0) == 15_000)
        b.connected()
        #expect(b.nextDelayMs(closeCode: nil, random: 0) == 125)
    }

    @Test func restartingRelayIsRetriedAtOnceWithJitter() {
        var b = ReconnectBackoff()
        for _ in 0..<5 { _ = b.nextDelayMs(closeCode: nil, random: 0.5) }
        #expect(b.nextDelayMs(closeCode: 1012, random: 0.5) == 500)
        #expect(b.nextDelayMs(closeCode: 1012, random: 0) == 0)
        #expect(b.attempt == 0)
    }
}
