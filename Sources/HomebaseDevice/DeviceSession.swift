import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseCuration
import HomebaseNode
import HomebaseRouter
import HomebaseStore
import HomebaseTransport
import Synchronization

/// Everything a handset or guest command works with: the state database and its stores, the sealed
/// messenger, the inference response router (whose `otherMessages` handler dispatches adverts, rosters,
/// grants and the model choice), the provider factory and the `LLMRouter`.
///
/// Nothing touches the network until `connect(timeout:)`; one-shot commands connect with a short bound and
/// then proceed offline if need be (routing then lands on-device with the router's or the provider's reason).
/// `stop()` ends the relay link cleanly.
public final class DeviceSession: Sendable {
    /// Namespaces in the state database's key-value table.
    enum Namespace {
        static let settings = "settings."
        static let secrets = "secrets."
        static let device = "device."
        static let account = "account."
        static let guest = "guest."
    }

    /// How a session is tuned (one-shot bounds, watchdogs for tests).
    public struct Options: Sendable {
        /// The inference watchdog ladder (the spec's 10 s / 90 s / 30 s unless a test shortens it).
        public var watchdogs = InferenceClientStateMachine.Watchdogs()
        /// The relay access token, when the relay needs one.
        public var relayToken: String?
        public init() {}
    }

    public let node: NodeState
    public let identity: SigningSecretKey
    public let settings: AgentSettings
    public let keys: CloudKeyStore
    public let runtime: ExternalRuntimeStore
    public let adverts: ExternalModelsAdvertStore
    public let joined: SQLiteJoinedHomebaseStore
    public let account: HandsetAccount
    public let guest: GuestMemberships
    public let http: DeviceHTTP
    public let messenger: any PeerMessenger
    public let responses: InferenceResponseRouter
    public let router: LLMRouter
    /// The on-device models: catalog, downloads, ready markers, the floor rules (design.md §C).
    public let models: OnDeviceModelStore
    /// Unix milliseconds (wall time: stamps and freshness). Timers use the monotonic clock the session was given.
    public let clock: @Sendable () -> UInt64
    private let relay: RelayMessenger?
    private let counters = Mutex(Counters())

    struct Counters {
        var started = false
        var storedAnnounced = 0
        var otherHandled = 0
        var advertsStored = 0
        var siblingDownloads: [Task<Void, Never>] = []
    }

    /// Opens an initialised state directory and builds the real relay messenger (not yet started).
    public convenience init(directory: StateDirectory, tool: String, http: DeviceHTTP, options: Options = Options(),
                            logger: Logger = .discard()) throws {
        try directory.requireInitialized(tool: tool)
        let node = try NodeState(path: directory.databasePath)
        let identity = try node.identity()
        let url = try node.relayURL()
        let seen = try SeenMessageStore(database: node.database)
        var linkOptions = RelayLink.Options()
        linkOptions.accessToken = options.relayToken ?? node.relayToken
        linkOptions.connectTimeout = .seconds(5)
        let box = RelationBox()
        let relay = RelayMessenger(url: url, key: identity, seen: seen, relation: { box.relation($0) },
                                   options: linkOptions, logger: logger,
                                   versionStore: try PeerVersionStore(database: node.database))
        try self.init(node: node, identity: identity, messenger: relay, relay: relay, http: http, options: options,
                      logger: logger, clock: { Posix.wallClockMs }, timers: .system)
        box.set { [weak self] key in self?.relation(of: key) ?? .stranger }
    }

