import HomebaseCore

/// What a zero-token key check found (`handset key test`).
public enum KeyCheck: Sendable, Equatable {
    /// The API accepted the key.
    case valid
    /// The API rejected the key (401).
    case invalid
    /// Anything else: unreachable, 5xx, 429; the detail says why.
    case unknown(String)
}

/// The HTTP side of a device, injected into `DeviceSession`: the providers the router builds for Ollama,
/// OpenAI, Anthropic and the device-model rung, the runtime verifier of test-before-persist, and the
/// zero-token key check. The executables pass the live implementations; tests pass fakes.
public struct DeviceHTTP: Sendable {
    public var makers: HTTPProviderMakers
    /// `nil` when this build has no HTTP runtime verifier (then `config endpoint verify` says so).
    public var verifier: (any RuntimeVerifier)?
    /// `nil` when this build cannot check keys.
    public var validateKey: (@Sendable (CloudProvider, String) async -> KeyCheck)?

    public init(makers: HTTPProviderMakers, verifier: (any RuntimeVerifier)? = nil,
                validateKey: (@Sendable (CloudProvider, String) async -> KeyCheck)? = nil) {
        self.makers = makers
        self.verifier = verifier
        self.validateKey = validateKey
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
    /// What the executables use.
    // TODO(clients): switch to the live HTTP providers (OpenAI, Ollama, Anthropic, the runtime verifier and
    // validateKey) once they are on main; until then every HTTP route falls back on-device.
    public static func standard() -> DeviceHTTP { .unavailable }
}
