import Foundation
import HomebaseCore
import HomebaseRouter
import Testing

/// The Homebase's environment failing around it: Ollama absent at start, the relay restarting.
@Suite("Homebase recovery", .serialized, .timeLimit(.minutes(1)))
struct HomebaseRecoveryTests {
    @Test("Ollama down at start: no models advertised, the handset routes on-device; served once Ollama is up")
    func ollamaDownAtStart() async throws {
        // A free port with nothing listening: bind the emulator once to learn one, then stop it.
        let probe = try IntegrationOllama()
        let port = probe.port
        probe.stop()
        let relay = try IntegrationRelay()
        let homebase = try IntegrationHomebase(relayURL: relay.url, ollamaURL: "http://127.0.0.1:\(port)")
        let handset = try IntegrationHandset(relayURL: relay.url)
        var ollama: IntegrationOllama?
        do {
            guard case .success = try await handset.pair(code: try homebase.pairingCode()) else {
                throw IntegrationFailure("pairing failed")
            }
            try handset.session.settings.setModelSource(.external)
            try handset.session.settings.setExternalRuntime(.ollama)
            try handset.session.settings.setExternalSelection(ExternalSelection(tag: "qwen2.5:7b", host: .own))
            await handset.refreshAdvert(timeout: .seconds(1))

            // A status written after the first probe failed (the first report may predate it).
            let probed = await eventually(.seconds(8)) { homebase.daemonStatus?.runtimeError != nil }
            #expect(probed, "no failed probe in the status: \(String(describing: homebase.daemonStatus))")
            #expect(homebase.daemonStatus?.runtimeAvailable == false)
            #expect(homebase.daemonStatus?.runtimeVerified == false)
            #expect(homebase.daemonStatus?.models.isEmpty == true)
            #expect(handset.session.adverts.advert?.models.isEmpty ?? true, "an advert with models from a dead runtime")

            let (_, answer, _) = await handset.chat("Anyone home?")
            #expect(answer.resolution.route == .onDevice)
            #expect(answer.result.providerKind == .onDevice)
            let reason = answer.resolution.fallback?.reason.rawValue ?? "none"
            #expect(["no_models", "stale_advert", "no_endpoint"].contains(reason), "reason \(reason)")
            print("Ollama down at start: route \(answer.resolution.route), reason \(reason)")

            // Ollama starts later: verified (test-before-persist), advertised, and the handset is served.
            ollama = try IntegrationOllama(port: port)
            let served = await eventually(.seconds(15)) {
                await handset.refreshAdvert()
                return await handset.chat("Now?").answer.result.providerKind == .sibling
            }
            #expect(served, "never served remotely after Ollama started")
        } catch { Issue.record(error) }
        handset.stop()
        await homebase.stop()
        ollama?.stop()
        relay.stop()
    }

    @Test("the relay restarts on the same port: the daemon reconnects and a later chat is served remotely")
    func relayRestart() async throws {
        try await IntegrationSystem.with { system in
            let before = await system.handset.chat("Before the restart")
            #expect(before.answer.result.providerKind == .sibling)

            let port = system.relay.port
            system.relay.stop()
            // While the relay is down the chat still answers (on-device).
            let during = await system.handset.chat("During the restart")
            #expect(during.answer.result.providerKind == .onDevice)
            print("relay down: fallback reason \(during.answer.result.fallback?.reason.rawValue ?? "none")")

            let restarted = try IntegrationRelay(port: port, dataDirectory: system.relay.dataDirectory)
            defer { restarted.stop() }
            let start = ContinuousClock.now
            let served = await eventually(.seconds(20)) {
                await system.handset.chat("After the restart").answer.result.providerKind == .sibling
            }
            #expect(served, "never served remotely after the relay came back")
            print("served remotely again \(ContinuousClock.now - start) after the relay restarted")
            let connected = await eventually(.seconds(5)) { system.homebase.daemonStatus?.relayConnected == true }
            #expect(connected)
        }
    }
}
