import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import HomebaseNode
import HomebaseStore
import HomebaseTransport

/// The Homebase daemon's core: wires a `PeerMessenger` to pairing, adverts and inference.
///
/// `run()` publishes the start advert, then consumes the messenger's inbound messages, the runtime's status
/// changes, the heartbeat and the state-database poll until `stop()`; it returns once everything has ended,
/// with every in-flight request cancelled.
///
/// Dispatch: on sync_delta, `infer.request`/`infer.cancel`, `advert.request` and `pair.request` (the only
/// message a stranger may send); a sibling's `roster` or `advert` is ignored (this Homebase signs the roster
/// and is the one host). On contact, `infer.*` go to the inference server, whose `GuestAuthorizer` checks the
/// grant (strangers get silence); `contact.join`, `contact.leave` and `advert.request` go to `contacts`. Every
/// state poll also sends the owner's queued grants and revocations (`ContactService.deliverPending`).
public actor HomebaseDaemon {
    /// How the heartbeat advert is paced.
    public enum Heartbeat: Sendable {
        /// Every interval (Protocol/messages.md §3: 2 minutes).
        case every(Duration)
        /// One beat per element (tests drive it).
        case ticks(AsyncStream<Void>)
    }

    public struct Configuration: Sendable {
        public var heartbeat: Heartbeat
        /// How often the state database's `state_version` is polled for a CLI's changes.
        public var statePollInterval: Duration
        public var limits: InferenceLimits

        public init(heartbeat: Heartbeat = .every(.seconds(120)), statePollInterval: Duration = .seconds(1),
                    limits: InferenceLimits = InferenceLimits()) {
            self.heartbeat = heartbeat
            self.statePollInterval = statePollInterval
            self.limits = limits
        }
    }

    public let publicKey: PublicKey
    public nonisolated let directory: PeerDirectory
    public nonisolated let inference: InferenceServer
    public nonisolated let adverts: AdvertPublisher
    public nonisolated let pairing: PairingService
    /// The relay's last round trip (a SEND to its RECEIPT), ms, for the status page; nil before any.
    public nonisolated var relayRoundTripMs: UInt64? { self.messenger.relayRoundTripMs }
    /// The contact channel; nil only if the guest tables could not be opened (logged; guests are then strangers).
    public nonisolated let contacts: ContactService?
    /// When each peer was last heard from (the status page).
    public nonisolated let lastHeard = PeerLastHeard()

    public nonisolated let state: HomebaseState
    private let messenger: any PeerMessenger
    /// The messenger's replay set, when it commits without syncing: synced once per state poll.
    private let seen: SeenMessageStore?
    public nonisolated let runtime: any RuntimeStatusSource
    private let configuration: Configuration
    public nonisolated let clock: ServiceClock
    private let logger: Logger
    private var runTask: Task<Void, Never>?
    private var stopped = false
    private var lastStateVersion: UInt64?

    /// - Parameters:
    ///   - identity: the device key (`state.deviceKey()`); `messenger` must be logged in with it.
    ///   - directory: the same directory whose `relationLookup` the messenger was built with.
    ///   - authorizer: who may run models; by default siblings, and guests by their grant (`GuestAuthorizer`).
    ///   - guests: the guest registry; by default opened on `state`. The daemon points `directory`'s contact
    ///     lookup at it.
    ///   - readCadence: the engine's read pacing, if it has one; the inference server lengthens it as more
    ///     requests stream (`InferenceLimits.runtimeReadPacing(running:)`).
    ///   - seen: the messenger's replay set if it commits without syncing (`SeenMessageStore.syncsEveryCommit`
    ///     false): the daemon syncs it every `statePollInterval`. Its owner syncs it once more after stopping
    ///     the messenger, which records ids until then (`HomebaseRunner`).
    public init(state: HomebaseState, identity: SigningSecretKey, directory: PeerDirectory,
                messenger: any PeerMessenger, runtime: any RuntimeStatusSource, engine: any ChatEngine,
                authorizer: (any InferenceAuthorizer)? = nil, guests: GuestRegistry? = nil,
                readCadence: HTTPReadCadence? = nil, seen: SeenMessageStore? = nil,
                configuration: Configuration = Configuration(), clock: ServiceClock = .system,
                logger: Logger = .discard()) {
        self.publicKey = identity.publicKey
        self.state = state
        self.seen = seen
        self.directory = directory
        self.messenger = messenger
        self.runtime = runtime
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        var limits = configuration.limits
        if let settings = try? state.settings() {
            limits.maxConcurrent = settings.maxConcurrentRequests
            limits.maxQueued = settings.maxQueuedRequests
            limits.runtimeParallel = settings.runtimeParallel
        }
        var registry = guests
        if registry == nil {
            do {
                registry = try GuestRegistry(state: state)
            } catch {
                logger.error("cannot open the guest registry; guests are ignored", metadata: ["error": "\(error)"])
            }
        }
        let guestAuthorizer = registry.map {
            GuestAuthorizer(directory: directory, registry: $0, clock: clock, logger: logger.with("component", "guests"))
        }
        if let registry { directory.setContactLookup(registry) }
        self.inference = InferenceServer(
            engine: engine, runtime: runtime, messenger: messenger,
            authorizer: authorizer ?? guestAuthorizer ?? SiblingInferenceAuthorizer(directory: directory),
            limits: limits, readCadence: readCadence, clock: clock, logger: logger.with("component", "inference"))
        self.adverts = AdvertPublisher(
            identity: identity, state: state, runtime: runtime, messenger: messenger,
            siblings: { [directory] in directory.siblings },
            guests: { [registry] in registry?.advertRecipients(nowMs: clock.nowMs()) ?? [] },
            clock: clock, logger: logger.with("component", "advert"))
        self.pairing = PairingService(state: state, logger: logger.with("component", "pairing"))
        if let registry, let guestAuthorizer {
            self.contacts = ContactService(
                registry: registry, authorizer: guestAuthorizer, messenger: messenger, adverts: self.adverts,
                inference: self.inference, clock: clock, logger: logger.with("component", "guests"))
        } else {
            self.contacts = nil
        }
    }

    /// Runs until `stop()` (or until the calling task is cancelled, or the messenger's inbound stream ends).
    /// Calling it again after it returned does nothing.
    public func run() async {
        guard self.runTask == nil, !self.stopped else { return }
        // Whatever changed since the directory was loaded (a CLI pairing meanwhile) counts from here on.
        await self.reloadIfChanged()
        self.adverts.publishOnStart()
        // Grants and revocations made while the daemon was not running.
        await self.contacts?.deliverPending()
        // `stop()` may have run while this actor was suspended above (actor reentrancy): honour it, or the loops
        // below would start after the stop and never end.
        guard !self.stopped else { return }
        // Requests and cancels are served where they arrive (the relay link's thread), not through `inbound`.
        self.messenger.setInlineHandler { [weak self] inbound in self?.takeInline(inbound) ?? false }
        let task = Task { await self.runLoops() }
        self.runTask = task
        // Cancelling the task that called `run()` stops the daemon too.
        await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        self.messenger.setInlineHandler(nil)
        self.inference.stopAll()
        // Usage of answers that ended just before the stop is still being written.
        await self.contacts?.authorizer.usageWritten()
    }

    /// Makes the replay ids recorded since the last sync durable (`seen`); a failure is logged, and the ids
    /// stay for the next sync. Every state poll, and once more by the owner after the messenger stopped.
    func syncSeen() {
        do {
            try self.seen?.sync()
        } catch {
            self.logger.warning("Cannot sync the seen-message ids", metadata: ["error": "\(error)"])
        }
    }

    /// Stops `run()`: its loops end and in-flight requests are cancelled.
    public func stop() {
        self.stopped = true
        self.runTask?.cancel()
    }

    private nonisolated func runLoops() async {
        // Each loop returns whether its ending ends the daemon: only the messenger's inbound stream does (the
        // messenger was shut down); a finished status or tick stream just stops that loop.
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await message in self.messenger.inbound {
                    // A pair.request or contact.join is acknowledged to the relay only now (`InboundLedger`).
                    let durable = await self.dispatch(message)
                    self.messenger.settle(message, durable: durable)
                }
                return true
            }
            group.addTask {
                for await status in self.runtime.changes {
                    self.adverts.runtimeChanged(status)
                    if let settings = try? self.state.settings() {
                        self.inference.updateRuntimeParallel(
                            settings.effectiveRuntimeParallel(known: status.knownParallelism))
                    }
                }
                return false
            }
            group.addTask {
                switch self.configuration.heartbeat {
                case .every(let interval):
                    while !Task.isCancelled {
                        do { try await self.clock.sleep(interval) } catch { break }
                        self.adverts.heartbeat()
                    }
                case .ticks(let ticks):
                    for await _ in ticks { self.adverts.heartbeat() }
                }
                return false
            }
            group.addTask {
                while !Task.isCancelled {
                    do { try await self.clock.sleep(self.configuration.statePollInterval) } catch { break }
                    await self.reloadIfChanged()
                    await self.syncSeen()
                    await self.contacts?.deliverPending()
                }
                return false
            }
            while let ends = await group.next() {
                if ends || Task.isCancelled { break }
            }
            group.cancelAll()
        }
    }

    /// Handles one inbound message (`infer.*` as the inline path does, for a messenger without one). Returns
    /// whether its effect is durable or its refusal final (`PeerMessenger.settle`): false only when the state
    /// could not be read or written, and the message should come again.
    @discardableResult
    public func dispatch(_ inbound: InboundMessage) async -> Bool {
        if self.takeInline(inbound) { return true }
        let sender = inbound.sender
        switch inbound.channel {
        case .sibling:
            if case .pairRequest(let secret, let name) = inbound.message {
                let outcome = self.pairing.handle(sender: sender, secret: secret, name: name,
                                                  nowMs: self.clock.nowMs(), messenger: self.messenger,
                                                  directory: self.directory)
                return outcome != .failed
            }
            // The messenger already applied the entitlement rule; check again, cheaply, in case it is wired to
            // an older roster.
            guard self.directory.relation(of: sender).isSibling else { return true }
            switch inbound.message {
            case .advertRequest:
                self.adverts.answerRequest(from: sender, channel: .sibling)
            default:
                // roster, advert, settings.model_choice, host→client messages: nothing for the Homebase to do.
                break
            }
        case .contact:
            switch inbound.message {
            case .contactJoin, .contactLeave, .advertRequest:
                // No guest registry (it could not be opened): nothing can be recorded, so nothing is settled.
                guard let contacts = self.contacts else { return false }
                return await contacts.handle(inbound)
            default:
                // advert, roster, contact.grant/revoke (host → guest), pairing: nothing for a host to do.
                break
            }
        case .unknown:
            break
        }
        return true
    }

    /// The inline path (`PeerMessenger.setInlineHandler`), and `dispatch`'s first step: takes `infer.request`
    /// and `infer.cancel` to the inference server, on the thread that received them; everything else goes on to
    /// `dispatch`. Who may ask is the messenger's entitlement rule and then the server's authorizer (siblings by
    /// the roster on sync_delta, guests by their grant on contact); a cancel reaches only its sender's requests.
    private nonisolated func takeInline(_ inbound: InboundMessage) -> Bool {
        self.lastHeard.heard(from: inbound.sender, atMs: self.clock.nowMs())
        switch inbound.message {
        case .inferRequest(let request):
            self.inference.handleRequest(request, from: inbound.sender, channel: inbound.channel)
        case .inferCancel(let id):
            self.inference.handleCancel(id: id, from: inbound.sender)
        default:
            return false
        }
        return true
    }

    /// Re-reads the roster and settings if another process changed the state database.
    public func reloadIfChanged() async {
        guard let version = try? self.state.stateVersion(), version != self.lastStateVersion else { return }
        self.lastStateVersion = version
        do {
            if let roster = try self.state.currentRoster() { self.directory.update(roster: roster) }
            try self.contacts?.registry.reload()
            let settings = try self.state.settings()
            self.inference.updateAdmission(maxConcurrent: settings.maxConcurrentRequests,
                                           maxQueued: settings.maxQueuedRequests)
            self.runtime.setPinnedModels(settings.pinnedModels)
            self.runtime.setSharedCloudModels(settings.sharedCloudModels)
            self.inference.updateRuntimeParallel(
                settings.effectiveRuntimeParallel(known: self.runtime.current.knownParallelism))
        } catch {
            self.logger.error("cannot reload state", metadata: ["error": "\(error)"])
        }
    }
}
