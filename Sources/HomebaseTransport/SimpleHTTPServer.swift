import Foundation
import HomebaseCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small blocking HTTP/1.1 server for test emulators: one accept thread, one thread per connection.
///
/// Good for a few hundred concurrent streams (each connection costs a thread with a small stack); the relay's
/// production loop uses epoll instead. Supports keep-alive, pipelining, `Expect: 100-continue`, request bodies by
/// Content-Length or chunked coding (bounded by `Configuration.maxBodyBytes`), and streamed chunked responses.
///
/// The handler runs on the connection's thread and may block (sleep between tokens, stall); it must return
/// when `HTTPResponseWriter.waitForDisconnect(timeoutMs:)` reports the client gone. Uses only POSIX calls
/// (poll, no epoll), so it builds on macOS.
public final class SimpleHTTPServer: Sendable {
    /// Receives each request with the writer for its response. Called on the connection's own thread.
    public typealias Handler = @Sendable (HTTPServerRequest, HTTPResponseWriter) -> Void
    /// Shapes a refusal the server sends itself: its headers and body from the status and a one-line reason.
    public typealias Refusal = @Sendable (_ status: Int, _ reason: String)
        -> (headers: [(String, String)], body: [UInt8])

    /// Bounds and timeouts of the server.
    public struct Configuration: Sendable {
        /// Limits on each request head (431/400 beyond them).
        public var headLimits = HTTPHeadLimits()
        /// Largest request body, by Content-Length or chunked. Over it: 413 and close. Bodies are buffered whole.
        public var maxBodyBytes = 8 * 1024 * 1024
        /// A keep-alive connection with no new request for this long is closed.
        public var idleTimeoutMs: Int32 = 30_000
        /// listen(2) backlog: a burst of 100 clients connecting at once must not be refused.
        public var backlog: Int32 = 512
        /// Stack of each connection thread; handlers are shallow, and hundreds of 8 MiB stacks waste address space.
        public var threadStackBytes = 512 * 1024
        /// Open connections at most (each costs a thread); one more is answered 503 and closed. Unbounded by
        /// default: the emulators serve what their tests send.
        public var maxConnections = Int.max
        /// Who gets a connection slot when they are scarce (`ConnectionSlots`: per peer address, and never taking
        /// an authenticated connection's): replaces `maxConnections` when set. A handler marks its connection
        /// authenticated with `HTTPResponseWriter.authenticateConnection()`.
        public var slots: ConnectionSlots.Limits?
        /// A request's head and body must arrive within this long from its first byte (before it, `idleTimeoutMs`
        /// applies: a browser keeps preconnected sockets silent for a while, and closing one just as it sends a
        /// POST would lose the POST). A client dribbling a byte at a time is answered 408 and closed. Unbounded
        /// when nil.
        public var requestReadTimeoutMs: Int32?
        /// A send that cannot go on for this long (a client that stopped reading, its buffers full) fails, and the
        /// connection ends (`SO_SNDTIMEO`). Unbounded when nil.
        public var sendTimeoutMs: Int32?
        /// The response to a request refused before any handler saw it (400 malformed, 408 late, 413 too large,
        /// 431 head too large, 503 too many connections): its headers and body from the status and a one-line
        /// reason. Plain text when nil; an API server answers in its own error shape.
        public var refusal: Refusal?

        public init() {}
    }

    private struct State: Sendable {
        var listenFD: Int32 = -1
        var wakeRead: Int32 = -1
        var wakeWrite: Int32 = -1
        var running = false
        var stopping = false
        /// Open connection sockets. Only the owning connection thread closes its fd, after removing it here,
        /// so `stop()` can `shutdown` them without racing a reused descriptor.
        var connections: Set<Int32> = []
        var acceptThreadDone = false
        /// With `Configuration.slots`: who holds which slot, by socket.
        var slots: ConnectionSlots?
    }

    let configuration: Configuration
    let handler: Handler
    private let state: Mutex<State>

    public init(configuration: Configuration = Configuration(), handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        var state = State()
        state.slots = configuration.slots.map { ConnectionSlots($0) }
        self.state = Mutex(state)
    }

