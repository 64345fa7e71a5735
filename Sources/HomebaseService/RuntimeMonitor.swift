import HomebaseCore
import HomebaseTransport
import Synchronization

/// Watches the Homebase's Ollama and reports its status (`RuntimeStatusSource`) to adverts and the inference
/// server.
///
/// Configuration and availability are separate facts (design.md §R4). An endpoint that is not yet verified is
/// run through test-before-persist (`OllamaRuntimeVerifier`) at each probe until it passes; then `persistVerified`
/// stores it, and from there on probes are cheap (version, tags, ps — no completion). A failed probe marks the
/// runtime unavailable, which advertises no models, but never forgets the endpoint: when Ollama comes back
/// the next probe finds it.
///
/// Probes run every `probeInterval`, soon after `reverifySoon()`, and with exponential backoff while they
/// fail (`RuntimeProbeSchedule`). Pinned models are kept warm: after each successful probe, a pinned model
/// that is installed, can complete and is not loaded gets a keep-alive load, because a cold load can take
/// longer than a requester's 90 s first-output watchdog.
public final class RuntimeMonitor: RuntimeStatusSource {
    public struct Configuration: Sendable {
        /// Between probes while the runtime answers.
        public var probeInterval: Duration = .seconds(30)
        /// From `reverifySoon()` to the probe; requests in between share it.
        public var reverifyDelay: Duration = .milliseconds(500)
        /// The first retry after a failed probe; doubled after each further failure…
        public var firstRetryDelay: Duration = .seconds(1)
        /// …up to this.
        public var maxRetryDelay: Duration = .seconds(60)
        /// Models to keep loaded (`HomebaseSettings.pinnedModels`); a name without a tag means `:latest`.
        public var pinnedModels: [String] = []
        /// `keep_alive` of the warming request: longer than the probe interval, so a pinned model never
        /// expires between two probes.
        public var pinnedKeepAlive = "30m"
        /// Cloud models the owner shares (`HomebaseSettings.sharedCloudModels`).
        public var sharedCloudModels: [String] = []
        public var client = OllamaManagementClient.Configuration()
        /// Ollama (`/api/*`) or an OpenAI-compatible server (`/v1/models`, llama-server's `/props` and `/slots`,
        /// LM Studio's `/api/v0/models`); the latter loads nothing on request, so pins do not apply to it.
        public var kind: RuntimeKind = .ollama

        public init() {}
    }

    private struct State {
        var status: RuntimeStatus
        var verified: Bool
        var schedule: RuntimeProbeSchedule
        var showCache = RuntimeProbe.ShowCache()
        /// Keep-alive loads in flight, by model: one at a time per model.
        var warming: [String: Task<Void, Never>] = [:]
        /// `configuration.pinnedModels` at first, then what `setPinnedModels` set.
        var pinnedModels: [String]
        /// `configuration.sharedCloudModels` at first, then what `setSharedCloudModels` set.
        var sharedCloudModels: Set<String>
    }

    public let endpoint: String
    public let configuration: Configuration
    public let changes: AsyncStream<RuntimeStatus>
    private let continuation: AsyncStream<RuntimeStatus>.Continuation
    private let client: OllamaManagementClient
    private let verifier: OllamaRuntimeVerifier
    /// The same endpoint as an OpenAI-compatible server (used when `configuration.kind` says so).
    private let openAIClient: OpenAICompatibleClient
    private let clock: ServiceClock
    private let logger: Logger
    private let persistVerified: @Sendable (RuntimeStatus) async throws -> Void
    private let state: Mutex<State>
    private let wakeup = Wakeup()
    /// Called after every probe's status is stored, changed or not (`observe`).
    private let observer = CallbackSlot<Void, Void>()

