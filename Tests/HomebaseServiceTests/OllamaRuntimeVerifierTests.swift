import HomebaseTransport
import OllamaEmulatorKit
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct RuntimeVerifierTests {
    static func verifier() -> OllamaRuntimeVerifier {
        OllamaRuntimeVerifier(http: HTTPClient(), clock: ServiceClock(nowMs: { 1_234 }))
    }

    static func emulator(_ configure: (inout EmulatorConfiguration) -> Void = { _ in }) throws
        -> (OllamaEmulator, String)
    {
        var configuration = EmulatorConfiguration()
        configure(&configuration)
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        return (emulator, "http://127.0.0.1:\(port)")
    }

    @Test func verificationPassesWithModelsAndATrialOnTheSmallestChatModel() async throws {
        let (emulator, endpoint) = try Self.emulator()
        defer { emulator.stop() }
        let status = try await Self.verifier().verify(endpoint: endpoint + "/")
        #expect(status.endpoint == endpoint && status.verified && status.available)
        #expect(status.version == "0.32.6" && status.checkedAtMs == 1_234 && status.lastError == nil)
        #expect(status.models.map(\.tag) == ["qwen2.5:7b", "llama3.2:3b", "nomic-embed-text:latest"])
        // Issue 34: the context served, not the trained one: llama3.2:3b is loaded (the trial), and /api/ps says
        // 4096; the others are unloaded: their trained length capped at Ollama's default 4096, labelled a default.
        #expect(status.models.map(\.trainedContextLength) == [32768, 131072, 2048])
        #expect(status.models.map(\.contextLength) == [4096, 4096, 2048])
        #expect(status.models.map(\.contextServed) == [false, true, false])
        #expect(status.models.map(\.canComplete) == [true, true, false])
        // llama3.2:3b is smaller on disk than qwen2.5:7b: the quickest cold load. The trial loaded it.
        #expect(status.models.filter(\.loaded).map(\.tag) == ["llama3.2:3b"])
        #expect(status.advertisedModels == status.models)
    }

    /// Issue 34: a cloud stub (a few hundred bytes, the "smallest" model) beside a local one, offline: the stub is
    /// not the trial model, its failing `show` does not fail the probe, the local model is advertised and the stub
    /// is listed as cloud and not advertised.
    @Test(arguments: [EmulatorConfiguration.CloudMode.offline, .disabled, .online])
    func aCloudStubNeverFailsVerificationAndIsNotAdvertised(_ cloud: EmulatorConfiguration.CloudMode) async throws {
        let (emulator, endpoint) = try Self.emulator {
            $0.models = ["gpt-oss:120b-cloud", "llama3.2:3b"]
            $0.cloud = cloud
        }
        defer { emulator.stop() }
        let status = try await Self.verifier().verify(endpoint: endpoint)
        #expect(status.verified && status.available)
        #expect(status.models.map(\.tag) == ["gpt-oss:120b-cloud", "llama3.2:3b"])
        #expect(status.models.map(\.cloud) == [true, false])
        // The trial ran on the local model.
        #expect(status.models.filter(\.loaded).map(\.tag) == ["llama3.2:3b"])
        #expect(status.advertisedModels.map(\.tag) == ["llama3.2:3b"])
        var shared = status
        shared.sharedCloudModels = ["gpt-oss:120b-cloud"]
        #expect(shared.advertisedModels.map(\.tag) == ["gpt-oss:120b-cloud", "llama3.2:3b"])
        // The inference server's one-model lookup says the same as the list, for each state.
        var down = shared
        down.available = false
        for s in [status, shared, down] {
            for tag in ["gpt-oss:120b-cloud", "llama3.2:3b", "qwen2.5:7b"] {
                #expect(s.advertised(tag) == s.advertisedModels.first { $0.tag == tag }, "\(tag)")
            }
        }
        #expect(shared.advertised("gpt-oss:120b-cloud")?.tag == "gpt-oss:120b-cloud" && status.advertised("gpt-oss:120b-cloud") == nil)
    }

    @Test func trialPrefersAModelAlreadyLoaded() async throws {
        let (emulator, endpoint) = try Self.emulator { $0.loaded = ["qwen2.5:7b"] }
        defer { emulator.stop() }
        let status = try await Self.verifier().verify(endpoint: endpoint)
        #expect(status.models.filter(\.loaded).map(\.tag) == ["qwen2.5:7b"])
    }

    @Test func embeddingOnlyRuntimePassesWithoutATrial() async throws {
        let (emulator, endpoint) = try Self.emulator { $0.models = ["nomic-embed-text:latest"] }
        defer { emulator.stop() }
        let status = try await Self.verifier().verify(endpoint: endpoint)
        #expect(status.verified && status.models.map(\.tag) == ["nomic-embed-text:latest"])
        #expect(status.models.allSatisfy { !$0.canComplete && !$0.loaded })
        // A trial would have failed ("does not support chat"), and would have loaded it: neither happened.
        let client = OllamaManagementClient(endpoint: endpoint, http: HTTPClient())
        #expect(try await client.ps().isEmpty)
    }

    @Test func runtimeWithNoModelsPasses() async throws {
        let (emulator, endpoint) = try Self.emulator { $0.models = [] }
        defer { emulator.stop() }
        let status = try await Self.verifier().verify(endpoint: endpoint)
        #expect(status.verified && status.available && status.models.isEmpty)
    }

    @Test func runtimeThatIsDownFails() async throws {
        let port = try closedPort()
        await #expect(throws: RuntimeVerificationError.probe(
            .unreachable("http://127.0.0.1:\(port) (connection refused)"))) {
            try await Self.verifier().verify(endpoint: "http://127.0.0.1:\(port)")
        }
    }

    @Test func runtimeThatCannotCompleteFails() async throws {
        let (emulator, endpoint) = try Self.emulator { $0.fault.http500 = true }
        defer { emulator.stop() }
        let error = await #expect(throws: RuntimeVerificationError.self) {
            try await Self.verifier().verify(endpoint: endpoint)
        }
        #expect(error == .trialCompletion(model: "llama3.2:3b", .http(
            status: 500, message: "llama runner process has terminated: exit status 2")))
        #expect(error?.description == "Ollama lists 'llama3.2:3b' but a trial completion with it failed: "
            + "Ollama answered HTTP 500: llama runner process has terminated: exit status 2")
    }

    @Test func somethingElseOnThePortFails() async throws {
        // A web server that is not Ollama: 404 for every /api path.
        let server = CannedServer { _, writer in writer.respond(status: 404, body: "<h1>Not Found</h1>") }
        defer { server.stop() }
        await #expect(throws: RuntimeVerificationError.probe(.http(status: 404, message: "<h1>Not Found</h1>"))) {
            try await Self.verifier().verify(endpoint: server.endpoint)
        }
    }

    @Test(arguments: ["", "127.0.0.1:11434", "ftp://127.0.0.1:11434", "http://", "http:///api", "http://a b"])
    func nonHTTPEndpointIsRefusedBeforeAnyRequest(endpoint: String) async throws {
        await #expect(throws: RuntimeVerificationError.invalidEndpoint(endpoint)) {
            try await Self.verifier().verify(endpoint: endpoint)
        }
    }
}
