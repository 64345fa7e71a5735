#if os(Linux)
internal import CLinux
import Glibc

/// A listening TCP socket on an `EventLoop` that accepts until EAGAIN on every readiness edge.
///
/// Loop-confined. When the process runs out of descriptors (EMFILE/ENFILE) it stops accepting for
/// `descriptorExhaustionPause` instead of spinning on a connection it cannot take, then tries again.
public final class TCPListener: EventLoopSource {
    /// How long accepting pauses after EMFILE/ENFILE/ENOBUFS/ENOMEM.
    public static let descriptorExhaustionPause: Duration = .milliseconds(100)
    /// Connections accepted in one turn; a burst beyond it resumes on the loop's next iteration, so a connection
    /// flood (thousands queued at once) does not hold up the connections already being served.
    public static let acceptBudget = 64

    /// The bound port (the kernel's choice when 0 was asked for).
    public let port: UInt16
    /// The bound address, e.g. "127.0.0.1:41234" or "[::1]:41234".
    public let localAddress: String

    // The loop closes every listener before it goes away (in run() and deinit), so it outlives us.
    private unowned(unsafe) let loop: EventLoop
    private var fd: Int32
    private let accept: (TCPConnection) -> Void
    private var acceptPaused = false
    /// An accept put off to the next iteration (the turn's budget was used) is queued.
    private var acceptResumeQueued = false

    /// Binds and listens on `host:port` (IPv4 or IPv6 literal or name; "" = all addresses) and registers
    /// with `loop`. Loop-only (or before `run()`).
    /// - Parameter accept: called on the loop for each new connection; set its delegate there.
    /// - Throws: `.connectFailed` when the host does not resolve, `.io(errno)` when socket/bind/listen fail.
    public init(
        loop: EventLoop, host: String, port: UInt16, backlog: Int32 = 4096,
        accept: @escaping (TCPConnection) -> Void
    ) throws(TransportError) {
        var lastError = TransportError.connectFailed("\(host): no address")
        var bound: (fd: Int32, address: SocketAddress)?
        for address in try SocketAddress.resolve(host: host, port: port, passive: true) {
            let fd = socket(
                address.family,
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = .io(Posix.errno)
                continue
            }
            Posix.setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            let rc = address.withSockAddr { bind(fd, $0, $1) }
            guard rc == 0, listen(fd, backlog) == 0, let local = SocketAddress.local(of: fd) else {
                lastError = .io(Posix.errno)
                Posix.closeDescriptor(fd)
                continue
            }
            bound = (fd, local)
            break
        }
        guard let bound else { throw lastError }
        self.loop = loop
        self.fd = bound.fd
        self.port = bound.address.port
        self.localAddress = bound.address.description
        self.accept = accept
        if let code = loop.register(bound.fd, events: EPOLLIN.rawValue | EPOLLET.rawValue, source: self) {
            Posix.closeDescriptor(bound.fd)
            throw .io(code)
        }
    }

    /// Whether the listener still accepts.
    public var isOpen: Bool { self.fd >= 0 }

    /// Stops listening and closes the socket. Connections already accepted stay open. Idempotent.
    public func close() {
        guard self.fd >= 0 else { return }
        self.loop.deregister(self.fd)
        Posix.closeDescriptor(self.fd)
        self.fd = -1
    }

    func handleEvents(_ events: UInt32) {
        self.acceptAll()
    }

    func loopIsClosing() {
        self.close()
    }

    private func acceptAll() {
        var budget = Self.acceptBudget
        while self.fd >= 0 && !self.acceptPaused {
            if budget == 0 {
                // More may be queued, and edge triggering will not report them again: resume next iteration.
                guard !self.acceptResumeQueued else { return }
                self.acceptResumeQueued = true
                self.loop.deferToNextIteration { [weak self] in
                    self?.acceptResumeQueued = false
                    self?.acceptAll()
                }
                return
            }
            let client = accept4(self.fd, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if client >= 0 {
                budget -= 1
                self.adopt(client)
                continue
            }
            switch Posix.errno {
            case EAGAIN, EWOULDBLOCK:
                return
            case EINTR, ECONNABORTED, EPROTO, EPERM:
                // This one connection died before we took it (or a firewall refused it); take the next.
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // The pending connection stays queued and the edge is spent, so retry on a timer rather
                // than spin or wait for an edge that may never come.
                self.acceptPaused = true
                self.loop.scheduleTimer(after: TCPListener.descriptorExhaustionPause) { [weak self] in
                    guard let self else { return }
                    self.acceptPaused = false
                    self.acceptAll()
                }
                return
            default:
                // Unexpected (EBADF/EINVAL would be our bug); wait for the next edge rather than spin.
                return
            }
        }
    }

    private func adopt(_ client: Int32) {
        Posix.setSocketOption(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        let connection = TCPConnection(loop: self.loop, fd: client)
        guard self.loop.register(client, events: TCPConnection.registrationEvents, source: connection) == nil else {
            connection.abandon()
            return
        }
        self.accept(connection)
    }
}

extension EventLoop {
    /// Listens on `host:port` and calls `accept` on the loop for each connection; see `TCPListener`.
    /// The listener stays open until `run()` returns. Loop-only (or before `run()`).
    /// - Returns: the bound port, so port 0 works.
    @discardableResult
    public func listen(
        host: String, port: UInt16, backlog: Int32 = 4096, accept: @escaping (TCPConnection) -> Void
    ) throws(TransportError) -> UInt16 {
        try TCPListener(loop: self, host: host, port: port, backlog: backlog, accept: accept).port
    }
}
#endif
