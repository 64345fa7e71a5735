import HomebaseCore
import HomebaseTransport
import OllamaEmulatorKit
import Testing

@testable import HomebaseRouter

/// Test-before-persist over HTTP against the Ollama emulator (design.md §R4).
@Suite(.timeLimit(.minutes(1))) struct HTTPRuntimeVerifierTests {
    let http = HTTPClient()

    func emulator(fault: EmulatorFault = EmulatorFault(), models: [String]? = nil) throws -> (OllamaEmulator, String) {
        var configuration = EmulatorConfiguration()
        configuration.tokensPerSecond = 5_000
        configuration.fault = fault
        configuration.version = "0.32.6"
        if let models { configuration.models = models }
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        return (emulator, "http://127.0.0.1:\(port)")
    }

    @Test func verifiesAndRecordsAWorkingRuntime() async throws {
        let (emulator, url) = try self.emulator()
        defer { emulator.stop() }
        let verifier = HTTPRuntimeVerifier(http: self.http)
        #expect(try await verifier.version(at: url) == "0.32.6")
        let models = try await verifier.models(at: url + "/")
        #expect(models.map(\.tag).contains("llama3.2:3b"))
        #expect(models.first { $0.tag == "llama3.2:3b" }?.capabilities.contains("completion") == true)
        #expect(models.first { $0.tag.hasPrefix("nomic-embed-text") }?.isCompletionCapable == false)

        let store = ExternalRuntimeStore(backend: InMemorySettingsBackend())
        let outcome = await store.verifyAndRecord(url: url, verifier: verifier, preferredModel: "llama3.2:3b", nowMs: 5)
        guard case .verified(let endpoint) = outcome else {
            Issue.record("not verified: \(outcome)")
            return
        }
        #expect(endpoint.version == "0.32.6")
        #expect(store.configured == endpoint)
    }

    /// Issue 34: `handset config endpoint verify` with a cloud stub as the newest model, offline: the trial goes
    /// to the local model and the endpoint verifies.
    @Test func aCloudStubIsNeverTheTrialModel() async throws {
        let (emulator, url) = try self.emulator(models: ["gpt-oss:120b-cloud", "llama3.2:3b"])
        defer { emulator.stop() }
        let verifier = HTTPRuntimeVerifier(http: self.http)
        let models = try await verifier.models(at: url)
        #expect(models.map(\.cloud) == [true, false])
        let store = ExternalRuntimeStore(backend: InMemorySettingsBackend())
        let outcome = await store.verifyAndRecord(url: url, verifier: verifier, nowMs: 5)
        guard case .verified = outcome else {
            Issue.record("not verified: \(outcome)")
            return
        }
    }

    @Test func trialUsesOneTokenOnV1() async throws {
        let (emulator, url) = try self.emulator()
        defer { emulator.stop() }
        try await HTTPRuntimeVerifier(http: self.http).trialCompletion(at: url, model: "llama3.2:3b")
    }

    @Test func failsAtVersionWhenDown() async throws {
        let (emulator, url) = try self.emulator()
        emulator.stop()
        let store = ExternalRuntimeStore(backend: InMemorySettingsBackend())
        let outcome = await store.verifyAndRecord(url: url, verifier: HTTPRuntimeVerifier(http: self.http), nowMs: 1)
        guard case .failed(let step, let detail) = outcome else {
            Issue.record("verified a dead runtime")
            return
        }
        #expect(step == .version)
        #expect(detail.hasPrefix("unreachable"))
        #expect(store.configured == nil)
    }

    @Test func failsAtTrialWhenCompletionAnswers500() async throws {
        var fault = EmulatorFault()
        fault.http500 = true
        let (emulator, url) = try self.emulator(fault: fault)
        defer { emulator.stop() }
        let store = ExternalRuntimeStore(backend: InMemorySettingsBackend())
        let outcome = await store.verifyAndRecord(url: url, verifier: HTTPRuntimeVerifier(http: self.http), nowMs: 1)
        guard case .failed(let step, let detail) = outcome else {
            Issue.record("verified a failing runtime")
            return
        }
        #expect(step == .trial)
        #expect(detail.contains("HTTP 500"))
        #expect(store.configured == nil)
    }

    @Test func noModelsSkipsTheTrial() async throws {
        let (emulator, url) = try self.emulator(models: [])
        defer { emulator.stop() }
        let store = ExternalRuntimeStore(backend: InMemorySettingsBackend())
        let outcome = await store.verifyAndRecord(url: url, verifier: HTTPRuntimeVerifier(http: self.http), nowMs: 1)
        guard case .verified(let endpoint) = outcome else {
            Issue.record("not verified: \(outcome)")
            return
        }
        #expect(endpoint.models.isEmpty)
    }

    @Test func nonOllamaServerFailsWithAClearStep() async throws {
        // The OpenAI-only root has no /api/version: 404, reported at the version step.
        let (emulator, url) = try self.emulator()
        defer { emulator.stop() }
        do throws(RuntimeProbeError) {
            _ = try await HTTPRuntimeVerifier(http: self.http).version(at: url + "/nothing-here")
            Issue.record("expected a failure")
        } catch {
            #expect(error.detail.contains("HTTP 404"))
        }
    }
}
