import HomebaseCore
import HomebaseEngines
import HomebaseTransport
import OllamaEmulatorKit
import Testing

@testable import HomebaseRouter

/// `OllamaProvider` (the OpenAI engine on `/v1`) against the in-process Ollama emulator, and the on-device
/// rung `HTTPProviderMakers.live` builds over it.
@Suite(.timeLimit(.minutes(1))) struct OllamaProviderTests {
    let http = HTTPClient()

    func withEmulator(legacy: Bool = false, fault: EmulatorFault = EmulatorFault(),
                      _ body: (OllamaEmulator, String) async throws -> Void) async throws {
        try await withOllamaEmulator({
            $0.legacyChunks = legacy
            $0.fault = fault
        }, body)
    }

    func provider(_ url: String, model: String = "llama3.2:3b", idle: Duration = .seconds(30)) -> OllamaProvider {
        OllamaProvider(http: self.http, url: url, model: model, idleTimeout: idle)
    }

    static let weatherTool = RawJSON(
        #"{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","#
            + #""properties":{"city":{"type":"string"}},"required":["city"]}}}"#)

    @Test(arguments: [false, true]) func streamsTextInBothChunkShapes(legacy: Bool) async throws {
        try await self.withEmulator(legacy: legacy) { _, url in
            var pieces: [String] = []
            var done: ChatResult?
            for await event in self.provider(url).stream(ChatRequest(messages: [.user("why is the sky blue")])) {
                if case .text(let piece) = event { pieces.append(piece) }
                if case .done(let result) = event { done = result }
                if case .failed(let error) = event { Issue.record("failed: \(error)") }
            }
            let tokens = TextGenerator(prompt: "why is the sky blue").tokens
            #expect(pieces == tokens)
            #expect(done?.text == tokens.joined())
            #expect(done?.finishReason == .stop)
            #expect(done?.providerKind == .ollama)
            #expect(done?.model == "llama3.2:3b")
            #expect(done?.usage?.completionTokens == tokens.count)
        }
    }

    @Test(arguments: [false, true]) func maxTokensIsSentAsMaxTokensAndCutsWithLength(legacy: Bool) async throws {
        try await self.withEmulator(legacy: legacy) { _, url in
            let request = ChatRequest(messages: [.user("count")], options: ChatOptions(maxTokens: 2))
            let result = try await self.provider(url).complete(request)
            #expect(result.finishReason == .length)
            #expect(result.text == TextGenerator(prompt: "count").tokens.prefix(2).joined())
        }
    }

    @Test func wholeToolCallInOneChunk() async throws {
        try await self.withEmulator { _, url in
            let request = ChatRequest(messages: [.user("get_weather in Tokyo")], tools: [Self.weatherTool])
            let result = try await self.provider(url).complete(request)
            #expect(result.finishReason == .toolCalls)
            #expect(result.toolCalls.count == 1)
            #expect(result.toolCalls.first?.name == "get_weather")
            #expect(result.toolCalls.first?.arguments.text == #"{"city":"Tokyo"}"#)
            #expect(result.toolCalls.first?.id.hasPrefix("call_") == true)
        }
    }

    @Test func http500AndUnknownModelMapToHTTPLabels() async throws {
        var fault = EmulatorFault()
        fault.http500 = true
        try await self.withEmulator(fault: fault) { _, url in
            do throws(ProviderError) {
                _ = try await self.provider(url).complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected 500")
            } catch {
                #expect(error.reason == .error("http_500"))
                #expect(error.detail.contains("llama runner process has terminated"))
            }
        }
        try await self.withEmulator { _, url in
            do throws(ProviderError) {
                _ = try await self.provider(url, model: "nope:1b").complete(ChatRequest(messages: [.user("hi")]))
                Issue.record("expected 404")
            } catch {
                #expect(error.reason == .error("http_404"))
            }
        }
    }

    @Test func stallTripsTheIdleTimeoutAndDisconnectIsMidStream() async throws {
        try await self.withEmulator { _, url in
            do throws(ProviderError) {
                _ = try await self.provider(url, idle: .milliseconds(400))
                    .complete(ChatRequest(messages: [.user("hi [[fault:stall-after=2]]")]))
                Issue.record("expected a timeout")
            } catch {
                #expect(error.reason == .error("timeout"))
            }
            do throws(ProviderError) {
                _ = try await self.provider(url).complete(ChatRequest(messages: [.user("hi [[fault:disconnect-after=2]]")]))
                Issue.record("expected a failure")
            } catch {
                #expect(error.reason == .error("mid_stream"))
            }
        }
    }

    @Test func downRuntimeIsUnreachable() async throws {
        var url = ""
        try await self.withEmulator { _, u in url = u }
        do throws(ProviderError) {
            _ = try await self.provider(url).complete(ChatRequest(messages: [.user("hi")]))
            Issue.record("expected a failure")
        } catch {
            #expect(error.reason == .error("unreachable"))
        }
    }

    @Test func openAIBaseAppendsV1Once() {
        for url in ["http://127.0.0.1:11434", "http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1"] {
            #expect(OllamaProvider(http: self.http, url: url, model: "m").engine.baseURL == "http://127.0.0.1:11434/v1")
        }
        let engine = OllamaProvider(http: self.http, url: "http://127.0.0.1:11434", model: "m").engine
        #expect(engine.maxTokensField == .maxTokens)
        #expect(engine.apiKey() == OpenAIChatEngine.ollamaKey)
    }

    @Test func liveMakersBuildTheDeviceRungOverTheFloor() async throws {
        let makers = HTTPProviderMakers.live(http: self.http)
        try await self.withEmulator { _, url in
            let onDevice = makers.onDevice(DeviceModel(url: url, tag: "llama3.2:3b"))
            let result = try await onDevice.complete(ChatRequest(messages: [.user("hello rung")]))
            #expect(result.providerKind == .onDevice)
            #expect(result.model == "llama3.2:3b")
            #expect(result.text == TextGenerator(prompt: "hello rung").tokens.joined())
            #expect(result.fallback == nil)

            let ollama = makers.ollama(VerifiedEndpoint(url: url, verifiedAtMs: 0, version: "0.32.6", models: []),
                                       "qwen2.5:7b")
            #expect(ollama.kind == .ollama)
            #expect(try await ollama.complete(ChatRequest(messages: [.user("x")])).model == "qwen2.5:7b")
        }
        // The runtime is gone now: the floor answers.
        let down = makers.onDevice(DeviceModel(url: "http://127.0.0.1:1", tag: "llama3.2:3b"))
        let result = try await down.complete(ChatRequest(messages: [.user("hello rung")]))
        #expect(result.providerKind == .onDevice)
        #expect(result.model == FloorProvider.modelName)
        #expect(result.fallback?.reason == .error("unreachable"))
        #expect(makers.openAI("gpt-4o-mini", { nil }).kind == .openai)
        #expect(makers.anthropic("claude-sonnet-4-5", { nil }).kind == .anthropic)
    }
}
