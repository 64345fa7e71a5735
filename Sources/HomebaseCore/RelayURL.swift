/// A parsed `ws://`, `wss://`, `http://` or `https://` URL, enough for our clients (no userinfo, no fragment).
public struct RelayURL: Equatable, Sendable, CustomStringConvertible {
    public var secure: Bool
    public var host: String
    public var port: UInt16
    /// Path and query, starting with `/`.
    public var target: String

    /// Parses a URL; `nil` for other schemes, a missing host, a bad port, or characters that do not belong.
    public init?(_ string: String) {
        let s = string.trimmingWhitespace
        let rest: Substring
        if let r = s.dropPrefix("wss://") ?? s.dropPrefix("https://") {
            self.secure = true
            rest = r
        } else if let r = s.dropPrefix("ws://") ?? s.dropPrefix("http://") {
            self.secure = false
            rest = r
        } else {
            return nil
        }
        let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<slash]
        var target = String(rest[slash...])
        if target.isEmpty { target = "/" } else if target.first == "?" { target = "/" + target }
        guard !authority.isEmpty, !authority.contains("@"),
              target.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "#" }) else { return nil }
        var host: Substring
        var portText: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._:".contains($0)) })
        else { return nil }
        if let p = portText {
            guard let n = UInt16(p), n > 0 else { return nil }
            self.port = n
        } else {
            self.port = self.secure ? 443 : 80
        }
        self.host = String(host)
        self.target = target
    }

    /// The `Host` header value.
    public var hostHeader: String {
        let h = self.host.contains(":") ? "[\(self.host)]" : self.host
        return (self.secure && self.port == 443) || (!self.secure && self.port == 80) ? h : "\(h):\(self.port)"
    }

    public var description: String { "\(self.secure ? "wss" : "ws")://\(self.hostHeader)\(self.target)" }

    /// The same endpoint as an `https://`/`http://` URL (libcurl's TLS connect takes those).
    public var httpURL: String { "\(self.secure ? "https" : "http")://\(self.hostHeader)\(self.target)" }
}

extension StringProtocol {
    var trimmingWhitespace: Substring {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return s
    }

    func dropPrefix(_ p: String) -> Substring? {
        self.lowercased().hasPrefix(p) ? Substring(self).dropFirst(p.count) : nil
    }
}
