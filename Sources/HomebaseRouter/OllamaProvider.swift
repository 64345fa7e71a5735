import HomebaseCore
import HomebaseEngines
import HomebaseTransport

/// The user's own Ollama (design.md §R4, the local-endpoint shape): the engine `OpenAIChatEngine.ollama` builds (the one
/// builder the Homebase uses too: the runtime's `/v1`, `max_tokens`, a dummy key) and the model tag.
/// Inference never goes through the native `/api/chat`; `/api/*` is management only (`HTTPRuntimeVerifier`).
public struct OllamaProvider: LLMProvider {
    public let engine: OpenAIChatEngine
    public let model: String

    /// - Parameters:
    ///   - url: the runtime's base URL, e.g. `http://127.0.0.1:11434` (no `/v1`).
    ///   - idleTimeout: silence allowed before giving up; the default tolerates a cold model load.
    public init(http: HTTPClient, url: String, model: String,
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.engine = OpenAIChatEngine.ollama(http: http, url: url, idleTimeout: idleTimeout)
        self.model = model
    }

    public var kind: ProviderKind { .ollama }

    private var runner: ChatEngineRunner {
        ChatEngineRunner(engine: self.engine, model: self.model, kind: .ollama, requireKey: nil)
    }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try await self.runner.complete(request)
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        self.runner.stream(request)
    }
}
