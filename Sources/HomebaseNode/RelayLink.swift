import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One device's connection to its relay, kept up by a dedicated I/O thread: connect, log in, send queued frames,
/// hand received frames to the owner, reconnect with backoff and jitter (1012 at once), Protocol/relay.md §3-7.
///
/// Thread safety: `enqueue`, `start` and `stop` may be called from any thread. Callbacks run on the I/O thread
/// and must not block.
public final class RelayLink: Sendable {
    public struct Options: Sendable {
        /// `Authorization: Bearer` for relays that require an access token.
        public var accessToken: String?
        public var caFile: String?
        public var insecureSkipVerify = false
        public var connectTimeout: Duration = .seconds(10)
        /// Silence after which the client pings, and after which it gives up on the connection.
        public var keepaliveMs: UInt64 = 45_000
        public var deadAfterMs: UInt64 = 100_000
        /// Stop after this many failed connection attempts in a row (nil: never; a daemon retries forever).
        public var maxAttempts: Int?
        /// Bytes of frames queued that the socket has not taken, past which `enqueue` refuses more, as when not
        /// connected. A relay that takes bytes, but more slowly than they come (a slow uplink under many
        /// streams), never stalls the connection out (`sendStallMs`); without a cap its backlog, and the memory
        /// it holds, would grow for as long as that lasts. 8 MiB: some 30 maximal SENDs, or thousands of chunks.
        public var maxBacklogBytes = 8 * 1024 * 1024
        public init() {}
    }

    public enum Event: Sendable, Equatable {
        case connected(stored: Int, maxPayload: Int)
        /// Frames that arrived together, in order: the receiver can handle them as a batch (one commit of
        /// their ids for replay protection instead of one each).
        case frames([RelayFrame])
        case disconnected(closeCode: UInt16?, reason: String)
        /// The link gave up: replaced (4001), too many failed attempts, or stopped.
        case stopped(reason: String)
    }

    /// What `enqueue` did with a frame.
    public enum Enqueued: Sendable, Equatable {
        case queued
        /// Not sent: no connection (or the link stopped).
        case notConnected
        /// Not sent: the backlog is full (`Options.maxBacklogBytes`); the relay takes bytes too slowly.
        case backlogFull
    }

    private struct Shared {
        var outbound: [[UInt8]] = []
        /// Bytes in `outbound`.
        var outboundBytes = 0
        /// Bytes the WebSocket held for room when last written to (`WebSocketClient.pendingOutputBytes`).
        var socketBacklogBytes = 0
        var stopped = false
        var connected = false
        /// Paces SENDs under the relay's announced limits (`RelaySendLimits`); set at each login.
        var pacer: SendPacer?
        /// When the first frame held back by the pacer may go (`Posix.monotonicMs`); nil when none is held.
        var pacedUntilMs: UInt64?
        /// Why the last attempt failed; nil once logged in.
        var problem: RelayConnectProblem?
    }

