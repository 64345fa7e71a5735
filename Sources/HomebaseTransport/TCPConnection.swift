#if os(Linux)
internal import CLinux
import Glibc

/// Receives a `TCPConnection`'s events, on its loop's thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// Bytes arrived. `bytes` points into the loop's shared read buffer and is valid only during this
    /// call: copy what you keep. May be called several times per readiness event.
    func connectionReadable(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer)
    /// A backlog of queued output has been fully handed to the kernel (`outboundBytesQueued` is 0).
    /// Not called when writes complete immediately.
    func connectionWritable(_ connection: TCPConnection)
    /// The connection is closed: called exactly once, never from inside `write` or `close` (it runs
    /// after the current callback returns). `error` is nil for a local close or the peer's clean EOF.
    func connectionClosed(_ connection: TCPConnection, error: TransportError?)
}

extension TCPConnectionDelegate {
    public func connectionWritable(_ connection: TCPConnection) {}
}

/// One accepted TCP connection on an `EventLoop`. Loop-confined: use it only on its loop's thread.
///
/// Reads go through the loop's one shared buffer, so an idle connection costs only this object (about
/// 80 bytes of heap) plus its kernel socket. Writes go straight to the kernel; only what the kernel
/// does not take is queued, and `outboundBytesQueued` lets the owner drop a reader that fell behind.
/// The queue itself is unbounded: bounding it is the owner's policy (the relay stops writing to it).
public final class TCPConnection: EventLoopSource {
    /// Bytes read from one connection in one turn: one read of the loop's buffer. A peer sending faster than it
    /// can be handled kept the loop reading its socket while every other connection waited (issue 23: a flood
    /// of maximal frames held the relay's other clients up for hundreds of milliseconds); past the budget the
    /// connection resumes on the loop's next iteration, after the others. A bulk transfer pays one more
    /// non-blocking epoll_wait per 64 KiB.
    public static let readBudgetBytes = EventLoop.readBufferBytes

    /// What a connection is registered for, once and never modified: edge-triggered reads, writes and hangups.
    static var registrationEvents: UInt32 {
        EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
    }

    /// Unique per loop, increasing.
    public let id: UInt64
    /// Receives events. Cleared after `connectionClosed`, which breaks delegate ↔ connection cycles.
    public var delegate: TCPConnectionDelegate?

    // The loop closes every connection before it goes away, and every path that touches the loop
    // checks `fd >= 0` first, so the loop outlives every use; unowned(unsafe) avoids refcount traffic.
    private unowned(unsafe) let loop: EventLoop
    private var fd: Int32
    private var state: State = .open
    private var readingPaused = false
    /// Readiness arrived while paused: with edge triggering it will not be reported again.
    private var readPending = false
    /// A read put off to the next iteration (the turn's budget was used) is queued.
    private var readResumeQueued = false
    private var outbound: [UInt8] = []
    private var outboundHead = 0

    private enum State: UInt8 {
        case open
        /// `closeAfterFlush()` was called (or the peer sent EOF) while output was queued.
        case closingAfterFlush
        case closed
    }

    init(loop: EventLoop, fd: Int32) {
        self.loop = loop
        self.fd = fd
        self.id = loop.makeConnectionID()
    }

    /// The loop this connection lives on (for timers and `execute`).
    public var eventLoop: EventLoop { self.loop }

    /// Bytes the kernel has taken from this connection's writes so far: an owner tells a reader that is slow
    /// (this grows) from one that stopped (it does not).
    public private(set) var bytesSent: UInt64 = 0

    /// Bytes accepted by `write` that the kernel has not taken yet.
    public var outboundBytesQueued: Int { self.outbound.count - self.outboundHead }

    /// False once closed (locally or by the peer).
    public var isOpen: Bool { self.state != .closed }

    /// The peer as "ip:port" or "[ipv6]:port"; "unknown" once closed. Computed on demand (getpeername)
    /// so idle connections do not store it.
    public var peerAddress: String {
        guard self.fd >= 0, let address = SocketAddress.peer(of: self.fd) else { return "unknown" }
        return address.description
    }

    // MARK: Writing

    /// Sends `bytes`: straight to the kernel when nothing is queued, the remainder (or everything, when
    /// output is already queued) appended to the outbound queue. Ignored after `close()` or
    /// `closeAfterFlush()`. A send failure closes the connection (the delegate hears it later).
    @inlinable
    public func write(_ bytes: some Collection<UInt8>) {
        let written: Void? = bytes.withContiguousStorageIfAvailable { self.write(UnsafeRawBufferPointer($0)) }
        if written == nil {
            Array(bytes).withUnsafeBytes { self.write($0) }
        }
    }

