#if canImport(Glibc)
import Glibc
#endif
import HomebaseCore
import HomebaseEngines
import HomebaseNode
import HomebaseTransport
import Synchronization

/// Serves `infer.request` (Protocol/messages.md §2) by streaming from the runtime's chat engine.
///
/// Per request: authorise (`InferenceAuthorizer`), validate (`InferenceLimits`), check the runtime and the
/// model, admit (a slot, or a place in the bounded queue, else `busy`), answer `infer.accept` at once —
/// queued requests are accepted too: accept means admitted, and the client's first-output watchdog covers the
/// wait — then stream: coalesced `infer.chunk`s with `seq` 0…n-1 and `infer.done` with the count, or one
/// `infer.error`. All replies are live sends. The streaming itself is an `InferenceStream` per request, fed by
/// the engine on the engine's own thread: the server admits, starts and ends requests, and hears nothing per read.
///
/// A request ends early, silently, on `infer.cancel` from its sender or a failed RECEIPT for its accept or one
/// of its chunks (the requester is gone): its stream is stopped, which aborts the HTTP request, and its
/// slot goes to the next queued request. Per request the server holds at most the coalescer's pending text.
///
/// Synchronous, on the caller's thread: the relay link's thread admits a batch of requests itself (their
/// accepts leave in the batch's one write, `PeerMessenger.setInlineHandler`), and the engine's thread ends the
/// answers of one pass and starts queued requests at the pass's end: no task and no hop onto an executor
/// thread per request. The decisions run under one lock (`LockedState`), so the authorizer's hooks run under it, on
/// those I/O threads: they must be quick and must not call back into the server. What a decision sets off that
/// calls back (a stream's end, a failed RECEIPT) is queued and handled after the lock is let go: by the thread
/// that let it go, at the end of the calling thread's `DeferredWakes` batch, or, outside any batch (a RECEIPT
/// told inside a stream's send), by a task.
public final class InferenceServer: Sendable {
    /// A job's identity. Its hash is taken once, when it is made: a request's key is looked up about a dozen
    /// times (jobs, the at-most-once set, its sends and its end), and each full hash of a 32-byte key and a
    /// 36-byte id cost more than the lookup. The value still comes from `Hasher` (seeded per process), so ids
    /// a requester chooses cannot be aimed at one bucket.
    struct Key: Hashable {
        let sender: PublicKey
        let id: String
        private let hashed: Int

        init(sender: PublicKey, id: String) {
            self.sender = sender
            self.id = id
            var hasher = Hasher()
            hasher.combine(sender)
            hasher.combine(id)
            self.hashed = hasher.finalize()
        }

        static func == (a: Key, b: Key) -> Bool {
            a.hashed == b.hashed && a.sender == b.sender && a.id == b.id
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(self.hashed)
        }
    }

    fileprivate struct Job {
        /// Tells a job from a later one with the same key, for callbacks that arrive after it ended.
        let token: UInt64
        let channel: Channel
        let request: InferRequest
        /// Keep the answer for the authorizer (conversation cache).
        let keepAnswer: Bool
        /// When it was admitted (wall clock, ms), for the status page.
        let admittedAtMs: UInt64
        /// When it was admitted (monotonic ms), for its time to first token and how long it took.
        let admittedAtMonotonicMs: UInt64
        /// Its model can think (capability `thinking`), as the runtime said at admission: `think` goes only to
        /// such a model (Ollama refuses an effort for any other, 400).
        let thinks: Bool
        /// When it got its slot (monotonic ms), for its tokens per second.
        var startedAtMonotonicMs: UInt64 = 0
        /// The answer streaming, once the job has a slot.
        var stream: InferenceStream?
        var running: Bool { self.stream != nil }
    }

    /// A request waiting for a slot, with what the queue's passes read of it, so that a pass (one at every end of a
    /// request, under steady load) walks this array alone: no job lookups or copies, no hashing of model names.
    struct Queued {
        let key: Key
        let model: String
        /// When it was queued (monotonic ms): it is told its place `queueTellDelayMs` after.
        let queuedAtMs: UInt64
        /// The position last told the requester (`infer.queued`), and when (monotonic ms).
        var toldPosition: Int?
        var toldAtMs: UInt64 = 0
    }

    /// Per model served: requests streaming now and how long a whole answer took lately (ms, a moving average),
    /// to judge whether the queue can start a request within the requester's first-output window. A Homebase
    /// serves a few models (only advertised ones are admitted), so a short array scanned by name beats a
    /// dictionary, whose every lookup hashed the name: four a request, about 1,000 instructions of a stream's
    /// 500,000 (tools/bench-instructions).
    struct ModelLoads {
        private var entries: [(model: String, running: Int, answerMs: Double?)] = []