    /// Builds a session over any messenger (tests pass a `LoopbackMessenger`, whose relation lookup should call
    /// `relation(of:)` of the session; see `RelationBox`).
    public init(node: NodeState, identity: SigningSecretKey, messenger: any PeerMessenger, relay: RelayMessenger?,
                http: DeviceHTTP, options: Options = Options(), logger: Logger = .discard(),
                clock: @escaping @Sendable () -> UInt64, timers: MonotonicClock) throws {
        self.node = node
        self.identity = identity
        self.clock = clock
        self.http = http
        self.messenger = messenger
        self.relay = relay
        let backend = { (ns: String) in SQLiteSettingsBackend(store: node.kv, namespace: ns) }
        self.settings = AgentSettings(backend: backend(Namespace.settings))
        self.keys = CloudKeyStore(backend: backend(Namespace.secrets))
        self.runtime = ExternalRuntimeStore(backend: backend(Namespace.device))
        self.adverts = ExternalModelsAdvertStore(backend: backend(Namespace.device))
        self.joined = try SQLiteJoinedHomebaseStore(database: node.database)
        self.account = HandsetAccount(backend: backend(Namespace.account), selfKey: identity.publicKey)
        self.guest = GuestMemberships(store: self.joined, backend: backend(Namespace.guest),
                                      selfKey: identity.publicKey, clock: clock)
        self.responses = InferenceResponseRouter(messenger: messenger)
        let models = OnDeviceModelStore(access: http.hub, device: backend(Namespace.device), settings: self.settings,
                                        clock: clock)
        self.models = models
        // A device model on the Hub-cache runtime answers through the stand-in runtime, over the floor. With a
        // device engine (read at every call), the floor's answers and the downloaded model's come from it; the
        // canned floor stays last.
        var makers = http.makers
        let ollamaRung = makers.onDevice
        let settings = self.settings
        let engineHTTP = http.engineHTTP
        makers.onDevice = { model in
            let engine = engineHTTP.flatMap { client in
                settings.deviceEngine.map { (client, $0) }
            }
            if let model, model.isHub {
                return OnDeviceProvider(deviceModel: model, makeDeviceProvider: { chosen in
                    let hub = HubModelProvider(id: chosen.tag, store: models,
                                               engine: engine.map { DeviceEngineProvider(http: $0.0, engine: $0.1, reportAs: chosen.tag) })
                    guard let (client, device) = engine else { return hub }
                    // Not downloaded (or not loadable): the engine answers as the floor would, then the canned floor.
                    return FallbackProvider(primary: hub,
                                            fallback: DeviceEngineProvider(http: client, engine: device, reportAs: device.model))
                })
            }
            guard model == nil, let (client, device) = engine else { return ollamaRung(model) }
            return OnDeviceProvider(deviceModel: DeviceModel(url: device.url, tag: device.model), makeDeviceProvider: { _ in
                DeviceEngineProvider(http: client, engine: device, reportAs: device.model)
            })
        }
        let factory = RelayInferenceProviderFactory(
            responses: self.responses, http: makers, joined: self.joined, watchdogs: options.watchdogs,
            wallClock: WallClock(clock), timers: timers, logger: logger)
        self.router = LLMRouter(settings: self.settings, keys: self.keys, runtime: self.runtime,
                                adverts: self.adverts, joined: self.joined, factory: factory, isHomebase: false,
                                clock: WallClock(clock), deviceModelFloor: { model in
                                    // A Hub model answers only once downloaded and loadable (the floor rules).
                                    guard model.isHub, case .floor(let reason) = models.resolve(choice: model.tag)
                                    else { return nil }
                                    return reason
                                })
        self.responses.setOtherMessagesHandler { [weak self] in self?.dispatch($0) }
        self.responses.setEventsHandler { [weak self] event in
            if case .connected(let stored) = event {
                self?.counters.withLock { $0.storedAnnounced = stored }
            }
        }
    }

    /// Creates (or updates) a device's state: identity, relay URL, name; the radio is set to the floor so a
    /// fresh device never routes to a cloud because a key was pasted (design.md §D).
    @discardableResult
    public static func initialize(directory: StateDirectory, relayURL: String, name: String) throws -> PublicKey {
        try directory.create()
        let fresh = !directory.exists
        let node = try NodeState(path: directory.databasePath)
        let key = try node.initialize(relayURL: relayURL, name: name)
        let settings = AgentSettings(backend: SQLiteSettingsBackend(store: node.kv, namespace: Namespace.settings))
        // Only a fresh device: re-running init must not overwrite a radio the user chose since.
        if fresh { try settings.setModelSource(.apple) }
        return key
    }

    /// This device's public key.
    public var publicKey: PublicKey { self.identity.publicKey }

    /// Siblings from the roster (and a Homebase being paired with), contacts from the joined store.
    public func relation(of sender: PublicKey) -> SenderRelation {
        SenderRelation(isSibling: self.account.relation(of: sender).isSibling,
                       isContact: self.guest.relation(of: sender).isContact)
    }

    // MARK: Connection

    /// Starts the relay link and waits at most `timeout` for the login, then at most `drain` for the stored
    /// frames the relay announced to be handled.
    ///
    /// - Returns: whether the device is connected.
    @discardableResult
    public func connect(timeout: Duration = .seconds(5), drain: Duration = .seconds(2)) async -> Bool {
        let start = self.counters.withLock { c -> Bool in
            defer { c.started = true }
            return !c.started
        }
        if start { self.relay?.start() }
        guard await Self.poll(timeout, { self.messenger.isConnected }) else { return false }
        _ = await Self.poll(drain) {
            self.counters.withLock { $0.otherHandled >= $0.storedAnnounced }
        }
        return true
    }

