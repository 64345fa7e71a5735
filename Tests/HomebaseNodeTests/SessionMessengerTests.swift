import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import HomebaseTransport
import Testing
@testable import HomebaseNode

/// The messenger's v2 wiring (Protocol/envelope.md §7): negotiation, handshakes through a real relay, v1-only
/// peers, and downgrades refused.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SessionMessengerTests {
    static func messenger(_ relay: LocalRelay, speaksV2: Bool = true,
                          relation: @escaping RelationLookup = { _ in .sibling }) async throws -> RelayMessenger {
        let m = RelayMessenger(url: relay.url, key: .generate(), seen: try SeenMessageStore(database: Database(path: ":memory:")),
                               relation: relation, logger: .discard(), speaksV2: speaksV2)
        m.start()
        var it = m.events.makeAsyncIterator()
        guard case .connected = await it.next() else { throw MessengerTestError("did not connect") }
        return m
    }

    static func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<250 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test func inferenceGoesOverASessionOnceThePeerAdvertisedV2() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await Self.messenger(relay), b = try await Self.messenger(relay)
        defer { a.stop(); b.stop() }
        #expect(a.envelopeVersions == [1, 2])

        // Nothing advertised yet: v1.
        #expect(await a.sendAndWait(.inferCancel(id: "v1"), to: b.publicKey, channel: .sibling, store: false)
                == .receipt(.delivered))
        #expect(try #require(await nextInbound(b)).message == .inferCancel(id: "v1"))
        #expect(a.sessionCounts == RelayMessenger.SessionCounts())

        // b's signed advert said [1, 2]: the next inference message makes a session and goes on it.
        a.recordEnvelopeVersions([1, 2], of: b.publicKey)
        #expect(await a.sendAndWait(.inferCancel(id: "v2"), to: b.publicKey, channel: .sibling, store: false)
                == .receipt(.delivered))
        #expect(try #require(await nextInbound(b)).message == .inferCancel(id: "v2"))
        #expect(a.sessionCounts.initiated == 1 && a.sessionCounts.sealed == 1)
        #expect(b.sessionCounts.responded == 1 && b.sessionCounts.opened == 1)

        // b learned a speaks v2 from the handshake, and answers on the session.
        #expect(b.envelopeVersion(for: a.publicKey) == 2)
        b.send(.inferChunk(InferChunk(id: "v2", seq: 0, text: "hi")), to: a.publicKey, channel: .sibling,
               store: false)
        #expect(try #require(await nextInbound(a)).message == .inferChunk(InferChunk(id: "v2", seq: 0, text: "hi")))
        #expect(b.sessionCounts.sealed == 1 && a.sessionCounts.opened == 1)

        // Other messages stay v1; the session is reused (no second handshake).
        b.send(.advertRequest, to: a.publicKey, channel: .sibling, store: false)
        #expect(try #require(await nextInbound(a)).message == .advertRequest)
        for i in 0..<5 {
            a.send(.inferCancel(id: "n\(i)"), to: b.publicKey, channel: .sibling, store: false)
            #expect(try #require(await nextInbound(b)).message == .inferCancel(id: "n\(i)"))
        }
        #expect(a.sessionCounts.initiated == 1 && a.sessionCounts.sealed == 6 && b.sessionCounts.sealed == 1)
        #expect(a.dropCounts.isEmpty && b.dropCounts.isEmpty)
    }

    /// Issue 37, item 12: a message other than inference that arrives inside a v2 session (another implementation
    /// may send it there; ours sends only `infer.*` on sessions) is handled as if it had come in v1: an
    /// `advert.request` on the session reaches the receiver's handler, and nothing is dropped.
    @Test func aNonInferenceMessageInsideASessionIsHandledLikeV1() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await Self.messenger(relay), b = try await Self.messenger(relay)
        defer { a.stop(); b.stop() }
        a.recordEnvelopeVersions([1, 2], of: b.publicKey)
        #expect(await a.sendAndWait(.inferCancel(id: "s"), to: b.publicKey, channel: .sibling, store: false)
                == .receipt(.delivered))
        #expect(try #require(await nextInbound(b)).message == .inferCancel(id: "s"))

        a.sendOnSession(.advertRequest, to: b.publicKey, channel: .sibling, onReceipt: nil)
        #expect(try #require(await nextInbound(b)).message == .advertRequest)
        #expect(a.sessionCounts.sealed == 2 && b.sessionCounts.opened == 2, "the advert.request went on the session")
        #expect(b.dropCounts.isEmpty)
    }

    @Test func aV1OnlyPeerStillWorksBothWays() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await Self.messenger(relay), old = try await Self.messenger(relay, speaksV2: false)
        defer { a.stop(); old.stop() }
        #expect(old.envelopeVersions == [1])
        // A v1-only peer's adverts carry no `envelopes`: recording them changes nothing.
        a.recordEnvelopeVersions(nil, of: old.publicKey)
        #expect(await a.sendAndWait(.inferCancel(id: "x"), to: old.publicKey, channel: .sibling, store: false)
                == .receipt(.delivered))
        #expect(try #require(await nextInbound(old)).message == .inferCancel(id: "x"))
        old.send(.inferChunk(InferChunk(id: "x", seq: 0, text: "ok")), to: a.publicKey, channel: .sibling,
                 store: false)
        #expect(try #require(await nextInbound(a)).message == .inferChunk(InferChunk(id: "x", seq: 0, text: "ok")))
        #expect(a.sessionCounts == RelayMessenger.SessionCounts())
        #expect(a.dropCounts.isEmpty && old.dropCounts.isEmpty)
    }

    /// A sender never falls back to v1 for a peer recorded at v2: when no session can be made (here the peer
    /// cannot answer a handshake) the message does not go at all.
    @Test func aSenderRefusesToDowngrade() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await Self.messenger(relay), old = try await Self.messenger(relay, speaksV2: false)
        defer { a.stop(); old.stop() }
        a.recordEnvelopeVersions([1, 2], of: old.publicKey)
        a.send(.inferCancel(id: "secret"), to: old.publicKey, channel: .sibling, store: false)
        #expect(await nextInbound(old, timeout: .milliseconds(800)) == nil)
        // What reached the peer was the handshake (which it cannot read), not a v1 copy of the message.
        #expect(old.dropCounts == ["unknown_version": 1])
        // A lower statement later does not lower the record.
        a.recordEnvelopeVersions([1], of: old.publicKey)
        #expect(a.envelopeVersion(for: old.publicKey) == 2)
    }

    /// A receiver drops a v1 inference message from a peer recorded at v2 (rule 12), and still takes its other
    /// v1 messages.
    @Test func aReceiverRefusesADowngradedInferenceMessage() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let b = try await Self.messenger(relay), forced = try await Self.messenger(relay, speaksV2: false)
        defer { b.stop(); forced.stop() }
        b.recordEnvelopeVersions([1, 2], of: forced.publicKey)
        forced.send(.inferCancel(id: "downgraded"), to: b.publicKey, channel: .sibling, store: false)
        forced.send(.advertRequest, to: b.publicKey, channel: .sibling, store: false)
        #expect(try #require(await nextInbound(b)).message == .advertRequest)
        #expect(b.dropCounts == ["downgrade": 1])
    }

    @Test func aStrangerCannotMakeASession() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await Self.messenger(relay), b = try await Self.messenger(relay, relation: { _ in .stranger })
        defer { a.stop(); b.stop() }
        a.recordEnvelopeVersions([1, 2], of: b.publicKey)
        a.send(.inferCancel(id: "x"), to: b.publicKey, channel: .sibling, store: false)
        #expect(await nextInbound(b, timeout: .milliseconds(800)) == nil)
        #expect(b.dropCounts == ["not_entitled": 1])
        #expect(b.sessionCounts.responded == 0)
    }

    /// Rule 8a's "contact" (envelope.md §7.7): a guest whose grant is in force. A pending or revoked guest is still a
    /// contact (its `contact.*` messages in v1 get answers), but its message 1 is dropped, so the sessions a
    /// Homebase holds are bounded by its siblings and granted guests, not by every key that sent a join.
    @Test func onlyAGrantedContactMakesASession() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let ungranted = SenderRelation(isSibling: false, isContact: true, isGranted: false)
        let guest = try await Self.messenger(relay, relation: { _ in .contact })
        let pendingHost = try await Self.messenger(relay, relation: { _ in ungranted })
        let grantingHost = try await Self.messenger(relay, relation: { _ in .contact })
        defer { guest.stop(); pendingHost.stop(); grantingHost.stop() }
        // Its v1 messages on the contact channel arrive.
        guest.send(.advertRequest, to: pendingHost.publicKey, channel: .contact, store: false)
        #expect(try #require(await nextInbound(pendingHost)).message == .advertRequest)
        guest.recordEnvelopeVersions([1, 2], of: pendingHost.publicKey)
        guest.send(.inferCancel(id: "x"), to: pendingHost.publicKey, channel: .contact, store: false)
        #expect(await nextInbound(pendingHost, timeout: .milliseconds(800)) == nil)
        #expect(pendingHost.dropCounts == ["not_entitled": 1])
        #expect(pendingHost.sessionCounts.responded == 0)
        // A granted guest makes its session on the contact channel.
        guest.recordEnvelopeVersions([1, 2], of: grantingHost.publicKey)
        guest.send(.inferCancel(id: "y"), to: grantingHost.publicKey, channel: .contact, store: false)
        #expect(try #require(await nextInbound(grantingHost)).message == .inferCancel(id: "y"))
        #expect(grantingHost.sessionCounts.responded == 1 && grantingHost.dropCounts.isEmpty)
    }

    /// envelope.md §7.9: what is stored for an offline peer stays v1 (and arrives when it connects), while an
    /// inference message to an offline v2 peer is never stored nor sent in v1: it fails at once (RECEIPT 2).
    @Test func storedMessagesStayV1AndInferenceIsNeverStored() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let bKey = SigningSecretKey.generate()
        let a = try await Self.messenger(relay)
        defer { a.stop() }
        a.recordEnvelopeVersions([1, 2], of: bKey.publicKey)
        #expect(await a.sendAndWait(.contactLeave, to: bKey.publicKey, channel: .sibling, store: true)
                == .receipt(.stored))
        #expect(await a.sendAndWait(.inferCancel(id: "x"), to: bKey.publicKey, channel: .sibling, store: true)
                == .receipt(.recipientOffline))
        let b = try await connectedMessenger(relay, key: bKey)
        defer { b.stop() }
        #expect(try #require(await nextInbound(b)).message == .contactLeave)
        #expect(b.sessionCounts == RelayMessenger.SessionCounts())
        #expect(a.sessionCounts.sealed == 0)
    }

    /// A peer that restarted holds no session: the message sent on the old one is dropped, and the restarted peer
    /// makes a new session so that the next message goes through (envelope.md §7.5).
    @Test func aRestartedPeerMakesANewSessionAndTheNextMessageArrives() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let bKey = SigningSecretKey.generate()
        let a = try await Self.messenger(relay)
        defer { a.stop() }
        let b = try await connectedMessenger(relay, key: bKey)
        a.recordEnvelopeVersions([1, 2], of: bKey.publicKey)
        a.send(.inferCancel(id: "before"), to: bKey.publicKey, channel: .sibling, store: false)
        #expect(try #require(await nextInbound(b)).message == .inferCancel(id: "before"))
        b.stop()
        let restarted = try await connectedMessenger(relay, key: bKey)
        defer { restarted.stop() }
        a.send(.inferCancel(id: "lost"), to: bKey.publicKey, channel: .sibling, store: false)
        // (Not `nextInbound` with a timeout: a cancelled wait ends the inbound stream.)
        #expect(await Self.eventually { a.sessionCounts.responded == 1 })  // the restarted peer's new handshake
        #expect(restarted.dropCounts == ["no_session": 1])
        a.send(.inferCancel(id: "after"), to: bKey.publicKey, channel: .sibling, store: false)
        #expect(try #require(await nextInbound(restarted)).message == .inferCancel(id: "after"))
        #expect(restarted.sessionCounts.initiated == 1 && restarted.sessionCounts.opened == 1)
    }

    /// The record of a peer's version survives a restart (a relay dropping the peer's adverts to a freshly
    /// started device cannot push it back to v1), and only goes up.
    @Test func aPeersVersionIsKeptAcrossARestart() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("versions-\(UUID().uuidString).db").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let key = SigningSecretKey.generate(), peer = SigningSecretKey.generate().publicKey
        func start() throws -> RelayMessenger {
            let db = try Database(path: path)
            return RelayMessenger(url: relay.url, key: key, seen: try SeenMessageStore(database: db),
                                  relation: { _ in .sibling }, logger: .discard(),
                                  versionStore: try PeerVersionStore(database: db))
        }
        let first = try start()
        #expect(first.envelopeVersion(for: peer) == 1)
        first.recordEnvelopeVersions([1, 2], of: peer)
        first.recordEnvelopeVersions([1], of: peer)
        first.stop()
        let again = try start()
        defer { again.stop() }
        #expect(again.envelopeVersion(for: peer) == 2)
        #expect(try PeerVersionStore(database: Database(path: path)).all().map { $0.1 } == [2])
    }

    /// IK's message 1 is replayable by design: a second copy is dropped (envelope.md §7.6), so the responder
    /// answers once and holds one session.
    @Test func aReplayedInitiationIsAnsweredOnce() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let aKey = SigningSecretKey.generate()
        let a = try await connectedMessenger(relay, key: aKey), b = try await Self.messenger(relay)
        defer { a.stop(); b.stop() }
        var table = try SessionTable(identity: aKey)
        let now = Posix.wallClockMs
        let m1 = try table.initiate(to: b.publicKey, channel: .sibling, sessionID: [7, 7, 7, 7, 7, 7, 7, 7],
                                    ephemeral: .generate(), messageID: SecureRandom.bytes(16), sentAtMs: now,
                                    nowMs: now)
        b.open(m1[...], from: aKey.publicKey)
        b.open(m1[...], from: aKey.publicKey)
        #expect(b.sessionCounts.responded == 1)
        // While its session is held the copy is refused by rule 8a (session id in use), before rule 11.
        #expect(b.dropCounts == ["handshake_failed": 1])
        // Sent as someone else (the relay says another key sent it): the header names a, so it is refused.
        b.open(m1[...], from: SigningSecretKey.generate().publicKey)
        #expect(b.dropCounts["sender_mismatch"] == 1)
    }

    /// A peer's signed advert is how a device learns it speaks v2: the messenger reads and verifies it.
    @Test func aSignedAdvertRecordsThePeersVersions() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let hostKey = SigningSecretKey.generate()
        let host = RelayMessenger(url: relay.url, key: hostKey, seen: nil, relation: { _ in .sibling },
                                  logger: .discard())
        host.start()
        var it = host.events.makeAsyncIterator()
        _ = await it.next()
        let a = try await Self.messenger(relay)
        defer { a.stop(); host.stop() }
        func advert(_ envelopes: [Int]?, signer: SigningSecretKey) -> Message {
            let p = SignedPayloadJSON.encode(AdvertPayload(
                host: hostKey.publicKey, seq: 1, issuedAt: 1, runtime: .init(version: "1"), models: [],
                envelopes: envelopes))
            return .advert(SignedBlob(payload: p, signature: signer.sign(p, context: SignatureContext.advert)))
        }
        // Badly signed: not believed.
        host.send(advert([1, 2], signer: .generate()), to: a.publicKey, channel: .sibling, store: false)
        _ = try #require(await nextInbound(a))
        #expect(a.envelopeVersion(for: hostKey.publicKey) == 1)
        host.send(advert([1, 2], signer: hostKey), to: a.publicKey, channel: .sibling, store: false)
        _ = try #require(await nextInbound(a))
        #expect(a.envelopeVersion(for: hostKey.publicKey) == 2)
    }
}
