import HomebaseCore
import Synchronization
import HomebaseCrypto
import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

/// A handset, an in-process fake Homebase that answers `pair.request` as told, on a loopback hub.
private struct PairingRig {
    let hub = LoopbackMessengerHub()
    let handsetKey = SigningSecretKey.generate().publicKey
    let homebase = SigningSecretKey.generate()
    let accountKey = SigningSecretKey.generate()
    let account: HandsetAccount
    let handset: LoopbackMessenger
    let homebaseMessenger: LoopbackMessenger
    let tasks: [Task<Void, Never>]

    /// - Parameter answer: what the fake Homebase replies to a `pair.request`, or nil for silence.
    init(answer: @escaping @Sendable (PairingRig.Keys) -> Message?) {
        let account = HandsetAccount(backend: InMemorySettingsBackend(), selfKey: self.handsetKey)
        self.account = account
        self.handset = self.hub.messenger(for: self.handsetKey) { account.relation(of: $0) }
        self.homebaseMessenger = self.hub.messenger(for: self.homebase.publicKey) { _ in .stranger }
        let keys = Keys(handset: self.handsetKey, homebase: self.homebase, account: self.accountKey)
        let hb = self.homebaseMessenger
        self.tasks = [
            pump(self.handset) { account.handle($0) },
            pump(hb) { inbound in
                guard case .pairRequest = inbound.message, let reply = answer(keys) else { return }
                hb.send(reply, to: inbound.sender, channel: .sibling, store: true)
            },
        ]
    }

    struct Keys: Sendable {
        let handset: PublicKey
        let homebase: SigningSecretKey
        let account: SigningSecretKey
    }

    var code: PairingCode {
        PairingCode(homebase: self.homebase.publicKey, secret: [UInt8](repeating: 7, count: 16),
                    relayURL: "ws://127.0.0.1:1/")
    }

    func cancel() { for t in self.tasks { t.cancel() } }
}

