import HomebaseCore
import HomebaseEngines
import HomebaseTransport

/// Bring-your-own-key Claude (design.md §R3): the Messages API with the ring's active key, read per request.
/// Failures are labelled as `ChatEngineRunner` documents; no key on the ring is `no_key` without a request.
public struct AnthropicProvider: LLMProvider {
    public let engine: AnthropicChatEngine
    public let model: String

    /// - Parameters:
    ///   - apiKey: read per request (`CloudKeyStore.apiKeyProvider(.anthropic)`).
    ///   - baseURL: the API root including `/v1` (tests point it at `AnthropicEmulator`).
    public init(http: HTTPClient, model: String, apiKey: @escaping @Sendable () -> String?,
                baseURL: String = AnthropicChatEngine.defaultBaseURL,
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.engine = AnthropicChatEngine(http: http, baseURL: baseURL, apiKey: apiKey, idleTimeout: idleTimeout)
        self.model = model
    }

    public var kind: ProviderKind { .anthropic }

    private var runner: ChatEngineRunner {
        ChatEngineRunner(engine: self.engine, model: self.model, kind: .anthropic, requireKey: self.engine.apiKey)
    }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try await self.runner.complete(request)
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        self.runner.stream(request)
    }

    /// Checks `key` without spending tokens (design.md §R3, the Settings "Test" button): `GET {baseURL}/models`
    /// with `x-api-key` and `anthropic-version` (200 valid, 401 invalid).
    public static func validateKey(_ key: String, http: HTTPClient,
                                   baseURL: String = AnthropicChatEngine.defaultBaseURL) async -> KeyValidation {
        let root = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        let request = HTTPRequest(url: root + "/models", headers: AnthropicChatEngine.headers(key: key),
                                  timeout: .seconds(30), maxResponseBytes: 4 * 1024 * 1024)
        return await OpenAIProvider.validation(http: http, request: request)
    }
}
