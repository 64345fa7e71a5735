import HomebaseCore
import HomebaseEngines
import HomebaseNode

/// The sibling shape of design.md §R4: this account's own Homebase over the sealed sibling channel (`sync_delta`).
///
/// Every request goes whole (siblings have no conversation cache). Any failure — a watchdog, an
/// `infer.error`, a refused receipt, a lost relay — and any request with tools ends the stream with
/// `.failed(reason)` (see `RelayInferenceClient`); the router's `FallbackProvider`, the one fallback layer,
/// then answers on-device.
public struct SiblingInferenceProvider: LLMProvider {
    public let client: RelayInferenceClient

    /// - Precondition: `client.channel` is `.sibling`.
    public init(client: RelayInferenceClient) {
        precondition(client.channel == .sibling, "SiblingInferenceProvider runs on the sibling channel")
        self.client = client
    }

    public init(messenger: any PeerMessenger, responses: InferenceResponseRouter, host: PublicKey, model: String,
                watchdogs: InferenceClientStateMachine.Watchdogs = .init(),
                clock: MonotonicClock, logger: Logger = .discard()) {
        self.init(client: RelayInferenceClient(
            messenger: messenger, responses: responses, host: host, channel: .sibling, model: model,
            watchdogs: watchdogs, clock: clock, logger: logger))
    }

    public var kind: ProviderKind { .sibling }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try await self.client.complete(request, plan: .whole(request.messages))
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        self.client.stream(request, plan: .whole(request.messages))
    }
}
