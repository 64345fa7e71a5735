import FoundationEssentials

/// The Homebase's own settings, written by `homebase init` and the CLI, read by the daemon.
///
/// Stored as one JSON value (key `homebase.settings`) so a write is atomic. Unknown fields are ignored and
/// missing ones take their defaults, so an older file still loads.
public struct HomebaseSettings: Codable, Equatable, Sendable {
    /// The relay, e.g. `wss://relay.example.org/v1`.
    public var relayURL: String
    /// Ollama's base URL. The default is loopback: the runtime is next to the daemon, never synced.
    public var ollamaURL: String
    /// Shown to siblings in the roster.
    public var deviceName: String
    /// Models the owner asked to keep (for `homebase pull` and the monitor; the advert lists what is installed).
    public var pinnedModels: [String]
    /// Requests the runtime serves at once.
    public var maxConcurrentRequests: Int
    /// Admitted requests waiting for a slot; beyond this a request gets `busy`.
    public var maxQueuedRequests: Int

    public static let defaultOllamaURL = "http://127.0.0.1:11434"

    public init(relayURL: String, ollamaURL: String = HomebaseSettings.defaultOllamaURL,
                deviceName: String = "Homebase", pinnedModels: [String] = [], maxConcurrentRequests: Int = 4,
                maxQueuedRequests: Int = 16) {
        self.relayURL = relayURL
        self.ollamaURL = ollamaURL
        self.deviceName = deviceName
        self.pinnedModels = pinnedModels
        self.maxConcurrentRequests = maxConcurrentRequests
        self.maxQueuedRequests = maxQueuedRequests
    }

    enum CodingKeys: String, CodingKey {
        case relayURL = "relay_url", ollamaURL = "ollama_url", deviceName = "device_name"
        case pinnedModels = "pinned_models", maxConcurrentRequests = "max_concurrent_requests"
        case maxQueuedRequests = "max_queued_requests"
    }

    /// The largest admission limits a settings record may hold; more is clamped.
    public static let maxConcurrentCeiling = 64
    public static let maxQueuedCeiling = 1024

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.relayURL = try c.decodeIfPresent(String.self, forKey: .relayURL) ?? ""
        self.ollamaURL = try c.decodeIfPresent(String.self, forKey: .ollamaURL) ?? Self.defaultOllamaURL
        self.deviceName = try c.decodeIfPresent(String.self, forKey: .deviceName) ?? "Homebase"
        self.pinnedModels = try c.decodeIfPresent([String].self, forKey: .pinnedModels) ?? []
        // A corrupt or hostile limit must not disable admission control: clamp to sane ranges.
        let concurrent = try c.decodeIfPresent(Int.self, forKey: .maxConcurrentRequests) ?? 4
        let queued = try c.decodeIfPresent(Int.self, forKey: .maxQueuedRequests) ?? 16
        self.maxConcurrentRequests = min(max(concurrent, 1), Self.maxConcurrentCeiling)
        self.maxQueuedRequests = min(max(queued, 0), Self.maxQueuedCeiling)
    }
}
