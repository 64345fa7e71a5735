import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// One client connection of the relay: HTTP until an upgrade, then WebSocket carrying relay frames.
///
/// Loop-confined. It moves bytes and carries out the actions of `RelaySessionStateMachine`; protocol rules live
/// in the machine, and routing between connections in `RelayServer`.
final class RelayConnection: TCPConnectionDelegate {
    /// WebSocket messages handled per connection in one turn of the loop. A read budget of small frames is
    /// thousands of them, and handling them all at once held every other connection up for milliseconds
    /// (issue 23: a flood of empty SENDs); the rest wait in the parser for the next turn.
    static let messagesPerTurn = 64

    enum Phase {
        /// Reading an HTTP request head (an upgrade, `/healthz` or `/metrics`).
        case http(HTTPRequestHeadParser)
        case websocket
        /// Hanging up: output still queued goes out first, for at most `closeFlushTimeoutMs` from `sinceMs`.
        case closing(sinceMs: UInt64)
    }

    unowned let server: RelayServer
    let tcp: TCPConnection
    let acceptedAtMs: UInt64
    /// Only `/metrics` and `/healthz` (the separate metrics listener).
    let metricsOnly: Bool
    var phase: Phase
    var parser: WebSocketParser?
    var session: RelaySessionStateMachine?
    /// Set once the key is registered in presence.
    var key: PublicKey?
    /// Counted in `RelayServer.pendingAuth` until READY or close.
    var countsAsPendingAuth = true

    /// The order of what this connection's client is owed (Protocol/relay.md §5): stored frames, and live frames
    /// held behind the STOREs sent before them. The rules are the machine's; `RelayServer` carries out its answers.
    var order = RelayDeliveryOrder()
    var readySent: Bool { self.order.readySent }
    // Fleet edges only: STORE frames this connection sent that are not committed yet, and the live frames it sent
    // to keys on other edges meanwhile, held so that they reach the recipient after those STOREs (one sender, one
    // order). A held frame waits for every STORE issued before it. Made on first use, apart from the connection:
    // a single relay's connections carry one empty reference (8 bytes) where the order inline took 48, and idle
    // connections are what a relay holds most of (`tools/bench-relay`'s RSS per idle connection).
    private var fleetOrderBox: FleetOrderBox?
    var fleetOrder: FleetOrderBox {
        if let box = self.fleetOrderBox { return box }
        let box = FleetOrderBox(maxHeldBytes: self.server.configuration.limits.outboundQueueMaxBytes)
        self.fleetOrderBox = box
        return box
    }
    var lastHeardMs: UInt64
    var lastPingMs: UInt64
    /// `tcp.bytesSent` when the sweep last saw the kernel take bytes (or nothing queued), and when: a queue that
    /// has not moved for `outboundStallMs` is a reader that stopped (4002).
    var progressMark: UInt64 = 0
    var progressAtMs: UInt64
    /// WebSocket output gathered during one loop iteration, written in one syscall by `flushOutput` (the
    /// server calls it before the loop waits again): a burst of DELIVERs costs one write, not one each.
    var output: [UInt8] = []
    var isDirty = false
    /// Reading is paused because this turn's `messagesPerTurn` are handled (resumed on the next iteration), or
    /// because the connection is over its pace (`InboundPacer`; resumed by a timer).
    private var turnSpent = false
    private var paced = false
    private var pacer: InboundPacer

    init(server: RelayServer, tcp: TCPConnection, nowMs: UInt64, metricsOnly: Bool) {
        self.server = server
        self.tcp = tcp
        self.acceptedAtMs = nowMs
        self.metricsOnly = metricsOnly
        self.phase = .http(HTTPRequestHeadParser())
        self.lastHeardMs = nowMs
        self.lastPingMs = nowMs
        self.progressAtMs = nowMs
        self.pacer = InboundPacer(limits: server.configuration.limits, nowMs: nowMs)
    }

    var isWebSocket: Bool {
        if case .websocket = self.phase { return true }
        return false
    }

    // MARK: TCPConnectionDelegate

    func connectionReadable(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        let now = self.server.nowMs
        self.lastHeardMs = now
        switch self.phase {
        case .http(var p):
            p.append(bytes)
            self.phase = .http(p)  // keep the buffered bytes even if handling below returns early
            self.readHTTP(parser: p)
        case .websocket:
            self.session?.bytesReceived(nowMs: now)
            if self.parser?.holdsStorage == false, var spare = self.server.takeSpareInputStorage() {
                self.parser?.adoptStorage(&spare)
            }
            self.parser?.append(bytes)
            self.readWebSocket()
        case .closing:
            break
        }
    }

