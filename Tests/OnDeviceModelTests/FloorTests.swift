import Foundation
import HomebaseCore
import HomebaseCuration
import HomebaseEngines
import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

/// The router's on-device arm over the Hub-cache runtime: a ready model answers, everything else is the floor.
@Suite struct FloorTests {
    func ask(_ store: OnDeviceModelStore, _ id: String) async -> ChatResult {
        let provider = OnDeviceProvider(deviceModel: .hub(id),
                                        makeDeviceProvider: { HubModelProvider(id: $0.tag, store: store) })
        return (try? await provider.complete(ChatRequest(messages: [.user("What is in this picture?")])))
            ?? FloorProvider().answer(ChatRequest(messages: []))
    }

    @Test func selectBeforeDownloadAnswersFromTheFloorUntilReady() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        let before = await self.ask(store, curatedVision)
        #expect(before.model == "floor")
        #expect(before.fallback == Fallback(from: .onDevice, reason: .error("not_downloaded")))
        try await store.download(curatedVision)
        let after = await self.ask(store, curatedVision)
        #expect(after.model == curatedVision)
        #expect(after.fallback == nil)
        #expect(after.text.contains("Qwen2-VL-2B-Instruct-4bit"))
        // Weights removed behind the store's back: the load check fails, the floor answers.
        try FileManager.default.removeItem(atPath: hub.layout.repo(curatedVision) + "/snapshots")
        let broken = await self.ask(store, curatedVision)
        #expect(broken.model == "floor")
        #expect(broken.fallback?.reason == .error("weights_missing"))
    }

    @Test func anUnknownIDInSettingsLandsOnTheFloor() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        let answer = await self.ask(store, "someone/never-heard-of")
        #expect(answer.model == "floor")
        #expect(answer.fallback?.reason == .error("unknown_model"))
    }

    @Test func removingTheActiveCustomRepoSnapsBackToTheFloor() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        let custom = "mlx-community/SmolLM2-135M-Instruct"  // not curated; custom bypasses the gates
        #expect(try store.addCustom(custom) == .added)
        #expect(try store.addCustom(custom) == .alreadyPresent)
        try await store.download(custom)
        _ = try hub.settings.choose(local: ModelChoice(modelID: custom, vision: false, origin: "me"))
        #expect(await self.ask(store, custom).model == custom)
        let (removed, reset) = try store.removeCustom(custom)
        #expect(removed && reset)
        #expect(hub.settings.modelChoice == nil)
        #expect(!FileManager.default.fileExists(atPath: hub.layout.repo(custom)))
        let answer = await self.ask(store, custom)
        #expect(answer.model == "floor")
        #expect(answer.fallback?.reason == .error("unknown_model"))
    }

    @Test func anIncapableDeviceAnswersFromTheFloorEvenWithWeights() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        try await store.download(curatedVision)
        try store.setCapable(false)
        let answer = await self.ask(store, curatedVision)
        #expect(answer.model == "floor")
        #expect(answer.fallback?.reason == .error("unsupported"))
    }

    /// `handset route` and its banner: a chosen Hub model that is not downloaded is not named as what answers —
    /// the floor is, with the reason — until the model is ready.
    @Test func theRouteSaysTheFloorAnswersUntilTheChosenModelIsReady() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let dir = NSTemporaryDirectory() + "route-floor-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let directory = StateDirectory(explicit: dir, tool: "handset")
        try DeviceSession.initialize(directory: directory, relayURL: "ws://127.0.0.1:1/", name: "phone")
        let node = try NodeState(path: directory.databasePath)
        let identity = try node.identity()
        let messenger = LoopbackMessengerHub().messenger(for: identity.publicKey) { _ in .sibling }
        var http = DeviceHTTP.unavailable
        http.hub = HubAccess(http: Hub.http, endpoint: hub.endpoint, cacheRoot: hub.root)
        let session = try DeviceSession(node: node, identity: identity, messenger: messenger, relay: nil, http: http,
                                        clock: { UInt64(Date().timeIntervalSince1970 * 1000) },
                                        timers: .system)
        defer { session.stop() }
        try session.settings.setModelSource(.community)
        try session.settings.setDeviceModel(.hub(curatedVision))

        let before = session.router.resolution()
        #expect(before.route == .onDevice)
        #expect(before.model == "floor")
        #expect(before.floorReason == .notDownloaded)
        #expect(session.router.banner().text == "On-device · floor (\(curatedVision) not ready: not_downloaded)")
        #expect(DeviceReport.route(session)["floor_reason"] as? String == "not_downloaded")
        let floorAnswer = try await session.router.provider().complete(ChatRequest(messages: [.user("Hi")]))
        #expect(floorAnswer.model == "floor")
        #expect(floorAnswer.fallback?.reason == .error("not_downloaded"))

        try await session.models.download(curatedVision)
        let after = session.router.resolution()
        #expect(after.model == curatedVision)
        #expect(after.floorReason == nil)
        #expect(session.router.banner().text == "On-device · \(curatedVision)")
        #expect(DeviceReport.route(session)["floor_reason"] is NSNull)
        let answer = try await session.router.provider().complete(ChatRequest(messages: [.user("Hi")]))
        #expect(answer.model == curatedVision)
    }
}
