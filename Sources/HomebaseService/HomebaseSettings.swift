import FoundationEssentials

/// The Homebase's own settings, written by `homebase init` and the CLI, read by the daemon.
///
/// Stored as one JSON value (key `homebase.settings`) so a write is atomic. Unknown fields are ignored and
/// missing ones take their defaults, so an older file still loads.
public struct HomebaseSettings: Codable, Equatable, Sendable {
    /// The relay, e.g. `wss://relay.example.org/v1`.
    public var relayURL: String
    /// The runtime's base URL (Ollama's, or an OpenAI-compatible server's without `/v1`; the key keeps its
    /// old name). The default is loopback: the runtime is next to the daemon, never synced.
    public var ollamaURL: String
    /// What kind of server `ollamaURL` is: Ollama (the default, and what older files mean) or any
    /// OpenAI-compatible server (llama.cpp's `llama-server`, LM Studio, vLLM, LocalAI, Jan).
    public var runtime: RuntimeKind
    /// Shown to siblings in the roster.
    public var deviceName: String
    /// Models the owner asked to keep (for `homebase pull` and the monitor; the advert lists what is installed).
    public var pinnedModels: [String]
    /// Requests the runtime serves at once.
    public var maxConcurrentRequests: Int
    /// Admitted requests waiting for a slot; beyond this a request gets `busy`.
    public var maxQueuedRequests: Int
    /// Cloud models (`*-cloud` stubs, forwarded by the runtime to a third party) the owner shares with siblings
    /// and guests. None by default: a guest's prompt never reaches a cloud the owner did not choose.
    public var sharedCloudModels: [String] = []
    /// Requests the runtime serves at once per model (Ollama's `OLLAMA_NUM_PARALLEL`, 1 by default); the
    /// Homebase queues the rest itself, where it can tell each requester where it stands.
    public var runtimeParallel: Int = 1

    public static let defaultOllamaURL = "http://127.0.0.1:11434"

    public init(relayURL: String, ollamaURL: String = HomebaseSettings.defaultOllamaURL,
                deviceName: String = "Homebase", pinnedModels: [String] = [], maxConcurrentRequests: Int = 4,
                maxQueuedRequests: Int = 16, runtime: RuntimeKind = .ollama) {
        self.runtime = runtime
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
        case maxQueuedRequests = "max_queued_requests", runtime
        case sharedCloudModels = "shared_cloud_models", runtimeParallel = "runtime_parallel"
    }

    /// The largest admission limits a settings record may hold; more is clamped.
    public static let maxConcurrentCeiling = 64
    public static let maxQueuedCeiling = 1024
    public static let runtimeParallelCeiling = 64

    /// Requests the Homebase lets the runtime run at once per model: what the runtime says it serves
    /// (llama-server's slots, `RuntimeStatus.knownParallelism`) when it says, else `runtimeParallel` (Ollama tells
    /// nothing: `OLLAMA_NUM_PARALLEL` is the owner's to repeat). Running more than the runtime serves would only
    /// queue them silently inside it, where no watchdog sees them move.
    public func effectiveRuntimeParallel(known: Int?) -> Int {
        guard let known, known > 0 else { return self.runtimeParallel }
        return min(known, Self.runtimeParallelCeiling)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.relayURL = try c.decodeIfPresent(String.self, forKey: .relayURL) ?? ""
        self.ollamaURL = try c.decodeIfPresent(String.self, forKey: .ollamaURL) ?? Self.defaultOllamaURL
        // An unknown kind (a newer file) is refused rather than taken for Ollama: the daemon would talk the
        // wrong API to it.
        self.runtime = try c.decodeIfPresent(RuntimeKind.self, forKey: .runtime) ?? .ollama
        self.deviceName = try c.decodeIfPresent(String.self, forKey: .deviceName) ?? "Homebase"
        self.pinnedModels = try c.decodeIfPresent([String].self, forKey: .pinnedModels) ?? []
        // A corrupt or hostile limit must not disable admission control: clamp to sane ranges.
        let concurrent = try c.decodeIfPresent(Int.self, forKey: .maxConcurrentRequests) ?? 4
        let queued = try c.decodeIfPresent(Int.self, forKey: .maxQueuedRequests) ?? 16
        self.maxConcurrentRequests = min(max(concurrent, 1), Self.maxConcurrentCeiling)
        self.maxQueuedRequests = min(max(queued, 0), Self.maxQueuedCeiling)
        self.sharedCloudModels = try c.decodeIfPresent([String].self, forKey: .sharedCloudModels) ?? []
        let parallel = try c.decodeIfPresent(Int.self, forKey: .runtimeParallel) ?? 1
        self.runtimeParallel = min(max(parallel, 1), Self.runtimeParallelCeiling)
    }
}

