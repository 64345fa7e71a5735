import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

/// Issue 38, defect 2: a device session's watchdogs run on the monotonic clock. The wall clock steps an hour back
/// (NTP, a user fixing the date) while a request waits for an accept that never comes; before, the session handed
/// the wall clock to the watchdog machine, whose timer, on firing, found its deadline an hour away and re-armed
/// for that hour: the requester hung instead of falling back on-device after the accept watchdog.
@Suite(.timeLimit(.minutes(1))) struct ClockStepTests {
    @Test func aWallClockStepBackDuringARequestDoesNotStallTheWatchdog() async throws {
        let hub = LoopbackMessengerHub()
        let dir = try DeviceTempDirectory()
        let directory = StateDirectory(explicit: dir.path, tool: "handset")
        try DeviceSession.initialize(directory: directory, relayURL: "ws://127.0.0.1:1/", name: "phone")
        let node = try NodeState(path: directory.databasePath)
        let identity = try node.identity()
        let box = RelationBox()
        let messenger = hub.messenger(for: identity.publicKey) { box.relation($0) }
        let stepped = Mutex(false)
        var options = DeviceSession.Options()
        options.watchdogs = InferenceClientStateMachine.Watchdogs(acceptMs: 300, firstOutputMs: 300, stallMs: 300)
        let session = try DeviceSession(
            node: node, identity: identity, messenger: messenger, relay: nil, http: .unavailable, options: options,
            clock: { wallMs() - (stepped.withLock { $0 } ? 3_600_000 : 0) }, timers: .system)
        defer { session.stop() }
        box.set { [weak session] in session?.relation(of: $0) ?? .stranger }

        let homebase = SigningSecretKey.generate()
        let account = SigningSecretKey.generate()
        let hb = hub.messenger(for: homebase.publicKey) { _ in .sibling }
        let fake = pump(hb) { inbound in
            switch inbound.message {
            case .pairRequest:
                let roster = DeviceFixture.roster(account: account, version: 2, homebase: homebase.publicKey,
                                                  handsets: [inbound.sender])
                hb.send(.pairAccept(roster: roster), to: inbound.sender, channel: .sibling, store: true)
            case .advertRequest:
                let advert = DeviceFixture.advert(host: homebase, seq: 1, issuedAt: wallMs(), tags: ["qwen2.5:7b"])
                hb.send(.advert(advert), to: inbound.sender, channel: .sibling, store: true)
            case .inferRequest:
                // The step comes while the requester waits for the accept, which never comes.
                stepped.withLock { $0 = true }
            default: break
            }
        }
        defer { fake.cancel() }
        let code = PairingCode(homebase: homebase.publicKey, secret: [UInt8](repeating: 1, count: 16),
                               relayURL: "ws://127.0.0.1:1/")
        try await session.account.pair(code: code, name: "phone", messenger: session.messenger, timeout: .seconds(5))
        #expect(await session.refreshAdvert(from: homebase.publicKey, channel: .sibling, timeout: .seconds(5)))
        try session.settings.setModelSource(.external)
        try session.settings.setExternalSelection(ExternalSelection(tag: "qwen2.5:7b"))

        let provider = session.router.provider()
        let result = await withTaskGroup(of: ChatResult?.self) { group in
            group.addTask {
                guard case .done(let result)? = await collect(provider.stream(Fixture.request)).last else { return nil }
                return result
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        let didStep = stepped.withLock { $0 }
        #expect(didStep)
        let answer = try #require(result, "no answer within 5 s of a 300 ms accept watchdog: the clock step stalled it")
        #expect(answer.fallback?.reason == .acceptTimeout)
        #expect(answer.providerKind == .onDevice)
    }
}
