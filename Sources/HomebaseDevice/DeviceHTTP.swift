import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseRouter
import HomebaseTransport

/// The HTTP side of a device, injected into `DeviceSession`: the providers the router builds for Ollama,
/// OpenAI, Anthropic and the device-model rung, the runtime verifier of test-before-persist, the
/// zero-token key check, and the Hub the on-device models come from (`HF_ENDPOINT`, `HF_HOME`). The executables pass the live implementations; tests pass fakes.
public struct DeviceHTTP: Sendable {
    public var makers: HTTPProviderMakers
    /// `nil` when this build has no HTTP runtime verifier (then `config endpoint verify` says so).
    public var verifier: (any RuntimeVerifier)?
    /// `nil` when this build cannot check keys.
    public var validateKey: (@Sendable (CloudProvider, String) async -> KeyValidation)?
    /// The Hub (catalog, downloads) and the Hub cache of the on-device models.
    public var hub: HubAccess
    /// The client for the device engine (`config device-engine URL`); `nil`: this build has none, and the canned
    /// floor answers on-device whatever is configured.
    public var engineHTTP: HTTPClient?

    public init(makers: HTTPProviderMakers, verifier: (any RuntimeVerifier)? = nil,
                validateKey: (@Sendable (CloudProvider, String) async -> KeyValidation)? = nil,
                hub: HubAccess = HubAccess(http: nil, cacheRoot: "/nonexistent/huggingface/hub"),
                engineHTTP: HTTPClient? = nil) {
        self.engineHTTP = engineHTTP
        self.makers = makers
        self.verifier = verifier
        self.validateKey = validateKey
        self.hub = hub
    }

    /// No HTTP at all: every HTTP provider fails at once with `error:http_unavailable`, so the router's
    /// fallback answers on-device; the device-model rung is absent (the floor answers). For tests and for
    /// commands that never chat.
    public static let unavailable = DeviceHTTP(makers: HTTPProviderMakers(
        ollama: { _, _ in UnavailableProvider(kind: .ollama) },
        openAI: { _, _ in UnavailableProvider(kind: .openai) },
        anthropic: { _, _ in UnavailableProvider(kind: .anthropic) },
        onDevice: { _ in OnDeviceProvider(deviceModel: nil) }))
}

/// A provider that always fails with `error:http_unavailable` (see `DeviceHTTP.unavailable`).
struct UnavailableProvider: LLMProvider {
    let kind: ProviderKind

    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        throw ProviderError(.error("http_unavailable"), detail: "no HTTP provider in this build")
    }
}

extension DeviceHTTP {
    /// What the executables use: the live HTTP providers on one shared client. The cloud base URLs can be
    /// pointed elsewhere with `HOMEBASE_OPENAI_BASE_URL` / `HOMEBASE_ANTHROPIC_BASE_URL` (tests and the demo use
    /// local emulators of those APIs).
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> DeviceHTTP {
        let http = HTTPClient()
        let openAI = environment["HOMEBASE_OPENAI_BASE_URL"] ?? OpenAIProvider.defaultBaseURL
        let anthropic = environment["HOMEBASE_ANTHROPIC_BASE_URL"] ?? AnthropicChatEngine.defaultBaseURL
        return DeviceHTTP(
            makers: .live(http: http, openAIBaseURL: openAI, anthropicBaseURL: anthropic),
            verifier: HTTPRuntimeVerifier(http: http),
            validateKey: { provider, key in
                switch provider {
                case .openai: await OpenAIProvider.validateKey(key, http: http, baseURL: openAI)
                case .anthropic: await AnthropicProvider.validateKey(key, http: http, baseURL: anthropic)
                }
            },
            hub: .environment(environment, http: http), engineHTTP: http)
    }
}