    /// - Parameters:
    ///   - endpoint: the configured Ollama URL (`HomebaseSettings.ollamaURL`).
    ///   - verified: whether `endpoint` already passed test-before-persist (the caller stored that fact).
    ///   - persistVerified: stores a newly verified endpoint; called once, with the status that passed. If it
    ///     throws, the endpoint stays unverified and is verified again at the next probe.
    public init(endpoint: String, verified: Bool, configuration: Configuration = Configuration(), http: HTTPClient,
                clock: ServiceClock = .system, logger: Logger = .discard(),
                persistVerified: @escaping @Sendable (RuntimeStatus) async throws -> Void) {
        self.client = OllamaManagementClient(endpoint: endpoint, http: http, configuration: configuration.client)
        self.endpoint = self.client.endpoint
        self.configuration = configuration
        self.verifier = OllamaRuntimeVerifier(http: http, clientConfiguration: configuration.client, clock: clock)
        self.openAIClient = OpenAICompatibleClient(endpoint: endpoint, http: http, configuration: configuration.client)
        self.clock = clock
        self.logger = logger
        self.persistVerified = persistVerified
        // Newest statuses win if the one consumer falls behind: each carries the whole truth.
        (self.changes, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
        let initial = RuntimeStatus(endpoint: verified ? self.client.endpoint : nil, verified: verified,
                                    available: false, version: nil, models: [], checkedAtMs: 0,
                                    kind: configuration.kind)
        let schedule = RuntimeProbeSchedule(
            probeInterval: configuration.probeInterval, reverifyDelay: configuration.reverifyDelay,
            firstRetryDelay: configuration.firstRetryDelay, maxRetryDelay: configuration.maxRetryDelay)
        self.state = Mutex(State(status: initial, verified: verified, schedule: schedule,
                                 pinnedModels: configuration.pinnedModels,
                                 sharedCloudModels: Set(configuration.sharedCloudModels)))
    }

    deinit {
        self.continuation.finish()
    }

    public var current: RuntimeStatus { self.state.withLock { $0.status } }

    /// Calls `onStatus` whenever a status is stored (every probe, changed or not), for a watcher of `current`
    /// that would otherwise poll it; `changes` is the one consumer's stream of what changed. Replaces an earlier
    /// observer. It runs on the monitor's task and must not block.
    public func observe(_ onStatus: @escaping @Sendable () -> Void) {
        self.observer.set { _ in onStatus() }
    }

    /// New pins apply at once: a probe soon loads the ones that are cold. Unpinned models are left to
    /// unload when their keep-alive runs out.
    public func setPinnedModels(_ tags: [String]) {
        let changed = self.state.withLock { s in
            guard s.pinnedModels != tags else { return false }
            s.pinnedModels = tags
            return true
        }
        if changed { self.reverifySoon() }
    }

    /// Sharing applies at once: the status is published again, so adverts add or drop the model.
    public func setSharedCloudModels(_ tags: [String]) {
        let status = self.state.withLock { s -> RuntimeStatus? in
            guard s.sharedCloudModels != Set(tags) else { return nil }
            s.sharedCloudModels = Set(tags)
            return s.status
        }
        if let status { self.publish(status) }
    }

    /// The models kept loaded now.
    public var pinnedModels: [String] { self.state.withLock { $0.pinnedModels } }

    public func reverifySoon() {
        let now = self.clock.monotonicMs()
        self.state.withLock { $0.schedule.reverifyRequested(atMs: now) }
        self.wakeup.signal()
    }

    /// Probes until the task is cancelled: the first probe at once, then as the schedule says. Keep-alive
    /// loads still in flight are cancelled on return.
    public func run() async {
        defer {
            let warming = self.state.withLock { s -> [Task<Void, Never>] in
                defer { s.warming = [:] }
                return Array(s.warming.values)
            }
            warming.forEach { $0.cancel() }
        }
        while !Task.isCancelled {
            let now = self.clock.monotonicMs()
            let due = self.state.withLock { $0.schedule.nextProbeAtMs }
            if now < due {
                await self.sleep(ms: due - now)
                continue
            }
            self.state.withLock { $0.schedule.probeStarted() }
            let succeeded = await self.probe()
            guard !Task.isCancelled else { break }
            let finishedAt = self.clock.monotonicMs()
            self.state.withLock { $0.schedule.probeFinished(succeeded: succeeded, atMs: finishedAt) }
        }
    }

    /// Sleeps `ms`, or less when `reverifySoon()` wakes the loop (which then recomputes the due time).
    private func sleep(ms: UInt64) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.clock.sleep(.milliseconds(ms)) }
            group.addTask { await self.wakeup.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// One probe (a verification while unverified); publishes the result. Returns whether it succeeded.
    private func probe() async -> Bool {
        let (verified, cache) = self.state.withLock { ($0.verified, $0.showCache) }
        let status: RuntimeStatus
        let kind = self.configuration.kind
        if verified, kind == .openAICompatible {
            do {
                status = try await self.openAIClient.snapshot().status(endpoint: self.endpoint, nowMs: self.clock.nowMs())
            } catch {
                if Task.isCancelled { return false }
                status = RuntimeStatus(endpoint: self.endpoint, verified: true, available: false, version: nil,
                                       models: [], checkedAtMs: self.clock.nowMs(), lastError: "\(error)",
                                       kind: kind)
            }
        } else if verified {
            var cache = cache
            do {
                let snapshot = try await RuntimeProbe(client: self.client).snapshot(cache: &cache)
                status = RuntimeStatus(endpoint: self.endpoint, verified: true, available: true,
                                       version: snapshot.version, models: snapshot.models,
                                       checkedAtMs: self.clock.nowMs())
                self.state.withLock { $0.showCache = cache }
            } catch {
                if Task.isCancelled { return false }
                status = RuntimeStatus(endpoint: self.endpoint, verified: true, available: false, version: nil,
                                       models: [], checkedAtMs: self.clock.nowMs(), lastError: "\(error)")
            }
        } else {
            status = await self.verify()
        }
        if Task.isCancelled { return false }
        self.publish(status)
        if status.available { self.warmPinnedModels(status) }
        return status.available
    }

    /// Test-before-persist, then the caller's store. The endpoint counts as verified only once stored.
    private func verify() async -> RuntimeStatus {
        let unverified = { (error: String) in
            RuntimeStatus(endpoint: nil, verified: false, available: false, version: nil, models: [],
                          checkedAtMs: self.clock.nowMs(), lastError: error, kind: self.configuration.kind)
        }
        let status: RuntimeStatus
        do {
            switch self.configuration.kind {
            case .ollama: status = try await self.verifier.verify(endpoint: self.endpoint)
            case .openAICompatible:
                status = try await OpenAICompatibleVerifier(client: self.openAIClient, clock: self.clock).verify()
            }
        } catch {
            return unverified("\(error)")
        }
        do {
            try await self.persistVerified(status)
        } catch {
            return unverified("could not store the verified endpoint: \(error)")
        }
        self.state.withLock { $0.verified = true }
        self.logger.info("Runtime verified", metadata: ["runtime.endpoint": self.endpoint,
                                                        "runtime.version": status.version ?? ""])
        return status
    }

    /// Stores `status` as current and yields it when something a consumer acts on changed (not merely the
    /// probe time or the wording of an error).
    private func publish(_ status: RuntimeStatus) {
        var status = status
        let changed = self.state.withLock { s -> Bool in
            let old = s.status
            status.sharedCloudModels = s.sharedCloudModels
            s.status = status
            return old.endpoint != status.endpoint || old.verified != status.verified
                || old.available != status.available || old.version != status.version
                || old.models.map(\.withoutLoadDetails) != status.models.map(\.withoutLoadDetails)
                || old.sharedCloudModels != status.sharedCloudModels
                || old.knownParallelism != status.knownParallelism
        }
        self.observer.current?(())
        guard changed else { return }
        self.logger.debug("Runtime status changed", metadata: [
            "runtime.available": "\(status.available)", "runtime.models": "\(status.models.count)",
        ])
        self.continuation.yield(status)
    }

    /// Starts a keep-alive load for each pinned model that is installed, can complete, is not loaded and is
    /// not already being loaded. A finished load asks for a probe, so the loaded flag shows soon.
    private func warmPinnedModels(_ status: RuntimeStatus) {
        guard self.configuration.kind == .ollama else { return }
        // Case-insensitively, as Ollama matches names: a pin of `Qwen2.5:7B` keeps `qwen2.5:7b` warm.
        let pinned = Set(self.pinnedModels.map { RuntimeProbe.normalized($0).lowercased() })
        guard !pinned.isEmpty else { return }
        let cold = status.models.filter {
            pinned.contains(RuntimeProbe.normalized($0.tag).lowercased()) && $0.canComplete && !$0.loaded && !$0.cloud
        }
        for model in cold {
            self.state.withLock { s in
                guard s.warming[model.tag] == nil else { return }
                s.warming[model.tag] = Task { await self.warm(model.tag) }
            }
        }
    }

    private func warm(_ tag: String) async {
        defer { self.state.withLock { _ = $0.warming.removeValue(forKey: tag) } }
        do {
            try await self.client.keepAlive(tag, duration: self.configuration.pinnedKeepAlive)
            self.logger.debug("Pinned model loaded", metadata: ["runtime.model": tag])
            self.reverifySoon()
        } catch {
            self.logger.debug("Pinned model did not load", metadata: ["runtime.model": tag, "error": "\(error)"])
        }
    }
}
