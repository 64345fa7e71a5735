#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few POSIX socket calls the simple server needs, behind one seam so it builds on Linux and macOS.
enum ServerSocket {
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "\(self.call) failed: \(String(cString: strerror(self.code)))" }
    }

    #if os(Linux)
    static let streamType = Int32(SOCK_STREAM.rawValue)
    /// Writing to a closed peer must return EPIPE, not kill the process with SIGPIPE.
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    static let streamType = SOCK_STREAM
    static let sendFlags: Int32 = 0
    #endif

    /// A listening IPv4 TCP socket on `host:port` (port 0 picks a free one). Returns the fd and bound port.
    static func listen(host: String, port: UInt16, backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, self.streamType, 0)
        guard fd >= 0 else { throw Failure(call: "socket", code: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        #if !os(Linux)
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        let address = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, address, &addr.sin_addr) == 1 else {
            close(fd)
            throw Failure(call: "inet_pton(\(host))", code: EINVAL)
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "bind", code: code)
        }
        guard Glibc_listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "listen", code: code)
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return (fd, UInt16(bigEndian: addr.sin_port))
    }

    /// Accepts one connection: its socket (negative on failure) and the peer's address as text (`""` if unknown).
    static func accept(_ listenFD: Int32) -> (fd: Int32, address: String) {
        var addr = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc_accept(listenFD, $0, &len) }
        }
        guard fd >= 0 else { return (fd, "") }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(addr.ss_family)
        let ok: Bool = withUnsafePointer(to: &addr) { raw in
            if family == AF_INET {
                return raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    var a = v4.pointee.sin_addr
                    return inet_ntop(AF_INET, &a, &text, socklen_t(text.count)) != nil
                }
            }
            if family == AF_INET6 {
                return raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                    var a = v6.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &a, &text, socklen_t(text.count)) != nil
                }
            }
            return false
        }
        return (fd, ok ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "")
    }

    /// Makes a send that cannot proceed for `ms` fail (EAGAIN) instead of blocking forever.
    static func setSendTimeout(_ fd: Int32, ms: Int32) {
        var tv = timeval(tv_sec: Int(ms / 1000), tv_usec: .init(ms % 1000 * 1000))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends all of `bytes`. Returns false when the peer is gone (EPIPE, ECONNRESET) or the socket failed.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Self.sendAll(fd, $0) }
    }

    /// Sends every byte of `raw` (a slice of a large body, with no copy).
    static func sendAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < raw.count {
            let n = send(fd, raw.baseAddress! + offset, raw.count - offset, self.sendFlags)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    /// Waits up to `timeoutMs` (-1: forever) for `fd` to become readable or hung up.
    static func waitReadable(_ fd: Int32, timeoutMs: Int32) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let r = poll(&pfd, 1, timeoutMs)
            if r < 0 && errno == EINTR { continue }
            return r > 0
        }
    }

    /// True when the peer has closed or reset: readable with no data to peek, or an error.
    static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n == 0 { return true }
        if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
        return false
    }
}

// `accept` is shadowed by ServerSocket.accept inside the enum; this forwards to the C function.
@inline(__always)
private func Glibc_accept(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) -> Int32 {
    accept(fd, address, &length)
}

// `listen` is shadowed by ServerSocket.listen inside the enum; this forwards to the C function.
@inline(__always)
private func Glibc_listen(_ fd: Int32, _ backlog: Int32) -> Int32 {
    listen(fd, backlog)
}
