#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One resolved socket address (IPv4 or IPv6), stored by value so it outlives getaddrinfo's list.
struct SocketAddress {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    var family: Int32 { Int32(self.storage.ss_family) }

    /// Resolves `host` (a name or an IPv4/IPv6 literal) for TCP. With `passive`, an empty host means
    /// every local address, as for a listener.
    static func resolve(host: String, port: UInt16, passive: Bool) throws(TransportError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = host.isEmpty
            ? getaddrinfo(nil, String(port), &hints, &list)
            : getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let list else {
            let reason = gai_strerror(rc).map { String(cString: $0) } ?? "error \(rc)"
            throw .connectFailed("cannot resolve \(host): \(reason)")
        }
        defer { freeaddrinfo(list) }
        var result: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if let address = entry.pointee.ai_addr,
                Int(entry.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size
            {
                var resolved = SocketAddress()
                withUnsafeMutableBytes(of: &resolved.storage) { target in
                    target.copyMemory(
                        from: UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen)))
                }
                resolved.length = entry.pointee.ai_addrlen
                result.append(resolved)
            }
            cursor = entry.pointee.ai_next
        }
        guard !result.isEmpty else { throw .connectFailed("cannot resolve \(host): no addresses") }
        return result
    }

    /// The local address a socket is bound to.
    static func local(of fd: Int32) -> SocketAddress? {
        var address = SocketAddress()
        address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &address.length) }
        }
        return rc == 0 ? address : nil
    }

    /// The peer address of a connected socket.
    static func peer(of fd: Int32) -> SocketAddress? {
        var address = SocketAddress()
        address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &address.length) }
        }
        return rc == 0 ? address : nil
    }

    /// The port in host byte order, or 0 for an unknown family.
    var port: UInt16 {
        var copy = self.storage
        return withUnsafeBytes(of: &copy) { raw in
            switch self.family {
            case AF_INET: return UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
            case AF_INET6: return UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
            default: return 0
            }
        }
    }

    /// "192.0.2.1:443" or "[2001:db8::1]:443".
    var description: String {
        var copy = self.storage
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return withUnsafeBytes(of: &copy) { raw -> String in
            switch self.family {
            case AF_INET:
                var address = raw.load(as: sockaddr_in.self).sin_addr
                guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return "?" }
                return "\(SocketAddress.string(text)):\(self.port)"
            case AF_INET6:
                var address = raw.load(as: sockaddr_in6.self).sin6_addr
                guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return "?" }
                return "[\(SocketAddress.string(text))]:\(self.port)"
            default:
                return "?"
            }
        }
    }

    private static func string(_ text: [CChar]) -> String {
        text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Calls `body` with a `sockaddr` pointer and length, for bind/connect.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var copy = self.storage
        return withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, self.length) }
        }
    }
}