    public let url: String
    private let key: SigningSecretKey
    private let options: Options
    private let shared = Mutex(Shared())
    private let onEvent: @Sendable (Event) -> Void
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)
    /// A wake byte is in the pipe and the I/O thread has not drained it yet: further enqueues need not write
    /// another (one pipe write per burst instead of one per frame).
    private let wakePending = Atomic<Bool>(false)
    /// The connection being served, for threads that write their queued frames themselves at the end of a batch
    /// (`writeOrWake`). Whoever touches the WebSocket holds this lock: the I/O thread to read, write or close it
    /// (never while it waits in poll(2)), another thread only when it finds the lock free.
    private let io = Mutex(IOSlot())
    /// Wake bytes written, and batches of frames another thread wrote itself (for tests).
    let wakesWritten = Atomic<Int>(0)
    let directWrites = Atomic<Int>(0)
    /// Frames `enqueue` refused because the backlog was full (`Options.maxBacklogBytes`).
    public let refusedFrames = Atomic<Int>(0)
    /// Times a SEND had to wait for the pacer (each wait counted once per frame at the queue's head).
    public let pacedWaits = Atomic<Int>(0)

    private struct IOSlot {
        var socket: SharedWebSocket?
        /// A write from another thread failed: the I/O thread ends the connection.
        var failed = false
    }

    /// The connection's WebSocket, used only under `io`.
    private final class SharedWebSocket: @unchecked Sendable {
        let ws: WebSocketClient
        init(_ ws: WebSocketClient) { self.ws = ws }
    }

    /// Pending output the socket has not taken for this long ends the connection, as a blocking send's
    /// deadline did.
    private static let sendStallMs: UInt64 = 10_000

    public init(url: String, key: SigningSecretKey, options: Options = Options(),
                onEvent: @escaping @Sendable (Event) -> Void) {
        self.url = url
        self.key = key
        self.options = options
        self.onEvent = onEvent
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0, "pipe() failed: \(errno)")
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        self.wakeRead = fds[0]
        self.wakeWrite = fds[1]
    }

    deinit {
        close(self.wakeRead)
        close(self.wakeWrite)
    }

    public var isConnected: Bool { self.shared.withLock { $0.connected } }

    /// Why the last connection attempt failed, from what it really met (issue 39); nil while logged in and
    /// before the first attempt ended.
    public var problem: RelayConnectProblem? { self.shared.withLock { $0.problem } }

    private func noteProblem(_ error: WebSocketClient.Error) {
        let tokenSent = self.options.accessToken != nil || self.url.contains("token=")
        let problem = RelayConnectProblem(cause: WebSocketClient.problemCause(error), url: self.url,
                                          tokenSent: tokenSent)
        self.shared.withLock { $0.problem = problem }
    }

    /// True while SENDs wait for the pacer: the relay's rate would refuse more now. A sender that can merge
    /// what it sends (a stream's chunks) holds its text instead of queuing more frames behind them.
    public var isPacing: Bool { self.shared.withLock { $0.pacedUntilMs != nil } }

    public func start() {
        let thread = Thread { [self] in
            Posix.nameCurrentThread("relay-link")
            self.run()
            self.finished.signal()
        }
        thread.name = "relay-link"
        thread.start()
    }

    /// Stops the link and waits (at most `timeout`) for the thread to close the connection.
    public func stop(timeout: Duration = .seconds(2)) {
        let already = self.shared.withLock { s -> Bool in
            defer { s.stopped = true }
            return s.stopped
        }
        guard !already else { return }
        self.writeWakeByte()  // at once, not at a batch's end: it waits below for the thread
        _ = self.finished.wait(timeout: .now() + .milliseconds(Int(timeout.components.seconds * 1000)))
    }

    /// Queues a frame, unless not connected or the backlog is full (`Options.maxBacklogBytes`): the caller then
    /// treats it as not sent.
    @discardableResult
    public func enqueue(_ frame: RelayFrame) -> Enqueued {
        self.enqueue(encoded: frame.encoded())
    }

    /// `enqueue` of a frame already encoded (`RelayFrame.encoded()`'s bytes), for a sender that builds it in place.
    @discardableResult
    public func enqueue(encoded: [UInt8]) -> Enqueued {
        let maxBacklog = self.options.maxBacklogBytes
        let outcome = self.shared.withLock { s -> Enqueued in
            guard s.connected, !s.stopped else { return .notConnected }
            let backlog = s.outboundBytes + s.socketBacklogBytes
            // A frame bigger than the cap still goes when nothing waits (the relay's own limit is the payload's).
            guard backlog == 0 || backlog + encoded.count <= maxBacklog else { return .backlogFull }
            s.outbound.append(encoded)
            s.outboundBytes += encoded.count
            return .queued
        }
        switch outcome {
        case .queued: break
        case .notConnected: return outcome
        case .backlogFull:
            self.refusedFrames.add(1, ordering: .relaxed)
            // The I/O thread takes a fresh measure of the backlog on its next pass (repeats share one byte).
            self.writeWakeByte()
            return outcome
        }
        // The queuing thread writes the frames itself if it can (`writeOrWake`); inside a batch of work on it (the
        // HTTP loop's pass), once at the batch's end, for all the frames the batch queued. A wake-up of the I/O
        // thread (a pipe write, a poll, a pass, often a timer's worth of CPU on a VM) costs more than the write.
        if DeferredWakes.isBatching {
            DeferredWakes.wake(self) { [self] in self.writeOrWake() }
        } else {
            self.writeOrWake()
        }
        return .queued
    }

    private func writeWakeByte() {
        guard !self.wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var b: UInt8 = 1
        _ = write(self.wakeWrite, &b, 1)
        self.wakesWritten.add(1, ordering: .relaxed)
    }

    /// On the thread that queued frames (at the end of its batch, if it has one): writes the queued frames from
    /// that thread when the socket is free, instead of waking the I/O thread to do it — no pipe write, no
    /// wake-up, and no pass of a second thread. Wakes it when the socket is busy (the I/O thread at it), not
    /// connected, or full (the rest waits there for POLLOUT), or when the write failed (it ends the connection).
    private func writeOrWake() {
        let written = self.io.withLockIfAvailable { slot -> Bool in
            guard let socket = slot.socket, !slot.failed else { return false }
            do {
                defer { self.noteBacklog(socket.ws) }
                let (frames, held) = self.takeOutbound()
                // Frames the pacer held need the I/O thread's timed wait to go later.
                return try socket.ws.trySend(binaryMessages: frames) && !held
            } catch {
                slot.failed = true
                return false
            }
        }
        if written == true {
            self.directWrites.add(1, ordering: .relaxed)
        } else {
            self.writeWakeByte()
        }
    }

    /// The queued frames the pacer lets go now, in order, and whether any stay held for it; the caller holds
    /// `io`, so frames taken later are written later. A SEND the pacer holds keeps every frame behind it queued
    /// too (order per connection is the protocol's), until `pacedUntilMs`.
    private func takeOutbound() -> (frames: [[UInt8]], held: Bool) {
        self.shared.withLock { s -> ([[UInt8]], Bool) in
            let now = Posix.monotonicMs
            var count = 0
            var bytes = 0
            s.pacedUntilMs = nil
            for frame in s.outbound {
                if frame.first == RelayFrameType.send.rawValue, s.pacer != nil {
                    let payload = max(0, frame.count - RelayFrame.sendHeaderByteCount)
                    guard s.pacer!.take(payloadBytes: payload, nowMs: now) else {
                        s.pacedUntilMs = now + max(1, s.pacer!.waitMs(payloadBytes: payload, nowMs: now))
                        self.pacedWaits.add(1, ordering: .relaxed)
                        break
                    }
                }
                count += 1
                bytes += frame.count
            }
            let frames: [[UInt8]]
            if count == s.outbound.count {
                frames = s.outbound
                s.outbound.removeAll(keepingCapacity: true)
            } else {
                frames = Array(s.outbound[..<count])
                s.outbound.removeFirst(count)
            }
            // Counted as the socket's until the caller's `noteBacklog` measures it: the frames are on their way
            // there, and must count against the cap meanwhile.
            s.socketBacklogBytes += bytes
            s.outboundBytes -= bytes
            return (frames, s.pacedUntilMs != nil)
        }
    }

    /// Records what `ws` holds for room after a write, for `enqueue`'s cap. The caller holds `io`.
    private func noteBacklog(_ ws: WebSocketClient) {
        let bytes = ws.pendingOutputBytes
        self.shared.withLock { $0.socketBacklogBytes = bytes }
    }

    private var isStopped: Bool { self.shared.withLock { $0.stopped } }

    // MARK: The I/O thread

    private func run() {
        var backoff = ReconnectBackoff()
        var failures = 0
        while !self.isStopped {
            var closeCode: UInt16?
            do {
                let ws = try self.connect()
                failures = 0
                let (stored, maxPayload, machine) = try self.login(ws)
                backoff.connected()
                // The relay's announced SEND limits, or the protocol's defaults when it announces none (or
                // nonsense): an older relay still gets paced SENDs, at the rates it most likely enforces.
                let announced = RelaySendLimits(announcedIn: ws.responseHeaders) ?? .defaults
                // From here on the WebSocket is touched only under `io`: other threads may write to it, from the
                // first frame queued after the owner hears of the connection.
                self.io.withLock { $0 = IOSlot(socket: SharedWebSocket(ws)) }
                self.shared.withLock {
                    $0.connected = true
                    $0.problem = nil
                    $0.outbound.removeAll()
                    $0.outboundBytes = 0
                    $0.socketBacklogBytes = 0
                    $0.pacer = SendPacer(limits: announced, nowMs: Posix.monotonicMs)
                    $0.pacedUntilMs = nil
                }
                self.onEvent(.connected(stored: stored, maxPayload: maxPayload))
                closeCode = self.serve(ws, machine: machine)
                self.io.withLock { $0 = IOSlot() }
                self.shared.withLock { $0.connected = false }
                self.onEvent(.disconnected(closeCode: closeCode, reason: "connection ended"))
            } catch let e as WebSocketClient.Error {
                if case .closed(let code, _) = e { closeCode = code }
                failures += 1
                self.noteProblem(e)
                self.onEvent(.disconnected(closeCode: closeCode, reason: "\(e)"))
            } catch {
                failures += 1
                self.onEvent(.disconnected(closeCode: nil, reason: "\(error)"))
            }
            self.shared.withLock { $0.connected = false }
            if self.isStopped { break }
            if closeCode == CloseCode.replaced {
                self.onEvent(.stopped(reason: "replaced by a newer connection with the same key (4001)"))
                self.shared.withLock { $0.stopped = true }
                break
            }
            if let max = self.options.maxAttempts, failures >= max {
                self.onEvent(.stopped(reason: "relay unreachable after \(failures) attempts"))
                self.shared.withLock { $0.stopped = true }
                break
            }
            let delay = backoff.nextDelayMs(closeCode: closeCode, random: Double.random(in: 0..<1))
            self.sleep(ms: delay)
        }
        self.onEvent(.stopped(reason: "stopped"))
    }

    private func connect() throws -> WebSocketClient {
        var o = WebSocketClient.Options(subprotocol: "homebase-relay.v1")
        o.caFile = self.options.caFile
        o.insecureSkipVerify = self.options.insecureSkipVerify
        o.connectTimeout = self.options.connectTimeout
        o.maxMessageBytes = 512 * 1024
        if let t = self.options.accessToken { o.headers = [("Authorization", "Bearer \(t)")] }
        return try WebSocketClient.connect(self.url, options: o)
    }

    private func login(_ ws: WebSocketClient) throws -> (Int, Int, RelayClientStateMachine) {
        var machine = RelayClientStateMachine(publicKey: self.key.publicKey)
        let deadline = ContinuousClock.now + self.options.connectTimeout
        while true {
            guard let m = try ws.receive(timeout: max(deadline - .now, .zero)) else {
                throw WebSocketClient.Error.handshake("no READY from the relay in time")
            }
            guard m.opcode == .binary else { throw WebSocketClient.Error.handshake("text frame from relay") }
            switch machine.messageReceived(m.payload[...]) {
            case .signChallenge(let nonce, _):
                let sig = self.key.sign(nonce, context: SignatureContext.relayAuth)
                if case .send(let f) = machine.challengeSigned(signature: sig) { try ws.send(binary: f.encoded()) }
            case .ready(let stored, let max):
                return (stored, max, machine)
            case .relayError(let code, let message):
                throw WebSocketClient.Error.closed(code: code, reason: message)
            case .close(let code, let reason):
                ws.close(code: code, reason: reason)
                throw WebSocketClient.Error.handshake(reason)
            default:
                continue
            }
        }
    }

    /// What one locked step at the socket found.
    private struct Step {
        var messages: [(opcode: WebSocketOpcode, payload: [UInt8])] = []
        var heard = false
        var pendingInput = false
        var pendingOutput = false
        /// Another thread's write failed, or output stalled.
        var failed = false
    }

    /// Serves one logged-in connection until it ends; returns the close code.
    private func serve(_ ws: WebSocketClient, machine: RelayClientStateMachine) -> UInt16? {
        var lastHeard = Posix.monotonicMs
        var lastPing = lastHeard
        var machine = machine
        let fd = ws.pollDescriptor
        // Whether the socket may hold bytes: at first, and then whenever poll(2) says so.
        var readable = true
        // The caller published `ws` in `io`: it is touched only under that lock.
        do {
            while true {
                if self.isStopped {
                    self.io.withLock { _ in ws.close(code: CloseCode.normal, reason: "") }
                    return CloseCode.normal
                }
                // Frames queued but not yet written go first, behind any output waiting for room; then everything
                // already received is taken (as one batch). The socket is read only when poll said so: a wake
                // for frames to send costs no recv(2).
                let step = try self.io.withLock { slot throws(WebSocketClient.Error) -> Step in
                    // Another thread's write failed, or output has not moved for too long: the connection ends
                    // before anything more is read (so no RECEIPT is taken only to be lost).
                    guard !slot.failed, ws.outputStalledMs(now: Posix.monotonicMs) <= Self.sendStallMs else {
                        return Step(failed: true)
                    }
                    _ = try ws.trySend(binaryMessages: self.takeOutbound().frames)
                    // Measured after the read as well: reading writes pending output too (and pongs).
                    defer { self.noteBacklog(ws) }
                    let before = ws.bytesReceived
                    var step = Step()
                    step.messages = try ws.receiveAvailable(read: readable)
                    step.heard = ws.bytesReceived != before  // a pong counts too
                    step.pendingInput = ws.mayHavePendingInput
                    step.pendingOutput = ws.hasPendingOutput
                    return step
                }
                if step.failed {
                    self.io.withLock { _ in ws.abort() }
                    return nil
                }
                if step.heard { lastHeard = Posix.monotonicMs }
                var received: [RelayFrame] = []
                defer { if !received.isEmpty { self.deliver(received) } }
                for m in step.messages {
                    guard m.opcode == .binary else { continue }
                    switch machine.messageReceived(m.payload[...]) {
                    case .deliver(let sender, let id, let payload):
                        received.append(.deliver(sender: sender, deliveryID: id, payload: payload))
                    case .receipt(let sendID, let status):
                        received.append(.receipt(sendID: sendID, status: status))
                    case .relayError(let code, let message):
                        received.append(.error(code: code, message: message))
                    case .close(let code, let reason):
                        self.io.withLock { _ in ws.close(code: code, reason: reason) }
                        return code
                    default:
                        break
                    }
                    // Bounded: a relay that never stops sending still gets its frames handled in batches.
                    if received.count >= 256 {
                        self.deliver(received)
                        received.removeAll(keepingCapacity: true)
                    }
                }
                if !received.isEmpty {
                    self.deliver(received)
                    received.removeAll()
                }
                let now = Posix.monotonicMs
                if now >= lastHeard + self.options.deadAfterMs {
                    self.io.withLock { _ in ws.abort() }
                    return nil
                }
                if now >= lastHeard + self.options.keepaliveMs, now >= lastPing + self.options.keepaliveMs {
                    lastPing = now
                    _ = try self.io.withLock { _ throws(WebSocketClient.Error) in
                        defer { self.noteBacklog(ws) }
                        return try ws.tryPing()
                    }
                }
                // Input poll cannot announce (a failure after the last messages, TLS records past the bound):
                // take it at once, only draining the wake pipe. Output waiting for room: wake when there is.
                // Frames the pacer holds go when it allows: the wait ends then.
                let pacedWait = self.shared.withLock { $0.pacedUntilMs }.map { $0 > now ? $0 - now : 0 }
                let timeoutMs = step.pendingInput ? 0 : Int32(min(pacedWait ?? 1_000, 1_000))
                readable = self.waitReadable(fd, writable: step.pendingOutput, timeoutMs: timeoutMs) || step.pendingInput
            }
        } catch {
            if case .closed(let code, _) = error { return code }
            return nil
        }
    }

    /// Hands received frames to the owner inside a batch: what its handling queues (ACKs, replies) is written
    /// from here at the end (`writeOrWake`), without a wake byte to this very thread and another turn of its loop.
    private func deliver(_ frames: [RelayFrame]) {
        DeferredWakes.batch { self.onEvent(.frames(frames)) }
    }

    /// Waits for the socket (readable, or writable when `writable`) or the wake pipe; returns whether the
    /// socket is readable (or failed: the read will say how). A wake byte is drained.
    private func waitReadable(_ fd: Int32, writable: Bool, timeoutMs: Int32) -> Bool {
        let events = Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0)
        var fds = [pollfd(fd: fd, events: events, revents: 0),
                   pollfd(fd: self.wakeRead, events: Int16(POLLIN), revents: 0)]
        if poll(&fds, 2, timeoutMs) < 0 {
            return true  // EINTR and the like: read to find out rather than miss anything
        }
        if fds[1].revents != 0 {
            // Drain, then clear the flag: an enqueue before the clear finds the flag set and writes nothing, but
            // its frame is already queued and the caller re-reads the queue right after this returns; an enqueue
            // after the clear writes a fresh byte. No wake-up is lost either way.
            var buf = [UInt8](repeating: 0, count: 64)
            while read(self.wakeRead, &buf, buf.count) > 0 {}
            self.wakePending.store(false, ordering: .releasing)
        }
        return fds[0].revents & ~Int16(POLLOUT) != 0
    }

    /// Waits out a reconnect delay; a stop cuts it short. A stale wake byte (a frame queued just before the
    /// connection dropped) is drained first, so it cannot turn the backoff into an immediate retry.
    private func sleep(ms: UInt64) {
        let deadline = Posix.monotonicMs + ms
        while !self.isStopped {
            let now = Posix.monotonicMs
            guard now < deadline else { return }
            var fds = [pollfd(fd: self.wakeRead, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, Int32(min(deadline - now, 60_000)))
            if fds[0].revents != 0 {
                var buf = [UInt8](repeating: 0, count: 64)
                while read(self.wakeRead, &buf, buf.count) > 0 {}
                self.wakePending.store(false, ordering: .releasing)
            }
        }
    }
}

