import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection driven byte by byte: what an attacker's client does (connections that never speak,
/// heads trickled a byte at a time, garbage instead of frames), which a well-behaved WebSocket client cannot
/// be made to do. Non-blocking underneath; every wait is a `poll` with a deadline. One thread at a time.
final class RawSocket {
    enum Received: Equatable {
        case bytes([UInt8])
        /// Nothing arrived within the timeout.
        case timedOut
        /// The peer closed (EOF).
        case closed
        /// The peer reset the connection (or another error ended it), with the errno.
        case failed(Int32)
    }

    private(set) var fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { self.close() }

    /// Connects to `host:port` (a numeric IPv4 or IPv6 address, or `localhost`) within `timeout`.
    static func connect(host: String, port: UInt16, timeout: Duration = .seconds(5)) throws -> RawSocket {
        try Self.connectMany(1, host: host, port: port, timeout: timeout)[0]
    }

    /// Opens `count` connections at once (every connect started before any is waited for, as a flood would),
    /// all within `timeout`; throws naming the first failure, having closed the others.
    static func connectMany(_ count: Int, host: String, port: UInt16, timeout: Duration) throws -> [RawSocket] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw CheckFailure("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var sockets: [RawSocket] = []
        var pending: [Int] = []
        sockets.reserveCapacity(count)
        for i in 0..<count {
            let fd = socket(first.pointee.ai_family,
                            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                let code = errno
                for s in sockets { s.close() }
                throw CheckFailure("socket \(i + 1) of \(count): \(Self.describe(code))")
            }
            let s = RawSocket(fd: fd)
            sockets.append(s)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 {
                let code = errno
                guard code == EINPROGRESS else {
                    for s in sockets { s.close() }
                    throw CheckFailure("connect \(i + 1) of \(count) failed: \(Self.describe(code))")
                }
                pending.append(i)
            }
        }
        let deadline = ContinuousClock.now + timeout
        while !pending.isEmpty {
            let left = deadline - .now
            guard left > .zero else {
                for s in sockets { s.close() }
                throw CheckFailure("\(pending.count) of \(count) connects not done within \(timeout)")
            }
            var fds = pending.map { pollfd(fd: sockets[$0].fd, events: Int16(POLLOUT), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), Self.milliseconds(left, atMost: 200)) > 0 else { continue }
            var still: [Int] = []
            for (k, i) in pending.enumerated() {
                guard fds[k].revents != 0 else {
                    still.append(i)
                    continue
                }
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(sockets[i].fd, SOL_SOCKET, SO_ERROR, &error, &length)
                if error != 0 {
                    for s in sockets { s.close() }
                    throw CheckFailure("connect \(i + 1) of \(count) failed: \(Self.describe(error))")
                }
            }
            pending = still
        }
        return sockets
    }

    static func milliseconds(_ d: Duration, atMost: Int) -> Int32 {
        Int32(min(atMost, max(0, Int(d.components.seconds) * 1000 + Int(d.components.attoseconds / 1_000_000_000_000_000))))
    }

    var isOpen: Bool { self.fd >= 0 }

    /// Closes with a reset (SO_LINGER 0): an attacker leaves no TIME_WAIT behind, so thousands of connections
    /// do not use up the ephemeral ports. Idempotent.
    func close() {
        guard self.fd >= 0 else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        Glibc.close(self.fd)
        self.fd = -1
    }

    /// Sends all of `bytes` before `deadline`. False when the peer closed or reset the connection first (an
    /// attacker expects that); throws only when the deadline passes.
    @discardableResult
    func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant = .now + .seconds(10)) throws -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                Glibc.send(self.fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
                continue
            }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else { return false }
            let left = deadline - .now
            guard left > .zero else { throw CheckFailure("send timed out after \(offset) of \(bytes.count) bytes") }
            _ = self.wait(for: Int16(POLLOUT), timeout: left)
        }
        return true
    }

    /// Sends what the kernel takes now, without waiting: the count taken, or nil once the connection is gone.
    func sendSome(_ bytes: UnsafeRawBufferPointer) -> Int? {
        while true {
            let n = Glibc.send(self.fd, bytes.baseAddress!, bytes.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : nil
        }
    }

    /// Up to `maxBytes`, waiting at most `timeout` for the first.
    func receive(maxBytes: Int = 64 * 1024, timeout: Duration) -> Received {
        var buffer = [UInt8](repeating: 0, count: maxBytes)
        let deadline = ContinuousClock.now + timeout
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress!, maxBytes, 0) }
            if n > 0 { return .bytes(Array(buffer[..<n])) }
            if n == 0 { return .closed }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else { return .failed(code) }
            let left = deadline - .now
            guard left > .zero, self.wait(for: Int16(POLLIN), timeout: left) else { return .timedOut }
        }
    }

    /// Whether `events` is ready within `timeout`.
    func wait(for events: Int16, timeout: Duration) -> Bool {
        var p = pollfd(fd: self.fd, events: events, revents: 0)
        let ms = Self.milliseconds(timeout, atMost: Int(Int32.max))
        while true {
            let rc = poll(&p, 1, ms)
            if rc >= 0 { return rc > 0 }
            if errno != EINTR { return false }
        }
    }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}

/// Polls many raw sockets at once: which of them the peer has ended. For thousands of half-open connections,
/// where a thread per socket is out of the question.
enum SocketSet {
    /// How one socket ended: when (nil: still open at the deadline) and the first bytes the peer sent.
    struct End {
        var at: ContinuousClock.Instant?
        var bytes: [UInt8] = []
    }

    /// Bytes kept per socket (enough for a CHALLENGE and a close frame).
    static let keptBytes = 512

    /// Waits until every socket in `sockets` has been ended by the peer or `timeout` passes.
    static func waitForEnds(_ sockets: [RawSocket], timeout: Duration) -> [End] {
        let deadline = ContinuousClock.now + timeout
        var ends = [End](repeating: End(), count: sockets.count)
        var open = Array(sockets.indices)
        var scratch = [UInt8](repeating: 0, count: 4096)
        while !open.isEmpty {
            let left = deadline - .now
            guard left > .zero else { break }
            var fds = open.map { pollfd(fd: sockets[$0].fd, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), RawSocket.milliseconds(left, atMost: 200)) > 0 else { continue }
            var still: [Int] = []
            for (k, i) in open.enumerated() {
                guard fds[k].revents != 0 else {
                    still.append(i)
                    continue
                }
                let n = scratch.withUnsafeMutableBytes { recv(sockets[i].fd, $0.baseAddress!, 4096, 0) }
                if n > 0 {
                    let room = Self.keptBytes - ends[i].bytes.count
                    if room > 0 { ends[i].bytes += scratch[..<min(n, room)] }
                    still.append(i)
                } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                    still.append(i)
                } else {
                    ends[i].at = .now
                }
            }
            open = still
        }
        return ends
    }
}
