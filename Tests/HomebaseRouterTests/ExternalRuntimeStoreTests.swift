import Synchronization
import Testing
@testable import HomebaseRouter

/// A verifier whose probes pass or fail as told, recording what was asked.
final class FakeRuntimeVerifier: RuntimeVerifier {
    let failAt: VerificationStep?
    let models: [RuntimeModel]
    let trials = Mutex<[String]>([])

    init(failAt: VerificationStep? = nil, models: [RuntimeModel]) {
        self.failAt = failAt
        self.models = models
    }

    func version(at url: String) async throws(RuntimeProbeError) -> String {
        if self.failAt == .version { throw RuntimeProbeError("connection refused") }
        return "0.5.1"
    }

    func models(at url: String) async throws(RuntimeProbeError) -> [RuntimeModel] {
        if self.failAt == .models { throw RuntimeProbeError("bad json") }
        return self.models
    }

    func trialCompletion(at url: String, model: String) async throws(RuntimeProbeError) {
        self.trials.withLock { $0.append(model) }
        if self.failAt == .trial { throw RuntimeProbeError("http 500") }
    }
}

@Suite struct ExternalRuntimeStoreTests {
    let backend = InMemorySettingsBackend()
    var store: ExternalRuntimeStore { ExternalRuntimeStore(backend: self.backend) }
    static let url = "http://127.0.0.1:11434"
    static let models = [RuntimeModel(tag: "nomic-embed-text", capabilities: ["embedding"]),
                         RuntimeModel(tag: "qwen2.5:7b", capabilities: ["completion", "tools"]),
                         RuntimeModel(tag: "llama3.2:3b", capabilities: ["completion"])]

    @Test func allProbesPassingPersistsTheEndpoint() async {
        let verifier = FakeRuntimeVerifier(models: Self.models)
        let outcome = await self.store.verifyAndRecord(url: " \(Self.url) ", verifier: verifier,
                                                       preferredModel: "llama3.2:3b", nowMs: 42)
        let expected = VerifiedEndpoint(url: Self.url, verifiedAtMs: 42, version: "0.5.1", models: Self.models)
        #expect(outcome == .verified(expected))
        #expect(self.store.configured == expected)
        #expect(self.store.hasVerifiedEndpoint)
        #expect(self.store.availability == RuntimeAvailability(url: Self.url, available: true, checkedAtMs: 42))
        #expect(verifier.trials.withLock { $0 } == ["llama3.2:3b"])
    }

    @Test func theTrialSkipsNonCompletionModels() async {
        let verifier = FakeRuntimeVerifier(models: Self.models)
        _ = await self.store.verifyAndRecord(url: Self.url, verifier: verifier, preferredModel: "nomic-embed-text",
                                             nowMs: 1)
        #expect(verifier.trials.withLock { $0 } == ["qwen2.5:7b"])
    }

    @Test func noCompletionModelMeansNoTrialAndStillPersists() async {
        let verifier = FakeRuntimeVerifier(failAt: .trial, models: [Self.models[0]])
        let outcome = await self.store.verifyAndRecord(url: Self.url, verifier: verifier, nowMs: 1)
        #expect(verifier.trials.withLock { $0 }.isEmpty)
        #expect(self.store.hasVerifiedEndpoint)
        guard case .verified = outcome else {
            Issue.record("expected verified, got \(outcome)")
            return
        }
    }

    @Test(arguments: [VerificationStep.version, .models, .trial])
    func anyFailingProbePersistsNothing(step: VerificationStep) async {
        let outcome = await self.store.verifyAndRecord(
            url: Self.url, verifier: FakeRuntimeVerifier(failAt: step, models: Self.models), nowMs: 1)
        guard case .failed(let failedStep, _) = outcome else {
            Issue.record("expected failure, got \(outcome)")
            return
        }
        #expect(failedStep == step)
        #expect(!self.store.hasVerifiedEndpoint)
        #expect(self.backend.snapshot.isEmpty)
    }

    @Test(arguments: [VerificationStep.version, .models, .trial])
    func aLaterFailureMarksUnavailableButNeverForgets(step: VerificationStep) async {
        _ = await self.store.verifyAndRecord(url: Self.url, verifier: FakeRuntimeVerifier(models: Self.models), nowMs: 1)
        let configured = self.store.configured
        _ = await self.store.verifyAndRecord(
            url: Self.url, verifier: FakeRuntimeVerifier(failAt: step, models: Self.models), nowMs: 2)
        #expect(self.store.configured == configured)
        #expect(self.store.availability?.available == false)
        #expect(self.store.availability?.checkedAtMs == 2)
        #expect(self.store.availability?.reason?.hasPrefix(step.rawValue) == true)
    }

    @Test func aFailedProbeOfAnotherURLChangesNothing() async {
        _ = await self.store.verifyAndRecord(url: Self.url, verifier: FakeRuntimeVerifier(models: Self.models), nowMs: 1)
        let before = self.backend.snapshot
        _ = await self.store.verifyAndRecord(url: "http://10.0.0.2:11434",
                                             verifier: FakeRuntimeVerifier(failAt: .version, models: []), nowMs: 2)
        #expect(self.backend.snapshot == before)
    }

    @Test func probeRecordsAvailabilityOnly() async {
        #expect(await !self.store.probe(verifier: FakeRuntimeVerifier(models: []), nowMs: 1))
        _ = await self.store.verifyAndRecord(url: Self.url, verifier: FakeRuntimeVerifier(models: Self.models), nowMs: 1)
        #expect(await !self.store.probe(verifier: FakeRuntimeVerifier(failAt: .version, models: []), nowMs: 5))
        #expect(self.store.hasVerifiedEndpoint)
        #expect(self.store.availability?.available == false)
        #expect(await self.store.probe(verifier: FakeRuntimeVerifier(models: []), nowMs: 6))
        #expect(self.store.availability == RuntimeAvailability(url: Self.url, available: true, checkedAtMs: 6))
    }

    @Test func forgetRemovesBothFacts() async throws {
        _ = await self.store.verifyAndRecord(url: Self.url, verifier: FakeRuntimeVerifier(models: Self.models), nowMs: 1)
        try self.store.forget()
        #expect(!self.store.hasVerifiedEndpoint)
        #expect(self.store.availability == nil)
    }

    @Test func aCorruptStoredEndpointIsNotVerified() throws {
        try self.backend.set("{\"url\": 3}", forKey: ExternalRuntimeStore.Key.endpoint)
        #expect(!self.store.hasVerifiedEndpoint)
    }
}
