import Foundation
import Testing
@testable import OllamaEmulatorKit

/// `/v1` surface and fault injection.
@Suite(.timeLimit(.minutes(1))) struct OllamaEmulatorOpenAITests {
    private func withEmulator(
        _ adjust: (inout EmulatorConfiguration) -> Void = { _ in },
        _ body: (RawHTTPClient) throws -> Void
    ) throws {
        var config = EmulatorConfiguration()
        config.tokensPerSecond = 100_000
        config.now = { Date(timeIntervalSince1970: 1_722_000_000) }
        adjust(&config)
        let emulator = OllamaEmulator(configuration: config)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        try body(RawHTTPClient(port: port))
    }

    private func events(_ text: String) -> [String] {
        text.components(separatedBy: "\n\n").filter { !$0.isEmpty }
    }

    private func json(_ event: String) throws -> [String: Any] {
        #expect(event.hasPrefix("data: "))
        return try #require(try JSONSerialization.jsonObject(with: Data(event.dropFirst(6).utf8)) as? [String: Any])
    }

    private let prefix = #"{"id":"chatcmpl-"#

    @Test func streamMatchesV0326ChunkShapesExactly() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":true,"stream_options":{"include_usage":true},"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}"#
            let r = try client.send("POST", "/v1/chat/completions", body: body)
            #expect(r.head.header("Content-Type") == "text/event-stream")
            #expect(r.text.hasSuffix("\n\ndata: [DONE]\n\n"))
            let events = self.events(r.text)
            #expect(events.count == 5)
            let id = try #require(try self.json(events[0])["id"] as? String)
            let head = #"data: {"id":"\#(id)","object":"chat.completion.chunk","created":1722000000,"model":"qwen2.5:7b","system_fingerprint":"fp_ollama","choices":"#
            let tokens = TextGenerator(prompt: "hi").tokens
            #expect(events[0] == head + #"[{"index":0,"delta":{"role":"assistant","content":"\#(tokens[0])"},"finish_reason":null}]}"#)
            #expect(events[1] == head + #"[{"index":0,"delta":{"content":"\#(tokens[1])"},"finish_reason":null}]}"#)
            #expect(events[2] == head + #"[{"index":0,"delta":{},"finish_reason":"length"}]}"#)
            #expect(events[3] == head + #"[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#)
            #expect(events[4] == "data: [DONE]")
            #expect(id.hasPrefix("chatcmpl-") && Int(id.dropFirst(9)).map { $0 < 999 } == true)
        }
    }

    /// `--answer-tokens`: every answer has a length in the range, the same one for the same prompt.
    @Test func answerLengthFollowsTheConfiguredRange() throws {
        try self.withEmulator({ $0.answerTokens = 300...310 }) { (client: RawHTTPClient) throws in
            for prompt in ["hi", "tell me about rivers", "x"] {
                let body = #"{"model":"qwen2.5:7b","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"\#(prompt)"}]}"#
                let events = self.events(try client.send("POST", "/v1/chat/completions", body: body).text)
                let usage = try #require(try self.json(events[events.count - 2])["usage"] as? [String: Any])
                let completion = try #require(usage["completion_tokens"] as? Int)
                #expect((300...310).contains(completion))
                #expect(completion == TextGenerator(prompt: prompt, minTokens: 300, maxTokens: 310).tokens.count)
                // One chunk per token, as Ollama streams.
                #expect(events.filter { $0.contains(#""content":"#) }.count == completion)
            }
        }
    }

    /// Ollama is a Go server: its JSON escapes `<`, `>`, `&`, U+2028 and U+2029 (encoding/json's HTML-safe
    /// default), on both surfaces, as a client would see in an error naming the model it asked for.
    @Test func ollamaEscapesHTMLInJSONAsGoDoes() throws {
        #expect(JSONValue.string("a<b>&c\u{2028}\u{2029}").serialized() == #""a\u003cb\u003e\u0026c\u2028\u2029""#)
        #expect(JSONValue.string("a<b>&c").serialized(htmlSafe: false) == #""a<b>&c""#)
        try self.withEmulator { (client: RawHTTPClient) throws in
            for path in ["/v1/chat/completions", "/api/chat"] {
                let body = #"{"model":"x<y>&z","stream":false,"messages":[{"role":"user","content":"hi"}]}"#
                let r = try client.send("POST", path, body: body)
                #expect(r.head.status == 404)
                #expect(r.text.contains(#"x\u003cy\u003e\u0026z"#), "\(path): \(r.text)")
                #expect(!r.text.contains("<"), "\(path): \(r.text)")
            }
        }
    }

    @Test func usageChunkOnlyWithIncludeUsage() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":true,"messages":[{"role":"user","content":"hi"}]}"#
            let events = self.events(try client.send("POST", "/v1/chat/completions", body: body).text)
            #expect(!events.contains { $0.contains("\"usage\"") })
            let finish = try self.json(events[events.count - 2])
            let choice = try #require((finish["choices"] as? [[String: Any]])?.first)
            #expect(choice["finish_reason"] as? String == "stop")
            #expect((choice["delta"] as? [String: Any])?.isEmpty == true)
        }
    }

    @Test func legacyChunksPutRoleEverywhereAndFinishOnLastChunk() throws {
        try self.withEmulator({ $0.legacyChunks = true }) { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}"#
            let events = self.events(try client.send("POST", "/v1/chat/completions", body: body).text)
            #expect(events.count == 4)
            #expect(events[1].contains(#""delta":{"role":"assistant","content":""#))
            #expect(events[2].hasSuffix(#""choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"length"}]}"#))
        }
    }

    @Test func toolCallIsOneChunkWithStringArguments() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":true,"messages":[{"role":"user","content":"please get weather for Paris"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}"#
            let events = self.events(try client.send("POST", "/v1/chat/completions", body: body).text)
            #expect(events.count == 3)
            let delta = try #require(((try self.json(events[0])["choices"] as? [[String: Any]])?.first)?["delta"] as? [String: Any])
            let call = try #require((delta["tool_calls"] as? [[String: Any]])?.first)
            #expect(call["type"] as? String == "function")
            #expect(call["index"] as? Int == 0)
            let function = try #require(call["function"] as? [String: Any])
            #expect(function["arguments"] as? String == #"{"city":"Paris"}"#)
            #expect(events[1].contains(#""delta":{},"finish_reason":"tool_calls""#))
        }
    }

    @Test func errorsHaveOpenAIShapes() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let empty = try client.send("POST", "/v1/chat/completions", body: #"{"model":"qwen2.5:7b","messages":[]}"#)
            #expect(empty.head.status == 400)
            #expect(empty.text == #"{"error":{"message":"[] is too short - 'messages'","type":"invalid_request_error","param":null,"code":null}}"#)
            let missing = try client.send(
                "POST", "/v1/chat/completions", body: #"{"model":"foo","messages":[{"role":"user","content":"x"}]}"#)
            #expect(missing.head.status == 404)
            #expect(missing.text == #"{"error":{"message":"model 'foo' not found","type":"not_found_error","param":null,"code":null}}"#)
            let model = try client.send("GET", "/v1/models/qwen2.5:7b")
            #expect(model.text == #"{"id":"qwen2.5:7b","object":"model","created":1721913600,"owned_by":"library"}"#)
            #expect(try client.send("GET", "/v1/models/foo").head.status == 404)
        }
    }

    // MARK: Faults

    @Test func http500ByHeaderHasTheRightBodies() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let v1 = try client.send(
                "POST", "/v1/chat/completions", body: #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"x"}]}"#,
                headers: ["X-Emulator-Fault: http-500"])
            #expect(v1.head.status == 500)
            #expect(v1.text.contains(#""type":"api_error","param":null,"code":null"#))
            let native = try client.send(
                "POST", "/api/chat", body: #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"x"}]}"#,
                headers: ["X-Emulator-Fault: http-500"])
            #expect(native.head.status == 500)
            #expect(native.text.hasPrefix(#"{"error":""#))
        }
    }

    @Test func unknownModelByFlag() throws {
        try self.withEmulator({ $0.fault.unknownModel = true }) { (client: RawHTTPClient) throws in
            let r = try client.send("POST", "/api/chat", body: #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"x"}]}"#)
            #expect(r.head.status == 404)
            #expect(try client.send("POST", "/api/show", body: #"{"model":"qwen2.5:7b"}"#).head.status == 404)
        }
    }

    @Test func stallAfterMarkerKeepsConnectionOpenAndSilent() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":true,"messages":[{"role":"user","content":"hi [[fault:stall-after=3]]"}]}"#
            let start = ContinuousClock.now
            let r = try client.send("POST", "/v1/chat/completions", body: body, timeoutMs: 600)
            #expect(ContinuousClock.now - start >= .milliseconds(550))  // still open when we gave up
            #expect(!r.complete)
            let events = self.events(r.text)
            #expect(events.count == 3)
            // The marker is stripped: the answer starts like the plain prompt's.
            #expect(events[0].contains(TextGenerator(prompt: "hi").tokens[0]))
        }
    }

    @Test func disconnectAfterDropsTheConnectionMidStream() throws {
        try self.withEmulator { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"hi"}]}"#
            let start = ContinuousClock.now
            let r = try client.send("POST", "/api/chat", body: body, headers: ["X-Emulator-Fault: disconnect-after=2"])
            #expect(ContinuousClock.now - start < .seconds(5))
            #expect(!r.complete)
            #expect(r.text.split(separator: "\n").count == 2)
        }
    }

    @Test func slowLoadDelaysTheFirstToken() throws {
        try self.withEmulator({ $0.firstTokenMs = 50 }) { (client: RawHTTPClient) throws in
            let body = #"{"model":"qwen2.5:7b","stream":false,"messages":[{"role":"user","content":"hi"}]}"#
            let start = ContinuousClock.now
            let r = try client.send("POST", "/api/chat", body: body, headers: ["X-Emulator-Fault: slow-load=300"])
            #expect(ContinuousClock.now - start >= .milliseconds(350))
            #expect(r.head.status == 200)
        }
    }

    @Test func aStreamSendsNothingBeforeItsFirstToken() throws {
        // As Ollama (Go's net/http): a streaming handler's head leaves with its first write, the first token.
        try self.withEmulator({ $0.firstTokenMs = 400 }) { (client: RawHTTPClient) throws in
            let chat = #"{"model":"qwen2.5:7b","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}"#
            for path in ["/v1/chat/completions", "/api/chat"] {
                let early = try client.exchange("POST", path, body: chat, headers: [], timeoutMs: 150)
                #expect(early.isEmpty, "\(path): \(String(decoding: early, as: UTF8.self))")
                let r = try client.send("POST", path, body: chat)
                #expect(r.head.status == 200 && r.complete)
            }
        }
    }

    @Test func faultSpecParsing() throws {
        let f = try EmulatorFault(parsing: "slow-load=10;stall-after=3,http-500")
        #expect(f.slowLoadMs == 10 && f.stallAfterTokens == 3 && f.http500)
        #expect(throws: EmulatorFault.ParseError.self) { try EmulatorFault(parsing: "explode") }
        #expect(throws: EmulatorFault.ParseError.self) { try EmulatorFault(parsing: "stall-after=x") }
    }

    @Test func commandLineParsesAndRejects() throws {
        guard case .run(let c) = try EmulatorCommandLine.parse(
            ["--listen", "0.0.0.0:9999", "--models", "a,b:1b", "--loaded", "a", "--tokens-per-s", "50",
             "--first-token-ms", "7", "--fault", "http-500", "--version", "9.9", "--legacy-chunks",
             "--answer-tokens", "200-400"])
        else { Issue.record("expected run"); return }
        #expect(c.answerTokens == 200...400)
        guard case .run(let exact) = try EmulatorCommandLine.parse(["--answer-tokens", "64"]) else {
            Issue.record("expected run")
            return
        }
        #expect(exact.answerTokens == 64...64)
        for bad in ["0", "10-5", "x", "5-", "-5", "1-100001", ""] {
            #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--answer-tokens", bad]) }
        }
        #expect(c.host == "0.0.0.0" && c.port == 9999 && c.models == ["a", "b:1b"] && c.loaded == ["a"])
        #expect(c.tokensPerSecond == 50 && c.firstTokenMs == 7 && c.fault.http500 && c.version == "9.9" && c.legacyChunks)
        guard case .help = try EmulatorCommandLine.parse(["--help"]) else { Issue.record("expected help"); return }
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--listen", "nope"]) }
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--fault", "boom"]) }
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--loaded", "zzz"]) }
        #expect(throws: EmulatorCommandLine.UsageError.self) { try EmulatorCommandLine.parse(["--bogus"]) }
    }
}
