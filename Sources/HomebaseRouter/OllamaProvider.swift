import HomebaseCore
import HomebaseEngines
import HomebaseTransport

/// The user's own Ollama (design.md §R4, shape one): the OpenAI engine pointed at the runtime's `/v1`, the
/// model tag, `max_tokens` (Ollama ignores `max_completion_tokens`) and a dummy key Ollama ignores.
/// Inference never goes through the native `/api/chat`; `/api/*` is management only (`HTTPRuntimeVerifier`).
public struct OllamaProvider: LLMProvider {
    /// Sent as the Bearer token: client SDKs need one, the server ignores it.
    public static let dummyKey = "ollama"

    public let engine: OpenAIChatEngine
    public let model: String

    /// - Parameters:
    ///   - url: the runtime's base URL, e.g. `http://127.0.0.1:11434` (no `/v1`).
    ///   - idleTimeout: silence allowed before giving up; the default tolerates a cold model load.
    public init(http: HTTPClient, url: String, model: String,
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.engine = OpenAIChatEngine(http: http, baseURL: Self.openAIBase(url), apiKey: { Self.dummyKey },
                                       maxTokensField: .maxTokens, idleTimeout: idleTimeout)
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

    /// `http://host:11434` → `http://host:11434/v1` (a URL already ending in `/v1` is kept).
    static func openAIBase(_ url: String) -> String {
        var root = url.trimmingCharacters(in: .whitespaces)
        while root.hasSuffix("/") { root.removeLast() }
        return root.hasSuffix("/v1") ? root : root + "/v1"
    }
}