        func running(_ model: String) -> Int {
            self.entries.first { $0.model == model }?.running ?? 0
        }

        func answerMs(_ model: String) -> Double? {
            self.entries.first { $0.model == model }?.answerMs
        }

        mutating func started(_ model: String) {
            if let i = self.entries.firstIndex(where: { $0.model == model }) {
                self.entries[i].running += 1
            } else {
                self.entries.append((model, 1, nil))
            }
        }

        /// One of `model`'s requests ended; `tookMs`: it answered whole, in that long.
        mutating func ended(_ model: String, tookMs: Double?) {
            guard let i = self.entries.firstIndex(where: { $0.model == model }) else { return }
            self.entries[i].running = max(0, self.entries[i].running - 1)
            if let took = tookMs {
                self.entries[i].answerMs = self.entries[i].answerMs.map { $0 * 0.7 + took * 0.3 } ?? took
            }
        }
    }

    /// What a decision set off that calls back into the server: handled after the lock is let go.
    enum Deferred: Sendable {
        /// A stream ended by itself (`InferenceStream.End`), told on the engine's thread.
        case ended(InferenceStream.End, key: Key, token: UInt64)
        /// A RECEIPT said the requester is gone (for an accept or a chunk).
        case requesterGone(key: Key, token: UInt64)
        /// A queued request's place was held back (`queueTellDelayMs`, `queueTellIntervalMs`): tell it if due.
        case tellPositions(scheduledAtMs: UInt64)
    }

    private let locked: Mutex<LockedState>
    /// Deferred work not yet handled (see the type's docs).
    private let deferred = Mutex<[Deferred]>([])
    /// The thread holding `locked` (pthread_self), 0 when none: a deferral made under the lock is left to the
    /// holder, who handles it after letting go, rather than waiting for the lock it holds.
    private let holder = Atomic<UInt>(0)
    /// Passes made to handle deferred work (tests count them: the ends of one engine pass take one).
    let deferredPasses = Atomic<Int>(0)

    public init(engine: any ChatEngine, runtime: any RuntimeStatusSource, messenger: any PeerMessenger,
                authorizer: any InferenceAuthorizer, limits: InferenceLimits = InferenceLimits(),
                readCadence: HTTPReadCadence? = nil, clock: ServiceClock = .system, logger: Logger = .discard()) {
        self.locked = Mutex(LockedState(engine: engine, runtime: runtime, messenger: messenger, authorizer: authorizer,
                               limits: limits, readCadence: readCadence, clock: clock, logger: logger))
        self.locked.withLock { $0.server = self }
    }

    /// Requests streaming now.
    public var activeCount: Int { self.withLocked { $0.runningCount } }
    /// Admitted requests waiting for a slot.
    public var queuedCount: Int { self.withLocked { $0.queue.count } }

    /// What streams now and what went wrong lately, for the status page.
    public var activity: InferenceActivity { self.withLocked { $0.activity() } }

    /// The limits in force (admission limits follow the settings).
    public var currentLimits: InferenceLimits { self.withLocked { $0.limits } }

    /// New admission limits (settings changed). Running requests are not touched; freed slots go to the queue.
    public func updateAdmission(maxConcurrent: Int, maxQueued: Int) {
        self.withLocked { $0.updateAdmission(maxConcurrent: maxConcurrent, maxQueued: maxQueued) }
    }

    /// How many requests per model the runtime runs at once (`homebase config --runtime-parallel`); more
    /// slots start queued requests at once.
    public func updateRuntimeParallel(_ parallel: Int) {
        self.withLocked { $0.updateRuntimeParallel(parallel) }
    }

    /// One `infer.request` from `sender` on `channel`, after the envelope's entitlement rule passed.
    public func handleRequest(_ request: InferRequest, from sender: PublicKey, channel: Channel) {
        self.withLocked { $0.handleRequest(request, from: sender, channel: channel) }
    }

    /// `infer.cancel` from `sender`: stops the request if that sender owns it; sends nothing. The id is
    /// remembered, so a request that comes after its cancel (it was delayed on its way) is not served.
    public func handleCancel(id: String, from sender: PublicKey) {
        self.withLocked { locked in
            let key = Key(sender: sender, id: id)
            if let job = locked.jobs[key] {
                // A requester cancels when its watchdog fires (it falls back) or its user stops the answer.
                locked.record(.cancelled, code: nil, message: "cancelled by the requester", peer: sender,
                            channel: job.channel, model: job.request.model)
            }
            locked.end(key, chargeStreamed: true)
            locked.remember(key)
        }
    }

