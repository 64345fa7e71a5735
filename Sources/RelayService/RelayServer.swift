import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import HomebaseTransport
import RelayFleet

/// The relay (Protocol/relay.md): one event loop thread for every connection, a mailbox worker thread for the
/// durable store, presence by public key.
///
/// Thread safety: `run()` blocks the calling thread; `shutdown()`, `reloadAdmission(_:)` and the bound ports
/// may be used from any thread. Everything else runs on the loop (hence `@unchecked Sendable`: the mutable
/// state is only touched from the loop thread, which `EventLoop.execute` enforces).
public final class RelayServer: @unchecked Sendable {
    public static let relayPath = "/v1/relay"
    public static let subprotocol = "homebase-relay.v1"
    /// How often connections are checked for auth deadlines, idleness and pings: every second, or a third of
    /// the ping interval when that is shorter (tests use short intervals).
    var sweepInterval: Duration { .milliseconds(min(1_000, Int(self.configuration.limits.pingIntervalMs / 3))) }
    /// Connections the deadline sweep closes in one loop turn (`sweepConnections`).
    static let sweepClosesPerTurn = 256
    /// How often expired stored frames are deleted and the mailbox gauges refreshed.
    static let maintenanceIntervalMs: UInt64 = 60_000

    public let configuration: RelayConfiguration
    /// Headers every upgrade response carries: the SEND limits announced to clients (Protocol/relay.md §6), so
    /// they can pace under them instead of losing frames to RECEIPT 5. Formatted once, not per connection.
    let upgradeHeaders: [(String, String)]
    let logger: Logger
    let loop: EventLoop
    let metrics = RelayMetrics()
    /// The SQLite mailbox's database; nil for a fleet edge, whose mailbox is in JetStream.
    private let database: Database?
    /// Set when the relay runs as an edge of a fleet (`--nats`).
    let fleet: FleetEdge?
    private let worker: MailboxWorker
    let presence = LocalPresence<RelayConnection>()
    private(set) var connections: [UInt64: RelayConnection] = [:]
    private var listeners: [TCPListener] = []
    var admission: Admission
    private var pendingAuth = 0
    private var webSockets = 0
    private var shuttingDown = false
    private var lastMaintenanceMs: UInt64 = 0
    /// Times the sweep had more to close than one turn allows and went on in the next (for tests).
    private(set) var sweepTurnsDeferred = 0
    /// Connections with output gathered in this loop iteration.
    private var dirty: [RelayConnection] = []
    private var flushing: [RelayConnection] = []
    /// Input storage of connections gone idle, lent to the next connection that reads (`takeSpareInputStorage`):
    /// at most 16 buffers of at most 64 KiB each, 1 MiB in all.
    private var spareInputStorage = SpareStorage(maxCount: 16, maxCapacity: 64 * 1024)

    /// The bound port of the main listener (useful with port 0).
    public let port: UInt16
    /// The bound port of the separate metrics listener, if configured.
    public let metricsPort: UInt16?

    /// Opens the mailbox and binds the listeners; call `run()` to serve.
    public convenience init(configuration: RelayConfiguration, admission: Admission = Admission(), logger: Logger)
        throws
    {
        try self.init(configuration: configuration, admission: admission, logger: logger, wrapMailbox: { $0 })
    }

