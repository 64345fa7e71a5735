import Testing
@testable import HomebaseCore

@Suite struct RelaySessionStateMachineTests {
    static let nonce = [UInt8](repeating: 0xAA, count: 32)
    static let pk = PublicKey(bytes: [UInt8](repeating: 1, count: 32))!
    static let bob = PublicKey(bytes: [UInt8](repeating: 2, count: 32))!
    static let sig = [UInt8](repeating: 3, count: 64)
    let t0: UInt64 = 1_000_000

    func authed(limits: RelayLimits = RelayLimits()) -> RelaySessionStateMachine {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: limits)
        _ = m.messageReceived(RelayFrame.auth(publicKey: Self.pk, signature: Self.sig).encoded()[...], nowMs: t0)
        _ = m.authVerified(publicKey: Self.pk, signatureValid: true, admitted: true)
        return m
    }

    func send(_ id: UInt32, flags: UInt8 = 0, payload: Int = 3) -> ArraySlice<UInt8> {
        RelayFrame.send(sendID: id, recipient: Self.bob, flags: flags,
                        payload: [UInt8](repeating: 9, count: payload)[...]).encoded()[...]
    }

    @Test func challengeCarriesTheNonceAndVersion() {
        let m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        #expect(m.challenge(relayTimeMs: 5) == .challenge(version: 1, nonce: Self.nonce, relayTimeMs: 5))
    }

    @Test func authIsHandedOutForVerificationThenReady() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        let a = m.messageReceived(RelayFrame.auth(publicKey: Self.pk, signature: Self.sig).encoded()[...], nowMs: t0 + 1)
        #expect(a == .verifyAuth(publicKey: Self.pk, signature: Self.sig, nonce: Self.nonce))
        do { let r = m.authVerified(publicKey: Self.pk, signatureValid: true, admitted: true); #expect(r == .none) }
        #expect(m.authenticatedKey == Self.pk)
        #expect(m.readyFrame(stored: 2) == .ready(stored: 2, maxPayload: 262_144))
    }

    @Test func silentClientIsClosedWithPolicyViolationAtTheDeadline() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        #expect(m.nextDeadlineMs == t0 + 10_000)
        do { let r = m.timerFired(nowMs: t0 + 9_999); #expect(r == .none) }
        do { let r = m.timerFired(nowMs: t0 + 10_000); #expect(r == .close(code: 1008, reason: .authTimeout)) }
        #expect(m.timerFired(nowMs: t0 + 20_000) == .none)  // closed once
    }

    @Test func badSignatureClosesWithPolicy() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        _ = m.messageReceived(RelayFrame.auth(publicKey: Self.pk, signature: Self.sig).encoded()[...], nowMs: t0)
        do { let r = m.authVerified(publicKey: Self.pk, signatureValid: false, admitted: true); #expect(r == .close(code: 1008, reason: .badSignature)) }
    }

    @Test func keyOutsideTheAllowlistClosesWithPolicy() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        _ = m.messageReceived(RelayFrame.auth(publicKey: Self.pk, signature: Self.sig).encoded()[...], nowMs: t0)
        do { let r = m.authVerified(publicKey: Self.pk, signatureValid: true, admitted: false); #expect(r == .close(code: 1008, reason: .notAdmitted)) }
    }

    @Test(arguments: [
        RelayFrame.send(sendID: 1, recipient: pk, flags: 0, payload: [1][...]),
        .ack(deliveryID: 1),
        .ready(stored: 0, maxPayload: 1),
        .challenge(version: 1, nonce: nonce, relayTimeMs: 0),
    ])
    func anyFrameButAuthBeforeReadyCloses(frame: RelayFrame) {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        do { let r = m.messageReceived(frame.encoded()[...], nowMs: t0); #expect(r == .close(code: 1008, reason: .frameBeforeReady)) }
    }

    @Test func malformedFrameBeforeReadyCloses() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        do { let r = m.messageReceived([0x02, 0x01][...], nowMs: t0); #expect(r == .close(code: 1008, reason: .frameBeforeReady)) }
    }

    @Test func aFrameWhileVerifyingCloses() {
        var m = RelaySessionStateMachine(nonce: Self.nonce, nowMs: t0, limits: RelayLimits())
        _ = m.messageReceived(RelayFrame.auth(publicKey: Self.pk, signature: Self.sig).encoded()[...], nowMs: t0)
        do { let r = m.messageReceived(send(1), nowMs: t0); #expect(r == .close(code: 1008, reason: .frameBeforeReady)) }
        // The late verdict changes nothing.
        do { let r = m.authVerified(publicKey: Self.pk, signatureValid: true, admitted: true); #expect(r == .none) }
        #expect(m.authenticatedKey == nil)
    }

    @Test func sendIsRoutedWithTheStoreFlag() {
        var m = authed()
        do { let r = m.messageReceived(send(5, flags: 1), nowMs: t0); #expect(r == .route(sendID: 5, recipient: Self.bob, store: true, payload: [9, 9, 9][...])) }
        do { let r = m.messageReceived(send(6, flags: 0), nowMs: t0); #expect(r == .route(sendID: 6, recipient: Self.bob, store: false, payload: [9, 9, 9][...])) }
    }

    @Test(arguments: [UInt8(0x02), 0x03, 0x80, 0xFF])
    func reservedFlagBitsGetStatus6(flags: UInt8) {
        var m = authed()
        do { let r = m.messageReceived(send(5, flags: flags), nowMs: t0); #expect(r == .refuse(sendID: 5, status: .badFlags)) }
        // send_id 0 asks for no receipt: the shell writes none, but the refusal is still an action it counts.
        do { let r = m.messageReceived(send(0, flags: flags), nowMs: t0); #expect(r == .refuse(sendID: 0, status: .badFlags)) }
    }

    @Test func payloadOverTheLimitGetsStatus4() {
        var limits = RelayLimits()
        limits.maxPayloadBytes = 100
        var m = authed(limits: limits)
        do { let r = m.messageReceived(send(1, payload: 100), nowMs: t0); #expect(r == .route(sendID: 1, recipient: Self.bob, store: false, payload: [UInt8](repeating: 9, count: 100)[...])) }
        do { let r = m.messageReceived(send(2, payload: 101), nowMs: t0); #expect(r == .refuse(sendID: 2, status: .payloadTooLarge)) }
    }

    @Test func floodingSenderGetsStatus5ThenRecovers() {
        var limits = RelayLimits()
        limits.sendFramesPerSecond = 10
        limits.sendFramesBurst = 3
        var m = authed(limits: limits)
        for i in 1...3 { let r = m.messageReceived(send(UInt32(i)), nowMs: t0); #expect(r != .refuse(sendID: UInt32(i), status: .rateLimited)) }
        do { let r = m.messageReceived(send(4), nowMs: t0); #expect(r == .refuse(sendID: 4, status: .rateLimited)) }
        // 100 ms later one token has been refilled.
        do { let r = m.messageReceived(send(5), nowMs: t0 + 100); #expect(r == .route(sendID: 5, recipient: Self.bob, store: false, payload: [9, 9, 9][...])) }
    }

    @Test func byteBucketLimitsVolume() {
        var limits = RelayLimits()
        limits.sendBytesPerSecond = 1000
        limits.sendBytesBurst = 1000
        var m = authed(limits: limits)
        do { let r = m.messageReceived(send(1, payload: 800), nowMs: t0); #expect(r != .refuse(sendID: 1, status: .rateLimited)) }
        do { let r = m.messageReceived(send(2, payload: 800), nowMs: t0); #expect(r == .refuse(sendID: 2, status: .rateLimited)) }
    }

    @Test func ackOfAStoredFrameIsPassedOnAndAckZeroIgnored() {
        var m = authed()
        do { let r = m.messageReceived(RelayFrame.ack(deliveryID: 9).encoded()[...], nowMs: t0); #expect(r == .acknowledge(deliveryID: 9)) }
        do { let r = m.messageReceived(RelayFrame.ack(deliveryID: 0).encoded()[...], nowMs: t0); #expect(r == .none) }
    }

    @Test(arguments: [
        RelayFrame.auth(publicKey: pk, signature: sig),
        .deliver(sender: pk, deliveryID: 1, payload: [][...]),
        .receipt(sendID: 1, status: .delivered),
        .error(code: 1, message: "x"),
        .ready(stored: 1, maxPayload: 1),
    ])
    func relayOnlyFramesFromAClientClose(frame: RelayFrame) {
        var m = authed()
        do { let r = m.messageReceived(frame.encoded()[...], nowMs: t0); #expect(r == .close(code: 1008, reason: .unexpectedFrame)) }
    }

    @Test func malformedFrameAfterReadyCloses() {
        var m = authed()
        do { let r = m.messageReceived([0x12, 0x00][...], nowMs: t0); #expect(r == .close(code: 1008, reason: .malformedFrame)) }
        #expect(m.messageReceived([0x12][...], nowMs: t0) == .none)  // already closed
    }

    @Test func idleConnectionIsClosedAfterNinetySecondsOfSilence() {
        var m = authed()
        #expect(m.nextDeadlineMs == t0 + 90_000)
        m.bytesReceived(nowMs: t0 + 50_000)  // a pong
        do { let r = m.timerFired(nowMs: t0 + 90_000); #expect(r == .none) }
        do { let r = m.timerFired(nowMs: t0 + 140_000); #expect(r == .close(code: 1001, reason: .idle)) }
    }

    @Test func closeReasonsMapToTheSpecCodes() {
        var m = authed()
        do { let r = m.textMessageReceived(); #expect(r == .close(code: 1003, reason: .textFrame)) }
        var m2 = authed()
        do { let r = m2.messageTooBig(); #expect(r == .close(code: 1009, reason: .tooBig)) }
        var m3 = authed()
        do { let r = m3.replaced(); #expect(r == .close(code: 4001, reason: .replaced)) }
        var m4 = authed()
        do { let r = m4.outboundQueueOverflowed(); #expect(r == .close(code: 4002, reason: .tooSlow)) }
        var m5 = authed()
        do { let r = m5.shutdown(); #expect(r == .close(code: 1012, reason: .shutdown)) }
        do { let r = m5.shutdown(); #expect(r == .none) }
    }

    @Test func tokenBucketRefillsAtItsRateAndCapsAtCapacity() {
        var b = TokenBucket(ratePerSecond: 1000, capacity: 10, nowMs: 0)
        for _ in 0..<10 { do { let r = b.take(1, nowMs: 0); #expect(r) } }
        do { let r = b.take(1, nowMs: 0); #expect(!r) }
        do { let r = b.take(1, nowMs: 1); #expect(r) }
        do { let r = b.take(5, nowMs: 1_000_000); #expect(r) }
        #expect(b.tokens == 5)
        // A cost over the capacity is allowed from a full bucket, leaving debt.
        var big = TokenBucket(ratePerSecond: 10, capacity: 10, nowMs: 0)
        do { let r = big.take(50, nowMs: 0); #expect(r) }
        do { let r = big.take(1, nowMs: 1000); #expect(!r) }
    }
}
