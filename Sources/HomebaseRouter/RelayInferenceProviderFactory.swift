import HomebaseCore
import HomebaseNode

/// The HTTP half of a `ProviderFactory`, injected: those providers are built elsewhere (the HTTP client
/// layer), and this factory only delegates to them.
public struct HTTPProviderMakers: Sendable {
    public var ollama: @Sendable (VerifiedEndpoint, String) -> any LLMProvider
    public var openAI: @Sendable (String, @escaping @Sendable () -> String?) -> any LLMProvider
    public var anthropic: @Sendable (String, @escaping @Sendable () -> String?) -> any LLMProvider
    /// The on-device provider for a device model (the rung is an HTTP provider over the device's own runtime).
    public var onDevice: @Sendable (DeviceModel?) -> any LLMProvider

    public init(ollama: @escaping @Sendable (VerifiedEndpoint, String) -> any LLMProvider,
                openAI: @escaping @Sendable (String, @escaping @Sendable () -> String?) -> any LLMProvider,
                anthropic: @escaping @Sendable (String, @escaping @Sendable () -> String?) -> any LLMProvider,
                onDevice: @escaping @Sendable (DeviceModel?) -> any LLMProvider = {
                    OnDeviceProvider(deviceModel: $0)
                }) {
        self.ollama = ollama
        self.openAI = openAI
        self.anthropic = anthropic
        self.onDevice = onDevice
    }
}

/// A `ProviderFactory` whose relay-routed providers are real: `SiblingInferenceProvider` and
/// `CrossAccountInferenceProvider` over one messenger, sharing its `InferenceResponseRouter` and one
/// `ConversationTracker`. The HTTP and on-device providers come from `http`.
public struct RelayInferenceProviderFactory: ProviderFactory {
    public let responses: InferenceResponseRouter
    public let conversations: ConversationTracker
    public let http: HTTPProviderMakers
    public let watchdogs: InferenceClientStateMachine.Watchdogs
    /// Stamps `lastHeardMs` (compared with advert-style freshness windows, so wall time).
    public let wallClock: WallClock
    /// Times the watchdogs of every relay-routed request.
    public let timers: MonotonicClock
    public let logger: Logger

    public var messenger: any PeerMessenger { self.responses.messenger }

    /// - Parameters:
    ///   - responses: the router that owns the messenger's inbound stream.
    ///   - joined: when given, every contact-channel frame refreshes the sender's `lastHeardMs` (this
    ///     installs the router's frame observer).
    public init(responses: InferenceResponseRouter, http: HTTPProviderMakers,
                conversations: ConversationTracker = ConversationTracker(),
                joined: (any JoinedHomebaseStore)? = nil,
                watchdogs: InferenceClientStateMachine.Watchdogs = .init(),
                wallClock: WallClock, timers: MonotonicClock, logger: Logger = .discard()) {
        self.responses = responses
        self.http = http
        self.conversations = conversations
        self.watchdogs = watchdogs
        self.wallClock = wallClock
        self.timers = timers
        self.logger = logger
        if let joined { responses.refreshingHostAlive(in: joined, clock: wallClock) }
    }

    public func makeOllama(endpoint: VerifiedEndpoint, model: String) -> any LLMProvider {
        self.http.ollama(endpoint, model)
    }

    public func makeOpenAI(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider {
        self.http.openAI(model, apiKey)
    }

    public func makeAnthropic(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider {
        self.http.anthropic(model, apiKey)
    }

    public func makeSibling(host: PublicKey, model: String) -> any LLMProvider {
        SiblingInferenceProvider(client: self.client(host: host, channel: .sibling, model: model))
    }

    public func makeCrossAccount(host: PublicKey, model: String) -> any LLMProvider {
        CrossAccountInferenceProvider(
            client: self.client(host: host, channel: .contact, model: model),
            conversations: self.conversations)
    }

    public func makeOnDevice(deviceModel: DeviceModel?) -> any LLMProvider {
        self.http.onDevice(deviceModel)
    }

    private func client(host: PublicKey, channel: Channel, model: String) -> RelayInferenceClient
    {
        RelayInferenceClient(messenger: self.messenger, responses: self.responses, host: host, channel: channel,
                             model: model, watchdogs: self.watchdogs, clock: self.timers,
                             logger: self.logger)
    }
}
