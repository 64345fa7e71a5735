import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct AdvertPublisherTests {
    /// The adverts `inbox` holds, each checked: signed by `host` over the exact payload bytes, `host` field right.
    static func verifiedAdverts(_ inbox: Inbox, host: PublicKey) -> [AdvertPayload] {
        inbox.messages.compactMap { m -> AdvertPayload? in
            guard case .advert(let blob) = m else { return nil }
            #expect(Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.advert,
                                     publicKey: host))
            // The signature covers these bytes and no others.
            var tampered = blob.payload
            tampered[tampered.count / 2] ^= 1
            #expect(!Signature.verify(blob.signature, message: tampered, context: SignatureContext.advert,
                                      publicKey: host))
            let payload = SignedPayloadJSON.decode(AdvertPayload.self, from: blob.payload)
            #expect(payload?.host == host.hex)
            return payload
        }
    }

    /// Issue 34: a cloud model is advertised only when shared, then marked `cloud`; the context is labelled.
    @Test func aCloudModelIsAdvertisedOnlyWhenSharedAndSaysSo() throws {
        var local = FakeRuntime.model("qwen2.5:7b")
        local.contextLength = 4096
        local.contextServed = true
        var cloud = FakeRuntime.model("gpt-oss:120b-cloud", loaded: false)
        cloud.cloud = true
        cloud.contextLength = nil
        var status = FakeRuntime.up([local, cloud])
        let host = testKey(9)
        let unshared = AdvertPublisher.payload(host: host, status: status, seq: 1, nowMs: 1)
        #expect(unshared.models.map(\.tag) == ["qwen2.5:7b"])
        #expect(unshared.models[0].cloud == nil && unshared.models[0].contextSource == "served")
        status.sharedCloudModels = ["gpt-oss:120b-cloud"]
        let shared = AdvertPublisher.payload(host: host, status: status, seq: 2, nowMs: 2)
        #expect(shared.models.map(\.tag) == ["qwen2.5:7b", "gpt-oss:120b-cloud"])
        #expect(shared.models[1].cloud == true && shared.models[1].contextSource == nil)
        let json = String(decoding: SignedPayloadJSON.encode(shared), as: UTF8.self)
        #expect(json.contains(#""cloud":true"#) && json.contains(#""context_source":"served""#))
    }

    @Test func startChangeRequestAndHeartbeatEachSendAFreshSignedAdvert() async throws {
        let h = try Harness()
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()

        await eventually("start advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 1 }
        let start = try #require(Self.verifiedAdverts(phone.inbox, host: h.homebase).first)
        #expect(start.models.map(\.tag) == ["qwen2.5:7b"])
        #expect(start.models.first?.capabilities == ["completion"])
        #expect(start.models.first?.loaded == true)
        #expect(start.runtime == AdvertPayload.Runtime(kind: "ollama", version: "0.5.1"))
        #expect(start.issuedAt == h.clock.value)

        // A loaded flag flips: a change.
        h.clock.advance(ms: 1_000)
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("qwen2.5:7b", loaded: false)]))
        await eventually("change advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 2 }
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).last?.models.first?.loaded == false)
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).last?.issuedAt == h.clock.value)

        // advert.request is answered at once.
        phone.messenger.send(.advertRequest, to: h.homebase, channel: .sibling, store: false)
        await eventually("answer") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 3 }

        // A heartbeat.
        h.ticks.yield()
        await eventually("heartbeat") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 4 }

        let seqs = Self.verifiedAdverts(phone.inbox, host: h.homebase).map(\.seq)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        await h.stop()
    }

    @Test func aStatusUpdateThatChangesNothingAdvertisedSendsNothing() async throws {
        let h = try Harness()
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        await eventually("start advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 1 }
        var same = FakeRuntime.up()
        same.checkedAtMs = 999
        h.runtime.set(same)
        // Then a real change, which must be the second advert.
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("llama3.2:3b")]))
        await eventually("change advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 2 }
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).last?.models.map(\.tag) == ["llama3.2:3b"])
        await h.stop()
    }

    @Test func anUnavailableRuntimeAdvertisesNoModels() async throws {
        let h = try Harness(runtime: FakeRuntime(FakeRuntime.down()))
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        await eventually("start advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 1 }
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).first?.models == [])

        // Coming back is a change; going down again is one too.
        h.runtime.set(FakeRuntime.up())
        h.runtime.set(FakeRuntime.down())
        await eventually("two changes") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 3 }
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).map(\.models.count) == [0, 1, 0])

        // Verified but not available, or available but not verified: nothing either.
        var unverified = FakeRuntime.up()
        unverified.verified = false
        #expect(AdvertPublisher.payload(host: h.homebase, status: unverified, seq: 1, nowMs: 1).models.isEmpty)
        await h.stop()
    }

    @Test func heartbeatsAreLiveAndChangesAreStored() async throws {
        let h = try Harness()
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        await eventually("start advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 1 }

        h.hub.disconnect(phone.key)
        h.ticks.yield()
        h.runtime.set(FakeRuntime.up([FakeRuntime.model("llama3.2:3b")]))
        await eventually("both sent") { h.hub.sent.filter { $0.to == phone.key && $0.type == "advert" }.count == 3 }
        h.hub.reconnect(phone.key)
        // Only the change was kept for the offline phone.
        await eventually("stored advert") { Self.verifiedAdverts(phone.inbox, host: h.homebase).count == 2 }
        #expect(Self.verifiedAdverts(phone.inbox, host: h.homebase).last?.models.map(\.tag) == ["llama3.2:3b"])
        await h.stop()
    }

    @Test func seqKeepsIncreasingAcrossARestart() async throws {
        let dir = try TemporaryDirectory()
        let hub = LoopbackMessengerHub()
        let phone = hub.messenger(for: testKey(0x11), relation: { _ in .sibling })
        let inbox = Inbox(phone)
        var host: PublicKey?
        for _ in 0..<2 {
            let state = try HomebaseState(path: dir.file("state.db"))
            try state.initialize(settings: HomebaseSettings(relayURL: "ws://r"), nowMs: 1)
            let identity = try state.deviceKey()
            host = identity.publicKey
            let messenger = hub.messenger(for: identity.publicKey, relation: { _ in .sibling })
            let publisher = AdvertPublisher(identity: identity, state: state, runtime: FakeRuntime(),
                                            messenger: messenger, siblings: { [testKey(0x11)] })
            publisher.publishOnStart()
            publisher.heartbeat()
        }
        let h = try #require(host)
        await eventually("four adverts") { Self.verifiedAdverts(inbox, host: h).count == 4 }
        #expect(Self.verifiedAdverts(inbox, host: h).map(\.seq) == [1, 2, 3, 4])
    }

    @Test func guestsGetEventAdvertsButNoHeartbeat() async throws {
        let dir = try TemporaryDirectory()
        let hub = LoopbackMessengerHub()
        let guest = hub.messenger(for: testKey(0x44), relation: { _ in .contact })
        let inbox = Inbox(guest)
        let state = try HomebaseState(path: dir.file("state.db"))
        try state.initialize(settings: HomebaseSettings(relayURL: "ws://r"), nowMs: 1)
        let identity = try state.deviceKey()
        let messenger = hub.messenger(for: identity.publicKey, relation: { _ in .contact })
        let runtime = FakeRuntime()
        let publisher = AdvertPublisher(identity: identity, state: state, runtime: runtime, messenger: messenger,
                                        siblings: { [] }, guests: { [testKey(0x44)] })
        publisher.publishOnStart()
        publisher.heartbeat()
        publisher.runtimeChanged(FakeRuntime.down())
        await eventually("two adverts") { Self.verifiedAdverts(inbox, host: identity.publicKey).count == 2 }
        #expect(inbox.all.allSatisfy { $0.channel == .contact })
        #expect(Self.verifiedAdverts(inbox, host: identity.publicKey).map(\.seq) == [1, 2])
    }
}