    /// Why the relay could not be used, when a connection was tried and failed (nil otherwise).
    public var relayProblem: String? {
        self.messenger.isConnected ? nil : self.relay?.connectProblem?.description
    }

    /// Why `connect` failed, in one line from what the last attempt met (issue 39): the same text the daemon
    /// logs and `homebase status` shows.
    public var connectFailure: String {
        if let problem = self.relay?.connectProblem { return problem.description }
        let url = ((try? self.node.relayURL()) ?? "").split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        return "no answer from the relay at \(url) in time; is it running, and is the URL right?"
    }

    /// Stops the link (if it was started), then the response router. The link's stop waits for its thread, so
    /// every message it accepted has been handled (`InferenceResponseRouter.routeInline`) when this returns.
    public func stop() {
        let started = self.counters.withLock { $0.started }
        if started { self.relay?.stop() }
        self.responses.stop()
    }

    // MARK: Adverts

    /// Asks `host` for its advert (`advert.request`, live) and waits at most `timeout` for one to be stored; a
    /// failed receipt (the host is offline) ends the wait at once.
    ///
    /// - Returns: whether a new advert was stored.
    @discardableResult
    public func refreshAdvert(from host: PublicKey, channel: Channel, timeout: Duration) async -> Bool {
        guard self.messenger.isConnected else { return false }
        let before = self.counters.withLock { $0.advertsStored }
        let outcome = await self.messenger.sendAndWait(.advertRequest, to: host, channel: channel, store: false)
        guard !outcome.isFailure else { return false }
        return await Self.poll(timeout) { self.counters.withLock { $0.advertsStored > before } }
    }

    // MARK: Inbound dispatch

    /// Every message that is not an inference answer: pairing and rosters, sibling adverts and the model
    /// choice, and the contact channel's grants, adverts and revocations.
    func dispatch(_ inbound: InboundMessage) {
        var stored = false
        switch inbound.channel {
        case .sibling:
            if !self.account.handle(inbound) {
                switch inbound.message {
                case .advert(let blob):
                    stored = self.account.receiveAdvert(blob, from: inbound.sender, into: self.adverts)
                case .modelChoice(let choice):
                    if self.account.receiveModelChoice(choice, from: inbound.sender, settings: self.settings) {
                        self.startSiblingDownload(choice.modelID)
                    }
                default:
                    break
                }
            }
        case .contact:
            stored = self.guest.handle(inbound) == .advertStored
        case .unknown:
            break
        }
        self.counters.withLock {
            $0.otherHandled += 1
            if stored { $0.advertsStored += 1 }
        }
    }

    /// A sibling chose a Hub model this device knows, can run and lacks (and this device's runtime is the Hub
    /// cache): download it here too, so the devices converge on the same brain. Until it is ready the floor answers.
    func startSiblingDownload(_ id: String) {
        guard self.settings.deviceModel?.isHub == true else { return }
        let store = self.models
        guard OnDeviceResolution.siblingShouldDownload(id, catalog: store.offlineCatalog(), custom: store.customRepos,
                                                       states: store.machine())
        else { return }
        let task = Task { _ = try? await store.download(id) }
        self.counters.withLock { $0.siblingDownloads.append(task) }
    }

    /// Downloads started because a sibling chose a model (`handset chat` waits for none of them).
    public var siblingDownloads: [Task<Void, Never>] { self.counters.withLock { $0.siblingDownloads } }

    /// Polls `condition` every 10 ms until it holds or `timeout` passes.
    static func poll(_ timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            // Cancelled: stop, rather than spin until the deadline on a sleep that no longer waits.
            do { try await Task.sleep(for: .milliseconds(10)) } catch { return condition() }
        }
    }
}

/// Lets a messenger built before its session ask that session who a sender is.
public final class RelationBox: Sendable {
    private let lookup = CallbackSlot<PublicKey, SenderRelation>()
    public init() {}
    public func set(_ lookup: @escaping RelationLookup) { self.lookup.set(lookup) }
    public func relation(_ key: PublicKey) -> SenderRelation { self.lookup.current?(key) ?? .stranger }
}