@Suite struct DeviceHandsetAccountTests {
    @Test func pairingPinsTheAccountKeyAndStoresTheRoster() async throws {
        let rig = PairingRig { k in
            .pairAccept(roster: DeviceFixture.roster(account: k.account, version: 2, homebase: k.homebase.publicKey,
                                                     handsets: [k.handset]))
        }
        defer { rig.cancel() }
        let roster = try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset,
                                                timeout: .seconds(5))
        #expect(roster.version == 2)
        #expect(rig.account.homebase == rig.homebase.publicKey)
        #expect(rig.account.accountKey == rig.accountKey.publicKey)
        #expect(rig.account.siblings == [rig.homebase.publicKey])
        #expect(rig.account.relation(of: rig.homebase.publicKey) == .sibling)
        #expect(rig.hub.sent.contains { $0.type == MessageType.pairRequest && $0.to == rig.homebase.publicKey })
    }

    @Test(arguments: ["invalid_code", "expired", "used", "rate_limited"])
    func aRejectIsReportedWithItsReason(reason: String) async throws {
        let rig = PairingRig { _ in .pairReject(reason: reason) }
        defer { rig.cancel() }
        await #expect(throws: PairingFailure.rejected(reason: reason)) {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(5))
        }
        #expect(!rig.account.isPaired)
        #expect(PairingFailure.rejected(reason: reason).description.contains(reason))
    }

    @Test func anOfflineHomebaseFailsAtOnceWithAClearError() async throws {
        let rig = PairingRig { _ in nil }
        defer { rig.cancel() }
        rig.hub.disconnect(rig.homebase.publicKey)
        await #expect(throws: PairingFailure.homebaseOffline) {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(30))
        }
        #expect(PairingFailure.homebaseOffline.description.hasPrefix(
            "the Homebase in the code is not on the relay: start 'homebase run' on it"))
    }

    @Test func aMistypedKeyInTheCodeIsCalledATypoBeforeAnythingIsSent() async throws {
        let rig = PairingRig { _ in nil }
        defer { rig.cancel() }
        // A typo that leaves no valid Ed25519 point (libsodium refuses it): found locally, nothing sent.
        var bytes = rig.code.homebase.bytes
        var mistyped = rig.code
        for i in 0..<256 {
            bytes[5] = UInt8(i)
            let key = PublicKey(bytes: bytes)!
            if !key.acceptsSealedMessages { mistyped.homebase = key; break }
        }
        #expect(!mistyped.homebase.acceptsSealedMessages && rig.code.homebase.acceptsSealedMessages)
        await #expect(throws: PairingFailure.mistypedKey) {
            try await rig.account.pair(code: mistyped, name: "phone", messenger: rig.handset, timeout: .seconds(30))
        }
        #expect(PairingFailure.mistypedKey.description.contains("mistyped or cut"))
    }

    @Test func silenceTimesOut() async throws {
        let rig = PairingRig { _ in nil }
        defer { rig.cancel() }
        await #expect(throws: PairingFailure.timedOut) {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset,
                                       timeout: .milliseconds(100))
        }
    }

    @Test func anEndedPairingDoesNotTimeOutTheNextOne() async throws {
        // The first request of each pair is rejected at once, the second gets no answer. The first pairing's
        // timer, cancelled when its answer came, must not time out the second one early (it did, when the
        // cancelled sleep fell through to "timed out" and found the next pairing's waiter installed).
        let requests = Mutex(0)
        let rig = PairingRig { _ in
            let n = requests.withLock { n in n += 1; return n }
            return n % 2 == 1 ? .pairReject(reason: "used") : nil
        }
        defer { rig.cancel() }
        for _ in 0..<5 {
            await #expect(throws: PairingFailure.rejected(reason: "used")) {
                try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(5))
            }
            let start = ContinuousClock.now
            await #expect(throws: PairingFailure.timedOut) {
                try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset,
                                           timeout: .milliseconds(200))
            }
            let waited = ContinuousClock.now - start
            #expect(waited >= .milliseconds(190), "timed out after \(waited)")
        }
    }

    @Test func aForgedRosterInPairAcceptIsRefusedAndNothingIsSaved() async throws {
        let rig = PairingRig { k in
            // Claims k.account but is signed by another key.
            .pairAccept(roster: DeviceFixture.roster(account: k.account, version: 2, homebase: k.homebase.publicKey,
                                                     handsets: [k.handset], signer: SigningSecretKey.generate()))
        }
        defer { rig.cancel() }
        await #expect(throws: PairingFailure.invalidRoster) {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(5))
        }
        #expect(rig.account.accountKey == nil)
        #expect(rig.account.roster == nil)
    }

    @Test func aPairAcceptThatDoesNotListThisDeviceIsRefused() async throws {
        let rig = PairingRig { k in
            .pairAccept(roster: DeviceFixture.roster(account: k.account, version: 2, homebase: k.homebase.publicKey,
                                                     handsets: []))
        }
        defer { rig.cancel() }
        await #expect(throws: PairingFailure.invalidRoster) {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(5))
        }
    }

    @Test func aPairAcceptFromAnotherKeyIsIgnored() async throws {
        let rig = PairingRig { _ in nil }
        defer { rig.cancel() }
        let stranger = SigningSecretKey.generate()
        let pairing = Task {
            try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset,
                                       timeout: .milliseconds(300))
        }
        try await Task.sleep(for: .milliseconds(50))
        let blob = DeviceFixture.roster(account: stranger, version: 9, homebase: rig.homebase.publicKey,
                                        handsets: [rig.handsetKey])
        rig.account.handle(DeviceFixture.inbound(.pairAccept(roster: blob), from: stranger.publicKey, on: .sibling))
        await #expect(throws: PairingFailure.timedOut) { try await pairing.value }
        #expect(!rig.account.isPaired)
    }

    // MARK: Later rosters

    private func paired() async throws -> PairingRig {
        let rig = PairingRig { k in
            .pairAccept(roster: DeviceFixture.roster(account: k.account, version: 5, homebase: k.homebase.publicKey,
                                                     handsets: [k.handset]))
        }
        try await rig.account.pair(code: rig.code, name: "phone", messenger: rig.handset, timeout: .seconds(5))
        return rig
    }

    @Test func laterRostersMustBeSignedNewerAndListUs() async throws {
        let rig = try await self.paired()
        defer { rig.cancel() }
        let other = SigningSecretKey.generate().publicKey
        let hb = rig.homebase.publicKey
        let forged = DeviceFixture.roster(account: rig.accountKey, version: 6, homebase: hb,
                                          handsets: [rig.handsetKey, other], signer: SigningSecretKey.generate())
        #expect(rig.account.apply(roster: forged) == .badSignature)
        let older = DeviceFixture.roster(account: rig.accountKey, version: 4, homebase: hb,
                                         handsets: [rig.handsetKey, other])
        #expect(rig.account.apply(roster: older) == .staleVersion)
        let same = DeviceFixture.roster(account: rig.accountKey, version: 5, homebase: hb, handsets: [rig.handsetKey, other])
        #expect(rig.account.apply(roster: same) == .staleVersion)
        let withoutUs = DeviceFixture.roster(account: rig.accountKey, version: 7, homebase: hb, handsets: [other])
        #expect(rig.account.apply(roster: withoutUs) == .notListed)
        #expect(rig.account.roster?.version == 5)
        #expect(!rig.account.siblings.contains(other))

        let good = DeviceFixture.roster(account: rig.accountKey, version: 6, homebase: hb, handsets: [rig.handsetKey, other])
        rig.account.handle(DeviceFixture.inbound(.roster(good), from: hb, on: .sibling))
        #expect(rig.account.roster?.version == 6)
        #expect(rig.account.relation(of: other) == .sibling)
    }

    @Test func aRosterBeforePairingIsDropped() {
        let account = HandsetAccount(backend: InMemorySettingsBackend(), selfKey: SigningSecretKey.generate().publicKey)
        let key = SigningSecretKey.generate()
        let blob = DeviceFixture.roster(account: key, version: 1, homebase: key.publicKey, handsets: [account.selfKey])
        #expect(account.apply(roster: blob) == .notPaired)
        #expect(account.relation(of: key.publicKey) == .stranger)
    }

    // MARK: Sibling sync

    @Test func theHomebasesAdvertIsStoredAndReplaysAndStrangersAreNot() async throws {
        let rig = try await self.paired()
        defer { rig.cancel() }
        let store = ExternalModelsAdvertStore(backend: InMemorySettingsBackend())
        let hb = rig.homebase.publicKey
        let advert = DeviceFixture.advert(host: rig.homebase, seq: 3, issuedAt: 1_000, tags: ["qwen2.5:7b"])
        #expect(rig.account.receiveAdvert(advert, from: hb, into: store))
        #expect(store.advert?.models.map(\.tag) == ["qwen2.5:7b"])
        #expect(!rig.account.receiveAdvert(advert, from: hb, into: store))  // same seq: a replay

        let forged = DeviceFixture.advert(host: rig.homebase, seq: 4, issuedAt: 2_000, tags: ["evil"],
                                          signer: SigningSecretKey.generate())
        #expect(!rig.account.receiveAdvert(forged, from: hb, into: store))
        let stranger = SigningSecretKey.generate()
        let theirs = DeviceFixture.advert(host: stranger, seq: 9, issuedAt: 2_000, tags: ["evil"])
        #expect(!rig.account.receiveAdvert(theirs, from: stranger.publicKey, into: store))
        #expect(store.advert?.seq == 3)
    }

    @Test func aSiblingsModelChoiceIsAppliedWithoutEcho() async throws {
        let rig = try await self.paired()
        defer { rig.cancel() }
        let settings = AgentSettings(backend: InMemorySettingsBackend())
        let sentBefore = rig.hub.sent.count
        let choice = ModelChoice(modelID: "llama3.2:3b", vision: true, origin: rig.homebase.publicKey.hex)
        #expect(rig.account.receiveModelChoice(choice, from: rig.homebase.publicKey, settings: settings))
        #expect(settings.modelChoice == choice)
        #expect(rig.hub.sent.count == sentBefore)  // nothing sent on
        let stranger = SigningSecretKey.generate().publicKey
        let other = ModelChoice(modelID: "x", vision: false, origin: stranger.hex)
        #expect(!rig.account.receiveModelChoice(other, from: stranger, settings: settings))
        #expect(settings.modelChoice == choice)
    }

    @Test func aLocalChoiceFansOutToEverySibling() async throws {
        let rig = try await self.paired()
        defer { rig.cancel() }
        let settings = AgentSettings(backend: InMemorySettingsBackend())
        let choice = ModelChoice(modelID: "llama3.2:3b", vision: false, origin: rig.handsetKey.hex)
        let reached = try await rig.account.chooseAndFanOut(choice, settings: settings, messenger: rig.handset)
        #expect(reached == 1)
        #expect(settings.modelChoice == choice)
        #expect(rig.hub.sent.contains { $0.type == MessageType.modelChoice && $0.to == rig.homebase.publicKey })
    }
}
