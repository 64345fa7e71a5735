import Foundation
import Testing
@testable import OllamaEmulatorKit

/// Starts the emulator on port 0 and checks every endpoint against reference/model-apis.md §1–3.
@Suite(.timeLimit(.minutes(1))) struct OllamaEmulatorTests {
    static let fixedNow = Date(timeIntervalSince1970: 1_722_000_000)

    private func withEmulator(
        _ adjust: (inout EmulatorConfiguration) -> Void = { _ in },
        _ body: (RawHTTPClient) throws -> Void
    ) throws {
        var config = EmulatorConfiguration()
        config.host = "127.0.0.1"
        config.tokensPerSecond = 100_000
        config.pullProgressIntervalMs = 0
        config.now = { Self.fixedNow }
        adjust(&config)
        let emulator = OllamaEmulator(configuration: config)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        try body(RawHTTPClient(port: port))
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    private let chat = #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"hi"}]"#

    @Test func livenessAndVersion() throws {
        try self.withEmulator({ $0.version = "0.5.1" }) { (client: RawHTTPClient) throws in
            let root = try client.send("GET", "/")
            #expect(root.head.status == 200)
            #expect(root.text == "Ollama is running")
            let head = try client.send("HEAD", "/")
            #expect(head.head.contentLength == 17)
            #expect(head.body.isEmpty)
            let version = try client.send("GET", "/api/version")
            #expect(version.text == #"{"version":"0.5.1"}"#)
            #expect(version.head.header("Content-Type") == "application/json; charset=utf-8")
            #expect(try client.send("GET", "/nope").head.status == 404)
        }
    }

    @Test func tagsListInstalledModelsWithDetails() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let tags = try self.json(try client.send("GET", "/api/tags").text)
            let models = try #require(tags["models"] as? [[String: Any]])
            #expect(models.map { $0["name"] as? String } == ["qwen2.5:7b", "llama3.2:3b", "nomic-embed-text:latest"])
            let first = models[0]
            #expect(first["model"] as? String == "qwen2.5:7b")
            let digest = try #require(first["digest"] as? String)
            #expect(digest.count == 64 && digest.allSatisfy(\.isHexDigit))
            #expect(first["size"] is Int)
            let details = try #require(first["details"] as? [String: Any])
            #expect(details["parameter_size"] as? String == "7.6B")
            #expect(details["quantization_level"] as? String == "Q4_K_M")
            #expect(details["family"] as? String == "qwen2")
        }
        try self.withEmulator({ $0.models = [] }) { (client: RawHTTPClient) throws in
            #expect(try client.send("GET", "/api/tags").text == #"{"models":[]}"#)
            #expect(try client.send("GET", "/v1/models").text == #"{"object":"list","data":null}"#)
        }
    }

    @Test func showGivesArchitectureContextLengthAndCapabilities() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let show = try self.json(try client.send("POST", "/api/show", body: #"{"model":"qwen2.5:7b"}"#).text)
            let info = try #require(show["model_info"] as? [String: Any])
            #expect(info["general.architecture"] as? String == "qwen2")
            #expect(info["qwen2.context_length"] as? Int == 32768)
            #expect(show["capabilities"] as? [String] == ["completion", "tools"])
            let embed = try self.json(
                try client.send("POST", "/api/show", body: #"{"name":"nomic-embed-text"}"#).text)
            #expect(embed["capabilities"] as? [String] == ["embedding"])
            let missing = try client.send("POST", "/api/show", body: #"{"model":"foo"}"#)
            #expect(missing.head.status == 404)
            #expect(missing.text == #"{"error":"model 'foo:latest' not found"}"#)
        }
    }

    @Test func psShowsModelsAfterUseAndPinsNegativeKeepAlive() throws {
        try self.withEmulator({ $0.loaded = ["llama3.2:3b"] }) { (client: RawHTTPClient) throws in
            var ps = try self.json(try client.send("GET", "/api/ps").text)
            #expect((ps["models"] as? [[String: Any]])?.map { $0["name"] as? String } == ["llama3.2:3b"])
            _ = try client.send("POST", "/api/chat", body: self.chat + #","stream":false,"keep_alive":"10m"}"#)
            ps = try self.json(try client.send("GET", "/api/ps").text)
            let models = try #require(ps["models"] as? [[String: Any]])
            // Pinned first (latest expiry), then qwen expiring 10 minutes after the fixed clock.
            #expect(models.map { $0["name"] as? String } == ["llama3.2:3b", "qwen2.5:7b"])
            #expect(models[1]["expires_at"] as? String == "2024-07-26T13:30:00Z")
            #expect(models[1]["size_vram"] is Int)
            _ = try client.send("POST", "/api/chat", body: #"{"model":"qwen2.5:7b","messages":[],"keep_alive":0}"#)
            ps = try self.json(try client.send("GET", "/api/ps").text)
            #expect((ps["models"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test func pullStreamsProgressAndInstalls() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let pull = try client.send("POST", "/api/pull", body: #"{"model":"gemma3:1b"}"#)
            #expect(pull.head.header("Content-Type") == "application/x-ndjson")
            let lines = try pull.text.split(separator: "\n").map { try self.json(String($0)) }
            #expect(lines.first?["status"] as? String == "pulling manifest")
            #expect(lines.last?["status"] as? String == "success")
            let progress = lines.filter { ($0["status"] as? String)?.hasPrefix("pulling ") == true && $0["digest"] != nil }
            let first = try #require(progress.first)
            #expect((first["status"] as? String)?.count == "pulling ".count + 12)
            #expect((first["digest"] as? String)?.hasPrefix("sha256:") == true)
            #expect(first["completed"] == nil)
            #expect(progress.contains { $0["completed"] as? Int == $0["total"] as? Int })
            #expect(lines.contains { $0["status"] as? String == "verifying sha256 digest" })
            #expect(lines.contains { $0["status"] as? String == "writing manifest" })
            #expect(try client.send("GET", "/api/tags").text.contains(#""name":"gemma3:1b""#))
        }
    }

    @Test func pullOfUnknownModelFailsInBand() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let pull = try client.send("POST", "/api/pull", body: #"{"model":"nope"}"#)
            #expect(pull.head.status == 200)
            #expect(pull.text == "{\"status\":\"pulling manifest\"}\n{\"error\":\"pull model manifest: file does not exist\"}\n")
        }
    }

    @Test func nativeChatStreamsNDJSONWithNanosecondMetrics() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let r = try client.send("POST", "/api/chat", body: self.chat + "}")
            #expect(r.head.header("Content-Type") == "application/x-ndjson")
            #expect(r.complete)
            let lines = try r.text.split(separator: "\n").map { try self.json(String($0)) }
            #expect(lines.count >= 13)
            #expect(lines.dropLast().allSatisfy { $0["done"] as? Bool == false })
            let last = try #require(lines.last)
            #expect(last["done"] as? Bool == true)
            #expect(last["done_reason"] as? String == "stop")
            for key in ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
                        "eval_duration"] {
                #expect(last[key] is Int, "\(key)")
            }
            let text = lines.dropLast().map { ($0["message"] as? [String: Any])?["content"] as? String ?? "" }.joined()
            // Deterministic: the same prompt gives the same answer, on both surfaces.
            let again = try client.send("POST", "/api/chat", body: self.chat + #","stream":false}"#)
            let whole = try self.json(again.text)
            #expect((whole["message"] as? [String: Any])?["content"] as? String == text)
            let v1 = try self.json(try client.send("POST", "/v1/chat/completions", body: self.chat + "}").text)
            let choice = try #require((v1["choices"] as? [[String: Any]])?.first)
            #expect((choice["message"] as? [String: Any])?["content"] as? String == text)
        }
    }

    @Test func nativeChatErrors() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let noModel = try client.send("POST", "/api/chat", body: #"{"messages":[]}"#)
            #expect(noModel.head.status == 400)
            #expect(noModel.text == #"{"error":"model is required"}"#)
            let missing = try client.send("POST", "/api/chat", body: #"{"model":"foo","messages":[]}"#)
            #expect(missing.head.status == 404)
            #expect(missing.text == #"{"error":"model 'foo' not found"}"#)
            #expect(try client.send("POST", "/api/chat", body: "{nope").head.status == 400)
        }
    }

    @Test func nativeToolCallHasObjectArguments() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":false,"messages":[{"role":"user","content":"get_weather in Tokyo"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}"#
            let r = try self.json(try client.send("POST", "/api/chat", body: body).text)
            let calls = try #require((r["message"] as? [String: Any])?["tool_calls"] as? [[String: Any]])
            let function = try #require(calls.first?["function"] as? [String: Any])
            #expect(function["index"] as? Int == 0)
            #expect(function["name"] as? String == "get_weather")
            #expect(function["arguments"] as? [String: String] == ["city": "Tokyo"])
            let id = try #require(calls.first?["id"] as? String)
            #expect(id.hasPrefix("call_") && id.count == 13)
        }
    }
}