    /// The owner stops one request from the status page, without revoking anyone: the stream stops, the
    /// requester gets `infer.error` `host_error` (and falls back), and text already streamed is charged.
    /// - Returns: false when no such request runs or waits.
    @discardableResult
    public func stop(id: String, from sender: PublicKey) -> Bool {
        self.withLocked { locked in
            let key = Key(sender: sender, id: id)
            guard locked.jobs[key] != nil else { return false }
            locked.end(key, outcome: .cancelled, reply: (.hostError, "stopped by the Homebase's owner"),
                     chargeStreamed: true, label: "stopped")
            return true
        }
    }

    /// Cancels every request (the daemon is stopping). Nothing more is sent for them, and requests that still
    /// arrive (the relay link's thread may be handing one over now) are ignored.
    public func stopAll() {
        self.withLocked { locked in
            locked.stopped = true
            for key in Array(locked.jobs.keys) { locked.end(key) }
        }
    }

    /// Stops every request of `sender`, streaming or queued, at once (a guest was revoked or left): the
    /// engine streams are cancelled. With `error`, each request gets one `infer.error` so the requester
    /// stops waiting; without, nothing more is sent.
    /// - Returns: how many requests were stopped.
    @discardableResult
    public func cancelAll(from sender: PublicKey, error: InferErrorCode? = nil) -> Int {
        self.withLocked { $0.cancelAll(from: sender, error: error) }
    }

    // MARK: The lock

    /// Runs `body` under the lock, then handles what it deferred.
    private func withLocked<T: Sendable>(_ body: (LockedState) -> T) -> T {
        let value = self.locked.withLock { locked -> T in
            self.holder.store(Self.currentThread, ordering: .relaxed)
            defer { self.holder.store(0, ordering: .relaxed) }
            return body(locked)
        }
        self.handleDeferred()
        return value
    }

    /// Queues `item`. It is handled when the lock is next let go on this thread (deferred under it), at the end
    /// of this thread's batch (`DeferredWakes`: one pass for all the items of an engine pass, or of a batch of
    /// relay frames), or else by a task: never right here, since the caller may hold a lock of its own (a
    /// RECEIPT told inside a stream's send).
    func postpone(_ item: Deferred) {
        let first = self.deferred.withLock { queue in
            queue.append(item)
            return queue.count == 1
        }
        // Under the lock on this thread: its holder handles the queue after letting go.
        if self.holder.load(ordering: .relaxed) == Self.currentThread { return }
        // Later items ride on the pass already asked for, until it takes the queue.
        guard first else { return }
        if DeferredWakes.isBatching {
            DeferredWakes.wake(self) { [self] in self.handleDeferred() }
        } else {
            Task { self.handleDeferred() }
        }
    }

    /// Handles the deferred items, and any they defer in turn, until none is left. Frames they send leave
    /// together (one `DeferredWakes` batch).
    private func handleDeferred() {
        while true {
            let items = self.deferred.withLock { queue in
                defer { queue = [] }
                return queue
            }
            guard !items.isEmpty else { return }
            self.deferredPasses.add(1, ordering: .relaxed)
            DeferredWakes.batch {
                self.locked.withLock { locked in
                    self.holder.store(Self.currentThread, ordering: .relaxed)
                    defer { self.holder.store(0, ordering: .relaxed) }
                    for item in items { locked.handle(item) }
                }
            }
        }
    }

    /// This thread, as `holder` records it.
    private static var currentThread: UInt { UInt(pthread_self()) }
}

