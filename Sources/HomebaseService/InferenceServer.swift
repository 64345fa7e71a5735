import HomebaseCore
import HomebaseNode
import HomebaseRouter
import HomebaseTransport
import Synchronization

/// Serves `infer.request` (Protocol/messages.md §2) by streaming from the runtime's chat engine.
///
/// Per request: authorise (`InferenceAuthorizer`), validate (`InferenceLimits`), check the runtime and the
/// model, admit (a slot, or a place in the bounded queue, else `busy`), answer `infer.accept` at once —
/// queued requests are accepted too: accept means admitted, and the client's first-output watchdog covers the
/// wait — then stream: coalesced `infer.chunk`s with `seq` 0…n-1 and `infer.done` with the count, or one
/// `infer.error`. All replies are live sends. The streaming itself is an `InferenceStream` per request, fed by
/// the engine on the engine's own thread: this actor admits, starts and ends requests, and hears nothing per read.
///
/// A request ends early, silently, on `infer.cancel` from its sender or a failed RECEIPT for its accept or one
/// of its chunks (the requester is gone): its stream is stopped, which aborts the HTTP request, and its
/// slot goes to the next queued request. Per request the server holds at most the coalescer's pending text.
public actor InferenceServer {
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

    private struct Job {
        /// Tells a job from a later one with the same key, for callbacks that arrive after it ended.
        let token: UInt64
        let channel: Channel
        let request: InferRequest
        /// Keep the answer for the authorizer (conversation cache).
        let keepAnswer: Bool
        /// The answer streaming, once the job has a slot.
        var stream: InferenceStream?
        var running: Bool { self.stream != nil }
    }

    private let engine: any ChatEngine
    private let runtime: any RuntimeStatusSource
    private let messenger: any PeerMessenger
    private let authorizer: any InferenceAuthorizer
    private let clock: ServiceClock
    private let logger: Logger
    private var limits: InferenceLimits
    /// The engine's read pacing, lengthened as more requests stream (`InferenceLimits.runtimeReadPacing(running:)`).
    private let readCadence: HTTPReadCadence?

    private var jobs: [Key: Job] = [:]
    private var runningCount = 0
    /// Admitted requests waiting for a slot, oldest first. At most `limits.maxQueued`, so removal by scan is cheap.
    private var queue: [Key] = []
    private var nextToken: UInt64 = 0
    private var remembered: Set<Key> = []
    private var rememberedOrder: [Key] = []
    private var rememberedHead = 0
    /// Streams that ended by themselves, not yet handled on the actor (`streamEndedOffActor`).
    private nonisolated let endedInbox = Mutex<[(end: InferenceStream.End, key: Key, token: UInt64)]>([])
    /// Hops made onto the actor to handle ended streams (tests count them).
    nonisolated let endHops = Atomic<Int>(0)

    public init(engine: any ChatEngine, runtime: any RuntimeStatusSource, messenger: any PeerMessenger,
                authorizer: any InferenceAuthorizer, limits: InferenceLimits = InferenceLimits(),
                readCadence: HTTPReadCadence? = nil, clock: ServiceClock = .system, logger: Logger = .discard()) {
        self.engine = engine
        self.readCadence = readCadence
        self.runtime = runtime
        self.messenger = messenger
        self.authorizer = authorizer
        self.limits = limits
        self.clock = clock
        self.logger = logger
    }

    /// Requests streaming now.
    public var activeCount: Int { self.runningCount }
    /// Admitted requests waiting for a slot.
    public var queuedCount: Int { self.queue.count }

    /// The limits in force (admission limits follow the settings).
    public var currentLimits: InferenceLimits { self.limits }

    /// New admission limits (settings changed). Running requests are not touched; freed slots go to the queue.
    public func updateAdmission(maxConcurrent: Int, maxQueued: Int) {
        self.limits.maxConcurrent = max(1, maxConcurrent)
        self.limits.maxQueued = max(0, maxQueued)
        self.startQueued()
    }

    // MARK: Inbound

    /// One `infer.request` from `sender` on `channel`, after the envelope's entitlement rule passed.
    public func handleRequest(_ request: InferRequest, from sender: PublicKey, channel: Channel) {
        let key = Key(sender: sender, id: request.id)
        // At most once per (sender, id): in flight or already answered, a second one is dropped.
        if self.jobs[key] != nil || self.remembered.contains(key) { return }

        switch self.authorizer.authorize(sender: sender, channel: channel, model: request.model) {
        case .ignore: return
        case .deny(let code):
            self.remember(key)
            self.sendError(code, code == .notGranted ? "not granted" : "not allowed", id: request.id, to: sender,
                           channel: channel)
            return
        case .allow: break
        }
        self.remember(key)

        if let problem = self.limits.violation(of: request) {
            self.sendError(.badRequest, problem, id: request.id, to: sender, channel: channel)
            return
        }
        var served = request
        var keepAnswer = false
        switch self.authorizer.prepare(request, from: sender, channel: channel) {
        case .refuse(let code, let message):
            self.sendError(code, message, id: request.id, to: sender, channel: channel)
            return
        case .serve(let messages, let keep):
            served.messages = messages
            keepAnswer = keep
            // A cached prefix plus new messages must still be within the protocol's limits.
            if messages != request.messages, let problem = self.limits.violation(of: served) {
                self.sendError(.badRequest, problem, id: request.id, to: sender, channel: channel)
                return
            }
        }
        let status = self.runtime.current
        guard status.verified && status.available else {
            self.sendError(.runtimeUnavailable, "the runtime does not answer", id: request.id, to: sender,
                           channel: channel)
            return
        }
        guard status.models.contains(where: { $0.tag == request.model && $0.canComplete }) else {
            self.sendError(.modelUnavailable, "model not installed", id: request.id, to: sender, channel: channel)
            return
        }
        let hasSlot = self.runningCount < self.limits.maxConcurrent
        guard hasSlot || self.queue.count < self.limits.maxQueued else {
            self.sendError(.busy, "the host is busy", id: request.id, to: sender, channel: channel)
            return
        }

        self.nextToken += 1
        let token = self.nextToken
        self.jobs[key] = Job(token: token, channel: channel, request: served, keepAnswer: keepAnswer)
        self.authorizer.admitted(served, from: sender, channel: channel)
        self.send(.inferAccept(InferAccept(id: request.id, model: request.model)), key: key, token: token)
        // The accept's receipt may already have ended the job (requester offline): check before starting.
        guard self.jobs[key]?.token == token else { return }
        if hasSlot { self.start(key) } else { self.queue.append(key) }
    }

    /// `infer.cancel` from `sender`: stops the request if that sender owns it; sends nothing.
    public func handleCancel(id: String, from sender: PublicKey) {
        self.end(Key(sender: sender, id: id), chargeStreamed: true)
    }

    /// Cancels every request (the daemon is stopping). Nothing more is sent for them.
    public func stopAll() {
        for key in Array(self.jobs.keys) { self.end(key) }
    }

    /// Stops every request of `sender`, streaming or queued, at once (a guest was revoked or left): the
    /// engine streams are cancelled. With `error`, each request gets one `infer.error` so the requester
    /// stops waiting; without, nothing more is sent.
    /// - Returns: how many requests were stopped.
    @discardableResult
    public func cancelAll(from sender: PublicKey, error: InferErrorCode? = nil) -> Int {
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
        self.paceForRunning()
        let token = job.token
        let options = job.request.options
        let chatRequest = ChatRequest(
            messages: job.request.messages,
            options: ChatOptions(temperature: options.temperature, topP: options.topP, maxTokens: options.maxTokens,
                                 stop: options.stop ?? [], seed: options.seed))
        // The engine pushes its reads straight into the stream (no hop onto this actor per read); this actor
        // hears only the end.
        let stream = InferenceStream(
            id: key.id, peer: key.sender, channel: job.channel, messenger: self.messenger, limits: self.limits,
            keepAnswer: job.keepAnswer, clock: self.clock,
            onEnd: { [weak self] end in self?.streamEndedOffActor(end, key: key, token: token) },
            onRequesterGone: { [weak self] in Task { await self?.requesterGone(key: key, token: token) } })
        job.stream = stream
        self.jobs[key] = job
        stream.attach(self.engine.start(model: job.request.model, request: chatRequest, sink: stream))
    }

    /// A stream's end, told on the engine's thread: queued for the actor, with one hop for all the ends queued
    /// meanwhile, made once the engine's loop pass is over (`DeferredWakes`). A task per end cost a task and a
    /// wake-up of an executor thread for every answer; the ends of one pass of paced reads come together.
    nonisolated func streamEndedOffActor(_ end: InferenceStream.End, key: Key, token: UInt64) {
        let first = self.endedInbox.withLock { inbox in
            inbox.append((end, key, token))
            return inbox.count == 1
        }
        // Later ends ride on the hop already asked for, until it takes the inbox.
        guard first else { return }
        DeferredWakes.wake(self) { Task { await self.takeEnded() } }
    }

    private func takeEnded() {
        self.endHops.add(1, ordering: .relaxed)
        let ended = self.endedInbox.withLock { inbox in
            defer { inbox = [] }
            return inbox
        }
        for item in ended { self.streamEnded(item.end, key: item.key, token: item.token) }
    }

    private func streamEnded(_ end: InferenceStream.End, key: Key, token: UInt64) {
        guard self.jobs[key]?.token == token else { return }
        switch end {
        case .done(let answer, let usage):
            self.end(key, outcome: .done(answer: answer, usage: usage))
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
        self.sendError(code, message, id: key.id, to: key.sender, channel: job.channel)
        self.end(key, outcome: .failed(code))
    }

    // MARK: Bookkeeping

    /// Ends a job, whatever state it is in, and gives its slot to the next queued request. The stream is
    /// stopped first, so nothing of it follows; `reply`, an `infer.error`, is sent only if the stream had not
    /// already sent `infer.done` (its end may still be on its way to this actor), so the requester gets one
    /// ending, never two. A stream that did finish is reported as done, whatever `outcome` says.
    /// `chargeStreamed` (the requester cut the answer short): text already streamed is reported as `cut`, so a
    /// guest cannot read answers free by cancelling each just before its end.
    private func end(_ key: Key, outcome: InferenceOutcome = .cancelled, reply: (InferErrorCode, String)? = nil,
                     chargeStreamed: Bool = false) {
        guard let job = self.jobs.removeValue(forKey: key) else { return }
        var outcome = outcome
        if case .done(let answer, let usage)? = job.stream?.stop() {
            outcome = .done(answer: answer, usage: usage)
        } else {
            if let (code, message) = reply {
                self.sendError(code, message, id: key.id, to: key.sender, channel: job.channel)
            }
            if chargeStreamed, let pieces = job.stream?.streamedPieces, pieces > 0 {
                outcome = .cut(usage: Usage(promptTokens: 0, completionTokens: pieces))
            }
        }
        self.authorizer.ended(job.request, from: key.sender, channel: job.channel, outcome: outcome)
        if job.running {
            self.runningCount -= 1
            self.paceForRunning()
            self.startQueued()
        } else {
            self.queue.removeAll { $0 == key }
        }
    }

    /// Sets the read cadence for the number of requests streaming now; every stream follows from its next read.
    private func paceForRunning() {
        guard let cadence = self.readCadence,
              let interval = self.limits.runtimeReadPacing(running: self.runningCount), interval != cadence.interval
        else { return }
        cadence.set(interval)
    }

    private func startQueued() {
        while self.runningCount < self.limits.maxConcurrent, !self.queue.isEmpty {
            self.start(self.queue.removeFirst())
        }
    }

    /// Sends an accept or a chunk, ending the job if the RECEIPT says the requester is gone.
    private func send(_ message: Message, key: Key, token: UInt64) {
        guard let channel = self.jobs[key]?.channel else { return }
        self.messenger.send(message, to: key.sender, channel: channel, store: false) { [weak self] outcome in
            guard outcome.isFailure, let self else { return }
            // Receipts may arrive on any thread, even inside `send`: hop back onto the actor.
            Task { await self.requesterGone(key: key, token: token) }
        }
    }

    private func requesterGone(key: Key, token: UInt64) {
        guard self.jobs[key]?.token == token else { return }
        self.logger.debug("requester gone", metadata: ["peer": key.sender.short])
        self.end(key, chargeStreamed: true)
    }

    private func sendError(_ code: InferErrorCode, _ message: String, id: String, to peer: PublicKey,
                           channel: Channel) {
        self.messenger.send(.inferError(InferError(id: id, code: code, message: message)), to: peer,
                            channel: channel, store: false)
    }

    private func remember(_ key: Key) {
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
