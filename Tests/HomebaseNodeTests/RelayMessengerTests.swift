import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseNode
@testable import RelayService

/// An in-process relay on port 0.
final class LocalRelay: @unchecked Sendable {
    let server: RelayServer
    let dir: String
    private let done = DispatchSemaphore(value: 0)

    init(configure: (inout RelayConfiguration) -> Void = { _ in }) throws {
        self.dir = FileManager.default.temporaryDirectory.appendingPathComponent("node-relay-\(UUID().uuidString)").path
        var c = RelayConfiguration()
        c.listenHost = "127.0.0.1"
        c.listenPort = 0
        c.dataDirectory = self.dir
        c.durability = "normal"
        configure(&c)
        let server = try RelayServer(configuration: c, logger: .discard())
        self.server = server
        let done = self.done
        Thread { server.run(); done.signal() }.start()
    }

    var url: String { "ws://127.0.0.1:\(self.server.port)/v1/relay" }

    func stop() {
        self.server.shutdown()
        self.done.wait()
        try? FileManager.default.removeItem(atPath: self.dir)
    }
}

/// A messenger with its own in-memory replay store, started and connected.
func connectedMessenger(_ relay: LocalRelay, key: SigningSecretKey = .generate(),
                        relation: @escaping RelationLookup = { _ in .sibling }) async throws -> RelayMessenger {
    let db = try Database(path: ":memory:")
    let m = RelayMessenger(url: relay.url, key: key, seen: try SeenMessageStore(database: db), relation: relation,
                           logger: .discard())
    m.start()
    var it = m.events.makeAsyncIterator()
    guard case .connected = await it.next() else { throw MessengerTestError("did not connect") }
    return m
}


/// A local relay and two messengers connected to it (`b` answering the entitlement rule with `bRelation`); `stop()`
/// ends all three.
struct ConnectedPair {
    let relay: LocalRelay
    let a: RelayMessenger
    let b: RelayMessenger

    init(bRelation: @escaping RelationLookup = { _ in .sibling }) async throws {
        let relay = try LocalRelay()
        do {
            self.a = try await connectedMessenger(relay)
            self.b = try await connectedMessenger(relay, relation: bRelation)
        } catch {
            relay.stop()
            throw error
        }
        self.relay = relay
    }

    func stop() {
        self.a.stop()
        self.b.stop()
        self.relay.stop()
    }
}

struct MessengerTestError: Error { let s: String; init(_ s: String) { self.s = s } }

