import HomebaseCore
import Testing
@testable import HomebaseRouter

/// Every branch of design.md §R2's `resolve()` tree, the Ollama arm's shapes and both legacy paths.
@Suite struct LLMRouterResolveTests {
    enum Shape: String, Sendable { case crossAccount, localEndpoint, sibling }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var isHomebase = false
        var setup: @Sendable (Harness) throws -> Void
        var route: Route
        var shape: Shape? = nil
        var model: String? = nil
        var fallback: Fallback? = nil
        var needsConfiguration = false
        var testDescription: String { self.name }
    }

    static let scenarios: [Scenario] = [
        // The radio: apple / community.
        Scenario(name: "apple routes to the floor", setup: { try $0.radio(.apple) }, route: .onDevice, model: "floor"),
        Scenario(name: "apple stays on-device with every arm configured (consent boundary)", setup: { h in
            try h.radio(.apple)
            try h.addKey("sk-proj-one", .openai)
            try h.addKey("sk-ant-one", .anthropic)
            try h.dropdown(.openai)
            try h.select("qwen2.5:7b")
            try h.verifiedEndpoint()
        }, route: .onDevice, model: "floor"),
        Scenario(name: "community uses the device model", setup: { h in
            try h.radio(.community)
            try h.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        }, route: .onDevice, model: "qwen2.5:0.5b"),
        Scenario(name: "community without a device model needs configuration", setup: { try $0.radio(.community) },
                 route: .onDevice, model: "floor", needsConfiguration: true),
        Scenario(name: "an unrecognised radio value reads as apple, never the legacy derivation", setup: { h in
            try h.settingsBackend.set("bogus", forKey: AgentSettings.Key.modelSource)
            try h.addKey("sk-proj-one", .openai)
        }, route: .onDevice, model: "floor"),

        // External → OpenAI / Claude.
        Scenario(name: "external openai with a key", setup: { h in
            try h.radio(.external); try h.dropdown(.openai); try h.addKey("sk-proj-one", .openai)
        }, route: .openai, model: AgentSettings.defaultOpenAIModel),
        Scenario(name: "external openai without a key", setup: { h in
            try h.radio(.external); try h.dropdown(.openai); try h.addKey("sk-ant-one", .anthropic)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .openai, reason: .noKey),
           needsConfiguration: true),
        Scenario(name: "external claude with a key", setup: { h in
            try h.radio(.external); try h.dropdown(.claude); try h.addKey("sk-ant-one", .anthropic)
            try h.settings.setClaudeModel("claude-opus-4-1")
        }, route: .anthropic, model: "claude-opus-4-1"),
        Scenario(name: "external claude without a key, an OpenAI key present", setup: { h in
            try h.radio(.external); try h.dropdown(.claude); try h.addKey("sk-proj-one", .openai)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .anthropic, reason: .noKey),
           needsConfiguration: true),
        Scenario(name: "a routing-time fallback uses the device model first", setup: { h in
            try h.radio(.external); try h.dropdown(.claude)
            try h.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        }, route: .onDevice, model: "qwen2.5:0.5b", fallback: Fallback(from: .anthropic, reason: .noKey),
           needsConfiguration: true),

        // External → Ollama: own Homebase.
        Scenario(name: "ollama is the dropdown default", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint()
        }, route: .external, shape: .localEndpoint, model: "qwen2.5:7b"),
        Scenario(name: "ollama with no model selected", setup: { h in
            try h.radio(.external); try h.dropdown(.ollama); try h.verifiedEndpoint(); try h.advert(ageMs: 0)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .ollama, reason: .noModelSelected),
           needsConfiguration: true),
        Scenario(name: "ollama with no selection and nothing else", setup: { h in
            try h.radio(.external); try h.dropdown(.ollama)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .sibling, reason: .noModelSelected),
           needsConfiguration: true),
        Scenario(name: "a verified endpoint wins over a fresh advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint(); try h.advert(ageMs: 0)
        }, route: .external, shape: .localEndpoint, model: "qwen2.5:7b"),
        Scenario(name: "an endpoint that failed a later probe still routes", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint()
            try h.runtime.recordAvailability(RuntimeAvailability(url: "http://127.0.0.1:11434", available: false,
                                                                 checkedAtMs: h.now, reason: "version: refused"))
        }, route: .external, shape: .localEndpoint, model: "qwen2.5:7b"),
        Scenario(name: "a handset with a fresh sibling advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 2 * Fixture.minute)
        }, route: .external, shape: .sibling, model: "qwen2.5:7b"),
        Scenario(name: "a handset with a stale sibling advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 11 * Fixture.minute)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .sibling, reason: .staleAdvert)),
        Scenario(name: "a handset with an empty advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 0, tags: [])
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .sibling, reason: .noModels),
           needsConfiguration: true),
        Scenario(name: "a handset with neither endpoint nor advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b")
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .sibling, reason: .noEndpoint),
           needsConfiguration: true),
        Scenario(name: "the Homebase never routes to a sibling advert", isHomebase: true, setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .ollama, reason: .noEndpoint),
           needsConfiguration: true),
        Scenario(name: "the Homebase routes to its own verified endpoint", isHomebase: true, setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint()
        }, route: .external, shape: .localEndpoint, model: "qwen2.5:7b"),

        // External → Ollama: a joined Homebase.
        Scenario(name: "a fresh joined Homebase", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(ageMs: 3 * Fixture.hour)
        }, route: .external, shape: .crossAccount, model: "llama3.1:70b"),
        Scenario(name: "a joined Homebase wins over this device's own endpoint", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(); try h.verifiedEndpoint()
        }, route: .external, shape: .crossAccount, model: "llama3.1:70b"),
        Scenario(name: "a stale joined Homebase lands on-device even with an endpoint", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(ageMs: 25 * Fixture.hour); try h.verifiedEndpoint(); try h.advert(ageMs: 0)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .crossAccount, reason: .staleAdvert)),
        Scenario(name: "a pending invitation never routes", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(state: .pending)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .crossAccount, reason: .notJoined),
           needsConfiguration: true),
        Scenario(name: "a revoked grant never routes", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(state: .revoked)
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .crossAccount, reason: .revoked),
           needsConfiguration: true),
        Scenario(name: "an unknown host never routes", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.otherFriend))
            h.joinedHomebase()
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .crossAccount, reason: .notJoined),
           needsConfiguration: true),
        Scenario(name: "a joined Homebase with no models never routes", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(tags: [])
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .crossAccount, reason: .noModels),
           needsConfiguration: true),
        Scenario(name: "a corrupt host degrades to own and uses the endpoint", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint()
            try h.settingsBackend.set(String(repeating: "zz", count: 32), forKey: AgentSettings.Key.externalHost)
            h.joinedHomebase()
        }, route: .external, shape: .localEndpoint, model: "qwen2.5:7b"),
        Scenario(name: "a short host degrades to own and uses the sibling advert", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
            try h.settingsBackend.set("b2b2", forKey: AgentSettings.Key.externalHost)
        }, route: .external, shape: .sibling, model: "qwen2.5:7b"),

        // Legacy: the stored "openai" radio.
        Scenario(name: "legacy openai radio with a key", setup: { h in
            try h.radio(.legacyOpenAI); try h.addKey("sk-one", .openai)
        }, route: .openai, model: AgentSettings.defaultOpenAIModel),
        Scenario(name: "legacy openai radio without a key", setup: { h in
            try h.radio(.legacyOpenAI); try h.verifiedEndpoint(); try h.select("qwen2.5:7b")
        }, route: .onDevice, model: "floor", fallback: Fallback(from: .openai, reason: .noKey),
           needsConfiguration: true),

        // Legacy: the never-set radio.
        Scenario(name: "never set with nothing stored", setup: { _ in }, route: .onDevice, model: "floor"),
        Scenario(name: "never set: a working Ollama arm wins", setup: { h in
            try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
            try h.settings.setLocalModelPreference("phi3:mini"); try h.addKey("sk-one", .openai)
        }, route: .external, shape: .sibling, model: "qwen2.5:7b"),
        Scenario(name: "never set: then the local-model preference", setup: { h in
            try h.select("qwen2.5:7b"); try h.advert(ageMs: 11 * Fixture.minute)
            try h.settings.setLocalModelPreference("phi3:mini"); try h.addKey("sk-one", .openai)
        }, route: .onDevice, model: "phi3:mini"),
        Scenario(name: "never set: then a stored OpenAI key", setup: { h in
            try h.select("qwen2.5:7b"); try h.advert(ageMs: 11 * Fixture.minute); try h.addKey("sk-one", .openai)
        }, route: .openai, model: AgentSettings.defaultOpenAIModel),
        Scenario(name: "never set: a Claude key alone does not route", setup: { h in
            try h.addKey("sk-ant-one", .anthropic); try h.dropdown(.claude)
        }, route: .onDevice, model: "floor"),
        Scenario(name: "never set on the Homebase ignores the sibling advert", isHomebase: true, setup: { h in
            try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
        }, route: .onDevice, model: "floor"),
    ]

    @Test(arguments: Self.scenarios)
    func resolvesAsTheSeedsSay(_ scenario: Scenario) throws {
        let harness = Harness(isHomebase: scenario.isHomebase)
        try scenario.setup(harness)
        let router = harness.router
        let resolution = router.resolution()
        #expect(router.resolve() == scenario.route)
        #expect(resolution.route == scenario.route)
        #expect(resolution.fallback == scenario.fallback)
        #expect(resolution.needsConfiguration == scenario.needsConfiguration)
        #expect(router.needsConfiguration == scenario.needsConfiguration)
        if let model = scenario.model { #expect(resolution.model == model) }
        let shape: Shape? = switch resolution.shape {
        case .crossAccount?: .crossAccount
        case .localEndpoint?: .localEndpoint
        case .sibling?: .sibling
        case nil: nil
        }
        #expect(shape == scenario.shape)
    }

    /// design.md §R5: less than 10 minutes old is fresh; exactly 10:00 is stale.
    @Test(arguments: [
        (9 * Fixture.minute + 59_000, Route.external),
        (10 * Fixture.minute - 1, Route.external),
        (10 * Fixture.minute, Route.onDevice),
        (10 * Fixture.minute + 1_000, Route.onDevice),
    ])
    func siblingAdvertFreshnessBoundary(ageMs: UInt64, expected: Route) throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: ageMs)
        #expect(harness.router.resolve() == expected)
    }

    /// design.md §R5: a joined Homebase heard from less than 24 h ago is fresh; exactly 24 h is stale.
    @Test(arguments: [
        (23 * Fixture.hour + 59 * Fixture.minute, Route.external),
        (24 * Fixture.hour - 1, Route.external),
        (24 * Fixture.hour, Route.onDevice),
        (24 * Fixture.hour + 1, Route.onDevice),
    ])
    func joinedHomebaseFreshnessBoundary(ageMs: UInt64, expected: Route) throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("llama3.1:70b", host: .joined(Fixture.friend))
        harness.joinedHomebase(ageMs: ageMs)
        #expect(harness.router.resolve() == expected)
    }

    @Test func noteHostAliveRefreshesAStaleJoinedHomebase() throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("llama3.1:70b", host: .joined(Fixture.friend))
        harness.joinedHomebase(ageMs: 30 * Fixture.hour)
        let router = harness.router
        #expect(router.resolve() == .onDevice)
        harness.joined.noteHostAlive(Fixture.friend, atMs: harness.now)
        #expect(router.resolve() == .external)
    }

    @Test func configurationNeverFlipsTheRadio() throws {
        let harness = Harness()
        try harness.radio(.apple)
        let router = harness.router
        #expect(router.resolve() == .onDevice)
        try harness.addKey("sk-proj-one", .openai)
        try harness.addKey("sk-ant-one", .anthropic)
        try harness.dropdown(.claude)
        try harness.select("qwen2.5:7b")
        try harness.verifiedEndpoint()
        try harness.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        _ = try harness.settings.choose(local: ModelChoice(modelID: "qwen2.5:1.5b", vision: false, origin: "x"))
        #expect(harness.settings.modelSource == .apple)
        #expect(router.resolve() == .onDevice)
        #expect(router.resolution().model == "floor")
    }

    @Test func everyCallReReadsTheSettings() throws {
        let harness = Harness()
        let router = harness.router
        try harness.radio(.external)
        try harness.dropdown(.openai)
        #expect(router.resolve() == .onDevice)
        try harness.addKey("sk-proj-one", .openai)
        #expect(router.resolve() == .openai)
        try harness.dropdown(.claude)
        #expect(router.resolve() == .onDevice)
        try harness.addKey("sk-ant-one", .anthropic)
        #expect(router.resolve() == .anthropic)
        try harness.radio(.apple)
        #expect(router.resolve() == .onDevice)
        try harness.radio(.external)
        try harness.dropdown(.ollama)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: 0)
        #expect(router.resolve() == .external)
        harness.clock.advance(ms: 10 * Fixture.minute)
        #expect(router.resolve() == .onDevice)
    }
}