    /// `wrapMailbox` lets a test put a mailbox with other timing (ACKs applied late) in front of the real one.
    init(configuration: RelayConfiguration, admission: Admission, logger: Logger,
         wrapMailbox: (any Mailbox) -> any Mailbox) throws
    {
        self.configuration = configuration
        self.upgradeHeaders = [(RelaySendLimits.headerName, RelaySendLimits(configuration.limits).headerValue)]
        self.admission = admission
        self.logger = logger
        var mailboxLimits = MailboxLimits()
        mailboxLimits.maxFrames = configuration.limits.mailboxMaxFrames
        mailboxLimits.maxBytes = configuration.limits.mailboxMaxBytes
        mailboxLimits.lifetimeMs = configuration.limits.storedFrameLifetimeMs
        let mailbox: any Mailbox
        if configuration.natsServers.isEmpty {
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory,
                                                    withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            let sync: Database.Synchronous = configuration.durability == "normal" ? .normal : .full
            let database = try Database(path: configuration.dataDirectory + "/relay.db",
                                        options: .init(synchronous: sync))
            self.database = database
            self.fleet = nil
            mailbox = try SQLiteMailbox(database: database, limits: mailboxLimits)
        } else {
            let fleet = try FleetEdge(configuration: configuration, limits: mailboxLimits, waiting: { [logger] why in
                logger.warning("Waiting for JetStream before listening", metadata: ["error": "\(why)"])
            }) { [logger] event in
                switch event {
                case .disconnected: logger.warning("NATS disconnected; reconnecting")
                case .reconnected(let server): logger.notice("NATS reconnected", metadata: ["server": "\(server)"])
                case .closed: logger.notice("NATS connection closed")
                case .asyncError(let text): logger.warning("NATS error", metadata: ["error": "\(text)"])
                }
            }
            self.database = nil
            self.fleet = fleet
            mailbox = fleet.mailbox
        }
        self.worker = MailboxWorker(mailbox: wrapMailbox(mailbox), clock: { Posix.wallClockMs })
        self.loop = try EventLoop()
        self.loop.busyPollNs = UInt64(configuration.busyPollMicroseconds) * 1_000
        var listeners: [TCPListener] = []
        weak var weakSelf: RelayServer?
        let main = try TCPListener(loop: self.loop, host: configuration.listenHost, port: configuration.listenPort,
                                   backlog: 4096) { tcp in weakSelf?.accepted(tcp, metricsOnly: false) }
        listeners.append(main)
        self.port = main.port
        if let host = configuration.metricsHost, let port = configuration.metricsPort {
            let m = try TCPListener(loop: self.loop, host: host, port: port, backlog: 64) { tcp in
                weakSelf?.accepted(tcp, metricsOnly: true)
            }
            listeners.append(m)
            self.metricsPort = m.port
        } else {
            self.metricsPort = nil
        }
        self.listeners = listeners
        weakSelf = self
    }

    var hasSeparateMetricsListener: Bool { self.metricsPort != nil }
    var nowMs: UInt64 { self.loop.nowMs }
    var wallClockMs: UInt64 { self.loop.wallClockMs }

    /// Serves until `shutdown()` completes. Blocks the calling thread.
    public func run() {
        self.worker.start()
        if let fleet = self.fleet {
            self.logger.notice("Relay edge listening", metadata: [
                "listen": "\(self.configuration.listenHost):\(self.port)", "edge": fleet.edgeID,
                "nats": self.configuration.natsServers.joined(separator: ","),
            ])
        } else {
            self.logger.notice("Relay listening", metadata: ["listen": "\(self.configuration.listenHost):\(self.port)",
                                                             "data": self.configuration.dataDirectory])
        }
        self.scheduleSweep()
        self.loop.execute { [self] in
            self.loop.setFlushHandler { [self] in self.flushDirty() }
            self.maintenance(force: true)
        }
        self.loop.run()
        self.worker.stopAndDrain()
        self.fleet?.stop()
        self.logger.notice("Relay stopped")
    }

    /// Graceful stop (SIGTERM): stop accepting, close every connection with 1012, make every acknowledged STORE
    /// durable, let the close frames flush (at most 2 s), then return from `run()`. Thread-safe.
    public func shutdown() {
        self.loop.execute { [self] in
            guard !self.shuttingDown else { return }
            self.shuttingDown = true
            for l in self.listeners { l.close() }
            for c in self.connections.values {
                if c.isWebSocket, let action = c.session?.shutdown() { c.perform(action) } else { c.tcp.close() }
            }
            self.worker.submit(.barrier { [self] in
                self.loop.execute { [self] in self.stopWhenClosed(deadlineMs: self.nowMs + 2_000) }
            })
        }
    }

    /// Replaces the admission lists (SIGHUP). Applies to new connections. Thread-safe.
    public func reloadAdmission(_ admission: Admission) {
        self.loop.execute { [self] in
            self.admission = admission
            self.logger.notice("Admission reloaded", metadata: [
                "tokens": "\(admission.tokens.count)", "allowlist": admission.allowedKeys.map { "\($0.count)" } ?? "off",
            ])
        }
    }