// MARK: Editing (`homebase config`)

extension HomebaseSettings {
    /// One change asked for on the command line.
    public enum Edit: Equatable, Sendable {
        /// Models to keep loaded, replacing the list; empty unpins all.
        case pin([String])
        case maxConcurrent(Int)
        case maxQueued(Int)
        /// Cloud models to share, replacing the list; empty shares none.
        case shareCloud([String])
        case runtimeParallel(Int)
        /// The runtime's kind and base URL together (`homebase config --runtime K --endpoint URL`); the new
        /// endpoint is verified again before anything is routed to it.
        case runtime(RuntimeKind, endpoint: String)
    }

    /// Why an edit is refused; the message is one line for the user.
    public struct EditError: Error, Equatable, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// A model list from `--pin a,b`: comma-separated tags, blanks dropped, duplicates removed in order.
    public static func parseModelList(_ text: String) throws(EditError) -> [String] {
        var seen: Set<String> = []
        var tags: [String] = []
        for piece in text.split(separator: ",", omittingEmptySubsequences: false) {
            let tag = piece.trimmingCharacters(in: .whitespaces)
            if tag.isEmpty { continue }
            guard tag.utf8.count <= 200, !tag.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw EditError(description: "'\(tag)' is not a model tag (e.g. qwen2.5:7b)")
            }
            if seen.insert(tag).inserted { tags.append(tag) }
        }
        return tags
    }

    /// These settings with `edits` applied, each checked against its range.
    public func applying(_ edits: [Edit]) throws(EditError) -> HomebaseSettings {
        var out = self
        for edit in edits {
            switch edit {
            case .pin(let tags):
                out.pinnedModels = tags
            case .maxConcurrent(let n):
                guard (1...Self.maxConcurrentCeiling).contains(n) else {
                    throw EditError(description: "--max-concurrent must be 1 to \(Self.maxConcurrentCeiling), not \(n)")
                }
                out.maxConcurrentRequests = n
            case .maxQueued(let n):
                guard (0...Self.maxQueuedCeiling).contains(n) else {
                    throw EditError(description: "--max-queued must be 0 to \(Self.maxQueuedCeiling), not \(n)")
                }
                out.maxQueuedRequests = n
            case .shareCloud(let tags):
                out.sharedCloudModels = tags
            case .runtimeParallel(let n):
                guard (1...Self.runtimeParallelCeiling).contains(n) else {
                    throw EditError(description: "--runtime-parallel must be 1 to \(Self.runtimeParallelCeiling), not \(n)")
                }
                out.runtimeParallel = n
            case .runtime(let kind, let endpoint):
                guard OllamaRuntimeVerifier.isHTTPURL(endpoint) else {
                    throw EditError(description: "--endpoint takes an http:// URL (e.g. http://127.0.0.1:8080), not '\(endpoint)'")
                }
                out.runtime = kind
                out.ollamaURL = endpoint
            }
        }
        return out
    }
}

extension HomebaseSettings {
    /// What `HomebaseState.verifiedEndpoint()` must equal for this runtime to count as verified: the URL for
    /// Ollama (as before), the kind and URL for another kind, so that changing only the kind verifies again.
    public var verifiedRuntimeIdentity: String {
        self.runtime == .ollama ? self.ollamaURL : "\(self.runtime.rawValue) \(self.ollamaURL)"
    }

    /// The tags of `wanted` the runtime does not have (issue 39: `config --pin` and `grant --models` of a model
    /// that is not installed are warned about, naming it). A tag without `:` means `:latest` and case does not
    /// count, as in Ollama; `*` is every model, never missing.
    public static func missingModels(_ wanted: [String], installed: [String]) -> [String] {
        let have = Set(installed.map { Self.normalizedTag($0).lowercased() })
        return wanted.filter { $0 != "*" && !have.contains(Self.normalizedTag($0).lowercased()) }
    }

    static func normalizedTag(_ name: String) -> String {
        let lastSegment = name.split(separator: "/").last.map(String.init) ?? name
        return lastSegment.contains(":") ? name : name + ":latest"
    }
}
