#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP client stream: non-blocking socket, waits with poll() (portable to macOS, unlike epoll).
///
/// Not thread-safe: use from one thread at a time (see `ByteStream`).
public final class TCPClientStream: ByteStream {
    private var fd: Int32
    /// recv(2) lands here, and only what arrived is copied out: no buffer of `maxBytes` is allocated and
    /// zeroed per call (a WebSocket client asks for 64 KiB and usually gets a few hundred bytes).
    private var scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 0, alignment: 1)

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        if self.fd >= 0 { Posix.closeDescriptor(self.fd) }
        self.scratch.deallocate()
    }

    /// Connects to `host:port`, trying each resolved address (IPv4 and IPv6) until one answers.
    /// - Parameter timeout: covers resolution-free connect attempts together; nil waits for the kernel's.
    /// - Throws: `.connectFailed` (with the last errno's text), or `.timedOut`.
    public static func connect(host: String, port: UInt16, timeout: Duration?) throws(TransportError)
        -> TCPClientStream
    {
        let deadlineNs = Duration.deadlineNs(after: timeout)
        let addresses = try SocketAddress.resolve(host: host, port: port, passive: false)
        var lastError = TransportError.connectFailed("\(host):\(port): no address tried")
        for address in addresses {
            do {
                return try self.connect(to: address, deadlineNs: deadlineNs)
            } catch {
                lastError = error
                if error == .timedOut { break }
            }
        }
        throw lastError
    }

    private static func connect(to address: SocketAddress, deadlineNs: UInt64?) throws(TransportError)
        -> TCPClientStream
    {
        #if canImport(Glibc)
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(address.family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw .connectFailed("socket: \(Posix.describe(errno: Posix.errno))") }
        // From here the stream owns fd; its deinit closes it on every failure path.
        let stream = TCPClientStream(fd: fd)
        if let code = Posix.setNonBlocking(fd) { throw .connectFailed("fcntl: \(Posix.describe(errno: code))") }
        #if canImport(Darwin)
        Posix.setSocketOption(fd, SOL_SOCKET, SO_NOSIGPIPE, 1)
        #endif
        Posix.setSocketOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        let rc = address.withSockAddr { posixConnect(fd, $0, $1) }
        if rc != 0 {
            let code = Posix.errno
            guard code == EINPROGRESS || code == EINTR else {
                throw .connectFailed("\(address.description): \(Posix.describe(errno: code))")
            }
            switch Posix.poll(fd, events: Int16(POLLOUT), deadlineNs: deadlineNs) {
            case .failure(let error): throw error
            case .success(0): throw .timedOut
            case .success: break
            }
            let pending = Posix.socketError(fd)
            guard pending == 0 else {
                throw .connectFailed("\(address.description): \(Posix.describe(errno: pending))")
            }
        }
        return stream
    }

    public var pollDescriptor: Int32 { self.fd }

    public func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) {
        guard self.fd >= 0 else { throw .closed }
        try self.sendAll(bytes, deadline: deadline)
    }

    public func trySend(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
        guard self.fd >= 0 else { throw .closed }
        var offset = 0
        while offset < bytes.count {
            let n = posixSend(self.fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n > 0 {
                offset += n
                continue
            }
            let code = Posix.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { break }
            if code == EPIPE || code == ECONNRESET { throw .closed }
            throw .io(code)
        }
        return offset
    }

    public func receive(maxBytes: Int, timeout: Duration?) throws(TransportError) -> [UInt8] {
        precondition(maxBytes > 0, "receive(maxBytes:) needs room for at least one byte")
        guard self.fd >= 0 else { throw .closed }
        let deadlineNs = Duration.deadlineNs(after: timeout)
        if self.scratch.count < maxBytes {
            self.scratch.deallocate()
            self.scratch = .allocate(byteCount: maxBytes, alignment: 1)
        }
        while true {
            let n = recv(self.fd, self.scratch.baseAddress, maxBytes, 0)
            if n >= 0 {
                return Array(UnsafeRawBufferPointer(rebasing: self.scratch[..<n]))
            }
            let code = Posix.errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else { throw .io(code) }
            // Nothing there and no time to wait: no poll(2) needed to say so.
            if timeout == .zero { throw .timedOut }
            switch Posix.poll(self.fd, events: Int16(POLLIN), deadlineNs: deadlineNs) {
            case .failure(let error): throw error
            case .success(0): throw .timedOut
            case .success: continue
            }
        }
    }

    public func close() {
        guard self.fd >= 0 else { return }
        Posix.closeDescriptor(self.fd)
        self.fd = -1
    }
}

/// connect(2) under a name that does not clash with `TCPClientStream.connect`.
private func posixConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

/// send(2) without SIGPIPE: MSG_NOSIGNAL on Linux; on Darwin the socket has SO_NOSIGPIPE.
func posixSend(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    return send(fd, bytes, count, Int32(MSG_NOSIGNAL))
    #else
    return send(fd, bytes, count, 0)
    #endif
}