    func connectionWritable(_ connection: TCPConnection) {
        // A drain paused for backpressure resumes once the kernel has taken the backlog.
        self.server.drainWhenWritable(self)
    }

    func connectionClosed(_ connection: TCPConnection, error: TransportError?) {
        self.phase = .closing(sinceMs: self.server.nowMs)
        self.session?.connectionClosed()
        self.server.connectionEnded(self)
    }

    // MARK: HTTP

    private func readHTTP(parser: HTTPRequestHeadParser) {
        var p = parser
        let head: HTTPRequestHead
        do {
            guard let h = try p.next() else {
                self.phase = .http(p)
                return
            }
            head = h
        } catch {
            self.respond(status: error.status, body: "bad request\n")
            return
        }
        self.server.metrics.httpRequests += 1
        let leftover = p.takeBuffered()
        switch (head.method, head.path) {
        case ("GET", "/healthz"), ("HEAD", "/healthz"):
            self.respond(status: 200, body: "ok", includeBody: head.method == "GET")
        case ("GET", "/metrics") where self.metricsOnly || !self.server.hasSeparateMetricsListener:
            self.respond(status: 200, body: self.server.renderMetrics(),
                         contentType: "text/plain; version=0.0.4; charset=utf-8")
        case (_, RelayServer.relayPath) where !self.metricsOnly:
            self.upgrade(head, leftover: leftover)
        default:
            self.respond(status: 404, body: "not found\n")
        }
    }

    private func respond(status: Int, body: String, contentType: String = "text/plain; charset=utf-8",
                         includeBody: Bool = true, extraHeaders: [HTTPHeaderField] = []) {
        let headers = [HTTPHeaderField(name: "Content-Type", value: contentType),
                       HTTPHeaderField(name: "Connection", value: "close")] + extraHeaders
        self.tcp.write(HTTPResponseEncoder.response(status: status, headers: headers, body: Array(body.utf8),
                                                    includeBody: includeBody))
        self.hangUpAfterFlush()
    }

    private func upgrade(_ head: HTTPRequestHead, leftover: [UInt8]) {
        let decision = WebSocketHandshake.serverDecision(
            method: head.method, target: head.target, headers: head.headers.map { ($0.name, $0.value) },
            expectedPath: RelayServer.relayPath, subprotocol: RelayServer.subprotocol)
        switch decision {
        case .reject(let status, let reason):
            self.tcp.write(WebSocketHandshake.serverRejectionBytes(status: status, reason: reason))
            self.hangUpAfterFlush()
        case .accept(let key, let subprotocol):
            guard self.server.admission.admitsUpgrade(authorization: head.header("Authorization"),
                                                      queryToken: head.queryValue("token")) else {
                self.server.metrics.authFailures["bad_token", default: 0] += 1
                self.respond(status: 401, body: "a valid access token is required\n",
                             extraHeaders: [HTTPHeaderField(name: "WWW-Authenticate", value: "Bearer")])
                return
            }
            guard self.server.admitsNewWebSocket() else {
                self.server.metrics.connectionsRefused += 1
                self.respond(status: 503, body: "relay at capacity, retry later\n",
                             extraHeaders: [HTTPHeaderField(name: "Retry-After", value: "5")])
                return
            }
            self.tcp.write(WebSocketHandshake.serverResponseBytes(forClientKey: key, subprotocol: subprotocol,
                                                                 extraHeaders: self.server.upgradeHeaders))
            self.phase = .websocket
            let now = self.server.nowMs
            var session = RelaySessionStateMachine(nonce: SecureRandom.bytes(32), nowMs: now,
                                                   limits: self.server.configuration.limits)
            self.parser = WebSocketParser(role: .server, maxMessageBytes: self.server.configuration.limits.maxMessageBytes)
            self.writeFrame(session.challenge(relayTimeMs: self.server.wallClockMs))
            session.bytesReceived(nowMs: now)
            self.session = session
            self.server.webSocketOpened()
            if !leftover.isEmpty {
                self.parser?.append(leftover)
                self.readWebSocket()
            }
        }
    }

    // MARK: WebSocket

