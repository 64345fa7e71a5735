import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking TCP client socket for attack-shaped tests: connect from a chosen loopback address, send bytes a
/// few at a time, read with a deadline, or never read at all.
final class RawSocket: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let fd: Int32

    /// Connects to 127.0.0.1:`port` from `source` (any 127.x address on Linux), with a receive buffer of
    /// `receiveBuffer` bytes when set (a client that stops reading then fills quickly).
    init(port: UInt16, source: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, connected == 0 else {
            close(fd)
            throw Failure(description: "cannot connect from \(source) to port \(port)")
        }
        self.fd = fd
    }

    deinit { close(self.fd) }

    /// Sends all of `text`; false once the server closed.
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            #if os(Linux)
            let flags = Int32(MSG_NOSIGNAL)
            #else
            let flags: Int32 = 0
            #endif
            let n = bytes.withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress! + sent, $0.count - sent, flags) }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Reads until the server closes or `timeoutMs` passes: what arrived, and whether the server closed.
    func readAll(timeoutMs: Int) -> (text: String, closed: Bool) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return (String(decoding: out, as: UTF8.self), false) }
            var pfd = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            guard poll(&pfd, 1, ms) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return (String(decoding: out, as: UTF8.self), true) }
            out += buffer[0..<n]
        }
    }
}
