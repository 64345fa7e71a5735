import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseNode
import HomebaseStore
import HomebaseTransport

/// `homebase run`: builds the daemon from the state database and runs it until stopped.
///
/// It owns the tasks: the relay messenger, the runtime monitor (test-before-persist, periodic re-verification),
/// the daemon, and a reporter that writes `DaemonStatus` for the CLI subcommands at start and on change. It holds
/// the state's `DaemonLock` while it runs, so a second daemon on the same state stops at start.
public final class HomebaseRunner: Sendable {
    public struct Options: Sendable {
        /// Builds the chat engine for the runtime's `/v1` (the OpenAI-compatible surface; design.md §R4), reading
        /// streams at the given cadence (`nil`: unpaced), which the inference server adjusts to the load.
        public var makeEngine: @Sendable (_ ollamaURL: String, _ readCadence: HTTPReadCadence?) -> any ChatEngine
        public var relayOptions = RelayLink.Options()
        public var daemon = HomebaseDaemon.Configuration()
        public var monitor = RuntimeMonitor.Configuration()
        /// Serve the status page (`--ui`); nil: none.
        public var ui: StatusPageServer.Configuration?
        public init(makeEngine: @escaping @Sendable (_ ollamaURL: String, _ readCadence: HTTPReadCadence?) -> any ChatEngine
                        = Options.ollamaEngine) {
            self.makeEngine = makeEngine
        }

        /// The engine the daemon runs: `OpenAIChatEngine.ollama`, the builder the handset's `OllamaProvider`
        /// uses too, over a client that keeps as many connections alive as requests may stream at once (a burst
        /// of streams then reuses connections instead of opening new ones, connect and Ollama's accept, per
        /// request).
        public static let ollamaEngine: @Sendable (_ ollamaURL: String, _ readCadence: HTTPReadCadence?) -> any ChatEngine = {
            OpenAIChatEngine.ollama(http: HTTPClient(maxIdleConnections: HomebaseSettings.maxConcurrentCeiling), url: $0,
                                    readCadence: $1)
        }
    }

    private let state: HomebaseState
    private let options: Options
    private let logger: Logger
    private let stopSignal = AsyncStream<Void>.makeStream()

    public init(state: HomebaseState, options: Options, logger: Logger) {
        self.state = state
        self.options = options
        self.logger = logger
    }

    /// Asks `run()` to return. Thread-safe.
    public func stop() { self.stopSignal.continuation.finish() }