extension InferenceServer {
    /// The server's state and decisions; used only under `InferenceServer.locked`'s lock.
    fileprivate final class LockedState {
        let engine: any ChatEngine
        let runtime: any RuntimeStatusSource
        let messenger: any PeerMessenger
        let authorizer: any InferenceAuthorizer
        let clock: ServiceClock
        let logger: Logger
        var limits: InferenceLimits
        /// The engine's read pacing, lengthened as more requests stream
        /// (`InferenceLimits.runtimeReadPacing(running:)`).
        let readCadence: HTTPReadCadence?
        /// The server, for callbacks (they defer work to it).
        weak var server: InferenceServer?
        /// When the scheduled `tellPositions` pass is due (monotonic ms), nil when none is.
        var tellScheduledAtMs: UInt64?
        /// No queued request can be due a tell before this (monotonic ms; `.max`: none queued). Lowered as
        /// requests are queued, recomputed by each pass that walks the queue.
        var nextTellBoundMs = UInt64.max

        var jobs: [Key: Job] = [:]
        var runningCount = 0
        /// Requests streaming per model, each at most `limits.runtimeParallel`, and how long its answers took.
        var models = ModelLoads()
        /// Admitted requests waiting for a slot, oldest first. At most `limits.maxQueued`, so removal by scan is cheap.
        var queue: [Queued] = []
        var nextToken: UInt64 = 0
        var remembered: Set<Key> = []
        var rememberedOrder: [Key] = []
        /// Each sender's allowance of refusals (`InferenceLimits.refusalsPerMinute`). Senders are peers the
        /// messenger let through (siblings, known guests); buckets that refilled are dropped when it grows.
        var refusals: [PublicKey: TokenBucket] = [:]
        var rememberedHead = 0
        /// `stopAll()` ran: no request is admitted any more.
        var stopped = false
        /// Requests admitted since the start, and text pieces streamed by requests that ended (the status page's
        /// chart counts the differences).
        var admittedTotal = 0
        var endedPieces = 0
        /// Errors sent and requests their requester gave up on, newest last (`InferenceActivity.maxEvents`).
        var events = NewestList<InferenceEvent>(capacity: InferenceActivity.maxEvents)
        /// Requests that ended, newest last (`InferenceActivity.maxFinished`).
        var finished = NewestList<FinishedRequest>(capacity: InferenceActivity.maxFinished)

        init(engine: any ChatEngine, runtime: any RuntimeStatusSource, messenger: any PeerMessenger,
             authorizer: any InferenceAuthorizer, limits: InferenceLimits, readCadence: HTTPReadCadence?,
             clock: ServiceClock, logger: Logger) {
            self.engine = engine
            self.readCadence = readCadence
            self.runtime = runtime
            self.messenger = messenger
            self.authorizer = authorizer
            self.limits = limits
            self.clock = clock
            self.logger = logger
        }

        func updateAdmission(maxConcurrent: Int, maxQueued: Int) {
            self.limits.maxConcurrent = max(1, maxConcurrent)
            self.limits.maxQueued = max(0, maxQueued)
            self.startQueued()
        }

        func updateRuntimeParallel(_ parallel: Int) {
            self.limits.runtimeParallel = max(1, parallel)
            self.startQueued()
        }

        /// Whether a request for `model` may start now.
        private func hasSlot(for model: String) -> Bool {
            self.runningCount < self.limits.maxConcurrent
                && self.models.running(model) < self.limits.runtimeParallel
        }

        /// Why the queue cannot be expected to start a request for `model` at `position` within the requester's
        /// first-output window, or nil. Judged from how long its answers took lately (unknown: admitted).
        private func queueTooSlow(model: String, position: Int) -> String? {
            guard let average = self.models.answerMs(model) else { return nil }
            let parallel = max(1, self.limits.runtimeParallel)
            let turns = (position + parallel - 1) / parallel
            let expected = average * Double(turns)
            guard expected > Double(self.limits.queueWaitBudgetMs) else { return nil }
            return "the host is busy: queue position \(position) for \(model), about \(Int(expected / 1000)) s before it could start"
        }

        /// Tells each queued requester whose position improved where it stands now (`infer.queued`): the first
        /// time once it has waited `queueTellDelayMs`, then at most once per `queueTellIntervalMs`. A place not yet
        /// due is told by a pass scheduled for the earliest such moment, even if the queue does not move again.
        /// Before the earliest moment any entry could be due (`nextTellBoundMs`) nothing can be told, and the pass
        /// (called at every admission and every end) does not walk the queue: under a steady load of short
        /// answers every request starts before its moment, and the queue is walked only by the timer's passes.
        private func tellPositions() {
            guard !self.queue.isEmpty else { return }
            let now = self.clock.monotonicMs()
            guard now >= self.nextTellBoundMs else {
                self.scheduleTellPass(at: self.nextTellBoundMs, now: now)
                return
            }
            // Positions count per model; a Homebase serves a few models, so a short list beats a dictionary.
            var positions: [(model: String, count: Int)] = []
            var nextDue: UInt64?
            var bound = UInt64.max
            for i in self.queue.indices {
                let model = self.queue[i].model
                let position: Int
                if let m = positions.firstIndex(where: { $0.model == model }) {
                    positions[m].count += 1
                    position = positions[m].count
                } else {
                    positions.append((model, 1))
                    position = 1
                }
                let told = self.queue[i].toldPosition
                let due = told == nil
                    ? self.queue[i].queuedAtMs &+ self.limits.queueTellDelayMs
                    : self.queue[i].toldAtMs &+ self.limits.queueTellIntervalMs
                guard told.map({ position < $0 }) ?? true else {
                    // Nothing to tell now; a later advance may make it due from `due` on.
                    bound = min(bound, due)
                    continue
                }
                guard due <= now else {
                    nextDue = min(nextDue ?? due, due)
                    bound = min(bound, due)
                    continue
                }
                self.queue[i].toldPosition = position
                self.queue[i].toldAtMs = now
                bound = min(bound, now &+ self.limits.queueTellIntervalMs)
                let key = self.queue[i].key
                guard let token = self.jobs[key]?.token else { continue }
                self.send(.inferQueued(InferQueued(id: key.id, position: position)), key: key, token: token)
            }
            self.nextTellBoundMs = bound
            if let due = nextDue { self.scheduleTellPass(at: due, now: now) }
        }

        /// Schedules a `tellPositions` pass at `due` (monotonic ms, after `now`) unless one comes by then: one
        /// at a time, for the earliest place due; it schedules the next.
        private func scheduleTellPass(at due: UInt64, now: UInt64) {
            guard due > now, due != .max, self.tellScheduledAtMs.map({ due < $0 }) ?? true else { return }
            self.tellScheduledAtMs = due
            let server = self.server
            let sleep = self.clock.sleep
            Task {
                try? await sleep(.milliseconds(Int(due &- now)))
                server?.postpone(.tellPositions(scheduledAtMs: due))
            }
        }

        func handle(_ item: Deferred) {
            switch item {
            case .ended(let end, let key, let token): self.streamEnded(end, key: key, token: token)
            case .requesterGone(let key, let token): self.requesterGone(key: key, token: token)
            case .tellPositions(let due):
                // A pass an earlier one superseded leaves the record of the pass still waiting alone.
                if self.tellScheduledAtMs == due { self.tellScheduledAtMs = nil }
                self.tellPositions()
            }
        }

        // MARK: Inbound

        func handleRequest(_ request: InferRequest, from sender: PublicKey, channel: Channel) {
            guard !self.stopped else { return }
            let key = Key(sender: sender, id: request.id)
            // At most once per (sender, id): in flight or already answered, a second one is dropped.
            if self.jobs[key] != nil || self.remembered.contains(key) { return }
            // A sender that used up its refusals is not even looked at: no registry read, no log line, no answer.
            guard self.mayRefuse(sender) else {
                self.remember(key)
                return
            }

            switch self.authorizer.authorize(sender: sender, channel: channel, model: request.model) {
            case .ignore: return
            case .deny(let code):
                self.remember(key)
                self.refuse(code, code == .notGranted ? "not granted" : "not allowed", id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            case .allow: break
            }
            self.remember(key)

            if let problem = self.limits.violation(of: request) {
                self.refuse(.badRequest, problem, id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            }
            var served = request
            var keepAnswer = false
            switch self.authorizer.prepare(request, from: sender, channel: channel) {
            case .refuse(let code, let message):
                self.refuse(code, message, id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            case .serve(let messages, let keep):
                served.messages = messages
                keepAnswer = keep
                // A cached prefix plus new messages must still be within the protocol's limits.
                if messages != request.messages, let problem = self.limits.violation(of: served) {
                    self.refuse(.badRequest, problem, id: request.id,
                                model: request.model, to: sender, channel: channel)
                    return
                }
            }
            let status = self.runtime.current
            guard status.verified && status.available else {
                self.refuse(.runtimeUnavailable, "the runtime does not answer", id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            }
            // Advertised models only: a cloud model the owner did not share is not served, whoever asks. (One
            // lookup, no copy of the advert's list: this runs for every request.)
            guard let info = status.advertised(request.model), info.canComplete else {
                self.refuse(.modelUnavailable, "model not installed", id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            }
            // Ollama cuts a prompt longer than the context it serves silently: refuse it by name instead.
            if let context = info.contextLength, context > 0,
                InferenceLimits.estimatedPromptTokens(served.messages) > context
            {
                let tokens = InferenceLimits.estimatedPromptTokens(served.messages)
                let source = info.contextServed
                    ? "" : " by default (OLLAMA_CONTEXT_LENGTH raises it; confirmed once the model is loaded)"
                self.refuse(.contextExceeded,
                            "the conversation is about \(tokens) tokens; \(request.model) serves \(context)\(source)",
                            id: request.id, model: request.model, to: sender, channel: channel)
                return
            }
            let hasSlot = self.hasSlot(for: request.model)
            guard hasSlot || self.queue.count < self.limits.maxQueued else {
                self.refuse(.busy, "the host is busy", id: request.id,
                            model: request.model, to: sender, channel: channel)
                return
            }
            if !hasSlot {
                let position = self.queue.reduce(1) { $0 + ($1.model == request.model ? 1 : 0) }
                if let problem = self.queueTooSlow(model: request.model, position: position) {
                    self.refuse(.busy, problem, id: request.id, model: request.model, to: sender, channel: channel)
                    return
                }
            }

            self.nextToken += 1
            let token = self.nextToken
            self.jobs[key] = Job(token: token, channel: channel, request: served, keepAnswer: keepAnswer,
                                 admittedAtMs: self.clock.nowMs(), admittedAtMonotonicMs: self.clock.monotonicMs(),
                                 thinks: ModelCapabilities.canThink(info.capabilities))
            self.admittedTotal += 1
            self.authorizer.admitted(served, from: sender, channel: channel)
            self.send(.inferAccept(InferAccept(id: request.id, model: request.model)), key: key, token: token)
            if hasSlot {
                self.start(key)
            } else {
                // Queued: told so, and where it stands, once it has waited `queueTellDelayMs`, so its watchdog
                // knows the wait is progress.
                let now = self.clock.monotonicMs()
                self.queue.append(Queued(key: key, model: request.model, queuedAtMs: now))
                self.nextTellBoundMs = min(self.nextTellBoundMs, now &+ self.limits.queueTellDelayMs)
                self.tellPositions()
            }
        }

        func cancelAll(from sender: PublicKey, error: InferErrorCode?) -> Int {
            let keys = self.jobs.keys.filter { $0.sender == sender }
            for key in keys {
                self.end(key, outcome: error.map { .failed($0) } ?? .cancelled,
                          reply: error.map { ($0, "no longer allowed") })
            }
            return keys.count
        }

        // MARK: Streaming

        private func start(_ key: Key) {
            guard var job = self.jobs[key], !job.running else { return }
            self.runningCount += 1
            self.models.started(job.request.model)
            self.paceForRunning()
            let token = job.token
            let options = job.request.options
            let chatRequest = ChatRequest(
                messages: job.request.messages,
                options: ChatOptions(temperature: options.temperature, topP: options.topP, maxTokens: options.maxTokens,
                                     stop: options.stop ?? [], seed: options.seed,
                                     think: job.thinks ? options.think : nil))
            // The engine pushes its reads straight into the stream, on its own thread; the server hears only
            // the end.
            let server = self.server
            let stream = InferenceStream(
                id: key.id, peer: key.sender, channel: job.channel, messenger: self.messenger, limits: self.limits,
                keepAnswer: job.keepAnswer, clock: self.clock,
                onEnd: { [weak server] end in server?.postpone(.ended(end, key: key, token: token)) },
                onRequesterGone: { [weak server] in server?.postpone(.requesterGone(key: key, token: token)) })
            job.stream = stream
            job.startedAtMonotonicMs = self.clock.monotonicMs()
            self.jobs[key] = job
            stream.attach(self.engine.start(model: job.request.model, request: chatRequest, sink: stream))
        }

        private func streamEnded(_ end: InferenceStream.End, key: Key, token: UInt64) {
            guard self.jobs[key]?.token == token else { return }
            switch end {
            case .done(let answer, let usage):
                self.end(key, outcome: .done(answer: answer, usage: usage))
            case .reasoningBudgetSpent(let usage):
                guard let job = self.jobs[key] else { return }
                let message = "max_tokens was spent reasoning (\(usage.completionTokens) tokens) before any answer; "
                    + "ask with more max_tokens or think: low or false"
                self.sendError(.reasoningBudget, message, id: key.id, model: job.request.model, to: key.sender,
                               channel: job.channel)
                self.end(key, outcome: .failed(.reasoningBudget))
            case .failed(let error):
                self.engineFailed(error: error, key: key)
            }
        }

        private func engineFailed(error: (any Error)?, key: Key) {
            guard let job = self.jobs[key] else { return }
            let code: InferErrorCode
            let message: String
            switch error {
            case nil:
                (code, message) = (.hostError, "the runtime's stream ended without finishing")
            case let e as ChatEngineError:
                switch e {
                case .connectFailed: (code, message) = (.runtimeUnavailable, "the runtime does not answer")
                case .http(404, _): (code, message) = (.modelUnavailable, "the runtime does not have the model")
                case .http(let status, _): (code, message) = (.hostError, "the runtime answered HTTP \(status)")
                case .midStream: (code, message) = (.hostError, "the runtime failed mid-stream")
                case .timedOut: (code, message) = (.hostError, "the runtime stopped sending")
                case .malformed: (code, message) = (.hostError, "the runtime's answer was malformed")
                case .cancelled: (code, message) = (.hostError, "the runtime request was cancelled")
                }
            default:
                (code, message) = (.hostError, "the runtime request failed")
            }
            // Whatever failed, the runtime's status may be stale (down, model gone): have it re-checked.
            self.runtime.reverifySoon()
            self.logger.info("inference failed", metadata: ["peer": key.sender.short, "code": code.rawValue])
            self.sendError(code, message, id: key.id, model: job.request.model, to: key.sender,
                           channel: job.channel)
            self.end(key, outcome: .failed(code))
        }

        // MARK: Bookkeeping

        /// Ends a job, whatever state it is in, and gives its slot to the next queued request. The stream is
        /// stopped first, so nothing of it follows; `reply`, an `infer.error`, is sent only if the stream had not
        /// already sent `infer.done` (its end may still be deferred), so the requester gets one ending, never
        /// two. A stream that did finish is reported as done, whatever `outcome` says.
        /// `chargeStreamed` (the requester cut the answer short): text already streamed is reported as `cut`, so
        /// a guest cannot read answers free by cancelling each just before its end.
        /// `label` names the ending on the status page's list of finished requests, when `outcome` does not say it.
        func end(_ key: Key, outcome: InferenceOutcome = .cancelled, reply: (InferErrorCode, String)? = nil,
                 chargeStreamed: Bool = false, label: String? = nil) {
            guard let job = self.jobs.removeValue(forKey: key) else { return }
            self.endedPieces += job.stream?.streamedPieces ?? 0
            var outcome = outcome
            if case .done(let answer, let usage)? = job.stream?.stop() {
                outcome = .done(answer: answer, usage: usage)
            } else {
                if let (code, message) = reply {
                    self.sendError(code, message, id: key.id, model: job.request.model, to: key.sender,
                                   channel: job.channel)
                }
                if chargeStreamed, let pieces = job.stream?.streamedPieces, pieces > 0 {
                    outcome = .cut(usage: Usage(promptTokens: 0, completionTokens: pieces))
                }
            }
            self.recordFinished(job, key: key, outcome: outcome, label: label)
            self.authorizer.ended(job.request, from: key.sender, channel: job.channel, outcome: outcome)
            if job.running {
                self.runningCount -= 1
                var took: Double?
                if case .done = outcome { took = Double(self.clock.monotonicMs() &- job.startedAtMonotonicMs) }
                self.models.ended(job.request.model, tookMs: took)
                self.paceForRunning()
                self.startQueued()
            } else {
                self.queue.removeAll { $0.key == key }
                self.tellPositions()
            }
        }

        /// Sets the read cadence for the number of requests streaming now; every stream follows from its next read.
        private func paceForRunning() {
            guard let cadence = self.readCadence,
                  let interval = self.limits.runtimeReadPacing(running: self.runningCount), interval != cadence.interval
            else { return }
            cadence.set(interval)
        }

        /// Starts queued requests, oldest first, each as soon as its model has a slot; then tells the others that
        /// still wait where they stand.
        private func startQueued() {
            var index = 0
            while index < self.queue.count, self.runningCount < self.limits.maxConcurrent {
                let key = self.queue[index].key, model = self.queue[index].model
                guard self.jobs[key] != nil else {
                    self.queue.remove(at: index)
                    continue
                }
                if self.hasSlot(for: model) {
                    self.queue.remove(at: index)
                    self.start(key)
                } else {
                    index += 1
                }
            }
            self.tellPositions()
        }

        /// Sends an accept, ending the job if the RECEIPT says the requester is gone. The RECEIPT may come on any
        /// thread, even inside `send` (the relay link down): it is deferred, so it ends the job only after this
        /// decision is over.
        private func send(_ message: Message, key: Key, token: UInt64) {
            guard let channel = self.jobs[key]?.channel else { return }
            let server = self.server
            self.messenger.send(message, to: key.sender, channel: channel, store: false) { [weak server] outcome in
                guard outcome.isFailure else { return }
                server?.postpone(.requesterGone(key: key, token: token))
            }
        }

        private func requesterGone(key: Key, token: UInt64) {
            guard self.jobs[key]?.token == token else { return }
            self.logger.debug("requester gone", metadata: ["peer": key.sender.short])
            if let job = self.jobs[key] {
                self.record(.requesterGone, code: nil, message: "the requester is gone", peer: key.sender,
                            channel: job.channel, model: job.request.model)
            }
            self.end(key, chargeStreamed: true)
        }

        /// Whether `sender` has a refusal left (`InferenceLimits.refusalsPerMinute`).
        private func mayRefuse(_ sender: PublicKey) -> Bool {
            self.refusals[sender].map { $0.waitMs(for: 1, nowMs: self.clock.monotonicMs()) == 0 } ?? true
        }

        /// Answers a request with `infer.error` instead of an accept, out of the sender's refusals.
        private func refuse(_ code: InferErrorCode, _ message: String, id: String, model: String, to peer: PublicKey,
                            channel: Channel) {
            let nowMs = self.clock.monotonicMs()
            if self.refusals[peer] == nil, self.refusals.count >= 1024 {
                // Forget the senders whose allowance is whole again; the others are still refusing.
                self.refusals = self.refusals.filter { $0.value.waitMs(for: $0.value.capacity, nowMs: nowMs) > 0 }
            }
            let perMinute = Double(self.limits.refusalsPerMinute)
            var bucket = self.refusals[peer] ?? TokenBucket(ratePerSecond: perMinute / 60, capacity: perMinute,
                                                            nowMs: nowMs)
            _ = bucket.take(1, nowMs: nowMs)
            self.refusals[peer] = bucket
            if bucket.waitMs(for: 1, nowMs: nowMs) > 0 {
                self.logger.info("refusals to a peer used up; its requests go unanswered for a while",
                                 metadata: ["peer": peer.short, "per_minute": "\(self.limits.refusalsPerMinute)"])
            }
            self.sendError(code, message, id: id, model: model, to: peer, channel: channel)
        }

        private func sendError(_ code: InferErrorCode, _ message: String, id: String, model: String,
                               to peer: PublicKey, channel: Channel) {
            self.record(.error, code: code.rawValue, message: message, peer: peer, channel: channel, model: model)
            self.messenger.send(.inferError(InferError(id: id, code: code, message: message)), to: peer,
                                channel: channel, store: false)
        }

        func record(_ kind: InferenceEvent.Kind, code: String?, message: String, peer: PublicKey, channel: Channel,
                    model: String) {
            self.events.append(InferenceEvent(atMs: self.clock.nowMs(), kind: kind, code: code, message: message,
                                              peer: peer, channel: channel, model: model))
        }

        /// Adds an ended request to the list of finished ones (who, which model, how much, how fast; no content).
        private func recordFinished(_ job: Job, key: Key, outcome: InferenceOutcome, label: String?) {
            let now = self.clock.monotonicMs()
            let ending: String
            switch outcome {
            case .done: ending = "done"
            case .failed(let code): ending = label ?? code.rawValue
            case .cancelled: ending = label ?? (job.running ? "cancelled" : "cancelled while queued")
            case .cut: ending = label ?? "cut short"
            }
            self.finished.append(FinishedRequest(
                peer: key.sender, channel: job.channel, model: job.request.model, endedAtMs: self.clock.nowMs(),
                tokens: job.stream?.streamedPieces ?? 0,
                firstTokenMs: job.stream?.firstPieceAtMs.map { $0 &- job.admittedAtMonotonicMs },
                durationMs: now &- job.admittedAtMonotonicMs, outcome: ending))
        }

        /// The live streams, recent events and running totals (under the lock, so the totals are consistent).
        func activity() -> InferenceActivity {
            let now = self.clock.monotonicMs()
            var livePieces = 0
            let streams = self.jobs.map { key, job -> LiveStream in
                let pieces = job.stream?.streamedPieces ?? 0
                livePieces += pieces
                let seconds = Double(now &- job.startedAtMonotonicMs) / 1000
                var stream = LiveStream(peer: key.sender, channel: job.channel, model: job.request.model,
                                        running: job.running, admittedAtMs: job.admittedAtMs, tokens: pieces,
                                        tokensPerSecond: job.running && seconds > 0.05 ? Double(pieces) / seconds : 0)
                stream.id = key.id
                stream.firstTokenMs = job.stream?.firstPieceAtMs.map { $0 &- job.admittedAtMonotonicMs }
                return stream
            }.sorted { ($0.admittedAtMs, $0.peer) < ($1.admittedAtMs, $1.peer) }
            var activity = InferenceActivity(streams: streams, events: self.events.oldestFirst, requestsTotal: self.admittedTotal,
                                             tokensTotal: self.endedPieces + livePieces)
            activity.finished = self.finished.oldestFirst
            return activity
        }

        func remember(_ key: Key) {
            guard key.id.utf8.count <= self.limits.maxRememberedIDBytes, self.remembered.insert(key).inserted else {
                return
            }
            self.rememberedOrder.append(key)
            if self.remembered.count > self.limits.rememberedIDs {
                self.remembered.remove(self.rememberedOrder[self.rememberedHead])
                self.rememberedHead += 1
                // Compact now and then so the order array stays about `rememberedIDs` long.
                if self.rememberedHead >= self.limits.rememberedIDs {
                    self.rememberedOrder.removeFirst(self.rememberedHead)
                    self.rememberedHead = 0
                }
            }
        }
    }
}

/// The newest `capacity` items, kept in a ring: adding one to a full list overwrites the oldest in place, where an
/// array's `removeFirst` moved every item (once per request, for the status page's list of finished requests).
struct NewestList<Element> {
    let capacity: Int
    private var items: [Element] = []
    /// Where the oldest item is, once the list is full.
    private var head = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { self.items.count }

    mutating func append(_ item: Element) {
        if self.items.count < self.capacity {
            self.items.append(item)
        } else {
            self.items[self.head] = item
            self.head = (self.head + 1) % self.capacity
        }
    }

    var oldestFirst: [Element] {
        Array(self.items[self.head...] + self.items[..<self.head])
    }
}