func nextInbound(_ m: RelayMessenger, timeout: Duration = .seconds(5)) async -> InboundMessage? {
    await withTaskGroup(of: InboundMessage?.self) { g in
        g.addTask {
            var it = m.inbound.makeAsyncIterator()
            return await it.next()
        }
        g.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await g.next()!
        g.cancelAll()
        return first
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct RelayMessengerTests {
    @Test func sealedMessagesFlowBothWaysWithReceipts() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let outcome = await a.sendAndWait(.inferCancel(id: "x1"), to: b.publicKey, channel: .sibling, store: false)
        #expect(outcome == .receipt(.delivered))
        let got = try #require(await nextInbound(b))
        #expect(got.sender == a.publicKey && got.channel == .sibling && got.message == .inferCancel(id: "x1"))
    }

    @Test func offlinePeerGivesReceipt2AtOnce() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await connectedMessenger(relay)
        defer { a.stop() }
        #expect(a.relayRoundTripMs == nil, "no SEND receipted yet")
        let start = ContinuousClock.now
        let outcome = await a.sendAndWait(.advertRequest, to: SigningSecretKey.generate().publicKey,
                                          channel: .sibling, store: false)
        #expect(outcome == .receipt(.recipientOffline))
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(1))
        // The receipt timed the relay's round trip (the status page shows it).
        let rtt = try #require(a.relayRoundTripMs)
        #expect(Duration.milliseconds(Int(rtt)) <= elapsed + .milliseconds(1))
    }

    @Test func storedMessageArrivesWhenThePeerConnects() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = try await connectedMessenger(relay)
        defer { a.stop() }
        let bKey = SigningSecretKey.generate()
        let outcome = await a.sendAndWait(.contactJoin(name: "Sam"), to: bKey.publicKey, channel: .contact, store: true)
        #expect(outcome == .receipt(.stored))
        let b = try await connectedMessenger(relay, key: bKey, relation: { _ in .stranger })
        defer { b.stop() }
        let got = try #require(await nextInbound(b))
        #expect(got.message == .contactJoin(name: "Sam"))
    }

    @Test func strangersAreDroppedExceptForTheirOneMessage() async throws {
        let pair = try await ConnectedPair(bRelation: { _ in .stranger })
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        _ = await a.sendAndWait(.advertRequest, to: b.publicKey, channel: .sibling, store: false)
        _ = await a.sendAndWait(.pairRequest(secret: "s", name: "n"), to: b.publicKey, channel: .sibling, store: false)
        let got = try #require(await nextInbound(b))
        #expect(got.message == .pairRequest(secret: "s", name: "n"))
        #expect(b.dropCounts["not_entitled"] == 1)
    }

    /// Issue 23: a stranger's envelope over `maxStrangerEnvelopeBytes` is dropped before it is opened or
    /// parsed (a stranger's 256 KiB of JSON held a Homebase's inbound messages up); its one message of an
    /// ordinary size still arrives.
    @Test func aStrangersLargeEnvelopeIsDroppedUnopened() async throws {
        let pair = try await ConnectedPair(bRelation: { _ in .stranger })
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let long = String(repeating: "n", count: EnvelopeReceiver.maxStrangerEnvelopeBytes)
        let big = try #require(a.seal(.contactJoin(name: long), to: b.publicKey, channel: .contact))
        #expect(big.count > EnvelopeReceiver.maxStrangerEnvelopeBytes)
        _ = await a.sendAndWait(.contactJoin(name: long), to: b.publicKey, channel: .contact, store: false)
        _ = await a.sendAndWait(.contactJoin(name: "Sam"), to: b.publicKey, channel: .contact, store: false)
        let got = try #require(await nextInbound(b))
        #expect(got.message == .contactJoin(name: "Sam"))
        #expect(b.dropCounts == ["not_entitled": 1])
    }

    /// The largest chunk the Homebase sends (16 KiB of text, every byte escaped as \u00XX, a UUID id) seals
    /// within the relay's payload limit with room to spare, and opens to the same text.
    @Test func theLargestChunkFitsTheRelayPayload() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let chunk = InferChunk(id: "6f1c2a7e-3b9d-4c8e-9f0a-1b2c3d4e5f60", seq: Int.max,
                               text: String(repeating: "\u{1}", count: 16 * 1024))
        let sealed = try #require(a.seal(.inferChunk(chunk), to: b.publicKey, channel: .sibling))
        #expect(sealed.count * 2 < RelayLimits().maxPayloadBytes, "\(sealed.count) bytes")
        b.open(sealed[...], from: a.publicKey)
        #expect(await nextInbound(b)?.message == .inferChunk(chunk))
    }

    @Test func thePayloadLimitIsTheEnvelopesNotTheFrames() async throws {
        // infer.cancel "x1" seals to 114 + 256 + 16 = 386 bytes, inside a 424-byte SEND frame. A relay that takes
        // 386-byte payloads gets it; one that takes 385 never sees it (the messenger refuses it at once).
        for (limit, expected) in [(386, SendOutcome.receipt(.delivered)), (385, .receipt(.payloadTooLarge))] {
            let relay = try LocalRelay(configure: { $0.limits.maxPayloadBytes = limit })
            defer { relay.stop() }
            let a = try await connectedMessenger(relay)
            let b = try await connectedMessenger(relay)
            defer { a.stop(); b.stop() }
            // `seal` applies the limit the relay's READY gave.
            let sealed = a.seal(.inferCancel(id: "x1"), to: b.publicKey, channel: .sibling)
            #expect(sealed?.count == (limit == 386 ? 386 : nil))
            let outcome = await a.sendAndWait(.inferCancel(id: "x1"), to: b.publicKey, channel: .sibling, store: false)
            #expect(outcome == expected, "limit \(limit)")
        }
    }

    @Test func replayedEnvelopeIsDroppedOnce() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let sealed = try #require(a.seal(.inferCancel(id: "r"), to: b.publicKey, channel: .sibling))
        b.open(sealed[...], from: a.publicKey)
        b.open(sealed[...], from: a.publicKey)
        #expect(await nextInbound(b)?.message == .inferCancel(id: "r"))
        #expect(b.dropCounts["replay"] == 1)
        // A forged sender (the relay reports someone else) is dropped too.
        b.open(sealed[...], from: SigningSecretKey.generate().publicKey)
        #expect(b.dropCounts["sender_mismatch"] == 1)
        // A flipped ciphertext byte does not open.
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        b.open(tampered[...], from: a.publicKey)
        #expect(b.dropCounts["open_failed"] == 1)
    }

    @Test func framesReceivedTogetherAreCheckedAsABatch() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let first = try #require(a.seal(.inferCancel(id: "1"), to: b.publicKey, channel: .sibling))
        let second = try #require(a.seal(.inferCancel(id: "2"), to: b.publicKey, channel: .sibling))
        // One drain of the socket: a message, its replay, a receipt nobody waits for, another message.
        b.handle([.deliver(sender: a.publicKey, deliveryID: 0, payload: first[...]),
                  .deliver(sender: a.publicKey, deliveryID: 0, payload: first[...]),
                  .receipt(sendID: 77, status: .delivered),
                  .deliver(sender: a.publicKey, deliveryID: 0, payload: second[...])])
        #expect(await nextInbound(b)?.message == .inferCancel(id: "1"))
        #expect(await nextInbound(b)?.message == .inferCancel(id: "2"))
        #expect(b.dropCounts["replay"] == 1)
        // A later batch replaying either is dropped too: the ids were committed.
        b.handle([.deliver(sender: a.publicKey, deliveryID: 0, payload: second[...])])
        #expect(b.dropCounts["replay"] == 2)
    }

    @Test func anInlineHandlerTakesMessagesWhereTheyArriveInOrder() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let taken = Mutex<[Message]>([])
        // Takes cancels, leaves the rest to `inbound`.
        b.setInlineHandler { inbound in
            guard case .inferCancel = inbound.message else { return false }
            taken.withLock { $0.append(inbound.message) }
            return true
        }
        let one = try #require(a.seal(.inferCancel(id: "1"), to: b.publicKey, channel: .sibling))
        let other = try #require(a.seal(.advertRequest, to: b.publicKey, channel: .sibling))
        let two = try #require(a.seal(.inferCancel(id: "2"), to: b.publicKey, channel: .sibling))
        b.handle([.deliver(sender: a.publicKey, deliveryID: 0, payload: one[...]),
                  .deliver(sender: a.publicKey, deliveryID: 0, payload: other[...]),
                  .deliver(sender: a.publicKey, deliveryID: 0, payload: one[...]),
                  .deliver(sender: a.publicKey, deliveryID: 0, payload: two[...])])
        // Taken before `handle` returned, in order, the replay not among them (the replay rule comes first).
        #expect(taken.withLock { $0 } == [.inferCancel(id: "1"), .inferCancel(id: "2")])
        #expect(b.dropCounts["replay"] == 1)
        #expect(await nextInbound(b)?.message == .advertRequest)
        // Without a handler, everything goes to `inbound` again.
        b.setInlineHandler(nil)
        let three = try #require(a.seal(.inferCancel(id: "3"), to: b.publicKey, channel: .sibling))
        b.handle([.deliver(sender: a.publicKey, deliveryID: 0, payload: three[...])])
        #expect(await nextInbound(b)?.message == .inferCancel(id: "3"))
        #expect(taken.withLock { $0 }.count == 2)
    }

    @Test func theInlineHandlerRunsNoDeeperAfterManyBatches() async throws {
        let pair = try await ConnectedPair()
        defer { pair.stop() }
        let (a, b) = (pair.a, pair.b)
        let depths = Mutex<[Int]>([])
        b.setInlineHandler { _ in
            let depth = stackDepthMarker()
            depths.withLock { $0.append(depth) }
            return true
        }
        let frames = try (0..<1_000).map { i in
            let sealed = try #require(a.seal(.inferCancel(id: "\(i)"), to: b.publicKey, channel: .sibling))
            return RelayFrame.deliver(sender: a.publicKey, deliveryID: 0, payload: sealed[...])
        }
        // One batch at a time, on this thread, as the link's thread hands them over. The handler, kept in a Mutex of
        // an optional closure, was wrapped in two more reabstraction thunks by every batch's read of it: the
        // Homebase's requests ran ever deeper, and slower, until the link thread's stack overflowed.
        for batch in stride(from: 0, to: frames.count, by: 2) {
            b.handle(Array(frames[batch..<(batch + 2)]))
        }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 1_000)
        #expect(abs(seen[0] - seen[seen.count - 1]) < 1_024, "the handler ran \(seen[0] - seen[seen.count - 1]) bytes deeper")
    }

    @Test func relayRestartIsSurvivedWithReconnect() async throws {
        let relay = try LocalRelay()
        let port = relay.server.port
        let bKey = SigningSecretKey.generate()
        let a = try await connectedMessenger(relay)
        defer { a.stop() }
        var events = a.events.makeAsyncIterator()
        relay.server.shutdown()
        guard case .disconnected(let code) = await events.next() else { Issue.record("no disconnect"); return }
        #expect(code == 1012)
        // A new relay on the same port; the messenger reconnects on its own (1012: at once, with jitter).
        var c = RelayConfiguration()
        c.listenHost = "127.0.0.1"
        c.listenPort = port
        c.dataDirectory = relay.dir
        c.durability = "normal"
        try await Task.sleep(for: .milliseconds(300))
        let second = try RelayServer(configuration: c, logger: .discard())
        let done = DispatchSemaphore(value: 0)
        Thread { second.run(); done.signal() }.start()
        defer { second.shutdown(); done.wait() }
        var reconnected = false
        while let e = await events.next() {
            if case .connected = e { reconnected = true; break }
        }
        #expect(reconnected)
        let outcome = await a.sendAndWait(.advertRequest, to: bKey.publicKey, channel: .sibling, store: true)
        #expect(outcome == .receipt(.stored))
    }
}

