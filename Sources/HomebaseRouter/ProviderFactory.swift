import HomebaseCore

/// Builds the concrete providers the router hands out. The HTTP and relay implementations plug in
/// here; tests use a recording fake. The router wraps whatever is returned, so a factory's providers
/// may fail freely: the router's fallback catches them.
public protocol ProviderFactory: Sendable {
    /// `OllamaProvider` over a verified endpoint (OpenAI-compatible `/v1/chat/completions`).
    func makeOllama(endpoint: VerifiedEndpoint, model: String) -> any LLMProvider
    /// `OpenAIProvider`; `apiKey` is read per request (a rotated key applies to the next call).
    func makeOpenAI(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider
    /// `AnthropicProvider` (Messages API); `apiKey` is read per request.
    func makeAnthropic(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider
    /// `SiblingInferenceProvider`: this account's Homebase over the sibling channel. It owns the watchdog
    /// ladder and fails (`.failed`, reason named) on any failure and on any request that carries tools; the
    /// router's `FallbackProvider` answers those on-device.
    func makeSibling(host: PublicKey, model: String) -> any LLMProvider
    /// `CrossAccountInferenceProvider`: a friend's Homebase over the contact channel; as `makeSibling`,
    /// plus one full-conversation retry on `cache_miss` before failing.
    func makeCrossAccount(host: PublicKey, model: String) -> any LLMProvider
    /// The on-device provider: the device model rung (when given) over the floor. Must never fail;
    /// `OnDeviceProvider` is the implementation.
    func makeOnDevice(deviceModel: DeviceModel?) -> any LLMProvider
}
