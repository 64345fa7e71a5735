#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The names this machine answers to on the network: the addresses of its interfaces (IPv4, and IPv6 other than
/// link-local, which needs a zone) and its host name (as given, its first label, and `label.local` for mDNS),
/// lower-case. The status page accepts them as hosts when it has an access token (issue 37).
public enum LocalHosts {
    public static func current() -> [String] {
        var names: [String] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        if getifaddrs(&list) == 0, let first = list {
            var next: UnsafeMutablePointer<ifaddrs>? = first
            while let entry = next {
                next = entry.pointee.ifa_next
                guard let address = entry.pointee.ifa_addr else { continue }
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        var a = v4.pointee.sin_addr
                        if inet_ntop(AF_INET, &a, &text, socklen_t(text.count)) != nil {
                            names.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                        }
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        var a = v6.pointee.sin6_addr
                        if inet_ntop(AF_INET6, &a, &text, socklen_t(text.count)) != nil {
                            let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
                            if !name.hasPrefix("fe80:") { names.append(name) }
                        }
                    }
                default:
                    break
                }
            }
            freeifaddrs(first)
        }
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count - 1) == 0 {
            let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
            if !host.isEmpty {
                let label = String(host.split(separator: ".").first ?? Substring(host))
                names += [host, label, label + ".local"]
            }
        }
        var seen = Set<String>()
        return names.map { $0.lowercased() }.filter { !$0.isEmpty && seen.insert($0).inserted }
    }
}
