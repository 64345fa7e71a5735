import HomebaseCore

/// One model installed on the Homebase's runtime: what the advert says of it (`advertised`, the one list of those
/// fields) plus what only the daemon knows. Its fields read as its own (`m.tag`, `m.loaded`) through
/// `advertised`; its JSON is the flat camelCase record it always was.
@dynamicMemberLookup
public struct RuntimeModelInfo: Codable, Sendable, Equatable {
    /// The model as the advert describes it. `contextSource` stays nil here: the advert derives it from
    /// `contextServed` (`AdvertPublisher.payload`). `cloud` is true or nil, read as a `Bool` through `cloud`.
    public var advertised: AdvertPayload.Model
    /// What the model was trained for (`/api/show`'s `<arch>.context_length`); `contextLength` is what is
    /// served: `/api/ps`'s once loaded (`contextServed`), else this capped at Ollama's default.
    public var trainedContextLength: Int?
    /// `contextLength` is what the runtime reports serving (the model is loaded), not a default.
    public var contextServed = false
    /// While loaded: the memory it takes and how much of it is on the GPU (bytes), and when Ollama's keep-alive
    /// unloads it (ms since 1970; years ahead for a pinned model). Nil when not loaded or not told.
    public var memoryBytes: Int64?
    public var vramBytes: Int64?
    public var unloadsAtMs: UInt64?

    /// `unknown`: the advert fields this runtime cannot tell (an OpenAI-compatible server that only lists model
    /// ids); those then hold their empty value or, for `capabilities`, a guess from the name. `nil` (Ollama):
    /// everything is known.
    public init(tag: String, family: String, parameterSize: String, quantization: String, capabilities: [String],
                contextLength: Int?, loaded: Bool, cloud: Bool = false, unknown: [String]? = nil) {
        self.advertised = AdvertPayload.Model(tag: tag, family: family, parameterSize: parameterSize,
                                              quantization: quantization, capabilities: capabilities,
                                              contextLength: contextLength, loaded: loaded,
                                              cloud: cloud ? true : nil, unknown: unknown)
    }

    /// The advert's fields (`tag`, `family`, `parameterSize`, `quantization`, `capabilities`, `contextLength`,
    /// `loaded`, `unknown`), read and written in place.
    public subscript<T>(dynamicMember field: WritableKeyPath<AdvertPayload.Model, T>) -> T {
        get { self.advertised[keyPath: field] }
        set { self.advertised[keyPath: field] = newValue }
    }

    /// A cloud stub (`remote_host` in `/api/tags`, e.g. `gpt-oss:120b-cloud`): the runtime forwards its prompts
    /// to a third party. Never a trial model, and advertised only when the owner shares it
    /// (`homebase config --share-cloud`). The advert carries `true`, or nothing for a local model.
    public var cloud: Bool {
        get { self.advertised.cloud == true }
        set { self.advertised.cloud = newValue ? true : nil }
    }

    /// `ModelCapabilities.canComplete`: the rule the handset applies too.
    public var canComplete: Bool { ModelCapabilities.canComplete(self.advertised.capabilities) }

    /// The flat record's keys (camelCase, unlike the advert's snake_case wire).
    enum CodingKeys: String, CodingKey {
        case tag, family, parameterSize, quantization, capabilities, contextLength, loaded, cloud
        case trainedContextLength, contextServed
        case memoryBytes, vramBytes, unloadsAtMs, unknown
    }

