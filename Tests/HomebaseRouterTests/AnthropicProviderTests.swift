import APIEmulatorKit
import HomebaseCore
import HomebaseEngines
import HomebaseTransport
import Testing

@testable import HomebaseRouter

/// `AnthropicProvider` against `AnthropicEmulator` over real HTTP on 127.0.0.1.
@Suite(.timeLimit(.minutes(1))) struct AnthropicProviderTests {
    let http = HTTPClient()

    func withEmulator(_ body: (AnthropicEmulator, String) async throws -> Void) async throws {
        let emulator = AnthropicEmulator()
        let port = try emulator.start()
        defer { emulator.stop() }
        try await body(emulator, "http://127.0.0.1:\(port)/v1")
    }

    func provider(_ base: String, key: String? = AnthropicEmulator.defaultKey) -> AnthropicProvider {
        AnthropicProvider(http: self.http, model: "claude-sonnet-4-5", apiKey: { key }, baseURL: base,
                          idleTimeout: .seconds(30))
    }

    @Test func streamsTextWithHeadersSystemAndDefaultMaxTokens() async throws {
        try await self.withEmulator { emulator, base in
            let request = ChatRequest(messages: [.system("You are concise."), .system("Be kind."), .user("hello there")])
            var pieces: [String] = []
            var done: ChatResult?
            for await event in self.provider(base).stream(request) {
                if case .text(let piece) = event { pieces.append(piece) }
                if case .done(let result) = event { done = result }
                if case .failed(let error) = event { Issue.record("failed: \(error)") }
            }
            let expected = EmulatorText.answer(for: "hello there")
            #expect(pieces.count > 1)
            #expect(pieces.joined() == expected)
            #expect(done?.text == expected)
            #expect(done?.finishReason == .stop)
            #expect(done?.providerKind == .anthropic)
            #expect(done?.usage?.completionTokens == EmulatorText.tokens(for: "hello there").count)
            let sent = try #require(emulator.stats.requests.last)
            #expect(sent.header("x-api-key") == AnthropicEmulator.defaultKey)
            #expect(sent.header("anthropic-version") == "2023-06-01")
            #expect(sent.header("content-type") == "application/json")
            #expect(sent.header("authorization") == nil)
            let json = try #require(sent.json)
            #expect(json["max_tokens"] as? Int == 1024)
            #expect(json["system"] as? String == "You are concise.\n\nBe kind.")
            let roles = (json["messages"] as? [[String: Any]])?.compactMap { $0["role"] as? String }
            #expect(roles == ["user"])
        }
    }

    @Test func maxTokensFromOptionsAndLengthStop() async throws {
        try await self.withEmulator { emulator, base in
            let options = ChatOptions(temperature: 0.2, maxTokens: 2, stop: ["\n\nHuman:"])
            let result = try await self.provider(base).complete(ChatRequest(messages: [.user("hello")], options: options))
            #expect(result.finishReason == .length)
            #expect(result.text == EmulatorText.tokens(for: "hello").prefix(2).joined())
            let json = try #require(emulator.stats.requests.last?.json)
            #expect(json["max_tokens"] as? Int == 2)
            #expect(json["stop_sequences"] as? [String] == ["\n\nHuman:"])
            #expect(json["temperature"] as? Double == 0.2)
        }
    }

    @Test func toolsAreTranslatedAndToolUseInputBecomesArguments() async throws {
        try await self.withEmulator { emulator, base in
            let tool = RawJSON(#"{"type":"function","function":{"name":"get_weather","description":"Weather","#
                + #""parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#)
            let request = ChatRequest(messages: [.user("Use get_weather for Paris")], tools: [tool])
            let result = try await self.provider(base).complete(request)
            #expect(result.text == AnthropicEmulator.toolPreamble)
            #expect(result.finishReason == .toolCalls)
            #expect(result.toolCalls.count == 1)
            #expect(result.toolCalls.first?.name == "get_weather")
            #expect(result.toolCalls.first?.arguments.text == #"{"city":"Paris"}"#)
            #expect(result.toolCalls.first?.id.hasPrefix("toolu_") == true)
            let sentTool = try #require((emulator.stats.requests.last?.json?["tools"] as? [[String: Any]])?.first)
            #expect(sentTool["name"] as? String == "get_weather")
            #expect(sentTool["description"] as? String == "Weather")
            #expect((sentTool["input_schema"] as? [String: Any])?["type"] as? String == "object")
            #expect(sentTool["type"] == nil && sentTool["function"] == nil)
        }
    }

    @Test func badKeyFailsWithHTTP401Label() async throws {
        try await self.withEmulator { _, base in
            do throws(ProviderError) {
                _ = try await self.provider(base, key: "sk-ant-wrong").complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected a failure")
            } catch {
                #expect(error.reason == .error("http_401"))
                #expect(error.detail == "HTTP 401: invalid x-api-key")
            }
        }
    }

    @Test func validateKeyUsesModelsAndSpendsNoCompletion() async throws {
        try await self.withEmulator { emulator, base in
            #expect(await AnthropicProvider.validateKey(AnthropicEmulator.defaultKey, http: self.http, baseURL: base)
                == .valid)
            #expect(await AnthropicProvider.validateKey("sk-ant-bad", http: self.http, baseURL: base) == .invalid)
            #expect(emulator.stats.completions == 0)
            #expect(emulator.stats.modelListings == 1)
            #expect(emulator.stats.requests.allSatisfy { $0.header("anthropic-version") == "2023-06-01" })
        }
    }

    @Test func overloadedAndRateLimitedMapToHTTPLabels() async throws {
        try await self.withEmulator { emulator, base in
            for status in [529, 429, 500] {
                emulator.setFault(.httpStatus(status))
                do throws(ProviderError) {
                    _ = try await self.provider(base).complete(ChatRequest(messages: [.user("hi")]))
                    Issue.record("expected \(status)")
                } catch {
                    #expect(error.reason == .error("http_\(status)"))
                }
            }
        }
    }

    @Test func midStreamErrorEventFails() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.midStreamError(afterTokens: 1))
            do throws(ProviderError) {
                _ = try await self.provider(base).complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected a failure")
            } catch {
                #expect(error.reason == .error("mid_stream"))
                #expect(error.detail.contains("Overloaded"))
            }
        }
    }

    @Test func cancellingTheConsumerClosesTheRequestPromptly() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.stall(afterTokens: 1))
            let provider = self.provider(base)
            let task = Task {
                for await _ in provider.stream(ChatRequest(messages: [.user("hi")])) {}
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while emulator.stats.completions == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await Task.sleep(for: .milliseconds(100))
            let cancelledAt = ContinuousClock.now
            task.cancel()
            await task.value
            while emulator.stats.clientsGone == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(emulator.stats.clientsGone == 1)
            #expect(ContinuousClock.now - cancelledAt < .seconds(2))
        }
    }

    @Test func hostileBodiesFailCleanly() async throws {
        try await self.withEmulator { emulator, base in
            let bodies: [(String, FallbackReason)] = [
                ("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\n\n", .error("malformed")),
                ("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n", .error("mid_stream")),
                ("data: [DONE]\n\n", .error("malformed")),
                ("", .error("mid_stream")),
            ]
            for (body, reason) in bodies {
                emulator.setFault(.rawStream(body))
                do throws(ProviderError) {
                    _ = try await self.provider(base).complete(ChatRequest(messages: [.user("hi")]))
                    Issue.record("expected a failure for \(body)")
                } catch {
                    #expect(error.reason == reason, "\(body.debugDescription)")
                }
            }
        }
    }

    @Test func emulatorRefusesAMissingMaxTokens() async throws {
        // The guard behind "missing max_tokens never happens": the emulator does reject it.
        try await self.withEmulator { _, base in
            let response = try await self.http.send(HTTPRequest(
                method: "POST", url: base + "/messages",
                headers: AnthropicChatEngine.headers(key: AnthropicEmulator.defaultKey),
                body: Array(#"{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}"#.utf8)))
            #expect(response.head.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains("max_tokens: Field required"))
        }
    }
}
