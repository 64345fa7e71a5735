import Foundation
import HomebaseTransport
import OllamaEmulatorKit
import Synchronization
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct OllamaManagementClientTests {
    // MARK: Against the emulator

    @Test func readsVersionTagsShowAndPs() async throws {
        var configuration = EmulatorConfiguration()
        configuration.loaded = ["llama3.2:3b"]
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)/", http: HTTPClient())
        #expect(client.endpoint == "http://127.0.0.1:\(port)")

        #expect(try await client.version() == "0.32.6")
        let tags = try await client.tags()
        #expect(tags.map(\.name) == ["qwen2.5:7b", "llama3.2:3b", "nomic-embed-text:latest"])
        let qwen = EmulatedModel(name: "qwen2.5:7b")
        #expect(tags[0] == OllamaInstalledModel(name: "qwen2.5:7b", size: Int64(qwen.size), digest: qwen.digest,
                                                family: "qwen2", parameterSize: "7.6B", quantization: "Q4_K_M",
                                                capabilities: ["completion", "tools"]))
        #expect(try await client.show("qwen2.5:7b")
            == OllamaModelInfo(capabilities: ["completion", "tools"], contextLength: 32768, architecture: "qwen2"))
        #expect(try await client.show("nomic-embed-text")
            == OllamaModelInfo(capabilities: ["embedding"], contextLength: 2048, architecture: "nomic-bert"))
        let loaded = try await client.ps()
        #expect(loaded.map(\.name) == ["llama3.2:3b"])
        #expect(loaded.first?.expiresAt?.hasPrefix("23") == true, "a --loaded model is pinned: far future")
    }

    @Test func showOfAnUnknownModelIsHTTP404WithOllamasMessage() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        await #expect(throws: OllamaError.http(status: 404, message: "model 'nope:1b' not found")) {
            try await client.show("nope:1b")
        }
    }

    @Test func keepAliveLoadsAModelAndTrialCompletesWithOneToken() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        #expect(try await client.ps().isEmpty)
        try await client.keepAlive("llama3.2:3b", duration: "30m")
        #expect(try await client.ps().map(\.name) == ["llama3.2:3b"])
        try await client.trialCompletion("qwen2.5:7b")
        #expect(Set(try await client.ps().map(\.name)) == ["llama3.2:3b", "qwen2.5:7b"])
    }

    @Test func keepAliveAndTrialSendWhatOllamaReads() async throws {
        let bodies = RequestLog()
        let server = CannedServer { request, writer in
            bodies.record(request.method + " " + request.path + " " + String(decoding: request.body, as: UTF8.self))
            let reply = request.path == "/api/chat"
                ? #"{"model":"m","done":true,"done_reason":"load"}"#
                : #"{"choices":[{"index":0,"message":{"role":"assistant","content":"OK"},"finish_reason":"length"}]}"#
            writer.respond(status: 200, body: reply)
        }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        try await client.keepAlive("qwen2.5:7b", duration: "30m")
        #expect(try await client.trialCompletion("qwen2.5:7b") == "OK")
        let sent = bodies.all
        try #require(sent.count == 2)
        func json(_ entry: String) throws -> [String: Any]? {
            let body = entry.split(separator: " ", maxSplits: 2).dropFirst(2).first ?? ""
            return try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        }
        let keepAlive = try json(sent[0])
        #expect(sent[0].hasPrefix("POST /api/chat "))
        #expect(keepAlive?["model"] as? String == "qwen2.5:7b")
        #expect((keepAlive?["messages"] as? [Any])?.isEmpty == true, "empty messages load without generating")
        #expect(keepAlive?["keep_alive"] as? String == "30m")
        let trial = try json(sent[1])
        #expect(sent[1].hasPrefix("POST /v1/chat/completions "))
        #expect(trial?["max_tokens"] as? Int == 1, "Ollama reads max_tokens")
        #expect(trial?["max_completion_tokens"] == nil, "Ollama ignores max_completion_tokens")
        #expect(trial?["stream"] as? Bool == false)
        #expect((trial?["messages"] as? [[String: Any]])?.first?["role"] as? String == "user")
    }

    @Test func trialCompletionWithAnEmbeddingModelIsAnHTTPError() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        await #expect(throws: OllamaError.http(status: 400,
                                               message: "\"nomic-embed-text:latest\" does not support chat")) {
            try await client.trialCompletion("nomic-embed-text:latest")
        }
    }

    @Test func closedPortIsUnreachableWithAnActionableMessage() async throws {
        let port = try closedPort()
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        let error = await #expect(throws: OllamaError.self) { try await client.version() }
        #expect(error == .unreachable("http://127.0.0.1:\(port) (connection refused)"))
        #expect(error?.description == "Ollama is not running at http://127.0.0.1:\(port) (connection refused) — "
            + "start it with `ollama serve`")
    }

    @Test func silentServerTimesOut() async throws {
        let server = CannedServer { _, writer in
            _ = writer.waitForDisconnect(timeoutMs: 5_000)
        }
        defer { server.stop() }
        var configuration = OllamaManagementClient.Configuration()
        configuration.requestTimeout = .milliseconds(200)
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient(), configuration: configuration)
        await #expect(throws: OllamaError.timedOut("\(server.endpoint) did not answer /api/tags within 0.2 s")) {
            try await client.tags()
        }
    }

    // MARK: Error bodies

    @Test(arguments: [
        (404, #"{"error":"model 'foo' not found"}"#, "model 'foo' not found"),
        (404, #"{"error":{"message":"model 'foo' not found","type":"not_found_error","param":null,"code":null}}"#,
         "model 'foo' not found"),
        (503, #"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#,
         "server busy, please try again.  maximum pending requests exceeded"),
        (404, "404 page not found", "404 page not found"),
        (502, "<html>\r\n<body>Bad Gateway</body>\u{1B}[2J</html>", "<html>  <body>Bad Gateway</body> [2J</html>"),
        (500, "", "no error message (HTTP 500)"),
        (500, #"{"error":5}"#, #"{"error":5}"#),
    ] as [(Int, String, String)])
    func errorStatusCarriesTheBodysMessage(status: Int, body: String, message: String) async throws {
        let server = CannedServer { _, writer in writer.respond(status: status, body: body) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        await #expect(throws: OllamaError.http(status: status, message: message)) { try await client.version() }
    }

    @Test func longErrorBodyIsCutTo200Characters() async throws {
        let long = String(repeating: "x", count: 5_000)
        let server = CannedServer { _, writer in writer.respond(status: 500, body: long) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        await #expect(throws: OllamaError.http(status: 500, message: String(repeating: "x", count: 200))) {
            try await client.ps()
        }
    }

    // MARK: Hostile and odd bodies

    enum Call: String, Sendable, CustomTestStringConvertible {
        case version, tags, show, ps, trial, keepAlive
        var testDescription: String { self.rawValue }

        func run(_ client: OllamaManagementClient) async throws {
            switch self {
            case .version: _ = try await client.version()
            case .tags: _ = try await client.tags()
            case .show: _ = try await client.show("m")
            case .ps: _ = try await client.ps()
            case .trial: try await client.trialCompletion("m")
            case .keepAlive: try await client.keepAlive("m", duration: "30m")
            }
        }
    }

    static let deepNesting = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)

    @Test(arguments: [
        (Call.version, #"{"version":"0.5"#, "/api/version answered with a body that is not valid JSON"),
        (.version, #"{"version":5}"#, "/api/version answered with a value of the wrong type at `version`"),
        (.version, "{}", "/api/version answered with no `version` field"),
        (.version, "Ollama is running", "/api/version answered with a body that is not valid JSON"),
        (.version, "", "/api/version answered with a body that is not valid JSON"),
        (.version, deepNesting, "/api/version answered with a body that is not valid JSON"),
        (.version, "[1,2]", "/api/version answered with a value of the wrong type at the body"),
        (.tags, #"{"models":"many"}"#, "/api/tags answered with a value of the wrong type at `models`"),
        (.tags, #"{"models":[{"name":7}]}"#, "/api/tags answered with a value of the wrong type at `models[0].name`"),
        (.tags, #"{"models":[{"size":1}]}"#, "/api/tags listed a model without a name"),
        (.tags, #"{"models":[{"name":"a","size":1e400}]}"#, "/api/tags answered with a body that is not valid JSON"),
        (.tags, #"{"models":[{"name":"a","details":{"family":["x"]}}]}"#,
         "/api/tags answered with a value of the wrong type at `models[0].details.family`"),
        (.show, #"{"capabilities":"completion"}"#,
         "/api/show answered with a value of the wrong type at `capabilities`"),
        (.show, #"{"model_info":{"general.architecture":"llama","llama.context_length":"big"}}"#,
         "/api/show answered with a value of the wrong type at `model_info.llama.context_length`"),
        (.show, #"{"model_info":{"general.architecture":7}}"#,
         "/api/show answered with a value of the wrong type at `model_info.general.architecture`"),
        (.ps, #"{"models":[{"name":null,"model":null}]}"#, "/api/ps listed a model without a name"),
        (.ps, #"{"models":[{"name":"a","expires_at":1}]}"#,
         "/api/ps answered with a value of the wrong type at `models[0].expires_at`"),
        (.trial, #"{"choices":[]}"#, "/v1/chat/completions answered without choices[0].message"),
        (.trial, #"{"object":"chat.completion"}"#, "/v1/chat/completions answered without choices[0].message"),
        (.trial, #"{"choices":[{"message":{"content":["a"]}}]}"#,
         "/v1/chat/completions answered with a value of the wrong type at `choices[0].message.content`"),
        (.keepAlive, "[]", "/api/chat answered with a value of the wrong type at the body"),
    ] as [(Call, String, String)])
    func malformedBodyIsMalformedNeverACrash(call: Call, body: String, problem: String) async throws {
        let server = CannedServer { _, writer in writer.respond(status: 200, body: body) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        await #expect(throws: OllamaError.malformed(problem)) { try await call.run(client) }
    }

    @Test func hugeBodyIsMalformedNotBuffered() async throws {
        let huge = #"{"models":["# + String(repeating: #"{"name":"a"},"#, count: 20_000) + "]}"
        let server = CannedServer { _, writer in writer.respond(status: 200, body: huge) }
        defer { server.stop() }
        var configuration = OllamaManagementClient.Configuration()
        configuration.maxResponseBytes = 64 * 1024
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient(), configuration: configuration)
        await #expect(throws: OllamaError.malformed("/api/tags answered with more than 64 KiB")) {
            try await client.tags()
        }
    }

    @Test(arguments: [
        // Old servers: no capabilities field; inferred from the name, family or architecture.
        (#"{"details":{"family":"llama"},"model_info":{}}"#,
         OllamaModelInfo(capabilities: ["completion"], contextLength: nil, architecture: nil)),
        (#"{"details":{"family":"nomic-bert"}}"#,
         OllamaModelInfo(capabilities: ["embedding"], contextLength: nil, architecture: nil)),
        ("{}", OllamaModelInfo(capabilities: ["completion"], contextLength: nil, architecture: nil)),
        // The architecture names the key; a plain `context_length` is not it.
        (#"{"capabilities":["completion"],"model_info":{"general.architecture":"gemma3","context_length":9,"#
            + #""gemma3.context_length":131072}}"#,
         OllamaModelInfo(capabilities: ["completion"], contextLength: 131072, architecture: "gemma3")),
        (#"{"capabilities":[],"model_info":{"general.architecture":"llama"}}"#,
         OllamaModelInfo(capabilities: [], contextLength: nil, architecture: "llama")),
        (#"{"capabilities":["completion"],"model_info":{"general.architecture":"llama","llama.context_length":0}}"#,
         OllamaModelInfo(capabilities: ["completion"], contextLength: nil, architecture: "llama")),
        (#"{"capabilities":["completion","vision"],"model_info":{"general.architecture":"","context_length":5}}"#,
         OllamaModelInfo(capabilities: ["completion", "vision"], contextLength: nil, architecture: "")),
    ] as [(String, OllamaModelInfo)])
    func showToleratesAbsentFields(body: String, expected: OllamaModelInfo) async throws {
        let server = CannedServer { _, writer in writer.respond(status: 200, body: body) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        #expect(try await client.show("some-model") == expected)
    }

    @Test func tagsAcceptsNullModelsAndMissingDetails() async throws {
        let server = CannedServer { request, writer in
            let body = request.path == "/api/tags" ? #"{"models":null}"# : #"{"models":[{"model":"a:1b"}]}"#
            writer.respond(status: 200, body: body)
        }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        #expect(try await client.tags().isEmpty)
        #expect(try await client.ps() == [OllamaLoadedModel(name: "a:1b", expiresAt: nil)])
    }

    @Test func tagsReadsTheRecordedShape() async throws {
        let body = try fixture("ollama/api-tags.json.txt")
        let server = CannedServer { _, writer in writer.respond(status: 200, body: body) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        #expect(try await client.tags() == [OllamaInstalledModel(
            name: "llama3.2:latest", size: 2019393189,
            digest: "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72", family: "llama",
            parameterSize: "3.2B", quantization: "Q4_K_M")])
    }
}

// MARK: Support shared by the Ollama tests

/// A SimpleHTTPServer on 127.0.0.1 port 0 answering every request with `handler`.
final class CannedServer: Sendable {
    let server: SimpleHTTPServer
    let port: UInt16

    init(_ handler: @escaping SimpleHTTPServer.Handler) {
        self.server = SimpleHTTPServer(handler: handler)
        // Port 0 on loopback cannot fail to bind short of fd exhaustion, which no test can recover from.
        self.port = try! self.server.start(port: 0)
    }

    var endpoint: String { "http://127.0.0.1:\(self.port)" }

    func stop() { self.server.stop() }
}

/// What a canned server received.
final class RequestLog: Sendable {
    private let entries = Mutex<[String]>([])
    var all: [String] { self.entries.withLock { $0 } }
    func record(_ entry: String) { self.entries.withLock { $0.append(entry) } }
}

/// The text of `Fixtures/<path>`, found from this file's location.
func fixture(_ path: String, filePath: String = #filePath) throws -> String {
    let root = filePath.split(separator: "/").dropLast(3).joined(separator: "/")
    return try String(contentsOfFile: "/" + root + "/Fixtures/" + path, encoding: .utf8)
}
