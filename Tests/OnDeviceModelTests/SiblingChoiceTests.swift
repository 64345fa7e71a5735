import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseCuration
import HomebaseEngines
import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

/// The choice syncs (design.md §C9): a sibling's `settings.model_choice` is applied without echo and, on a device whose
/// runtime is the Hub cache, starts its own download; the router answers from the floor until it is ready, then
/// from the model.
@Suite(.timeLimit(.minutes(1))) struct SiblingChoiceTests {
    @Test func aSiblingsChoiceDownloadsHereAndThenAnswers() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let loopback = LoopbackMessengerHub()
        let dir = NSTemporaryDirectory() + "sibling-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let directory = StateDirectory(explicit: dir, tool: "handset")
        try DeviceSession.initialize(directory: directory, relayURL: "ws://127.0.0.1:1/", name: "phone")
        let node = try NodeState(path: directory.databasePath)
        let identity = try node.identity()
        let box = RelationBox()
        let messenger = loopback.messenger(for: identity.publicKey) { box.relation($0) }
        var http = DeviceHTTP.unavailable
        http.hub = HubAccess(http: Hub.http, endpoint: hub.endpoint, cacheRoot: hub.root)
        let session = try DeviceSession(node: node, identity: identity, messenger: messenger, relay: nil, http: http,
                                        clock: { UInt64(Date().timeIntervalSince1970 * 1000) },
                                        timers: .system)
        // Weakly, as `DeviceSession` does it: the session holds the messenger, whose lookup holds the box.
        box.set { [weak session] in session?.relation(of: $0) ?? .stranger }
        defer { session.stop() }

        // Pair with a fake Homebase (a roster sibling), which then sends its model choice.
        let homebase = SigningSecretKey.generate()
        let account = SigningSecretKey.generate()
        let hb = loopback.messenger(for: homebase.publicKey) { _ in .sibling }
        let fake = Task {
            for await inbound in hb.inbound {
                guard case .pairRequest = inbound.message else { continue }
                var devices = [RosterPayload.Device(pk: homebase.publicKey.hex, name: "mac", role: "homebase", addedAt: 1)]
                devices.append(RosterPayload.Device(pk: inbound.sender.hex, name: "phone", role: "handset", addedAt: 2))
                let payload = SignedPayloadJSON.encode(RosterPayload(account: account.publicKey, version: 2, devices: devices))
                let roster = SignedBlob(payload: payload, signature: account.sign(payload, context: SignatureContext.roster))
                hb.send(.pairAccept(roster: roster), to: inbound.sender, channel: .sibling, store: true)
            }
        }
        defer { fake.cancel() }
        let pump = Task { for await inbound in messenger.inbound { session.dispatch(inbound) } }
        defer { pump.cancel() }
        let code = PairingCode(homebase: homebase.publicKey, secret: [UInt8](repeating: 1, count: 16),
                               relayURL: "ws://127.0.0.1:1/")
        try await session.account.pair(code: code, name: "phone", messenger: session.messenger, timeout: .seconds(5))

        try session.settings.setModelSource(.community)
        try session.settings.setDeviceModel(.hub("mlx-community/Llama-3.2-3B-Instruct-4bit"))
        let choice = ModelChoice(modelID: curatedVision, vision: true, origin: homebase.publicKey.hex)
        hb.send(.modelChoice(choice), to: identity.publicKey, channel: .sibling, store: true)

        let deadline = ContinuousClock.now + .seconds(20)
        while session.models.state(curatedVision) != .ready && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(session.settings.modelChoice == choice)
        #expect(session.models.state(curatedVision) == .ready)
        #expect(session.siblingDownloads.count == 1)
        let answer = try await session.router.provider().complete(ChatRequest(messages: [.user("Hi")]))
        #expect(answer.model == curatedVision)
        #expect(answer.fallback == nil)
        // The same choice again: already ready, no second download.
        hb.send(.modelChoice(choice), to: identity.publicKey, channel: .sibling, store: true)
        try await Task.sleep(for: .milliseconds(200))
        #expect(session.siblingDownloads.count == 1)
    }
}