    /// Reports written before `cloud` existed read as local models.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(tag: try c.decode(String.self, forKey: .tag),
                  family: try c.decode(String.self, forKey: .family),
                  parameterSize: try c.decode(String.self, forKey: .parameterSize),
                  quantization: try c.decode(String.self, forKey: .quantization),
                  capabilities: try c.decode([String].self, forKey: .capabilities),
                  contextLength: try c.decodeIfPresent(Int.self, forKey: .contextLength),
                  loaded: try c.decode(Bool.self, forKey: .loaded),
                  cloud: try c.decodeIfPresent(Bool.self, forKey: .cloud) ?? false,
                  unknown: try c.decodeIfPresent([String].self, forKey: .unknown))
        self.trainedContextLength = try c.decodeIfPresent(Int.self, forKey: .trainedContextLength)
        self.contextServed = try c.decodeIfPresent(Bool.self, forKey: .contextServed) ?? false
        self.memoryBytes = try c.decodeIfPresent(Int64.self, forKey: .memoryBytes)
        self.vramBytes = try c.decodeIfPresent(Int64.self, forKey: .vramBytes)
        self.unloadsAtMs = try c.decodeIfPresent(UInt64.self, forKey: .unloadsAtMs)
    }

    /// The record as before `advertised` existed: `cloud` always written, absent optionals left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        let m = self.advertised
        try c.encode(m.tag, forKey: .tag)
        try c.encode(m.family, forKey: .family)
        try c.encode(m.parameterSize, forKey: .parameterSize)
        try c.encode(m.quantization, forKey: .quantization)
        try c.encode(m.capabilities, forKey: .capabilities)
        try c.encodeIfPresent(m.contextLength, forKey: .contextLength)
        try c.encode(m.loaded, forKey: .loaded)
        try c.encode(self.cloud, forKey: .cloud)
        try c.encodeIfPresent(self.trainedContextLength, forKey: .trainedContextLength)
        try c.encode(self.contextServed, forKey: .contextServed)
        try c.encodeIfPresent(self.memoryBytes, forKey: .memoryBytes)
        try c.encodeIfPresent(self.vramBytes, forKey: .vramBytes)
        try c.encodeIfPresent(self.unloadsAtMs, forKey: .unloadsAtMs)
        try c.encodeIfPresent(m.unknown, forKey: .unknown)
    }
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
    /// Cloud models the owner chose to share (`homebase config --share-cloud`), by tag.
    public var sharedCloudModels: Set<String> = []
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

    /// The models to advertise and serve: none unless the runtime is verified and available, and a cloud model
    /// only when the owner shares it (design.md §R: a prompt never goes to a cloud its owner did not choose).
    public var advertisedModels: [RuntimeModelInfo] {
        self.models.filter(self.advertises)
    }

    /// The model `tag` if it is among `advertisedModels`, found without building that list (the inference server
    /// asks for every request).
    public func advertised(_ tag: String) -> RuntimeModelInfo? {
        self.models.first { $0.tag == tag }.flatMap { self.advertises($0) ? $0 : nil }
    }

    /// The one rule of both: a verified, available runtime, and a cloud model only when shared.
    private func advertises(_ model: RuntimeModelInfo) -> Bool {
        self.verified && self.available && (!model.cloud || self.isShared(model.tag))
    }

    /// Whether the owner shares the cloud model `tag` (a name without a tag means `:latest`).
    public func isShared(_ tag: String) -> Bool {
        self.sharedCloudModels.contains(tag) || self.sharedCloudModels.contains(RuntimeProbe.normalized(tag))
    }
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
    /// The owner changed the cloud models it shares (`homebase config --share-cloud`).
    func setSharedCloudModels(_ tags: [String])
}

extension RuntimeStatusSource {
    /// Sources that load nothing ignore pins.
    public func setPinnedModels(_ tags: [String]) {}
    /// Sources without cloud models ignore sharing.
    public func setSharedCloudModels(_ tags: [String]) {}
}

extension RuntimeModelInfo {
    /// The model without its memory and unload time: what consumers act on (those change with every use, as
    /// Ollama's keep-alive is extended; a change of them alone is not a change of the runtime's status).
    public var withoutLoadDetails: RuntimeModelInfo {
        var m = self
        m.memoryBytes = nil
        m.vramBytes = nil
        m.unloadsAtMs = nil
        return m
    }
}