    private func readWebSocket() {
        // The upgrade sets both before the phase becomes .websocket; without them nothing could be read or answered.
        guard self.parser != nil, self.session != nil else {
            assertionFailure("a WebSocket connection without its parser or session")
            return self.closeWebSocket(code: 1011, reason: "internal_error")
        }
        var handled = 0
        while case .websocket = self.phase {
            if self.paced || self.turnSpent { break }
            if handled == Self.messagesPerTurn {
                self.spendTurn()
                break
            }
            let event: WebSocketEvent?
            do {
                event = try self.parser?.next()
            } catch {
                if error == .messageTooBig, let action = self.session?.messageTooBig() {
                    self.perform(action)
                } else {
                    self.closeWebSocket(code: error.closeCode, reason: "protocol_error")
                }
                return
            }
            guard let event else { break }
            handled += 1
            switch event {
            case .message(let opcode, let payload):
                if let waitMs = self.pacer.received(byteCount: payload.count, nowMs: self.server.nowMs) {
                    self.pace(forMs: waitMs)
                }
                if opcode == .text {
                    if let action = self.session?.textMessageReceived() { self.perform(action) }
                } else {
                    self.server.metrics.framesReceived += 1
                    if let action = self.session?.messageReceived(payload[...], nowMs: self.server.nowMs) {
                        self.perform(action)
                    }
                }
            case .ping(let data):
                self.append(WebSocketFrameEncoder.encode(opcode: .pong, payload: data))
            case .pong:
                break
            case .close(let code, _):
                // Echo the close (RFC 6455 §5.5.1) and hang up.
                let echo = code.map { WebSocketFrameEncoder.closePayload(code: $0, reason: "") } ?? []
                self.append(WebSocketFrameEncoder.encode(opcode: .close, payload: echo))
                self.flushOutput()
                self.session?.connectionClosed()
                self.hangUpAfterFlush()
            }
        }
        // An idle connection holds no input storage: it goes back to the server's spares for the next read.
        if case .websocket = self.phase, let storage = self.parser?.takeIdleStorage() {
            self.server.recycleInputStorage(storage)
        }
    }

    /// Stops reading until the loop's next iteration, when the messages already buffered are handled first.
    private func spendTurn() {
        self.server.metrics.turnsYielded += 1
        self.turnSpent = true
        self.tcp.pauseReading()
        self.tcp.eventLoop.deferToNextIteration { [self] in
            self.turnSpent = false
            self.resumeWebSocket()
        }
    }

    /// Stops reading for `ms`: the connection sends faster than twice what it may send.
    private func pace(forMs ms: UInt64) {
        guard !self.paced else { return }
        self.paced = true
        self.server.metrics.pacedReads += 1
        self.tcp.pauseReading()
        self.tcp.eventLoop.scheduleTimer(after: .milliseconds(Int64(ms))) { [self] in
            self.paced = false
            self.resumeWebSocket()
        }
    }

    /// Handles what is buffered, then reads again unless that paused it once more.
    private func resumeWebSocket() {
        guard case .websocket = self.phase else { return }
        self.readWebSocket()
        if !self.paced && !self.turnSpent { self.tcp.resumeReading() }
    }

    /// Carries out one action of the session machine.
    func perform(_ action: RelaySessionStateMachine.Action) {
        switch action {
        case .none:
            break
        case .verifyAuth(let pk, let signature, let nonce):
            let valid = Signature.verify(signature, message: nonce, context: SignatureContext.relayAuth, publicKey: pk)
            let admitted = self.server.admission.admits(pk)
            guard let next = self.session?.authVerified(publicKey: pk, signatureValid: valid, admitted: admitted)
            else { return }
            if case .close = next {
                self.perform(next)
            } else {
                self.server.authenticated(self, key: pk)
            }
        case .send(let frames):
            for f in frames { self.writeFrame(f) }
        case .refuse(let sendID, let status):
            if let reason = RelayMetrics.DropReason(refused: status) { self.server.metrics.dropped(reason) }
            if sendID != 0 { self.writeFrame(.receipt(sendID: sendID, status: status)) }
        case .route(let sendID, let recipient, let store, let payload):
            self.server.route(from: self, sendID: sendID, recipient: recipient, store: store, payload: payload)
        case .acknowledge(let id):
            self.server.acknowledge(self, deliveryID: id)
        case .close(let code, let reason):
            switch reason {
            case .badSignature, .notAdmitted, .authTimeout:
                self.server.metrics.authFailures[reason.rawValue, default: 0] += 1
            default: break
            }
            self.closeWebSocket(code: code, reason: reason.rawValue)
        }
    }

