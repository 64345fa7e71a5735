import Foundation
import HomebaseCore
import HomebaseTransport
import OllamaEmulatorKit
import Synchronization
import Testing
@testable import HomebaseService

/// An OpenAI-compatible runtime beside Ollama (issue 35): what llama-server, LM Studio and a bare server say,
/// how that becomes the advert (unknowns said, never invented), detection, and test-before-persist.
@Suite(.timeLimit(.minutes(1))) struct OpenAICompatibleRuntimeTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// llama-server's `/v1/models`, recorded from the real server (Fixtures/llama-server/).
    static var llamaModels: [UInt8] { get throws { Self.bytes(try fixture("llama-server/v1-models.json.txt")) } }
    static var llamaProps: [UInt8] { get throws { Self.bytes(try fixture("llama-server/props.json.txt")) } }
    static var llamaSlots: [UInt8] { get throws { Self.bytes(try fixture("llama-server/slots.json.txt")) } }

    // MARK: Decoding

    @Test func llamaServerModelsAreReadFromDataNotFromTheOllamaLikeArray() throws {
        let models = try OpenAICompatibleWire.models(try Self.llamaModels)
        #expect(models.map(\.id) == ["SmolLM2-135M-Instruct.Q4_1.gguf"])
        #expect(models[0].capabilities == ["completion"])
        #expect(models[0].parameterCount ?? 0 > 100_000_000)
        #expect(models[0].quantization == "Q4_1")
        #expect(models[0].contextLength == 2048)
    }

    @Test func propsAndSlotsGiveContextSlotsAndBuild() throws {
        let props = try OpenAICompatibleWire.props(try Self.llamaProps)
        #expect(props.totalSlots == 2 && props.contextLength == 2048 && props.quantization == "Q4_1")
        #expect(props.build?.isEmpty == false)
        let slots = try OpenAICompatibleWire.slots(try Self.llamaSlots)
        #expect(slots.count == 2 && slots.contextLength == 2048)
    }

    @Test func lmStudioModelsGiveLoadedStateContextAndType() throws {
        let body = Self.bytes("""
            {"object":"list","data":[
              {"id":"qwen2-vl-7b-instruct","object":"model","type":"vlm","publisher":"mlx-community","arch":"qwen2_vl",
               "compatibility_type":"mlx","quantization":"4bit","state":"not-loaded","max_context_length":32768},
              {"id":"meta-llama-3.1-8b-instruct","object":"model","type":"llm","arch":"llama","quantization":"Q4_K_M",
               "state":"loaded","max_context_length":131072,"loaded_context_length":4096},
              {"id":"text-embedding-nomic-embed-text-v1.5","type":"embeddings","state":"loaded"}]}
            """)
        let lm = try OpenAICompatibleWire.lmStudioModels(body)
        #expect(lm.map(\.loaded) == [false, true, true])
        #expect(lm.map(\.contextLength) == [32768, 4096, nil])
        let listed = lm.map { OpenAICompatibleWire.ListedModel(id: $0.id, capabilities: nil) }
        let models = OpenAICompatibleSnapshot(listed: listed, lmStudio: lm).models
        #expect(models.map(\.capabilities) == [["completion", "vision"], ["completion"], ["embedding"]])
        #expect(models.map(\.family) == ["qwen2_vl", "llama", ""])
        #expect(models[1].unknown == ["parameter_size"])
        #expect(models[2].unknown == ["family", "parameter_size", "quantization", "context_length"])
    }

    @Test func aBareServerSaysWhatItCannotTell() throws {
        let listed = try OpenAICompatibleWire.models(Self.bytes(#"{"object":"list","data":[{"id":"m1","object":"model"}]}"#))
        let models = OpenAICompatibleSnapshot(listed: listed).models
        #expect(models.count == 1)
        let m = models[0]
        #expect(m.tag == "m1" && m.family == "" && m.parameterSize == "" && m.quantization == "")
        #expect(m.contextLength == nil && m.loaded == false && m.capabilities == ["completion"])
        #expect(m.unknown == ["family", "parameter_size", "quantization", "context_length", "loaded", "capabilities"])
        // The advert carries the list; Ollama's models (unknown nil) encode exactly as before.
        let host = PublicKey(bytes: [UInt8](repeating: 7, count: 32))!
        var status = RuntimeStatus(endpoint: "http://x", verified: true, available: true, version: nil, models: models,
                                   checkedAtMs: 1, kind: .openAICompatible)
        var text = String(decoding: SignedPayloadJSON.encode(AdvertPublisher.payload(host: host, status: status, seq: 1, nowMs: 5)), as: UTF8.self)
        #expect(text.contains(#""runtime":{"kind":"openai-compatible","version":""}"#))
        #expect(text.contains(#""unknown":["family","parameter_size","quantization","context_length","loaded","capabilities"]"#))
        status.kind = .ollama
        status.models[0].unknown = nil
        text = String(decoding: SignedPayloadJSON.encode(AdvertPublisher.payload(host: host, status: status, seq: 1, nowMs: 5)), as: UTF8.self)
        #expect(!text.contains("unknown") && text.contains(#""kind":"ollama""#))
    }

    @Test func llamaServerSnapshotKnowsEverythingButFamily() throws {
        let snapshot = OpenAICompatibleSnapshot(
            listed: try OpenAICompatibleWire.models(try Self.llamaModels),
            props: try OpenAICompatibleWire.props(try Self.llamaProps),
            slots: try OpenAICompatibleWire.slots(try Self.llamaSlots))
        let m = try #require(snapshot.models.first)
        #expect(m.loaded && m.contextLength == 2048 && m.quantization == "Q4_1" && m.parameterSize == "135M")
        #expect(m.unknown == ["family"])
        #expect(snapshot.parallelism == 2 && snapshot.trialModel == m.tag)
        let status = snapshot.status(endpoint: "http://127.0.0.1:1", nowMs: 9)
        #expect(status.knownParallelism == 2 && status.kind == .openAICompatible && status.version == snapshot.version)
    }

    @Test func parameterSizesAreWrittenAsOllamaDoes() {
        #expect(OpenAICompatibleSnapshot.parameterSize(134_515_008) == "135M")
        #expect(OpenAICompatibleSnapshot.parameterSize(7_615_616_512) == "7.6B")
        #expect(OpenAICompatibleSnapshot.parameterSize(8_000_000_000) == "8B")
        #expect(OpenAICompatibleSnapshot.parameterSize(999) == "999")
    }

    @Test(arguments: [
        "", "null", "[]", "{", #"{"data":{}}"#, #"{"data":[{"object":"model"}]}"#, #"{"data":[{"id":""}]}"#,
        #"{"data":[{"id":7}]}"#, String(repeating: "[", count: 10_000),
        #"{"data":[{"id":"\#(String(repeating: "x", count: 600))"}]}"#,
    ])
    func hostileModelListsAreRefused(body: String) {
        #expect(throws: OpenAICompatibleError.self) { try OpenAICompatibleWire.models(Self.bytes(body)) }
    }

    @Test func hostileExtrasAreUnknownNotGuessed() throws {
        // meta of the wrong types, a capabilities array with a non-string, a negative context.
        let body = Self.bytes("""
            {"data":[{"id":"a","meta":{"n_params":"many","n_ctx":-1,"ftype":5}}],
             "models":[{"model":"a","capabilities":["completion",3]}]}
            """)
        let listed = try OpenAICompatibleWire.models(body)
        #expect(listed == [OpenAICompatibleWire.ListedModel(id: "a", parameterCount: nil, trainedContext: nil,
                                                            contextLength: nil, quantization: nil, capabilities: nil)])
        #expect(throws: OpenAICompatibleError.self) { try OpenAICompatibleWire.slots(Self.bytes("[]")) }
        #expect(throws: OpenAICompatibleError.self) { try OpenAICompatibleWire.props(Self.bytes("[1]")) }
        #expect(try OpenAICompatibleWire.props(Self.bytes(#"{"total_slots":0,"n_ctx":"x"}"#)) == .init())
        // LM Studio answers unknown paths with 200 and an error object: that is not a llama-server.
        #expect(throws: OpenAICompatibleError.self) {
            try OpenAICompatibleWire.props(Self.bytes(#"{"error":"Unexpected endpoint or method. (GET /props)"}"#))
        }
        #expect(throws: OpenAICompatibleError.self) { try OpenAICompatibleWire.completionContent(Self.bytes(#"{"choices":[]}"#)) }
    }

    // MARK: Detection

    @Test func detectionTellsOllamaFromLlamaServer() throws {
        let version = (200, Self.bytes(#"{"version":"0.5.1"}"#))
        #expect(RuntimeDetection.classify(version: version, models: nil) == .ollama)
        // llama-server: /api/version is 404, /v1/models has data (and an Ollama-like models array).
        #expect(RuntimeDetection.classify(version: (404, Self.bytes("File Not Found")),
                                          models: (200, try Self.llamaModels)) == .openAICompatible)
        // An Ollama-shaped models array alone is not an OpenAI-compatible list, nor Ollama.
        #expect(RuntimeDetection.classify(version: nil, models: (200, Self.bytes(#"{"models":[{"name":"a"}]}"#))) == nil)
        #expect(RuntimeDetection.classify(version: (200, Self.bytes("{}")), models: (500, [])) == nil)
        #expect(RuntimeDetection.classify(version: nil, models: nil) == nil)
    }

    @Test func liveDetectionAndVerificationOfAFakeLlamaServer() async throws {
        let models = try Self.llamaModels, props = try Self.llamaProps, slots = try Self.llamaSlots
        let log = RequestLog()
        let server = CannedServer { request, writer in
            log.record("\(request.method) \(request.path)")
            switch request.path {
            case "/v1/models": writer.respond(status: 200, body: String(decoding: models, as: UTF8.self))
            case "/props": writer.respond(status: 200, body: String(decoding: props, as: UTF8.self))
            case "/slots": writer.respond(status: 200, body: String(decoding: slots, as: UTF8.self))
            case "/v1/chat/completions":
                writer.respond(status: 200, body: #"{"choices":[{"index":0,"message":{"role":"assistant","content":"OK"}}]}"#)
            default: writer.respond(status: 404, body: "File Not Found")
            }
        }
        defer { server.stop() }
        #expect(await RuntimeDetection.detect(endpoint: server.endpoint, http: HTTPClient()) == .openAICompatible)
        let verifier = OpenAICompatibleVerifier(client: OpenAICompatibleClient(endpoint: server.endpoint + "/v1/", http: HTTPClient()))
        let status = try await verifier.verify()
        #expect(status.verified && status.available && status.endpoint == server.endpoint)
        #expect(status.models.map(\.tag) == ["SmolLM2-135M-Instruct.Q4_1.gguf"] && status.knownParallelism == 2)
        // The trial completion was made: test-before-persist is a real one-token request.
        #expect(log.all.contains("POST /v1/chat/completions"))
        #expect(!log.all.contains("GET /api/v0/models"))
    }

    @Test func anLMStudioLikeServerIsAskedItsOwnModelList() async throws {
        let server = CannedServer { request, writer in
            switch request.path {
            case "/v1/models":
                writer.respond(status: 200, body: #"{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model"}]}"#)
            case "/api/v0/models":
                writer.respond(status: 200, body: #"{"data":[{"id":"qwen2.5-7b-instruct","type":"llm","arch":"qwen2","quantization":"Q4_K_M","state":"loaded","max_context_length":32768,"loaded_context_length":8192}]}"#)
            case "/v1/chat/completions": writer.respond(status: 200, body: #"{"choices":[{"message":{"content":"OK"}}]}"#)
            default: writer.respond(status: 200, body: #"{"error":"Unexpected endpoint or method."}"#)
            }
        }
        defer { server.stop() }
        let status = try await OpenAICompatibleVerifier(client: OpenAICompatibleClient(endpoint: server.endpoint, http: HTTPClient())).verify()
        let m = try #require(status.models.first)
        #expect(m.loaded && m.contextLength == 8192 && m.quantization == "Q4_K_M" && m.family == "qwen2")
        #expect(m.unknown == ["parameter_size"] && status.knownParallelism == nil && status.version == nil)
    }

    @Test func verificationFailsWhenTheTrialFailsOrNothingIsListed() async throws {
        let server = CannedServer { request, writer in
            switch request.path {
            case "/v1/models": writer.respond(status: 200, body: #"{"data":[{"id":"m"}]}"#)
            case "/v1/chat/completions": writer.respond(status: 503, body: #"{"error":{"message":"Loading model"}}"#)
            default: writer.respond(status: 404, body: "")
            }
        }
        defer { server.stop() }
        let verifier = OpenAICompatibleVerifier(client: OpenAICompatibleClient(endpoint: server.endpoint, http: HTTPClient()))
        await #expect(throws: OpenAICompatibleError.trialCompletion(
            model: "m", OpenAICompatibleError.http(status: 503, path: "/v1/chat/completions", message: "Loading model").description)) {
            try await verifier.verify()
        }
        let empty = CannedServer { _, writer in writer.respond(status: 200, body: #"{"object":"list","data":[]}"#) }
        defer { empty.stop() }
        await #expect(throws: OpenAICompatibleError.noModels(empty.endpoint)) {
            try await OpenAICompatibleVerifier(client: OpenAICompatibleClient(endpoint: empty.endpoint, http: HTTPClient())).verify()
        }
    }

    @Test func ollamaIsDetectedAsOllama() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        #expect(await RuntimeDetection.detect(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient()) == .ollama)
    }

    @Test func monitorOfAnOpenAICompatibleRuntimeVerifiesThenProbes() async throws {
        let models = try Self.llamaModels
        let up = Mutex(true)
        let server = CannedServer { request, writer in
            guard up.withLock({ $0 }) else { return writer.respond(status: 503, body: "{}") }
            switch request.path {
            case "/v1/models": writer.respond(status: 200, body: String(decoding: models, as: UTF8.self))
            case "/v1/chat/completions": writer.respond(status: 200, body: #"{"choices":[{"message":{"content":"OK"}}]}"#)
            default: writer.respond(status: 404, body: "")
            }
        }
        defer { server.stop() }
        var configuration = RuntimeMonitor.Configuration()
        configuration.kind = .openAICompatible
        configuration.probeInterval = .milliseconds(50)
        configuration.firstRetryDelay = .milliseconds(50)
        let stored = Mutex<[String]>([])
        let monitor = RuntimeMonitor(endpoint: server.endpoint, verified: false, configuration: configuration,
                                     http: HTTPClient()) { status in stored.withLock { $0.append(status.endpoint ?? "") } }
        let task = Task { await monitor.run() }
        defer { task.cancel() }
        try await eventually("verified") { monitor.current.available }
        #expect(stored.withLock { $0 } == [server.endpoint])
        #expect(monitor.current.kind == .openAICompatible && monitor.current.models.count == 1)
        // Not llama-server here (no /props): nothing about slots is claimed.
        #expect(monitor.current.knownParallelism == nil)
        up.withLock { $0 = false }
        try await eventually("unavailable") { !monitor.current.available }
        #expect(monitor.current.advertisedModels.isEmpty && monitor.current.verified)
    }

    // MARK: Settings

    @Test func settingsKeepTheRuntimeKindAndOlderFilesMeanOllama() throws {
        let old = try JSONDecoder().decode(HomebaseSettings.self, from: Data(#"{"relay_url":"ws://r","ollama_url":"http://o"}"#.utf8))
        #expect(old.runtime == .ollama && old.verifiedRuntimeIdentity == "http://o")
        let edited = try old.applying([.runtime(.openAICompatible, endpoint: "http://127.0.0.1:8080")])
        #expect(edited.runtime == .openAICompatible && edited.ollamaURL == "http://127.0.0.1:8080")
        // Changing only the kind must verify again: the identity differs from the plain URL.
        #expect(edited.verifiedRuntimeIdentity == "openai-compatible http://127.0.0.1:8080")
        let round = try JSONDecoder().decode(HomebaseSettings.self, from: JSONEncoder().encode(edited))
        #expect(round == edited)
        #expect(throws: HomebaseSettings.EditError.self) { try old.applying([.runtime(.openAICompatible, endpoint: "ftp://x")]) }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(HomebaseSettings.self, from: Data(#"{"relay_url":"ws://r","runtime":"vllm-native"}"#.utf8))
        }
    }
}