/// Replay records past the horizon are pruned on a timer while the messenger runs, not only at each login: a
/// device connected for weeks keeps only records that can still stop a replay.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ReplayPruneTimerTests {
    @Test func recordsPastTheHorizonArePrunedWithoutAReconnect() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let seen = try SeenMessageStore(database: try Database(path: ":memory:"))
        let now = Mutex<UInt64>(30 * 24 * 3600 * 1000)  // day 30
        let messenger = RelayMessenger(url: relay.url, key: .generate(), seen: seen, relation: { _ in .sibling },
                                       logger: .discard(), wallClock: { now.withLock { $0 } },
                                       replayPruneInterval: .milliseconds(50))
        messenger.start()
        defer { messenger.stop() }
        #expect(await eventually { messenger.isConnected })
        // Recorded after the login's prune: one inside the 7-day horizon, one that ages out of it below.
        let day: UInt64 = 24 * 3600 * 1000
        _ = try seen.insertIfNew(sender: SigningSecretKey.generate().publicKey, messageID: [1], sentAtMs: 29 * day)
        _ = try seen.insertIfNew(sender: SigningSecretKey.generate().publicKey, messageID: [2], sentAtMs: 24 * day)
        try await Task.sleep(for: .milliseconds(200))
        #expect(try seen.count() == 2)
        now.withLock { $0 = 33 * day }  // the second is now 9 days old
        #expect(await eventually { (try? seen.count()) == 1 })
        #expect(messenger.isConnected)  // no reconnect was needed
    }

    private func eventually(_ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}