    /// Binds `host:port` (IPv4 literal or `localhost`; port 0 picks a free port), starts the accept thread and
    /// returns the bound port.
    /// - Throws: when the server already runs, or socket/bind/listen fail (the message names the call).
    @discardableResult
    public func start(host: String = "127.0.0.1", port: UInt16) throws -> UInt16 {
        let already = self.state.withLock { $0.running || $0.stopping }
        guard !already else { throw ServerSocket.Failure(call: "start (already started)", code: EINVAL) }
        let (fd, bound) = try ServerSocket.listen(host: host, port: port, backlog: self.configuration.backlog)
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            let code = errno
            close(fd)
            throw ServerSocket.Failure(call: "pipe", code: code)
        }
        self.state.withLock {
            $0.listenFD = fd
            $0.wakeRead = pipeFDs[0]
            $0.wakeWrite = pipeFDs[1]
            $0.running = true
        }
        let wakeRead = pipeFDs[0]
        let thread = Thread { [self] in
            Posix.nameCurrentThread("http-accept")
            self.acceptLoop(listenFD: fd, wakeFD: wakeRead)
        }
        thread.name = "http-accept"
        thread.start()
        return bound
    }

    /// Closes the listener and every connection, and waits (up to 2 s) for connection threads to return.
    /// Handlers blocked in `waitForDisconnect` see the client as gone. Safe to call more than once.
    public func stop() {
        let wakeWrite: Int32? = self.state.withLock { state in
            guard state.running, !state.stopping else { return nil }
            state.stopping = true
            for fd in state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
            return state.wakeWrite
        }
        guard let wakeWrite else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            let done = self.state.withLock { state -> Bool in
                // Connections accepted just before the stop flag was set are shut down here too.
                for fd in state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
                return state.acceptThreadDone && state.connections.isEmpty
            }
            if done { break }
            usleep(2_000)
        }
        self.state.withLock { state in
            if state.acceptThreadDone {
                close(state.listenFD)
                close(state.wakeRead)
                close(state.wakeWrite)
            }
            state.running = false
        }
    }

    /// Number of open client connections (for tests and metrics).
    public var connectionCount: Int { self.state.withLock { $0.connections.count } }

    /// With `Configuration.slots`: connection `fd` proved it may be here, and is never evicted for a stranger.
    func authenticate(_ fd: Int32) {
        self.state.withLock { $0.slots?.authenticate(Int(fd)) }
    }

    private static let tooManyConnections = HTTPResponseEncoder.response(
        status: 503,
        headers: [HTTPHeaderField(name: "Content-Type", value: "text/plain; charset=utf-8"),
                  HTTPHeaderField(name: "Connection", value: "close")],
        body: Array("too many connections\n".utf8))

    /// The 503 for a connection over the limit, in the API's shape when `Configuration.refusal` gives one.
    private var tooManyConnectionsResponse: [UInt8] {
        guard let shaped = self.configuration.refusal?(503, "too many connections") else {
            return Self.tooManyConnections
        }
        let headers = shaped.headers.map { HTTPHeaderField(name: $0.0, value: $0.1) }
            + [HTTPHeaderField(name: "Connection", value: "close")]
        return HTTPResponseEncoder.response(status: 503, headers: headers, body: shaped.body)
    }

    private func acceptLoop(listenFD: Int32, wakeFD: Int32) {
        defer { self.state.withLock { $0.acceptThreadDone = true } }
        var fds = [
            pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let r = poll(&fds, 2, -1)
            if r < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let (client, address) = ServerSocket.accept(listenFD)
            if client < 0 { continue }  // ECONNABORTED, EMFILE: keep serving the others
            var one: Int32 = 1
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if !os(Linux)
            setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            if let ms = self.configuration.sendTimeoutMs { ServerSocket.setSendTimeout(client, ms: ms) }
            let admitted = self.state.withLock { state -> Bool? in
                guard !state.stopping else { return nil }
                if state.slots != nil {
                    switch state.slots!.admit(Int(client), address: address) {
                    case .refuse:
                        return false
                    case .admitEvicting(let victim):
                        // Its thread sees the connection end, and closes it (releasing nothing: the slot is gone).
                        shutdown(Int32(victim), Int32(SHUT_RDWR))
                    case .admit:
                        break
                    }
                } else {
                    guard state.connections.count < self.configuration.maxConnections else { return false }
                }
                state.connections.insert(client)
                return true
            }
            guard let admitted else {
                close(client)
                return
            }
            guard admitted else {
                // The response fits any socket buffer: the send cannot block the accept loop.
                _ = ServerSocket.sendAll(client, self.tooManyConnectionsResponse)
                close(client)
                continue
            }
            let thread = Thread { [self] in
                Posix.nameCurrentThread("http-conn")
                var connection = HTTPServerConnection(fd: client, server: self)
                connection.run()
                self.state.withLock { state in
                    _ = state.connections.remove(client)
                    state.slots?.release(Int(client))
                }
                close(client)
            }
            thread.name = "http-conn"
            thread.stackSize = self.configuration.threadStackBytes
            thread.start()
        }
    }
}
