import HomebaseCore

/// One model installed on the Homebase's runtime, as the advert describes it.
public struct RuntimeModelInfo: Codable, Sendable, Equatable {
    public var tag: String
    public var family: String
    public var parameterSize: String
    public var quantization: String
    public var capabilities: [String]
    public var contextLength: Int?
    /// In memory now (Ollama `/api/ps`), so a request will not wait for a cold load.
    public var loaded: Bool
    /// The advert fields this runtime cannot tell (an OpenAI-compatible server that only lists model ids):
    /// `family`, `parameter_size`, `quantization`, `context_length`, `loaded`, `capabilities`. Those fields
    /// then hold their empty value (`""`, absent, `false`) or, for `capabilities`, a guess from the name, and
    /// the advert says so rather than invent them. `nil` (Ollama): everything is known.
    public var unknown: [String]?

    public init(tag: String, family: String, parameterSize: String, quantization: String, capabilities: [String],
                contextLength: Int?, loaded: Bool, unknown: [String]? = nil) {
        self.tag = tag
        self.family = family
        self.parameterSize = parameterSize
        self.quantization = quantization
        self.capabilities = capabilities
        self.contextLength = contextLength
        self.loaded = loaded
        self.unknown = unknown
    }

    public var canComplete: Bool { self.capabilities.contains("completion") }
}

/// What the Homebase knows about its runtime now. Configuration (a verified endpoint) and availability (the
/// last probe) are separate facts: a failed probe never forgets a verified endpoint.
public struct RuntimeStatus: Sendable, Equatable {
    /// The endpoint URL, once it passed test-before-persist.
    public var endpoint: String?
    public var verified: Bool
    /// The last probe succeeded.
    public var available: Bool
    public var version: String?
    /// Installed models (empty when unavailable: a Homebase whose runtime is down advertises none).
    public var models: [RuntimeModelInfo]
    public var checkedAtMs: UInt64
    /// Why the last probe failed, for `homebase status`.
    public var lastError: String?
    /// What kind of server the runtime is (`ollama` or `openai-compatible`); the advert's `runtime.kind`.
    public var kind: RuntimeKind
    /// The runtime's known parallelism: how many requests it serves at once, when the runtime says so
    /// (llama-server's `/slots`, else `/props` `total_slots`); `nil` when it cannot be known. This is the one
    /// place a per-runtime queue (`homebase config --runtime-parallel`, issue 34) reads it from.
    public var knownParallelism: Int?

    public init(endpoint: String?, verified: Bool, available: Bool, version: String?, models: [RuntimeModelInfo],
                checkedAtMs: UInt64, lastError: String? = nil, kind: RuntimeKind = .ollama,
                knownParallelism: Int? = nil) {
        self.endpoint = endpoint
        self.verified = verified
        self.available = available
        self.version = version
        self.models = models
        self.checkedAtMs = checkedAtMs
        self.lastError = lastError
        self.kind = kind
        self.knownParallelism = knownParallelism
    }

    public static let unknown = RuntimeStatus(endpoint: nil, verified: false, available: false, version: nil,
                                              models: [], checkedAtMs: 0)

    /// The models to advertise: none unless the runtime is verified and available.
    public var advertisedModels: [RuntimeModelInfo] { self.verified && self.available ? self.models : [] }
}

/// The source of runtime status for adverts and the inference server. `RuntimeMonitor` implements it over
/// Ollama's `/api/*`; tests use a fake.
public protocol RuntimeStatusSource: AnyObject, Sendable {
    var current: RuntimeStatus { get }
    /// Each change of status (models, loaded flags, availability, version). One consumer.
    var changes: AsyncStream<RuntimeStatus> { get }
    /// Ask for a re-verification soon (after a request failed against the runtime).
    func reverifySoon()
    /// The owner changed the pinned models (`homebase config --pin`): keep these loaded from now on.
    func setPinnedModels(_ tags: [String])
}

extension RuntimeStatusSource {
    /// Sources that load nothing ignore pins.
    public func setPinnedModels(_ tags: [String]) {}
}
