import APIEmulatorKit
import HomebaseCore
import HomebaseEngines
import HomebaseTransport
import Testing

@testable import HomebaseRouter

/// `OpenAIProvider` against `OpenAIEmulator` over real HTTP on 127.0.0.1.
@Suite(.timeLimit(.minutes(1))) struct OpenAIProviderTests {
    let http = HTTPClient()

    func withEmulator(_ body: (OpenAIEmulator, String) async throws -> Void) async throws {
        let emulator = OpenAIEmulator()
        let port = try emulator.start()
        defer { emulator.stop() }
        try await body(emulator, "http://127.0.0.1:\(port)/v1")
    }

    func provider(_ base: String, key: String? = OpenAIEmulator.defaultKey, idle: Duration = .seconds(30))
        -> OpenAIProvider
    {
        OpenAIProvider(http: self.http, model: "gpt-4o-mini", apiKey: { key }, baseURL: base, idleTimeout: idle)
    }

    static let weatherTool = RawJSON(
        #"{"type":"function","function":{"name":"get_weather","description":"Weather for a city","#
            + #""parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#)

    /// OpenAI's servers do not HTML-escape their JSON (Ollama's Go server does): an error naming a model with
    /// `<&>` carries them as they are.
    @Test func errorBodiesAreNotHTMLEscaped() async throws {
        try await self.withEmulator { _, base in
            let body = #"{"model":"x<y>&z","stream":true,"messages":[{"role":"user","content":"hi"}]}"#
            let response = try await self.http.send(HTTPRequest(
                method: "POST", url: base + "/chat/completions",
                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer " + OpenAIEmulator.defaultKey)],
                body: Array(body.utf8)))
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(response.head.status == 404)
            #expect(text.contains("x<y>&z"), "\(text)")
            #expect(!text.contains("\\u003c"), "\(text)")
        }
    }

    @Test func streamsTextAndAssemblesTheResult() async throws {
        try await self.withEmulator { emulator, base in
            let request = ChatRequest(messages: [.system("be brief"), .user("tell me about rivers")])
            var pieces: [String] = []
            var done: ChatResult?
            for await event in self.provider(base).stream(request) {
                switch event {
                case .text(let piece): pieces.append(piece)
                case .done(let result): done = result
                default: Issue.record("unexpected \(event)")
                }
            }
            let expected = EmulatorText.answer(for: "tell me about rivers")
            #expect(pieces.count > 1)
            #expect(pieces.joined() == expected)
            #expect(done?.text == expected)
            #expect(done?.finishReason == .stop)
            #expect(done?.providerKind == .openai)
            #expect(done?.model == "gpt-4o-mini")
            #expect(done?.usage?.completionTokens == EmulatorText.tokens(for: "tell me about rivers").count)
            #expect((done?.usage?.promptTokens ?? 0) > 0)
            #expect(emulator.stats.completions == 1)
        }
    }

    @Test func requestCarriesKeyStreamOptionsMaxCompletionTokensAndOptions() async throws {
        try await self.withEmulator { emulator, base in
            let options = ChatOptions(temperature: 0.25, topP: 0.5, maxTokens: 3, stop: ["END"], seed: 7)
            let result = try await self.provider(base).complete(ChatRequest(messages: [.user("hello")], options: options))
            #expect(result.finishReason == .length)
            #expect(result.text == EmulatorText.tokens(for: "hello").prefix(3).joined())
            let sent = try #require(emulator.stats.requests.last)
            #expect(sent.header("authorization") == "Bearer \(OpenAIEmulator.defaultKey)")
            let json = try #require(sent.json)
            #expect(json["stream"] as? Bool == true)
            #expect((json["stream_options"] as? [String: Any])?["include_usage"] as? Bool == true)
            #expect(json["max_completion_tokens"] as? Int == 3)
            #expect(json["max_tokens"] == nil)
            #expect(json["temperature"] as? Double == 0.25)
            #expect(json["top_p"] as? Double == 0.5)
            #expect(json["stop"] as? [String] == ["END"])
            #expect(json["seed"] as? Int == 7)
            #expect((json["messages"] as? [[String: Any]])?.first?["role"] as? String == "user")
        }
    }

    @Test func fragmentedToolCallIsJoined() async throws {
        try await self.withEmulator { emulator, base in
            let request = ChatRequest(messages: [.user("get_weather in Paris please")], tools: [Self.weatherTool])
            var streamed: [ToolCall] = []
            var done: ChatResult?
            for await event in self.provider(base).stream(request) {
                if case .toolCall(let call) = event { streamed.append(call) }
                if case .done(let result) = event { done = result }
            }
            #expect(streamed.count == 1)
            #expect(streamed.first?.name == "get_weather")
            #expect(streamed.first?.arguments.text == #"{"city":"Paris"}"#)
            #expect(streamed.first?.id.hasPrefix("call_") == true)
            #expect(done?.finishReason == .toolCalls)
            #expect(done?.toolCalls == streamed)
            let tools = try #require(emulator.stats.requests.last?.json?["tools"] as? [[String: Any]])
            #expect(tools.first?["type"] as? String == "function")
        }
    }

    @Test func badKeyFailsWithHTTP401Label() async throws {
        try await self.withEmulator { _, base in
            do throws(ProviderError) {
                _ = try await self.provider(base, key: "sk-wrong-key-123").complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected a failure")
            } catch {
                #expect(error.reason == .error("http_401"))
                #expect(error.detail.contains("Incorrect API key provided"))
                #expect(!error.detail.contains("sk-wrong-key-123"))
            }
        }
    }

    @Test func missingKeyFailsWithNoKeyAndSendsNothing() async throws {
        try await self.withEmulator { emulator, base in
            var last: ChatStreamEvent?
            for await event in self.provider(base, key: nil).stream(ChatRequest(messages: [.user("hi")])) {
                last = event
            }
            #expect(last == .failed(ProviderError(.noKey, detail: "no openai key on file")))
            #expect(emulator.stats.requests.isEmpty)
        }
    }

    @Test func validateKeyUsesModelsAndSpendsNoCompletion() async throws {
        try await self.withEmulator { emulator, base in
            #expect(await OpenAIProvider.validateKey(OpenAIEmulator.defaultKey, http: self.http, baseURL: base) == .valid)
            #expect(await OpenAIProvider.validateKey("sk-nope", http: self.http, baseURL: base) == .invalid)
            #expect(emulator.stats.completions == 0)
            #expect(emulator.stats.requests.map(\.path) == ["/v1/models", "/v1/models"])
            emulator.stop()
            guard case .unknown = await OpenAIProvider.validateKey("k", http: self.http, baseURL: base) else {
                Issue.record("a down server should be unknown")
                return
            }
        }
    }

    @Test func serverErrorsMapToHTTPLabels() async throws {
        try await self.withEmulator { emulator, base in
            for status in [500, 429] {
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

    @Test func unknownModelIs404() async throws {
        try await self.withEmulator { _, base in
            let provider = OpenAIProvider(http: self.http, model: "gpt-9", apiKey: { OpenAIEmulator.defaultKey },
                                          baseURL: base)
            do throws(ProviderError) {
                _ = try await provider.complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected 404")
            } catch {
                #expect(error.reason == .error("http_404"))
                #expect(error.detail.contains("does not exist"))
            }
        }
    }

    @Test func midStreamErrorFailsAfterPartialText() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.midStreamError(afterTokens: 2))
            var texts = 0
            var last: ChatStreamEvent?
            for await event in self.provider(base).stream(ChatRequest(messages: [.user("hi")])) {
                if case .text = event { texts += 1 }
                last = event
            }
            #expect(texts == 2)
            guard case .failed(let error) = last else {
            Issue.record("expected failure, got \(String(describing: last))")
            return
        }
            #expect(error.reason == .error("mid_stream"))
        }
    }

    @Test func disconnectMidStreamIsMidStream() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.disconnect(afterTokens: 1))
            do throws(ProviderError) {
                _ = try await self.provider(base).complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected a failure")
            } catch {
                #expect(error.reason == .error("mid_stream"))
            }
        }
    }

    @Test func stallTripsTheIdleTimeout() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.stall(afterTokens: 1))
            let started = ContinuousClock.now
            do throws(ProviderError) {
                _ = try await self.provider(base, idle: .milliseconds(400)).complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected a timeout")
            } catch {
                #expect(error.reason == .error("timeout"))
            }
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }

    @Test func cancellingTheConsumerClosesTheRequestPromptly() async throws {
        try await self.withEmulator { emulator, base in
            emulator.setFault(.stall(afterTokens: 2))
            let provider = self.provider(base)
            let task = Task {
                var texts = 0
                for await event in provider.stream(ChatRequest(messages: [.user("hi")])) {
                    if case .text = event { texts += 1 }
                }
                return texts
            }
            // Wait until the emulator is stalling (two tokens out), then cancel.
            let deadline = ContinuousClock.now + .seconds(10)
            while emulator.stats.completions == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(100))
            let cancelledAt = ContinuousClock.now
            task.cancel()
            _ = await task.value
            while emulator.stats.clientsGone == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(emulator.stats.clientsGone == 1)
            #expect(ContinuousClock.now - cancelledAt < .seconds(2))
        }
    }

    @Test func connectionRefusedIsUnreachable() async throws {
        let emulator = OpenAIEmulator()
        let port = try emulator.start()
        emulator.stop()
        do throws(ProviderError) {
            _ = try await self.provider("http://127.0.0.1:\(port)/v1").complete(ChatRequest(messages: [.user("hi")]))
            Issue.record("expected a failure")
        } catch {
            #expect(error.reason == .error("unreachable"))
        }
    }

    @Test func hostileBodiesAreMalformedOrMidStream() async throws {
        try await self.withEmulator { emulator, base in
            let bodies: [(String, FallbackReason)] = [
                ("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"\n\n", .error("malformed")),
                ("data: {\"choices\":\"x\"}\n\n", .error("malformed")),
                ("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n",
                 .error("mid_stream")),
                ("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"", .error("mid_stream")),
                ("", .error("mid_stream")),
                ("\u{0}\u{1}garbage\n\n", .error("mid_stream")),
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
}
