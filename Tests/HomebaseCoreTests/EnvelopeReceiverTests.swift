import Testing
@testable import HomebaseCore

@Suite struct EnvelopeReceiverTests {
    static let me = PublicKey(bytes: [UInt8](repeating: 1, count: 32))!
    static let peer = PublicKey(bytes: [UInt8](repeating: 2, count: 32))!
    static let now: UInt64 = 1_764_400_000_000
    let receiver = EnvelopeReceiver(selfKey: me)

    func header(version: UInt8 = 1, channel: Channel = .sibling, sender: PublicKey = peer,
                recipient: PublicKey = me, sentAt: UInt64 = now) -> EnvelopeHeader {
        EnvelopeHeader(version: version, channel: channel, sender: sender, recipient: recipient,
                       messageID: [UInt8](repeating: 7, count: 16), sentAtMs: sentAt,
                       nonce: [UInt8](repeating: 0, count: 24))
    }

    @Test func aGoodHeaderPasses() throws {
        try receiver.checkHeader(header(), deliveredBy: Self.peer, nowMs: Self.now)
    }

    @Test func unknownVersionIsDropped() {
        #expect(throws: EnvelopeError.unknownVersion) { try receiver.checkHeader(header(version: 2), deliveredBy: Self.peer, nowMs: Self.now) }
    }

    @Test func envelopeForSomeoneElseIsDropped() {
        #expect(throws: EnvelopeError.wrongRecipient) {
            try receiver.checkHeader(header(recipient: Self.peer), deliveredBy: Self.peer, nowMs: Self.now)
        }
    }

    @Test func senderMustMatchTheRelaysAuthenticatedSender() {
        let mallory = PublicKey(bytes: [UInt8](repeating: 9, count: 32))!
        #expect(throws: EnvelopeError.senderMismatch) { try receiver.checkHeader(header(), deliveredBy: mallory, nowMs: Self.now) }
    }

    @Test func unknownChannelIsNotEntitled() {
        #expect(throws: EnvelopeError.notEntitled) {
            try receiver.checkHeader(header(channel: .unknown(3)), deliveredBy: Self.peer, nowMs: Self.now)
        }
    }

    @Test func fiveMinutesAheadIsTheLimit() throws {
        try receiver.checkHeader(header(sentAt: Self.now + 300_000), deliveredBy: Self.peer, nowMs: Self.now)
        #expect(throws: EnvelopeError.fromTheFuture) {
            try receiver.checkHeader(header(sentAt: Self.now + 300_001), deliveredBy: Self.peer, nowMs: Self.now)
        }
    }

    @Test func olderThanTheStoreLifetimeIsExpired() throws {
        let week: UInt64 = 7 * 24 * 3600 * 1000
        try receiver.checkHeader(header(sentAt: Self.now - week), deliveredBy: Self.peer, nowMs: Self.now)
        #expect(throws: EnvelopeError.expired) {
            try receiver.checkHeader(header(sentAt: Self.now - week - 1), deliveredBy: Self.peer, nowMs: Self.now)
        }
        #expect(receiver.replayHorizonMs(nowMs: Self.now) == Self.now - week)
    }

    @Test(arguments: [
        (Channel.sibling, "infer.request", SenderRelation.sibling, true),
        (.sibling, "infer.request", .stranger, false),
        (.sibling, "infer.request", .contact, false),
        (.sibling, "pair.request", .stranger, true),
        (.sibling, "contact.join", .stranger, false),
        (.contact, "infer.request", .contact, true),
        (.contact, "infer.request", .stranger, false),
        (.contact, "infer.request", .sibling, false),
        (.contact, "contact.join", .stranger, true),
        (.contact, "pair.request", .stranger, false),
        (.unknown(7), "contact.join", .contact, false),
    ])
    func channelEntitlement(channel: Channel, type: String, relation: SenderRelation, allowed: Bool) {
        let ok = (try? receiver.checkEntitlement(channel: channel, messageType: type, relation: relation)) != nil
        #expect(ok == allowed)
    }

    /// Rule 8a of envelope.md §7.7: a sibling on sync_delta, a contact whose grant is in force on contact.
    @Test func whoMayMakeASession() {
        let r = EnvelopeReceiver(selfKey: PublicKey(bytes: [UInt8](repeating: 1, count: 32))!)
        let ungranted = SenderRelation(isSibling: false, isContact: true, isGranted: false)
        let cases: [(Channel, SenderRelation, Bool)] = [
            (.sibling, .sibling, true), (.sibling, .contact, false), (.sibling, .stranger, false),
            (.contact, .contact, true), (.contact, ungranted, false), (.contact, .sibling, false),
            (.contact, .stranger, false), (.unknown(7), SenderRelation(isSibling: true, isContact: true), false),
        ]
        for (channel, relation, allowed) in cases {
            do throws(EnvelopeError) {
                try r.checkSessionEntitlement(channel: channel, relation: relation)
                #expect(allowed, "\(channel) \(relation)")
            } catch {
                #expect(!allowed && error == .notEntitled, "\(channel) \(relation)")
            }
        }
        // A pending guest may still send its contact.* messages (rule 10), just not make sessions.
        #expect((try? r.checkEntitlement(channel: .contact, messageType: "contact.leave", relation: ungranted)) != nil)
        #expect(SenderRelation.contact.isGranted && !SenderRelation.sibling.isGranted)
    }
}
