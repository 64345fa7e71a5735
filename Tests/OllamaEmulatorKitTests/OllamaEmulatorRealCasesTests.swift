import Foundation
import Synchronization
import Testing
@testable import OllamaEmulatorKit

/// Issue 34: the emulator does what real Ollama does (reference/model-apis.md §7): cloud stubs, thinking models
/// on both APIs, one request at a time per model, capabilities in /api/tags, a /v1 stream failing mid-way, 405,
/// case-insensitive names, a silent digest check in /api/pull, keep_alive through Go's ParseDuration.
@Suite(.timeLimit(.minutes(1))) struct OllamaEmulatorRealCasesTests {
    private func withEmulator(
        _ adjust: (inout EmulatorConfiguration) -> Void = { _ in },
        _ body: (RawHTTPClient, UInt16) throws -> Void
    ) throws {
        var config = EmulatorConfiguration()
        config.tokensPerSecond = 100_000
        adjust(&config)
        let emulator = OllamaEmulator(configuration: config)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        try body(RawHTTPClient(port: port), port)
    }

    private func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    private func dataEvents(_ text: String) throws -> [[String: Any]] {
        try text.components(separatedBy: "\n\n").filter { $0.hasPrefix("data: {") }.map {
            try self.object(String($0.dropFirst(6)))
        }
    }

    @Test(arguments: [(EmulatorConfiguration.CloudMode.offline, 502), (.disabled, 403), (.online, 200)])
    func cloudStubsAreListedAndForwarded(_ mode: EmulatorConfiguration.CloudMode, _ status: Int) throws {
        try self.withEmulator({ $0.models = ["gpt-oss:120b-cloud", "qwen2.5:7b"]; $0.cloud = mode }) { client, _ in
            let tags = try self.object(try client.send("GET", "/api/tags").text)
            let models = try #require(tags["models"] as? [[String: Any]])
            #expect(models[0]["remote_host"] as? String == "https://ollama.com:443")
            #expect(models[0]["remote_model"] as? String == "gpt-oss:120b")
            #expect((models[0]["size"] as? Int).map { $0 < 1000 } == true)
            #expect(models[1]["remote_host"] == nil)
            #expect(models[1]["capabilities"] as? [String] == ["completion", "tools"])
            #expect(models[0]["capabilities"] as? [String] == ["completion", "tools", "thinking"])
            let show = try client.send("POST", "/api/show", body: #"{"model":"gpt-oss:120b-cloud"}"#)
            #expect(show.head.status == status)
            let chat = try client.send("POST", "/v1/chat/completions",
                                       body: #"{"model":"gpt-oss:120b-cloud","messages":[{"role":"user","content":"hi"}]}"#)
            #expect(chat.head.status == status)
            if status == 502 { #expect(chat.text.contains("dial tcp")) }
        }
    }

    @Test func aThinkingModelReasonsFirstOnBothAPIsWithinTheBudget() throws {
        try self.withEmulator({ $0.models = ["qwen3:8b", "qwen2.5:7b"]; $0.reasoningTokens = 4 }) { client, _ in
            let v1 = try self.dataEvents(try client.send("POST", "/v1/chat/completions",
                body: #"{"model":"qwen3:8b","stream":true,"messages":[{"role":"user","content":"hi"}]}"#).text)
            let deltas = v1.compactMap { (($0["choices"] as? [[String: Any]])?.first?["delta"]) as? [String: Any] }
            #expect(deltas.prefix(4).allSatisfy { ($0["reasoning"] as? String)?.isEmpty == false && $0["content"] as? String == "" })
            #expect(deltas.dropFirst(4).first?["reasoning"] == nil)
            // The budget counts reasoning: 3 tokens are all reasoning, cut by length.
            let cut = try self.dataEvents(try client.send("POST", "/v1/chat/completions",
                body: #"{"model":"qwen3:8b","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}"#).text)
            let reasons = cut.compactMap { (($0["choices"] as? [[String: Any]])?.first?["finish_reason"]) as? String }
            #expect(reasons == ["length"])
            #expect(!cut.contains { (((($0["choices"] as? [[String: Any]])?.first?["delta"]) as? [String: Any])?["content"] as? String ?? "").isEmpty == false })
            // reasoning_effort none: no reasoning. An effort asked of a model that cannot think: 400.
            let off = try client.send("POST", "/v1/chat/completions",
                body: #"{"model":"qwen3:8b","stream":true,"reasoning_effort":"none","messages":[{"role":"user","content":"hi"}]}"#)
            #expect(!off.text.contains("\"reasoning\""))
            let refused = try client.send("POST", "/v1/chat/completions",
                body: #"{"model":"qwen2.5:7b","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}"#)
            #expect(refused.head.status == 400 && refused.text.contains("does not support thinking"))
            // Native: message.thinking pieces; think false turns it off.
            let native = try client.send("POST", "/api/chat", body: #"{"model":"qwen3:8b","messages":[{"role":"user","content":"hi"}]}"#)
            let lines = try native.text.split(separator: "\n").map { try self.object(String($0)) }
            #expect(lines.prefix(4).allSatisfy { (($0["message"] as? [String: Any])?["thinking"] as? String)?.isEmpty == false })
            let nativeOff = try client.send("POST", "/api/chat",
                body: #"{"model":"qwen3:8b","think":false,"messages":[{"role":"user","content":"hi"}]}"#)
            #expect(!nativeOff.text.contains("thinking"))
        }
    }

    /// `--parallel 1`: a second request to the same model gets no byte until the first ends; another model is
    /// not held up.
    @Test func parallelOneQueuesSilentlyPerModel() throws {
        try self.withEmulator({ $0.parallel = 1; $0.tokensPerSecond = 50; $0.answerTokens = 25...25 }) { client, port in
            let body = #"{"model":"qwen2.5:7b","stream":true,"messages":[{"role":"user","content":"hi"}]}"#
            let done = Mutex<[String: ContinuousClock.Instant]>([:])
            let start = ContinuousClock.now
            let threads = ["a", "b"].map { name in
                Thread {
                    _ = try? RawHTTPClient(port: port).send("POST", "/v1/chat/completions", body: body)
                    done.withLock { $0[name] = .now }
                }
            }
            threads[0].start()
            Thread.sleep(forTimeInterval: 0.1)
            threads[1].start()
            // Another model answers meanwhile (half a second each at 50 tokens/s).
            _ = try client.send("POST", "/v1/chat/completions",
                                body: #"{"model":"llama3.2:3b","messages":[{"role":"user","content":"hi"}]}"#)
            let other = ContinuousClock.now - start
            while done.withLock({ $0.count }) < 2 { Thread.sleep(forTimeInterval: 0.02) }
            let times = done.withLock { $0 }
            #expect(times["b"]! - start >= .milliseconds(950), "the second waited for the first")
            #expect(other < .milliseconds(900), "another model was not held up")
        }
    }

    @Test func aV1StreamThatFailsMidwayEndsWithAnEmptyDeltaAndNoFinish() throws {
        try self.withEmulator { client, _ in
            let r = try client.send("POST", "/v1/chat/completions", body: #"{"model":"qwen2.5:7b","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
                                    headers: ["X-Emulator-Fault: error-after=3"])
            #expect(r.head.status == 200)
            #expect(!r.text.contains("[DONE]") && !r.text.contains("\"finish_reason\":\"stop\""))
            let events = try self.dataEvents(r.text)
            #expect(events.count == 4)
            #expect(((events.last?["choices"] as? [[String: Any]])?.first?["delta"] as? [String: Any])?.isEmpty == true)
        }
    }

    @Test func wrongMethodsAre405AndNamesMatchCaseInsensitively() throws {
        try self.withEmulator { client, _ in
            #expect(try client.send("GET", "/api/chat").head.status == 405)
            #expect(try client.send("POST", "/api/tags").head.status == 405)
            #expect(try client.send("GET", "/nope").head.status == 404)
            let r = try client.send("POST", "/v1/chat/completions", body: #"{"model":"Qwen2.5:7B","messages":[{"role":"user","content":"hi"}]}"#)
            #expect(r.head.status == 200)
        }
    }

    @Test func keepAliveIsAGoDuration() throws {
        #expect(try OllamaEmulator.parseDuration("30m") == 1800)
        #expect(try OllamaEmulator.parseDuration("-1m") == -60)
        #expect(try OllamaEmulator.parseDuration("1h30m") == 5400)
        #expect(try OllamaEmulator.parseDuration("0") == 0)
        #expect(OllamaEmulator.keepAliveError("-1") == #"time: missing unit in duration "-1""#)
        #expect(OllamaEmulator.keepAliveError("300") == #"time: missing unit in duration "300""#)
        #expect(OllamaEmulator.keepAliveError("5x") == #"time: unknown unit "x" in duration "5x""#)
        #expect(OllamaEmulator.keepAliveError("") == #"time: invalid duration """#)
        #expect(OllamaEmulator.keepAliveSeconds(300) == 300)
        try self.withEmulator { client, _ in
            let r = try client.send("POST", "/api/chat", body: #"{"model":"qwen2.5:7b","messages":[],"keep_alive":"-1"}"#)
            #expect(r.head.status == 400 && r.text.contains("missing unit"))
            #expect(try client.send("POST", "/api/chat", body: #"{"model":"qwen2.5:7b","messages":[],"keep_alive":-1}"#).head.status == 200)
        }
    }

    @Test func pullGoesSilentWhileItVerifies() throws {
        try self.withEmulator({ $0.pullVerifyMs = 600; $0.pullProgressIntervalMs = 1 }) { client, _ in
            let start = ContinuousClock.now
            let r = try client.send("POST", "/api/pull", body: #"{"model":"gemma3:1b"}"#)
            #expect(ContinuousClock.now - start >= .milliseconds(600))
            #expect(r.text.contains("verifying sha256 digest") && r.text.contains("success"))
        }
    }

    @Test func theNewFlagsParse() throws {
        guard case .run(let c) = try EmulatorCommandLine.parse(
            ["--cloud", "disabled", "--parallel", "1", "--reasoning-tokens", "80", "--context-length", "8192",
             "--pull-verify-ms", "5000", "--fault", "error-after=5"])
        else { Issue.record("not a run"); return }
        #expect(c.cloud == .disabled && c.parallel == 1 && c.reasoningTokens == 80 && c.contextLength == 8192)
        #expect(c.pullVerifyMs == 5000 && c.fault.errorAfterTokens == 5)
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--cloud", "maybe"]) }
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--parallel", "0"]) }
    }
}