    /// Runs until `stop()`.
    public func run() async throws {
        guard try self.state.isInitialized else { throw CLIError("not initialised; run 'homebase init --relay URL'") }
        let lock = try self.state.daemonLockPath.map { path throws(DaemonLock.Failure) in
            try DaemonLock.acquire(path: path)
        }
        defer { withExtendedLifetime(lock) {} }
        let settings = try self.state.settings()
        // The lock says a daemon runs from here on: until the reporter's first word, the report a previous
        // daemon left (perhaps killed while connected) must not speak for this one.
        try? self.state.setDaemonStatus(DaemonStatus(
            pid: ProcessInfo.processInfo.processIdentifier, updatedAtMs: Posix.wallClockMs, relayURL: settings.relayURL,
            relayConnected: false, runtime: .unknown))
        let identity = try self.state.deviceKey()
        let directory = PeerDirectory(selfKey: identity.publicKey, roster: try self.state.currentRoster())
        // Ids commit without an fsync of their own; the daemon syncs them once a second (SeenMessageStore).
        let seen = try SeenMessageStore(database: self.state.database, syncsEveryCommit: false)
        var relayOptions = self.options.relayOptions
        if relayOptions.accessToken == nil { relayOptions.accessToken = ProcessInfo.processInfo.environment["HOMEBASE_RELAY_TOKEN"] }
        let messenger = RelayMessenger(url: settings.relayURL, key: identity, seen: seen,
                                       relation: directory.relationLookup, options: relayOptions,
                                       logger: self.logger.with("component", "relay"),
                                       versionStore: try PeerVersionStore(database: self.state.database),
                                       // Pairing and the guest list: acknowledged once the daemon committed them.
                                       settledTypes: InboundLedger.hostSettledTypes)
        let http = HTTPClient()
        let state = self.state
        var monitorConfiguration = self.options.monitor
        monitorConfiguration.pinnedModels = settings.pinnedModels
        monitorConfiguration.sharedCloudModels = settings.sharedCloudModels
        monitorConfiguration.kind = settings.runtime
        let verified = state.verifiedEndpoint() == settings.verifiedRuntimeIdentity
        let monitor = RuntimeMonitor(
            endpoint: settings.ollamaURL, verified: verified, configuration: monitorConfiguration, http: http,
            logger: self.logger.with("component", "runtime")
        ) { status in
            try state.setVerifiedEndpoint(settings.verifiedRuntimeIdentity)
        }
        let guests = try GuestRegistry(state: self.state)
        let cadence = self.options.daemon.limits.runtimeReadPacing.map(HTTPReadCadence.init)
        let daemon = HomebaseDaemon(
            state: self.state, identity: identity, directory: directory, messenger: messenger, runtime: monitor,
            engine: self.options.makeEngine(settings.ollamaURL, cadence), guests: guests, readCadence: cadence,
            seen: seen, configuration: self.options.daemon, logger: self.logger)
        let collector = StatusCollector(daemon: daemon)
        let page: (server: StatusPageServer, url: String)?
        if let ui = self.options.ui {
            let server = StatusPageServer(collector: collector, configuration: ui,
                                          logger: self.logger.with("component", "ui"))
            let port = try server.start()
            let url = "http://\(ui.host.contains(":") ? "[\(ui.host)]" : ui.host):\(port)/"
            page = (server, url)
            self.logger.notice("Status page listening on \(url)")
        } else {
            page = nil
        }
        defer { page?.server.stop() }
        messenger.start()
        self.logger.notice("Homebase running", metadata: ["device": identity.publicKey.short,
                                                          "relay": settings.relayURL, "runtime": settings.runtime.rawValue,
                                                          "endpoint": settings.ollamaURL])
        // What the report shows changes with the relay link and the runtime's probes: they say so, and nothing
        // polls (an idle daemon wakes for neither).
        let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        monitor.observe { changed.yield() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await monitor.run() }
            group.addTask { await daemon.run() }
            group.addTask {
                for await event in messenger.events {
                    collector.relayEvent(event)
                    changed.yield()
                }
            }
            group.addTask {
                await self.report(messenger: messenger, monitor: monitor, relayURL: settings.relayURL,
                                  ui: page.map { ($0.url, self.options.ui?.accessToken) }, changes: changes)
            }
            if page != nil {
                // The chart's buckets: what was admitted and streamed, once a second.
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: .seconds(1)) } catch { break }
                        collector.sample()
                    }
                }
            }
            group.addTask { [stopSignal] in
                for await _ in stopSignal.stream {}
            }
            // The stop signal ends first; then everything else is cancelled.
            _ = await group.next()
            await daemon.stop()
            group.cancelAll()
        }
        messenger.stop()
        // Ids the link recorded after the daemon's last sync (its loops end before the link does).
        await daemon.syncSeen()
        try? self.state.setDaemonStatus(DaemonStatus(pid: 0, updatedAtMs: 0, relayURL: settings.relayURL,
                                                     relayConnected: false, runtime: monitor.current))
        self.logger.notice("Homebase stopped")
    }

    /// Writes the daemon's status for the CLI at start and at each change of the relay link or the runtime
    /// (`changes` says when one may have happened). No heartbeat: the lock says whether the daemon runs, so an
    /// idle daemon writes nothing, and it does not wake to look either.
    private func report(messenger: RelayMessenger, monitor: RuntimeMonitor, relayURL: String,
                        ui: (url: String, token: String?)?, changes: AsyncStream<Void>) async {
        let pid = ProcessInfo.processInfo.processIdentifier
        var last: (connected: Bool, problem: String?, runtime: RuntimeStatus)?
        var changes = changes.makeAsyncIterator()
        while !Task.isCancelled {
            let connected = messenger.isConnected
            let problem = connected ? nil : messenger.connectProblem?.description
            let runtime = monitor.current
            if last.map({ $0.connected != connected || $0.problem != problem || $0.runtime != runtime }) ?? true {
                let status = DaemonStatus(pid: pid, updatedAtMs: Posix.wallClockMs, relayURL: relayURL,
                                          relayConnected: connected, runtime: runtime, uiURL: ui?.url,
                                          uiToken: ui?.token, relayProblem: problem)
                do {
                    try self.state.setDaemonStatus(status)
                    last = (connected, problem, runtime)
                } catch {
                    // Tried again in a second, change or not: the report must not stay stale.
                    self.logger.warning("Cannot write daemon status", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: .seconds(1))
                    continue
                }
            }
            guard await changes.next() != nil else { return }
        }
    }
}