    /// Sends raw bytes; see `write(_:)`. The bytes are copied if they must be queued.
    public func write(_ buffer: UnsafeRawBufferPointer) {
        guard self.state == .open, buffer.count > 0 else { return }
        if self.outboundHead == self.outbound.count {
            var offset = 0
            while offset < buffer.count {
                let n = send(self.fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if n > 0 {
                    offset += n
                    self.bytesSent &+= UInt64(n)
                    continue
                }
                let code = n == 0 ? EAGAIN : Posix.errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { break }
                self.close(error: .io(code))
                return
            }
            if offset == buffer.count { return }
            self.enqueue(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
        } else {
            self.enqueue(buffer)
        }
    }

    private func enqueue(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        // Drop the consumed prefix once it is most of the buffer, so the queue does not only grow.
        if self.outboundHead > 4096 && self.outboundHead >= self.outbound.count / 2 {
            self.outbound.removeFirst(self.outboundHead)
            self.outboundHead = 0
        }
        self.outbound.append(contentsOf: bytes)
    }

    /// Writes queued output until the kernel pushes back. Returns false if the connection closed.
    private func flush() -> Bool {
        while self.outboundHead < self.outbound.count {
            let n = self.outbound.withUnsafeBytes { raw in
                send(self.fd, raw.baseAddress! + self.outboundHead, raw.count - self.outboundHead, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                self.outboundHead += n
                self.bytesSent &+= UInt64(n)
                continue
            }
            let code = n == 0 ? EAGAIN : Posix.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return true }
            self.close(error: .io(code))
            return false
        }
        // Drained: give the memory back, so a connection that once had a backlog is cheap again.
        self.outbound = []
        self.outboundHead = 0
        if self.state == .closingAfterFlush {
            self.close(error: nil)
            return false
        }
        self.delegate?.connectionWritable(self)
        return self.state != .closed
    }

    // MARK: Closing

    /// Closes now, dropping queued output. Idempotent; the delegate hears `connectionClosed` once.
    public func close() {
        self.close(error: nil)
    }

    /// Closes once queued output has been sent (immediately if none). Later writes are ignored; reads
    /// are still delivered until then. A peer that never reads keeps the connection open, so pair this
    /// with a timer.
    public func closeAfterFlush() {
        guard self.state == .open else { return }
        if self.outboundBytesQueued == 0 {
            self.close(error: nil)
        } else {
            self.state = .closingAfterFlush
        }
    }

    func close(error: TransportError?) {
        guard self.state != .closed else { return }
        self.state = .closed
        self.loop.deregister(self.fd)
        Posix.closeDescriptor(self.fd)
        self.fd = -1
        self.outbound = []
        self.outboundHead = 0
        self.loop.deferWork {
            let delegate = self.delegate
            self.delegate = nil
            delegate?.connectionClosed(self, error: error)
        }
    }

    /// Closes a connection that was never registered or handed out (registration failed).
    func abandon() {
        self.state = .closed
        Posix.closeDescriptor(self.fd)
        self.fd = -1
    }

    // MARK: Reading

    /// Stops delivering reads (backpressure); the kernel buffers, then the peer's sends block.
    public func pauseReading() {
        self.readingPaused = true
    }

    /// Resumes reads paused by `pauseReading()`, including data that arrived meanwhile.
    public func resumeReading() {
        guard self.readingPaused else { return }
        self.readingPaused = false
        if self.readPending {
            self.readPending = false
            self.loop.deferWork { self.readAvailable(untilWouldBlock: true) }
        }
    }

    // MARK: Events

    func handleEvents(_ events: UInt32) {
        guard self.state != .closed else { return }
        if events & EPOLLERR.rawValue != 0 {
            let code = Posix.socketError(self.fd)
            self.close(error: code == 0 ? nil : .io(code))
            return
        }
        if events & EPOLLOUT.rawValue != 0 && self.outboundBytesQueued > 0 {
            guard self.flush() else { return }
        }
        let hangup = EPOLLRDHUP.rawValue | EPOLLHUP.rawValue
        if events & (EPOLLIN.rawValue | hangup) != 0 {
            self.readAvailable(untilWouldBlock: events & hangup != 0)
        }
    }

    func loopIsClosing() {
        self.close(error: nil)
    }

    /// Reads into the loop's shared buffer and hands each chunk to the delegate.
    ///
    /// A read shorter than the buffer means the socket was drained at that moment; with edge triggering
    /// new data raises a new edge, so we skip the recv that would only say EAGAIN (one syscall less per
    /// frame). A hangup must be read to the end, because the EOF rides on the same edge as the data.
    private func readAvailable(untilWouldBlock: Bool) {
        let buffer = self.loop.readBuffer
        var budget = Self.readBudgetBytes
        while self.state != .closed {
            if self.readingPaused {
                self.readPending = true
                return
            }
            if budget <= 0 {
                // More may be waiting, and edge triggering will not report it again: resume next iteration.
                self.resumeReadNextIteration(untilWouldBlock: untilWouldBlock)
                return
            }
            let n = recv(self.fd, buffer.baseAddress, buffer.count, 0)
            if n > 0 {
                budget -= n
                self.delegate?.connectionReadable(self, bytes: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                if n < buffer.count && !untilWouldBlock { return }
                continue
            }
            if n == 0 {
                // Peer EOF: send what is queued, then close; nothing more will arrive.
                if self.outboundBytesQueued > 0 {
                    self.state = .closingAfterFlush
                } else {
                    self.close(error: nil)
                }
                return
            }
            let code = Posix.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return }
            self.close(error: .io(code))
            return
        }
    }

    private func resumeReadNextIteration(untilWouldBlock: Bool) {
        guard !self.readResumeQueued else { return }
        self.readResumeQueued = true
        self.loop.deferToNextIteration { [self] in
            self.readResumeQueued = false
            guard self.state != .closed else { return }
            self.readAvailable(untilWouldBlock: untilWouldBlock)
        }
    }
}
#endif
