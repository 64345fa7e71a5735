import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import HomebaseNode
import Testing
@testable import HomebaseService

extension Harness {
    var contacts: ContactService { get throws { try #require(self.daemon.contacts) } }

    /// A guest device (another account) on the hub: it treats the Homebase as a contact.
    func guest(_ byte: UInt8) -> (key: PublicKey, messenger: LoopbackMessenger, inbox: Inbox) {
        let key = testKey(byte)
        let homebase = self.homebase
        let m = self.hub.messenger(for: key, relation: { $0 == homebase ? .contact : .stranger })
        return (key, m, Inbox(m))
    }

    /// A guest that joined and was granted `models`, with its grant and advert received.
    func grantedGuest(_ byte: UInt8, models: GrantPayload.GrantedModels = .all, expiresAt: UInt64? = nil) async throws
        -> (key: PublicKey, messenger: LoopbackMessenger, inbox: Inbox)
    {
        let g = self.guest(byte)
        g.messenger.send(.contactJoin(name: "friend"), to: self.homebase, channel: .contact, store: false)
        await eventually("pending") { (try? self.contacts.registry.record(for: g.key)?.state) == .pending }
        try await self.contacts.grant(guest: g.key, models: models, expiresAt: expiresAt)
        _ = await g.inbox.first("advert") { if case .advert = $0 { true } else { false } }
        return g
    }

    func guestRequest(_ id: String, from guest: LoopbackMessenger, model: String = "qwen2.5:7b",
                      messages: [ChatMessage] = [ChatMessage(role: "user", content: "hi")],
                      conversation: ConversationRef? = nil) {
        guest.send(.inferRequest(InferRequest(id: id, model: model, messages: messages, conversation: conversation)),
                   to: self.homebase, channel: .contact, store: false)
    }
}

extension Message {
    var isAdvert: Bool { if case .advert = self { true } else { false } }
}

@Suite(.timeLimit(.minutes(1))) struct ContactServiceTests {
    @Test func aJoinIsPendingThenAGrantSendsASignedGrantAndAnAdvert() async throws {
        let h = try Harness()
        await h.startServing()
        let g = h.guest(0x21)
        g.messenger.send(.contactJoin(name: "Ann"), to: h.homebase, channel: .contact, store: false)
        await eventually("pending") { (try? h.contacts.registry.record(for: g.key)?.state) == .pending }
        #expect(try h.contacts.registry.guests(nowMs: h.clock.value).map(\.name) == ["Ann"])
        // Pending: asked, not granted.
        h.guestRequest("p1", from: g.messenger)
        #expect(await g.inbox.finished("p1").map(\.errorCode) == ["not_granted"])

        let expires = h.clock.value + 3_600_000
        try await h.contacts.grant(guest: g.key, models: .only(["qwen2.5:7b"]), expiresAt: expires)
        _ = await g.inbox.first("advert") { $0.isAdvert }
        let contactMessages = g.inbox.messages.filter { if case .inferError = $0 { false } else { true } }
        guard case .contactGrant(let blob) = contactMessages.first else {
            Issue.record("expected contact.grant first, got \(contactMessages)")
            return
        }
        #expect(contactMessages.count == 2 && contactMessages[1].isAdvert)
        #expect(Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.grant,
                                 publicKey: h.homebase))
        var tampered = blob.payload
        tampered[tampered.count / 2] ^= 1
        #expect(!Signature.verify(blob.signature, message: tampered, context: SignatureContext.grant,
                                  publicKey: h.homebase))
        let payload = try #require(SignedPayloadJSON.decode(GrantPayload.self, from: blob.payload))
        #expect(payload.host == h.homebase.hex)
        #expect(payload.guest == g.key.hex)
        #expect(payload.models == .only(["qwen2.5:7b"]))
        #expect(payload.expiresAt == expires)
        // Both were stored sends on the contact channel.
        #expect(g.inbox.all.suffix(2).allSatisfy { $0.channel == .contact })

        h.guestRequest("g1", from: g.messenger)
        let served = await g.inbox.finished("g1")
        #expect(served.first == .inferAccept(InferAccept(id: "g1", model: "qwen2.5:7b")))
        guard case .inferDone = served.last else {
            Issue.record("expected done, got \(served)")
            return
        }
        // A model outside the grant.
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("qwen2.5:7b"), FakeRuntime.model("llama3.2:3b")]))
        h.guestRequest("g2", from: g.messenger, model: "llama3.2:3b")
        #expect(await g.inbox.finished("g2").map(\.errorCode) == ["not_granted"])
        await h.stop()
    }

    @Test func anInvitationIsSentAgainWhenTheGuestJoins() async throws {
        let h = try Harness()
        let g = h.guest(0x22)
        // Granted before it ever joined and before the daemon runs: delivered on start.
        try h.contacts.registry.grant(guest: g.key, models: .all, expiresAt: nil, nowMs: h.clock.value)
        await h.startServing()
        _ = await g.inbox.first("first grant") { if case .contactGrant = $0 { true } else { false } }
        g.messenger.send(.contactJoin(name: "Bo"), to: h.homebase, channel: .contact, store: false)
        await eventually("grant and advert again") {
            g.inbox.messages.filter { if case .contactGrant = $0 { true } else { false } }.count == 2
        }
        await eventually("adverts") { g.inbox.messages.filter(\.isAdvert).count >= 2 }
        #expect(try h.contacts.registry.record(for: g.key)?.joinedAtMs == h.clock.value)
        #expect(try h.contacts.registry.pendingOutbox().isEmpty)
        await h.stop()
    }

    @Test func anExpiredGrantIsNotGrantedAndGetsNoAdverts() async throws {
        let h = try Harness()
        await h.startServing()
        let g = try await h.grantedGuest(0x23, expiresAt: h.clock.value + 1_000)
        h.guestRequest("e1", from: g.messenger)
        #expect(await g.inbox.finished("e1").last?.errorCode == nil)
        h.clock.advance(ms: 1_000)
        h.guestRequest("e2", from: g.messenger)
        #expect(await g.inbox.finished("e2").map(\.errorCode) == ["not_granted"])
        #expect(try h.contacts.registry.advertRecipients(nowMs: h.clock.value).isEmpty)
        #expect(try h.contacts.registry.guests(nowMs: h.clock.value).first?.expired == true)
        await h.stop()
    }

    @Test func revokingMidStreamStopsTheStreamAndTheNextRequest() async throws {
        let engine = FakeEngine([.text("partial"), .hang])
        let h = try Harness(engine: engine)
        await h.startServing()
        let g = try await h.grantedGuest(0x24)
        h.guestRequest("r1", from: g.messenger)
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        try await h.contacts.revoke(guest: g.key, reason: "bye")
        await eventually("engine stream cancelled") { engine.cancellations == 1 }
        #expect(h.daemon.inference.activeCount == 0)
        await eventually("r1 ends with not_granted") { g.inbox.inference("r1").last?.errorCode == "not_granted" }
        _ = await g.inbox.first("contact.revoke") { $0 == .contactRevoke(reason: "bye") }
        h.guestRequest("r2", from: g.messenger)
        #expect(await g.inbox.finished("r2").map(\.errorCode) == ["not_granted"])
        #expect(engine.calls == 1)
        await h.stop()
    }

    @Test func aRevokeFromTheCLIProcessReachesTheRunningDaemon() async throws {
        let engine = FakeEngine([.text("partial"), .hang])
        let h = try Harness(engine: engine)
        await h.startServing()
        let g = try await h.grantedGuest(0x25)
        h.guestRequest("c1", from: g.messenger)
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        // The CLI's own connection to the same database.
        let cli = try GuestRegistry(state: HomebaseState(path: h.directoryOnDisk.file("state.db")))
        #expect(try cli.revoke(guest: g.key, nowMs: h.clock.value) == [.revoke(reason: "revoked by the host")])
        // In force for the very next request, before the daemon even polled.
        h.guestRequest("c2", from: g.messenger)
        #expect(await g.inbox.finished("c2").map(\.errorCode) == ["not_granted"])
        await eventually("stream stopped") { engine.cancellations == 1 }
        _ = await g.inbox.first("contact.revoke") { if case .contactRevoke = $0 { true } else { false } }
        #expect(try cli.guests(nowMs: h.clock.value).map(\.state) == [.revoked])
        await h.stop()
    }

    @Test func strangersAreRateLimitedAndGetSilence() async throws {
        let h = try Harness()
        await h.startServing()
        let g = h.guest(0x26)
        try await h.contacts.grant(guest: g.key, models: .all, expiresAt: nil)
        for i in 0..<100 {
            let s = h.guest(UInt8(0x80 + i))
            s.messenger.send(.contactJoin(name: "spam"), to: h.homebase, channel: .contact, store: false)
        }
        // Joins are handled in order; a last one from the granted guest (never rate-limited) marks the end.
        g.messenger.send(.contactJoin(name: "friend"), to: h.homebase, channel: .contact, store: false)
        await eventually("grant sent again") {
            g.inbox.messages.filter { if case .contactGrant = $0 { true } else { false } }.count == 2
        }
        let pending = try h.contacts.registry.guests(nowMs: h.clock.value).filter { $0.state == .pending }
        #expect(pending.count == 30)

        // A stranger's request reaches the authorizer (dispatched directly, past the envelope rule): silence.
        let stranger = testKey(0x7F)
        await h.daemon.dispatch(InboundMessage(
            sender: stranger, channel: .contact,
            message: .inferRequest(InferRequest(id: "x", model: "qwen2.5:7b", messages: [.user("hi")])),
            sentAtMs: h.clock.value, messageID: [1]))
        await h.daemon.dispatch(InboundMessage(sender: stranger, channel: .contact, message: .advertRequest,
                                               sentAtMs: h.clock.value, messageID: [2]))
        h.guestRequest("after", from: g.messenger)
        _ = await g.inbox.finished("after")
        #expect(!h.hub.sent.contains { $0.to == stranger })
        #expect(h.engine.calls == 1)
        await h.stop()
    }

    @Test func aReplayedRequestIDIsServedOnce() async throws {
        let h = try Harness()
        await h.startServing()
        let g = try await h.grantedGuest(0x27)
        h.guestRequest("same", from: g.messenger)
        _ = await g.inbox.finished("same")
        h.guestRequest("same", from: g.messenger)
        h.guestRequest("next", from: g.messenger)
        _ = await g.inbox.finished("next")
        #expect(g.inbox.inference("same").filter { if case .inferAccept = $0 { true } else { false } }.count == 1)
        #expect(h.engine.calls == 2)
        await h.stop()
    }

    @Test func perGuestLimitsAnswerBusy() async throws {
        let engine = FakeEngine([.waitForGate, .text("ok"), .finish(.stop, Usage(promptTokens: 7, completionTokens: 3))])
        let h = try Harness(engine: engine)
        await h.startServing()
        let g = try await h.grantedGuest(0x28)
        let registry = try h.contacts.registry
        try registry.setLimits(guest: g.key, GuestLimitOverride(maxConcurrent: 1, requestsPerMinute: 3,
                                                                tokensPerDay: 15))
        // Concurrency: the second while the first streams.
        h.guestRequest("l1", from: g.messenger)
        _ = await g.inbox.first("accept") { $0 == .inferAccept(InferAccept(id: "l1", model: "qwen2.5:7b")) }
        h.guestRequest("l2", from: g.messenger)
        let busy = await g.inbox.finished("l2")
        #expect(busy.map(\.errorCode) == ["busy"])
        engine.gate.open()
        _ = await g.inbox.finished("l1")
        // A request's end is accounted moments after its done reached the guest (the server's next pass), and its
        // usage written after that (in the background): l3 and l4 must not overtake either.
        await eventually("l1 ended") { h.daemon.inference.activeCount == 0 }
        // Requests a minute: l1 and l3 count (l2 and l4 below are refused before they count).
        engine.gate.open(10)
        h.guestRequest("l3", from: g.messenger)
        _ = await g.inbox.finished("l3")
        await eventually("l1's and l3's usage written") {
            (try? registry.usageToday(guest: g.key, nowMs: h.clock.value).requests) == 2
        }
        // Tokens today: 20 used, over the 15 allowed.
        h.guestRequest("l4", from: g.messenger)
        guard case .inferError(let e) = await g.inbox.finished("l4").last else {
            Issue.record("expected an error")
            return
        }
        #expect(e.code == "busy")
        #expect(e.message.contains("tokens"))
        try registry.setLimits(guest: g.key, GuestLimitOverride(maxConcurrent: 1, requestsPerMinute: 3))
        h.guestRequest("l5", from: g.messenger)
        #expect(await g.inbox.finished("l5").last?.errorCode == nil)
        h.guestRequest("l6", from: g.messenger)
        guard case .inferError(let rate) = await g.inbox.finished("l6").last else {
            Issue.record("expected an error")
            return
        }
        #expect(rate.code == "busy")
        #expect(rate.message.contains("a minute"))
        h.clock.advance(ms: 60_000)
        await eventually("l5 ended") { h.daemon.inference.activeCount == 0 }
        h.guestRequest("l7", from: g.messenger)
        #expect(await g.inbox.finished("l7").last?.errorCode == nil)
        await h.stop()
    }

    @Test func usageIsCountedAfterDoneAndListed() async throws {
        let h = try Harness()
        await h.startServing()
        let g = try await h.grantedGuest(0x29)
        h.guestRequest("u1", from: g.messenger)
        h.guestRequest("u2", from: g.messenger)
        _ = await g.inbox.finished("u1")
        _ = await g.inbox.finished("u2")
        await eventually("usage recorded") {
            (try? h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).requests) == 2
        }
        let summary = try #require(try h.contacts.registry.guests(nowMs: h.clock.value).first)
        #expect(summary.usage == GuestUsage(requests: 2, promptTokens: 14, completionTokens: 6))
        #expect(summary.name == "friend")
        #expect(!GuestSummary.json([summary]).contains("hi"))
        await h.stop()
    }

    /// A guest that cancels an answer after reading part of it is charged for the pieces streamed (no free
    /// answers by cancelling just before the end); one that cancels before any text costs nothing.
    @Test func anAnswerCutShortIsChargedForWhatWasStreamed() async throws {
        let h = try Harness()
        h.engine.setScript([.read(["a", "b", "c"]), .hang])
        await h.startServing()
        let g = try await h.grantedGuest(0x2B)
        h.guestRequest("x1", from: g.messenger)
        await eventually("text streamed") {
            g.inbox.inference("x1").compactMap { m -> String? in if case .inferChunk(let c) = m { c.text } else { nil } }
                .joined() == "abc"
        }
        g.messenger.send(.inferCancel(id: "x1"), to: h.homebase, channel: .contact, store: false)
        await eventually("usage recorded") {
            (try? h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).requests) == 1
        }
        #expect(try h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value)
            == GuestUsage(requests: 1, promptTokens: 0, completionTokens: 3))

        // Cancelled while waiting for the runtime: nothing streamed, nothing charged.
        h.engine.setScript([.hang])
        h.guestRequest("x2", from: g.messenger)
        _ = await g.inbox.first("accept x2") { if case .inferAccept(let a) = $0 { a.id == "x2" } else { false } }
        g.messenger.send(.inferCancel(id: "x2"), to: h.homebase, channel: .contact, store: false)
        await eventually("x2 ended") { h.daemon.inference.activeCount == 0 }
        #expect(try h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).requests == 1)

        // Gone mid-answer (its next chunk's RECEIPT says offline): charged for what it had, as a cancel.
        h.engine.setScript([.read(["d", "e"]), .waitForGate, .read(["f"]), .hang])
        h.guestRequest("x3", from: g.messenger)
        await eventually("x3 streamed") {
            g.inbox.inference("x3").compactMap { m -> String? in if case .inferChunk(let c) = m { c.text } else { nil } }
                .joined() == "de"
        }
        h.hub.disconnect(g.key)
        // The next piece is due at once (no coalescer hold) and, past the receipt interval, asks for a RECEIPT.
        h.clock.advance(ms: 600)
        h.engine.gate.open()
        await eventually("usage of x3") {
            (try? h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).requests) == 2
        }
        #expect(try h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).completionTokens == 3 + 3)
        await h.stop()
    }

    @Test func guestsGetAdvertsOnEventsButNoHeartbeat() async throws {
        let h = try Harness()
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        let g = try await h.grantedGuest(0x2A)
        let before = g.inbox.messages.filter(\.isAdvert).count
        let phoneBefore = phone.inbox.messages.filter(\.isAdvert).count
        for _ in 0..<3 { h.ticks.yield() }
        await eventually("three heartbeats to the sibling") {
            phone.inbox.messages.filter(\.isAdvert).count == phoneBefore + 3
        }
        #expect(g.inbox.messages.filter(\.isAdvert).count == before)
        // advert.request: answered at once.
        g.messenger.send(.advertRequest, to: h.homebase, channel: .contact, store: false)
        await eventually("answer") { g.inbox.messages.filter(\.isAdvert).count == before + 1 }
        // A model change: an advert.
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("qwen2.5:7b"), FakeRuntime.model("llama3.2:3b")]))
        await eventually("change") { g.inbox.messages.filter(\.isAdvert).count == before + 2 }
        // A pending guest gets none, and its advert.request is ignored.
        let p = h.guest(0x2B)
        p.messenger.send(.contactJoin(name: "p"), to: h.homebase, channel: .contact, store: false)
        await eventually("pending") { (try? h.contacts.registry.record(for: p.key)?.state) == .pending }
        p.messenger.send(.advertRequest, to: h.homebase, channel: .contact, store: false)
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("qwen2.5:7b")]))
        await eventually("change") { g.inbox.messages.filter(\.isAdvert).count == before + 3 }
        #expect(!p.inbox.messages.contains { $0.isAdvert })
        await h.stop()
    }

    @Test func leavingForgetsTheGuestAndStopsItsStreams() async throws {
        let engine = FakeEngine([.text("partial"), .hang])
        let h = try Harness(engine: engine)
        await h.startServing()
        let g = try await h.grantedGuest(0x2C)
        let authorizer = try h.contacts.authorizer
        h.guestRequest("v1", from: g.messenger)
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        // An answer that has just finished, its usage write held back (as a slow disk would): the leave must wait
        // for it before removing the guest.
        authorizer.usageWriter.suspend()
        authorizer.ended(InferRequest(id: "v0", model: "qwen2.5:7b", messages: [.user("hi")]), from: g.key,
                         channel: .contact, outcome: .done(answer: nil, usage: Usage(promptTokens: 3, completionTokens: 4)))
        g.messenger.send(.contactLeave, to: h.homebase, channel: .contact, store: false)
        await eventually("stream stopped") { engine.cancellations == 1 }
        try await Task.sleep(for: .milliseconds(50))
        authorizer.usageWriter.resume()
        // Streams are stopped first, usage written, then the guest is removed with it: no row is left behind by
        // a write that came after the removal.
        await eventually("forgotten") { (try? h.contacts.registry.isContact(g.key)) == false }
        await authorizer.usageWritten()
        #expect((try? h.contacts.registry.usageToday(guest: g.key, nowMs: h.clock.value).requests) == 0)
        await h.stop()
    }

    @Test func aLeavingGuestsRequestsGetNoAnswer() async throws {
        let h = try Harness()
        await h.startServing()
        let g = try await h.grantedGuest(0x2D)
        let authorizer = try h.contacts.authorizer
        // Between the leave's start and the guest's removal (streams stopped, usage written), a request that
        // arrives on the relay link's thread must not be admitted: it would stream to a guest who is gone.
        authorizer.startLeaving(guest: g.key)
        h.guestRequest("l1", from: g.messenger)
        h.guestRequest("l2", from: g.messenger)
        try await Task.sleep(for: .milliseconds(50))
        #expect(g.inbox.inference("l1").isEmpty && g.inbox.inference("l2").isEmpty)
        #expect(h.daemon.inference.activeCount == 0)
        // Forgotten (a failed removal clears the mark too): served again.
        authorizer.forget(guest: g.key)
        h.guestRequest("l3", from: g.messenger)
        guard case .inferDone = await g.inbox.finished("l3").last else { Issue.record("l3 not done"); return }
        await h.stop()
    }

    @Test func theConversationCacheServesFollowUpsAndMissesAfterEviction() async throws {
        let h = try Harness()
        await h.startServing()
        let g = try await h.grantedGuest(0x2D)
        let first = [ChatMessage(role: "user", content: "hi")]
        h.guestRequest("k1", from: g.messenger, messages: first, conversation: ConversationRef(id: "conv"))
        _ = await g.inbox.finished("k1")
        let held = first + [ChatMessage(role: "assistant", content: "Hello, world")]
        let ref = ConversationRef(
            id: "conv", baseCount: 2,
            baseDigest: ConversationDigest.compute(messages: held.map { ($0.role, $0.content) }))
        let next = [ChatMessage(role: "user", content: "and then?")]
        await eventually("cached") { (try? h.contacts.authorizer.cache.contains(guest: g.key, id: "conv")) == true }
        h.guestRequest("k2", from: g.messenger, messages: next, conversation: ref)
        #expect(await g.inbox.finished("k2").last?.errorCode == nil)
        #expect(h.engine.last?.request.messages == held + next)

        // A wrong digest: cache_miss, and the engine is not called.
        var wrong = ref
        wrong.baseDigest = String(repeating: "0", count: 64)
        h.guestRequest("k3", from: g.messenger, messages: next, conversation: wrong)
        #expect(await g.inbox.finished("k3").map(\.errorCode) == ["cache_miss"])

        // Evicted between two requests: cache_miss, then the full retry is served.
        try h.contacts.authorizer.cache.removeAll(guest: g.key)
        let full = held + next + [ChatMessage(role: "assistant", content: "Hello, world")]
        let ref2 = ConversationRef(
            id: "conv", baseCount: full.count,
            baseDigest: ConversationDigest.compute(messages: full.map { ($0.role, $0.content) }))
        h.guestRequest("k4", from: g.messenger, messages: [.user("more")], conversation: ref2)
        #expect(await g.inbox.finished("k4").map(\.errorCode) == ["cache_miss"])
        h.guestRequest("k5", from: g.messenger, messages: full + [.user("more")],
                       conversation: ConversationRef(id: "conv"))
        #expect(await g.inbox.finished("k5").last?.errorCode == nil)
        #expect(h.engine.calls == 3)
        await h.stop()
    }
}
