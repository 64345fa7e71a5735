import HomebaseCore
import Testing
@testable import HomebaseRouter

/// `provider(model:)`: the shapes walked in order, fallbacks at routing time and in call, and races.
@Suite struct LLMRouterProviderTests {
    typealias Made = RecordingProviderFactory.Made

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var isHomebase = false
        var setup: @Sendable (Harness) throws -> Void
        var model: String? = nil
        var built: [Made]
        var answeredBy: ProviderKind
        var fallback: Fallback? = nil
        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(name: "apple → on-device floor", setup: { try $0.radio(.apple) }, built: [],
             answeredBy: .onDevice),
        Case(name: "openai → OpenAI with the configured model", setup: { h in
            try h.radio(.external); try h.dropdown(.openai); try h.addKey("sk-proj-one", .openai)
            try h.settings.setOpenAIModel("gpt-4.1")
        }, built: [.openai(model: "gpt-4.1")], answeredBy: .openai),
        Case(name: "claude → Anthropic, model overridden", setup: { h in
            try h.radio(.external); try h.dropdown(.claude); try h.addKey("sk-ant-one", .anthropic)
        }, model: "claude-haiku-4-5", built: [.anthropic(model: "claude-haiku-4-5")], answeredBy: .anthropic),
        Case(name: "claude without a key → on-device with the reason", setup: { h in
            try h.radio(.external); try h.dropdown(.claude)
        }, built: [], answeredBy: .onDevice, fallback: Fallback(from: .anthropic, reason: .noKey)),
        Case(name: "joined fresh → cross-account", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(); try h.verifiedEndpoint()
        }, built: [.crossAccount(host: Fixture.friend, model: "llama3.1:70b")], answeredBy: .crossAccount),
        Case(name: "joined stale → on-device", setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(ageMs: 24 * Fixture.hour)
        }, built: [], answeredBy: .onDevice, fallback: Fallback(from: .crossAccount, reason: .staleAdvert)),
        Case(name: "verified endpoint → Ollama, model overridden", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint(); try h.advert(ageMs: 0)
        }, model: "llama3.2:3b", built: [.ollama(url: "http://127.0.0.1:11434", model: "llama3.2:3b")],
             answeredBy: .ollama),
        Case(name: "handset with a fresh advert → remote to its own Homebase", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: Fixture.minute)
        }, built: [.sibling(host: Fixture.ownHomebase, model: "qwen2.5:7b")], answeredBy: .sibling),
        Case(name: "the Homebase with a fresh advert and no endpoint → on-device", isHomebase: true, setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
        }, built: [], answeredBy: .onDevice, fallback: Fallback(from: .ollama, reason: .noEndpoint)),
        Case(name: "stale advert → on-device", setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 10 * Fixture.minute + 1_000)
        }, built: [], answeredBy: .onDevice, fallback: Fallback(from: .sibling, reason: .staleAdvert)),
        Case(name: "legacy openai radio with a key → OpenAI", setup: { h in
            try h.radio(.legacyOpenAI); try h.addKey("sk-one", .openai)
        }, built: [.openai(model: AgentSettings.defaultOpenAIModel)], answeredBy: .openai),
        Case(name: "never set with a key → OpenAI", setup: { h in try h.addKey("sk-one", .openai) },
             built: [.openai(model: AgentSettings.defaultOpenAIModel)], answeredBy: .openai),
    ]

    @Test(arguments: Self.cases)
    func walksTheShapesInOrder(_ testCase: Case) async throws {
        let harness = Harness(isHomebase: testCase.isHomebase)
        try testCase.setup(harness)
        let provider = harness.router.provider(model: testCase.model)
        #expect(harness.factory.primaries == testCase.built)
        let result = try await provider.complete(Fixture.request)
        #expect(result.providerKind == testCase.answeredBy)
        #expect(result.fallback == testCase.fallback)
    }

    @Test func theLegacyLocalModelPreferenceBuildsTheDeviceRung() async throws {
        let harness = Harness()
        try harness.settings.setLocalModelPreference("phi3:mini")
        let result = try await harness.router.provider().complete(Fixture.request)
        #expect(result.providerKind == .onDevice)
        #expect(result.model == "phi3:mini")
        #expect(harness.factory.calls.contains(
            .onDevice(DeviceModel(url: LLMRouter.defaultDeviceRuntimeURL, tag: "phi3:mini"))))
    }

    @Test func aRaceWhereTheAdvertExpiresAfterResolveLandsOnDevice() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: 9 * Fixture.minute)
        let router = harness.router
        #expect(router.resolve() == .external)
        harness.clock.advance(ms: Fixture.minute)
        let result = try await router.provider().complete(Fixture.request)
        #expect(harness.factory.primaries.isEmpty)
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .sibling, reason: .staleAdvert))
    }

    /// Inside one `provider(model:)` call: the resolution reads the clock at 9:59.999, the walk at 10:00.
    @Test func aRaceInsideProviderLandsOnDevice() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: 10 * Fixture.minute - 1)
        harness.clock.advanceOnEveryRead(ms: 1)
        let result = try await harness.router.provider().complete(Fixture.request)
        #expect(harness.factory.primaries.isEmpty)
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .sibling, reason: .staleAdvert))
    }

    @Test func aRaceWhereTheGrantIsRevokedAfterResolveLandsOnDevice() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("llama3.1:70b", host: .joined(Fixture.friend))
        harness.joinedHomebase()
        let router = harness.router
        #expect(router.resolve() == .external)
        harness.joinedHomebase(state: .revoked)
        let result = try await router.provider().complete(Fixture.request)
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .crossAccount, reason: .revoked))
    }

    @Test func aKeyRemovedAfterTheProviderWasBuiltFallsBackInCall() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.dropdown(.openai)
        try harness.addKey("sk-proj-one", .openai)
        let provider = harness.router.provider()
        try harness.keys.remove(at: 0, from: .openai)
        let result = try await provider.complete(Fixture.request)
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .openai, reason: .noKey))
    }

    @Test func theKeyIsReadPerRequest() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.dropdown(.openai)
        try harness.addKey("sk-proj-one", .openai)
        try harness.addKey("sk-proj-two", .openai)
        let provider = harness.router.provider()
        _ = try await provider.complete(Fixture.request)
        try harness.keys.move(from: 1, to: 0, in: .openai)
        _ = try await provider.complete(Fixture.request)
        #expect(harness.factory.keysSeen == ["sk-proj-one", "sk-proj-two"])
    }

    @Test(arguments: [FallbackReason.acceptTimeout, .firstOutputTimeout, .stall, .error("not_granted")])
    func anInCallFailureReRunsOnDevice(reason: FallbackReason) async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: 0)
        harness.factory.fail(.sibling, reason)
        let result = try await harness.router.provider().complete(Fixture.request)
        #expect(result.providerKind == .onDevice)
        #expect(result.model == "floor")
        #expect(result.fallback == Fallback(from: .sibling, reason: reason))
    }

    @Test func aFailingDeviceRungStillAnswersFromTheFloor() async throws {
        let harness = Harness()
        try harness.radio(.community)
        try harness.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        let router = harness.router
        let first = try await router.provider().complete(Fixture.request)
        #expect(first.providerKind == .onDevice)
        #expect(first.model == "qwen2.5:0.5b")
        harness.factory.fail(.onDevice, .offline)
        let second = try await router.provider().complete(Fixture.request)
        #expect(second.providerKind == .onDevice)
        #expect(second.model == "floor")
        #expect(second.fallback == Fallback(from: .onDevice, reason: .offline))
    }

    @Test func aStreamThatFailsAfterPartialOutputRestartsThenStreamsTheFallbackWhole() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.advert(ageMs: 0)
        harness.factory.fail(.sibling, .stall)
        var events: [ChatStreamEvent] = []
        for await event in harness.router.provider().stream(Fixture.request) { events.append(event) }
        #expect(Array(events.prefix(3)) == [.text("partial "), .text("answer"), .restart(.stall)])
        guard case .done(let result)? = events.last else {
            Issue.record("no terminal .done: \(events)")
            return
        }
        let afterRestart = events.dropFirst(3).dropLast().compactMap { if case .text(let t) = $0 { t } else { nil } }
        #expect(afterRestart.joined() == result.text)
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .sibling, reason: .stall))
        #expect(!events.contains { if case .failed = $0 { true } else { false } })
    }

    @Test func aStreamFromAHealthyProviderHasNoRestart() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.select("qwen2.5:7b")
        try harness.verifiedEndpoint()
        var events: [ChatStreamEvent] = []
        for await event in harness.router.provider().stream(Fixture.request) { events.append(event) }
        #expect(events == [.text("partial "), .text("answer"),
                           .done(ChatResult(text: "partial answer", providerKind: .ollama, model: "qwen2.5:7b"))])
    }

    @Test func aRoutingTimeFallbackStreamCarriesTheReason() async throws {
        let harness = Harness()
        try harness.radio(.external)
        try harness.dropdown(.claude)
        var last: ChatStreamEvent?
        for await event in harness.router.provider().stream(Fixture.request) { last = event }
        guard case .done(let result)? = last else {
            Issue.record("no terminal .done")
            return
        }
        #expect(result.model == "floor")
        #expect(result.fallback == Fallback(from: .anthropic, reason: .noKey))
    }
}