    /// Hangs up once queued output is sent. A peer that stops reading would keep the connection (its socket and
    /// its queue, up to `outboundQueueMaxBytes`) forever, so the sweep drops it after `closeFlushTimeoutMs`.
    private func hangUpAfterFlush() {
        self.phase = .closing(sinceMs: self.server.nowMs)
        self.tcp.closeAfterFlush()
    }

    /// Sends a close frame with `code` and hangs up once it is flushed.
    func closeWebSocket(code: UInt16, reason: String) {
        guard case .websocket = self.phase else { return }
        self.server.metrics.closes[reason, default: 0] += 1
        self.server.logger.debug("Closing connection", metadata: ["conn.id": "\(self.tcp.id)", "close.code": "\(code)",
                                                                 "close.reason": reason])
        self.append(WebSocketFrameEncoder.encode(opcode: .close,
                                                 payload: WebSocketFrameEncoder.closePayload(code: code, reason: reason)))
        self.flushOutput()
        self.session?.connectionClosed()
        self.hangUpAfterFlush()
    }

    func writeFrame(_ frame: RelayFrame) {
        WebSocketFrameEncoder.encode(opcode: .binary, payload: frame.encoded(), into: &self.output)
        self.markDirty()
    }

    /// Appends a DELIVER: the WebSocket and relay headers, then the payload.
    func writeDeliver(sender: PublicKey, deliveryID: UInt64, payload: ArraySlice<UInt8>) {
        Self.appendDeliverHeader(sender: sender, deliveryID: deliveryID, payloadCount: payload.count, to: &self.output)
        self.output.append(contentsOf: payload)
        self.markDirty()
    }

    /// Appends already framed bytes.
    func append(_ bytes: [UInt8]) {
        self.output.append(contentsOf: bytes)
        self.markDirty()
    }

    private func markDirty() {
        guard !self.isDirty else { return }
        self.isDirty = true
        self.server.markDirty(self)
    }

    /// Hands the gathered output to the socket in one write.
    func flushOutput() {
        self.isDirty = false
        guard !self.output.isEmpty else { return }
        if self.tcp.isOpen { self.tcp.write(self.output) }
        // Keep a small buffer for the next burst; give a big one back so idle connections stay cheap.
        self.output.removeAll(keepingCapacity: self.output.capacity <= 16 * 1024)
    }

    /// WebSocket header (server frames are unmasked) followed by `0x11 || sender || delivery_id`.
    static func deliverHeader(sender: PublicKey, deliveryID: UInt64, payloadCount: Int) -> [UInt8] {
        var h = [UInt8]()
        h.reserveCapacity(10 + RelayFrame.deliverHeaderByteCount)
        Self.appendDeliverHeader(sender: sender, deliveryID: deliveryID, payloadCount: payloadCount, to: &h)
        return h
    }

    static func appendDeliverHeader(sender: PublicKey, deliveryID: UInt64, payloadCount: Int, to h: inout [UInt8]) {
        let length = RelayFrame.deliverHeaderByteCount + payloadCount
        h.append(0x82)  // FIN, binary
        if length < 126 {
            h.append(UInt8(length))
        } else if length <= 0xFFFF {
            h.append(126)
            h.append(UInt8(length >> 8))
            h.append(UInt8(length & 0xFF))
        } else {
            h.append(127)
            for i in (0..<8).reversed() { h.append(UInt8(truncatingIfNeeded: UInt64(length) >> (UInt64(i) * 8))) }
        }
        h.append(RelayFrameType.deliver.rawValue)
        sender.withUnsafeBytes { h.append(contentsOf: $0) }
        for i in (0..<8).reversed() { h.append(UInt8(truncatingIfNeeded: deliveryID >> (UInt64(i) * 8))) }
    }

    /// Unsent bytes: the kernel's backlog plus live frames held behind stored ones.
    var queuedBytes: Int { self.tcp.outboundBytesQueued + self.output.count + self.order.heldBytes }
}

/// A fleet edge connection's `FleetSendOrder`, by reference (see `RelayConnection.fleetOrder`).
final class FleetOrderBox {
    var order: FleetSendOrder<(sendID: UInt32, recipient: PublicKey, payload: [UInt8])>

    init(maxHeldBytes: Int) {
        self.order = FleetSendOrder(maxHeldBytes: maxHeldBytes)
    }
}
