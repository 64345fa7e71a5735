import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseTransport

/// What a zero-token key check found.
public enum KeyValidation: Sendable, Equatable {
    /// The API accepted the key (200).
    case valid
    /// The API rejected the key (401).
    case invalid
    /// Anything else (unreachable, 5xx, 429, …): the key's fate is unknown; the message says why.
    case unknown(String)
}

/// Bring-your-own-key OpenAI (design.md §R3): Chat Completions with the ring's active key, read per request.
/// Failures are `ProviderError`s labelled as `ChatEngineRunner` documents (`error:http_401`, …); no key on
/// the ring is `no_key` without any request.
public struct OpenAIProvider: LLMProvider {
    public static let defaultBaseURL = "https://api.openai.com/v1"

    public let engine: OpenAIChatEngine
    public let model: String

    /// - Parameters:
    ///   - apiKey: read per request (`CloudKeyStore.apiKeyProvider(.openai)`).
    ///   - baseURL: the API root including `/v1` (tests point it at `OpenAIEmulator`).
    public init(http: HTTPClient, model: String, apiKey: @escaping @Sendable () -> String?,
                baseURL: String = OpenAIProvider.defaultBaseURL,
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.engine = OpenAIChatEngine(http: http, baseURL: baseURL, apiKey: apiKey,
                                       maxTokensField: .maxCompletionTokens, idleTimeout: idleTimeout)
        self.model = model
    }

    public var kind: ProviderKind { .openai }

    private var runner: ChatEngineRunner {
        ChatEngineRunner(engine: self.engine, model: self.model, kind: .openai, requireKey: self.engine.apiKey)
    }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try await self.runner.complete(request)
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        self.runner.stream(request)
    }

    /// Checks `key` without spending tokens: `GET {baseURL}/models` with the Bearer header (200 valid, 401
    /// invalid).
    public static func validateKey(_ key: String, http: HTTPClient,
                                   baseURL: String = OpenAIProvider.defaultBaseURL) async -> KeyValidation {
        let root = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        let request = HTTPRequest(url: root + "/models", headers: [("Authorization", "Bearer " + key)],
                                  timeout: .seconds(30), maxResponseBytes: 4 * 1024 * 1024)
        return await Self.validation(http: http, request: request)
    }

    /// Maps a models-list probe to a verdict; shared with `AnthropicProvider`.
    static func validation(http: HTTPClient, request: HTTPRequest) async -> KeyValidation {
        let response: HTTPResponse
        do throws(ChatEngineError) {
            response = try await HTTPChatTransport.send(http: http, request: request)
        } catch {
            return .unknown(ChatEngineRunner.providerError(error).detail)
        }
        switch response.head.status {
        case 200: return .valid
        case 401: return .invalid
        case let status:
            return .unknown("HTTP \(status): " + HTTPChatTransport.errorMessage(response.body, status: status))
        }
    }
}