    /// Runs `body` on the loop and waits for its result (for tests and status queries).
    public func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let box = ResultBox<T>()
        self.loop.execute { box.set(body()) }
        return box.wait()
    }

    private func stopWhenClosed(deadlineMs: UInt64) {
        if self.connections.isEmpty || self.nowMs >= deadlineMs {
            self.loop.stop()
        } else {
            _ = self.loop.scheduleTimer(after: .milliseconds(20)) { [self] in self.stopWhenClosed(deadlineMs: deadlineMs) }
        }
    }

    // MARK: Connections

    private func accepted(_ tcp: TCPConnection, metricsOnly: Bool) {
        self.metrics.connectionsAccepted += 1
        let c = RelayConnection(server: self, tcp: tcp, nowMs: self.nowMs, metricsOnly: metricsOnly)
        tcp.delegate = c
        self.connections[tcp.id] = c
        self.pendingAuth += 1
        if self.shuttingDown { tcp.close() }
    }

    /// Whether a new WebSocket may be opened (connection limits, Protocol/relay.md §6).
    func admitsNewWebSocket() -> Bool {
        guard !self.shuttingDown else { return false }
        // `pendingAuth` already counts the connection asking.
        return self.pendingAuth <= self.configuration.limits.maxPendingAuth
            && self.webSockets < self.configuration.limits.maxConnections
    }

    func webSocketOpened() { self.webSockets += 1 }

    func markDirty(_ c: RelayConnection) { self.dirty.append(c) }

    private func flushDirty() {
        guard !self.dirty.isEmpty else { return }
        // Two lists swapped, not a copy: emptying a list that a copy shares would allocate a new one each turn.
        swap(&self.dirty, &self.flushing)
        for c in self.flushing { c.flushOutput() }
        self.flushing.removeAll(keepingCapacity: true)
    }

    /// Gives `parser` input storage from the spares, if any: a connection that reads one frame at a time would
    /// otherwise allocate and free its storage on every read (idle connections hold none).
    /// Input storage an idle connection gave back, for a connection about to read (nil when none is spare).
    func takeSpareInputStorage() -> [UInt8]? { self.spareInputStorage.take() }

    /// Keeps an idle connection's input storage for the next read of any connection, within the pool's bounds.
    func recycleInputStorage(_ storage: [UInt8]) {
        self.spareInputStorage.give(storage)
    }

    func connectionEnded(_ c: RelayConnection) {
        guard self.connections.removeValue(forKey: c.tcp.id) != nil else { return }
        if c.countsAsPendingAuth { self.pendingAuth -= 1 }
        if c.session != nil { self.webSockets -= 1 }
        if let key = c.key {
            self.presence.unregister(key, c)
            self.fleet?.release(key, connection: c.tcp.id)
        }
    }

    func authenticated(_ c: RelayConnection, key: PublicKey) {
        if let old = self.presence.register(key, c), let action = old.session?.replaced() {
            old.perform(action)
        }
        c.key = key
        c.countsAsPendingAuth = false
        self.pendingAuth -= 1
        self.logger.debug("Client authenticated", metadata: ["conn.id": "\(c.tcp.id)", "peer.pk": key.short])
        let id = c.tcp.id
        // READY waits for the stored count and, on a fleet edge, for the claim to settle across the edges.
        let gate = ReadyGate(waitingForClaim: self.fleet != nil)
        if let fleet = self.fleet {
            do {
                try fleet.hold(key, connection: id, atMs: self.wallClockMs, deliver: { [weak self] message, reply in
                    guard let self else { return }
                    self.loop.execute { self.fleetReceived(message, for: key, reply: reply) }
                }, settled: { [weak self] newest in
                    guard let self else { return }
                    self.loop.execute {
                        guard let c = self.connections[id] else { return }
                        if !newest, let action = c.session?.replaced() {  // a newer login elsewhere holds the key
                            self.fleet?.release(key, connection: id)
                            return c.perform(action)
                        }
                        if let stored = gate.claimSettled() { self.writeReady(c, stored: stored) }
                    }
                })
            } catch {
                self.logger.error("Cannot hold the key in the fleet", metadata: ["error": "\(error)"])
                _ = gate.claimSettled()
            }
        }
        self.worker.submit(.pendingCount(key) { [self] result in
            self.loop.execute { [self] in
                guard let c = self.connections[id] else { return }
                if let stored = gate.counted((try? result.get()) ?? 0) { self.writeReady(c, stored: stored) }
            }
        })
    }

    private func writeReady(_ c: RelayConnection, stored: Int) {
        guard c.isWebSocket, let session = c.session else { return }
        c.writeFrame(session.readyFrame(stored: stored))
        if let after = c.order.readyWritten(stored: stored, backlogged: self.isBacklogged(c)) {
            self.fetchPage(c, after: after)
        } else {
            self.flushDeferred(c)
        }
    }

    // MARK: Forwarding (Protocol/relay.md §4)

    func route(from sender: RelayConnection, sendID: UInt32, recipient: PublicKey, store: Bool,
               payload: ArraySlice<UInt8>) {
        guard let senderKey = sender.key else { return }
        let target = self.presence.session(for: recipient)
        if !store, target == nil, self.fleet != nil {
            return self.forwardToFleet(from: sender, sendID: sendID, recipient: recipient, payload: payload)
        }
        if !store {
            guard let t = target, t.isWebSocket, t.readySent else {
                self.metrics.dropped(.recipientOffline)
                return self.receipt(to: sender, sendID: sendID, .recipientOffline)
            }
            let delivered = self.deliverLive(to: t, sender: senderKey, payload: payload)
            return self.receipt(to: sender, sendID: sendID, delivered ? .delivered : .recipientOffline)
        }
        let seq = target?.order.storeIssued() ?? 0
        let senderID = sender.tcp.id
        if self.fleet != nil { sender.fleetOrder.order.storeIssued() }
        let targetID = target?.tcp.id
        let item = MailboxItem(recipient: recipient, sender: senderKey, payload: Array(payload))
        self.worker.submit(.enqueue(item) { [self] result in
            self.loop.execute { [self] in
                self.stored(result, senderID: senderID, sendID: sendID, recipient: recipient, targetID: targetID,
                            seq: seq)
            }
        })
    }

    private func stored(_ result: Result<MailboxEnqueueResult, any Error>, senderID: UInt64, sendID: UInt32,
                        recipient: PublicKey, targetID: UInt64?, seq: Int) {
        let target = targetID.flatMap { self.connections[$0] }
        // The worker is FIFO and completions arrive in order, so numbers complete one after another.
        if let t = target, seq > 0 {
            let committed: UInt64? = if case .success(.stored(let id)) = result { id } else { nil }
            t.order.storeCompleted(seq: seq, deliveryID: committed)
        }
        let sender = self.connections[senderID]
        // Whatever the outcome, live frames this sender held behind the STORE may follow it now (fleet).
        defer { if let s = sender, self.fleet != nil { self.storeCompleted(for: s) } }
        let status: ReceiptStatus
        switch result {
        case .success(.stored(let deliveryID)):
            self.metrics.framesStored += 1
            if let t = self.presence.session(for: recipient), t.isWebSocket {
                status = .delivered
                if t.readySent { self.drain(t) }
            } else if let fleet = self.fleet {
                // Another edge may hold the recipient: tell it, and answer the sender when it has said.
                if let t = target, t.isWebSocket { self.flushDeferred(t) }
                fleet.announceStored(to: recipient, deliveryID: deliveryID) { [weak self] held in
                    guard let self else { return }
                    self.loop.execute {
                        if let s = self.connections[senderID] { self.receipt(to: s, sendID: sendID, held ? .delivered : .stored) }
                    }
                }
                return
            } else {
                status = .stored
            }
        case .success(.mailboxFull):
            self.metrics.dropped(.mailboxFull)
            status = .mailboxFull
        case .success(.unavailable(let why)):
            self.metrics.dropped(.storeError)
            self.logger.warning("Mailbox store not confirmed", metadata: ["error": why])
            status = .recipientOffline
        case .failure(let error):
            self.metrics.dropped(.storeError)
            self.logger.error("Mailbox write failed", metadata: ["error": "\(error)"])
            status = .recipientOffline
        }
        if let t = target, t.isWebSocket { self.flushDeferred(t) }
        if let s = sender { self.receipt(to: s, sendID: sendID, status) }
    }

    /// Writes a live DELIVER (delivery id 0), or holds it behind stored frames. A recipient whose queue is over
    /// its bound is not written to: the frame is dropped and false returned (RECEIPT 2 for the sender), until the
    /// queue drains. The recipient stays connected unless it stops reading (`sweepConnections`, 4002): closing it
    /// here let any sender knock any device off the relay with a burst larger than the device could read at once.
    func deliverLive(to t: RelayConnection, sender: PublicKey, payload: ArraySlice<UInt8>) -> Bool {
        guard t.queuedBytes <= self.configuration.limits.outboundQueueMaxBytes else {
            self.metrics.dropped(.recipientSlow)
            return false
        }
        if t.order.canWriteLiveNow {
            t.writeDeliver(sender: sender, deliveryID: 0, payload: payload)
        } else {
            var frame = RelayConnection.deliverHeader(sender: sender, deliveryID: 0, payloadCount: payload.count)
            frame.append(contentsOf: payload)
            t.order.hold(frame)
        }
        self.metrics.framesForwarded += 1
        self.metrics.bytesForwarded += payload.count
        return true
    }

    func receipt(to c: RelayConnection, sendID: UInt32, _ status: ReceiptStatus) {
        guard sendID != 0, c.isWebSocket else { return }
        c.writeFrame(.receipt(sendID: sendID, status: status))
    }

    func acknowledge(_ c: RelayConnection, deliveryID: UInt64) {
        guard let key = c.key else { return }
        self.metrics.storedAcknowledged += 1
        self.worker.submit(.acknowledge(key, deliveryID: deliveryID))
    }

    /// Delivers the next page of stored frames to `c`, oldest first; pages follow until the mailbox is empty,
    /// pausing while the connection's queue is over half its bound. A page stops there too (the rest is read
    /// again from the cursor): a page of 64 maximal frames is 16 MiB, which closed every reader that could not take
    /// it at once (4002), so a mailbox anyone can fill kept its owner from ever logging in on a slow link.
    func drain(_ c: RelayConnection) {
        guard c.key != nil, c.isWebSocket else { return }
        if let after = c.order.requestDrain(backlogged: self.isBacklogged(c)) { self.fetchPage(c, after: after) }
    }

    /// The connection's kernel backlog went down: a page paused for it is read now.
    func drainWhenWritable(_ c: RelayConnection) {
        if let after = c.order.writable(backlogged: self.isBacklogged(c)) { self.fetchPage(c, after: after) }
    }

    /// Over half the outbound bound is waiting in the kernel: stored frames wait (`connectionWritable` resumes).
    private func isBacklogged(_ c: RelayConnection) -> Bool {
        c.tcp.outboundBytesQueued > self.configuration.limits.outboundQueueMaxBytes / 2
    }

    /// Reads the page after `after` and writes it, each held live frame after the stored frames it follows.
    private func fetchPage(_ c: RelayConnection, after: UInt64) {
        guard let key = c.key else { return }
        let id = c.tcp.id
        let page = self.configuration.limits.mailboxPageFrames
        self.worker.submit(.pending(key, after: after, limit: page) { [self] result in
            self.loop.execute { [self] in
                guard let c = self.connections[id], c.isWebSocket else { return }
                c.order.pageStarted()
                let frames = (try? result.get()) ?? []
                let half = self.configuration.limits.outboundQueueMaxBytes / 2
                var written = 0
                for f in frames {
                    if c.tcp.outboundBytesQueued + c.output.count > half {
                        c.order.pageCut()
                        break
                    }
                    written += 1
                    c.writeDeliver(sender: f.sender, deliveryID: f.deliveryID, payload: f.payload[...])
                    self.metrics.storedDelivered += 1
                    self.metrics.framesForwarded += 1
                    self.metrics.bytesForwarded += f.payload.count
                    // Live frames sent between two STORE frames go out between them.
                    for frame in c.order.delivered(f.deliveryID) { c.append(frame) }
                }
                self.flushDeferred(c)
                if let next = c.order.pageFinished(full: written == page, backlogged: self.isBacklogged(c)) {
                    self.fetchPage(c, after: next)
                }
            }
        })
    }

    /// Writes held live frames whose preceding STORE frames have all been delivered, in order.
    func flushDeferred(_ c: RelayConnection) {
        for frame in c.order.releasable() { c.append(frame) }
    }

    // MARK: Timers

    private func scheduleSweep() {
        _ = self.loop.scheduleTimer(after: self.sweepInterval) { [self] in
            self.sweep()
            if !self.shuttingDown { self.scheduleSweep() }
        }
    }

    /// Auth deadlines, slowloris (an HTTP request that never completes), idle timeouts, pings, and connections
    /// whose peer never takes their last bytes.
    private func sweep() {
        self.sweepConnections()
        self.maintenance(force: false)
    }

    /// The connections' part of `sweep`, closing at most `sweepClosesPerTurn` of them per loop turn: closing
    /// thousands at once (a wave of half-open connections reaching the auth deadline together) held every other
    /// connection up for 250 ms. The rest are closed in the next turns, after the others have been served.
    private func sweepConnections() {
        let now = self.nowMs
        let limits = self.configuration.limits
        var closes = 0
        for c in Array(self.connections.values) {
            if closes == Self.sweepClosesPerTurn {
                self.sweepTurnsDeferred += 1
                self.loop.deferToNextIteration { [self] in self.sweepConnections() }
                return
            }
            switch c.phase {
            case .http:
                // A connection that never finishes its request head gets the auth deadline too.
                if now >= c.acceptedAtMs + limits.authDeadlineMs {
                    c.tcp.close()
                    closes += 1
                }
            case .websocket:
                guard var s = c.session else { continue }
                let action = s.timerFired(nowMs: now)
                c.session = s
                if action != .none {
                    c.perform(action)
                    closes += 1
                } else if c.readySent, self.stoppedReading(c, now: now),
                          let overflow = c.session?.outboundQueueOverflowed() {
                    c.perform(overflow)
                    closes += 1
                } else if c.readySent, now >= c.lastHeardMs + limits.pingIntervalMs,
                          now >= c.lastPingMs + limits.pingIntervalMs {
                    c.lastPingMs = now
                    c.append(WebSocketFrameEncoder.encode(opcode: .ping, payload: [UInt8]()))
                }
            case .closing(let since):
                // Its peer has not taken the last bytes (a close frame behind a backlog): it is not reading.
                if now >= since + limits.closeFlushTimeoutMs, c.tcp.isOpen {
                    c.tcp.close()
                    closes += 1
                }
            }
        }
    }

    /// Whether `c` has had output queued that the kernel took none of for `outboundStallMs`.
    private func stoppedReading(_ c: RelayConnection, now: UInt64) -> Bool {
        let sent = c.tcp.bytesSent
        if c.tcp.outboundBytesQueued == 0 || sent != c.progressMark {
            c.progressMark = sent
            c.progressAtMs = now
            return false
        }
        return now >= c.progressAtMs + self.configuration.limits.outboundStallMs
    }

    private func maintenance(force: Bool) {
        let now = self.nowMs
        guard force || now >= self.lastMaintenanceMs + Self.maintenanceIntervalMs else { return }
        self.lastMaintenanceMs = now
        self.worker.submit(.expire { [self] result in
            let n = (try? result.get()) ?? 0
            self.loop.execute { [self] in self.metrics.framesExpired += n }
        })
        self.refreshDepth()
    }

    private func refreshDepth() {
        self.worker.submit(.depth { [self] result in
            guard let d = try? result.get() else { return }
            self.loop.execute { [self] in self.metrics.mailboxDepth = d }
        })
    }

    func renderMetrics() -> String {
        let text = self.metrics.render(pendingAuth: self.pendingAuth, authenticated: self.presence.count,
                                       websocket: self.webSockets)
        return self.fleet.map { text + $0.renderMetrics() } ?? text
    }

    /// Counts for tests and status: (pending auth, authenticated, WebSockets, all connections).
    public func connectionCounts() -> (pendingAuth: Int, authenticated: Int, webSockets: Int, all: Int) {
        self.onLoop { (self.pendingAuth, self.presence.count, self.webSockets, self.connections.count) }
    }
}

/// A one-shot value handed from the loop thread to a waiting thread.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    private var value: T?
    private let semaphore = DispatchSemaphore(value: 0)
    func set(_ v: T) {
        self.value = v
        self.semaphore.signal()
    }
    func wait() -> T {
        self.semaphore.wait()
        return self.value!
    }
}

/// The two things a login's READY waits for: the stored count, and on a fleet edge the key's claim. Loop-confined.
final class ReadyGate: @unchecked Sendable {  // touched only on the loop
    private var claimPending: Bool
    private var stored: Int?

    init(waitingForClaim: Bool) { self.claimPending = waitingForClaim }

    /// The claim settled; the stored count when READY may go now.
    func claimSettled() -> Int? {
        self.claimPending = false
        return self.stored
    }

    /// The stored count arrived; itself when READY may go now.
    func counted(_ n: Int) -> Int? {
        self.stored = n
        return self.claimPending ? nil : n
    }
}
