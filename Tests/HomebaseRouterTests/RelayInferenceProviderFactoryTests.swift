import HomebaseCore
import HomebaseNode
import Testing
@testable import HomebaseRouter

/// The router over the real relay factory: a handset with a fresh advert is served by its Homebase, and a
/// dead Homebase lands on-device inside the call.
@Suite(.timeLimit(.minutes(1))) struct RelayInferenceProviderFactoryTests {
    static func router(_ rig: RelayRig, harness h: Harness) -> LLMRouter {
        let factory = RelayInferenceProviderFactory(responses: rig.responses, http: .unavailable,
                                                    watchdogs: RelayRig.ladder, wallClock: .fixed(0),
                                                    timers: MonotonicClock { monotonicMs() })
        let clock = h.clock
        return LLMRouter(settings: h.settings, keys: h.keys, runtime: h.runtime, adverts: h.adverts, joined: h.joined,
                         factory: factory, isHomebase: false, clock: WallClock { clock.read() })
    }

    @Test func theRouterServesAFreshAdvertOverTheRelay() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["From ", "the Homebase."]) }
        defer { rig.stop() }
        let h = Harness()
        try h.radio(.external)
        try h.select("qwen2.5:7b")
        try h.advert(ageMs: Fixture.minute)
        let result = try await Self.router(rig, harness: h).provider().complete(Fixture.request)
        #expect(result.text == "From the Homebase.")
        #expect(result.providerKind == .sibling)
        #expect(result.model == "qwen2.5:7b")
        #expect(result.fallback == nil)
        #expect(rig.host.requests.first?.model == "qwen2.5:7b")
    }

    @Test func aSilentHomebaseFallsBackOnDeviceInsideTheCall() async throws {
        let rig = RelayRig { _, _ in [] }
        defer { rig.stop() }
        let h = Harness()
        try h.radio(.external)
        try h.select("qwen2.5:7b")
        try h.advert(ageMs: Fixture.minute)
        let events = await collect(Self.router(rig, harness: h).provider().stream(Fixture.request))
        guard case .done(let result) = events.last else { Issue.record("no .done"); return }
        #expect(result.providerKind == .onDevice)
        #expect(result.model == FloorProvider.modelName)
        #expect(result.fallback == Fallback(from: .sibling, reason: .acceptTimeout))
        #expect(!events.contains { if case .failed = $0 { true } else { false } })
    }

    @Test func httpProvidersAreDelegated() async throws {
        let rig = RelayRig { _, _ in [] }
        defer { rig.stop() }
        let factory = RelayInferenceProviderFactory(responses: rig.responses, http: .unavailable, wallClock: .fixed(0),
                                                    timers: MonotonicClock { 0 })
        #expect(factory.makeOpenAI(model: "gpt", apiKey: { nil }).kind == .openai)
        #expect(factory.makeAnthropic(model: "claude", apiKey: { nil }).kind == .anthropic)
        #expect(factory.makeOllama(endpoint: Fixture.endpoint(), model: "m").kind == .ollama)
        #expect(factory.makeOnDevice(deviceModel: nil).kind == .onDevice)
        #expect(factory.makeSibling(host: RelayRig.hostKey, model: "m").kind == .sibling)
        #expect(factory.makeCrossAccount(host: RelayRig.hostKey, model: "m").kind
            == .crossAccount)
    }
}
