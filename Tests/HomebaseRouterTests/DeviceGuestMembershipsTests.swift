import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

@Suite struct DeviceGuestMembershipsTests {
    let hub = LoopbackMessengerHub()
    let host = SigningSecretKey.generate()
    let guestKey = SigningSecretKey.generate().publicKey
    let clock = ManualClock(1_800_000_000_000)
    let memberships: GuestMemberships
    let guest: LoopbackMessenger
    /// The host's end, held so the hub (which holds messengers weakly) keeps the host connected.
    let hostMessenger: LoopbackMessenger

    init() {
        let clock = self.clock
        let memberships = GuestMemberships(store: InMemoryJoinedHomebaseStore(), backend: InMemorySettingsBackend(),
                                           selfKey: self.guestKey, clock: { clock.read() })
        self.memberships = memberships
        self.guest = self.hub.messenger(for: self.guestKey) { memberships.relation(of: $0) }
        self.hostMessenger = self.hub.messenger(for: self.host.publicKey) { _ in .contact }
    }

    private func deliver(_ message: Message, from sender: PublicKey? = nil) -> GuestInboundOutcome {
        self.memberships.handle(DeviceFixture.inbound(message, from: sender ?? self.host.publicKey, on: .contact))
    }

    private func joinAndGrant(_ models: GrantPayload.GrantedModels = .only(["llama3.1:8b"])) async throws {
        try await self.memberships.join(host: self.host.publicKey, name: "Ben", messenger: self.guest)
        let grant = DeviceFixture.grant(host: self.host, guest: self.guestKey, models: models,
                                        issuedAt: self.clock.value)
        #expect(self.deliver(.contactGrant(grant)) == .granted)
    }

    @Test func joinSendsAStoredJoinAndRecordsPending() async throws {
        self.hub.disconnect(self.host.publicKey)
        let outcome = try await self.memberships.join(host: self.host.publicKey, name: "Ben", messenger: self.guest)
        #expect(outcome == .receipt(.stored))
        #expect(self.memberships.store.record(for: self.host.publicKey)?.state == .pending)
        #expect(self.memberships.relation(of: self.host.publicKey) == .contact)
        #expect(self.hub.sent.last?.type == MessageType.contactJoin)
    }

    @Test func aVerifiedGrantJoinsWithTheGrantedModels() async throws {
        try await self.joinAndGrant()
        let record = try #require(self.memberships.store.record(for: self.host.publicKey))
        #expect(record.state == .joined)
        #expect(record.models.map(\.tag) == ["llama3.1:8b"])
        #expect(record.isRoutable(nowMs: self.clock.value))
        #expect(self.memberships.model(on: self.host.publicKey, requested: nil) == "llama3.1:8b")
        #expect(self.memberships.model(on: self.host.publicKey, requested: "x") == "x")
    }

    @Test func forgedMisaddressedAndExpiredGrantsAreIgnored() async throws {
        try await self.memberships.join(host: self.host.publicKey, name: "Ben", messenger: self.guest)
        let now = self.clock.value
        let forged = DeviceFixture.grant(host: self.host, guest: self.guestKey, models: .all, issuedAt: now,
                                         signer: SigningSecretKey.generate())
        #expect(self.deliver(.contactGrant(forged)) == .dropped)
        let someoneElse = DeviceFixture.grant(host: self.host, guest: SigningSecretKey.generate().publicKey,
                                              models: .all, issuedAt: now)
        #expect(self.deliver(.contactGrant(someoneElse)) == .dropped)
        let expired = DeviceFixture.grant(host: self.host, guest: self.guestKey, models: .all, issuedAt: now - 10,
                                          expiresAt: now)
        #expect(self.deliver(.contactGrant(expired)) == .dropped)
        // A valid grant relayed by another key is not the host's grant.
        let other = SigningSecretKey.generate()
        let valid = DeviceFixture.grant(host: self.host, guest: self.guestKey, models: .all, issuedAt: now)
        #expect(self.deliver(.contactGrant(valid), from: other.publicKey) == .dropped)
        #expect(self.memberships.store.record(for: self.host.publicKey)?.state == .pending)
    }

    @Test func advertsFromAJoinedHostUpdateModelsWithinTheGrant() async throws {
        try await self.joinAndGrant(.only(["llama3.1:8b", "qwen2.5:7b"]))
        let advert = DeviceFixture.advert(host: self.host, seq: 1, issuedAt: self.clock.value,
                                          tags: ["qwen2.5:7b", "secret:70b"])
        #expect(self.deliver(.advert(advert)) == .advertStored)
        #expect(self.memberships.store.record(for: self.host.publicKey)?.models.map(\.tag) == ["qwen2.5:7b"])
        #expect(self.deliver(.advert(advert)) == .dropped)  // replayed seq
        let forged = DeviceFixture.advert(host: self.host, seq: 2, issuedAt: self.clock.value, tags: ["x"],
                                          signer: SigningSecretKey.generate())
        #expect(self.deliver(.advert(forged)) == .dropped)
    }

    @Test func anAdvertFromAPendingHostIsDropped() async throws {
        try await self.memberships.join(host: self.host.publicKey, name: "Ben", messenger: self.guest)
        let advert = DeviceFixture.advert(host: self.host, seq: 1, issuedAt: self.clock.value, tags: ["a"])
        #expect(self.deliver(.advert(advert)) == .dropped)
        #expect(self.memberships.store.record(for: self.host.publicKey)?.models.isEmpty == true)
    }

    @Test func revokeMarksTheHostRevoked() async throws {
        try await self.joinAndGrant()
        #expect(self.deliver(.contactRevoke(reason: "bye")) == .revoked)
        #expect(self.memberships.store.record(for: self.host.publicKey)?.state == .revoked)
        #expect(self.memberships.relation(of: self.host.publicKey) == .contact)
    }

    @Test func messagesFromUnknownHostsAreDropped() {
        let stranger = SigningSecretKey.generate()
        let grant = DeviceFixture.grant(host: stranger, guest: self.guestKey, models: .all, issuedAt: 1)
        #expect(self.deliver(.contactGrant(grant), from: stranger.publicKey) == .dropped)
        #expect(self.memberships.store.all().isEmpty)
        #expect(self.memberships.relation(of: stranger.publicKey) == .stranger)
    }

    @Test func anyFrameFromTheHostRefreshesLastHeard() async throws {
        try await self.joinAndGrant()
        let before = try #require(self.memberships.store.record(for: self.host.publicKey)).lastHeardMs
        self.clock.advance(ms: 5_000)
        _ = self.deliver(.advertRequest)
        #expect(self.memberships.store.record(for: self.host.publicKey)?.lastHeardMs == before + 5_000)
    }

    @Test func leaveSendsLeaveAndForgetsTheHost() async throws {
        try await self.joinAndGrant()
        try await self.memberships.leave(host: self.host.publicKey, messenger: self.guest)
        #expect(self.hub.sent.last?.type == MessageType.contactLeave)
        #expect(self.memberships.store.record(for: self.host.publicKey) == nil)
        #expect(self.memberships.relation(of: self.host.publicKey) == .stranger)
    }
}
