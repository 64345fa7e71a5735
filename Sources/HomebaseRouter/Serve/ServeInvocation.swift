import HomebaseCore
import HomebaseNode

/// `handset serve` / `guest serve`'s options (issue 36): `[--listen HOST:PORT] [--token T] [--cors ORIGIN]
/// [--allow-host NAME]...`.
public struct ServeInvocation: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port: UInt16
    /// `--token`, else `HOMEBASE_SERVE_TOKEN` (so it does not sit in `ps`).
    public var token: String?
    public var corsOrigin: String?
    public var allowedHosts: [String] = []
    /// Guest only: which joined host to use.
    public var guestHost: PublicKey?

    /// The handset's default port; the guest's is one more, so both run side by side.
    public static let handsetPort: UInt16 = 11435
    public static let guestPort: UInt16 = 11436

    public init(port: UInt16) { self.port = port }

    public static func usage(_ tool: String) -> String {
        "serve [--listen HOST:PORT] [--token T] [--cors ORIGIN] [--allow-host NAME]..."
            + (tool == "guest" ? " [--host PK]" : "")
    }

    public static func summary(_ tool: String) -> String {
        let port = tool == "guest" ? Self.guestPort : Self.handsetPort
        return "Serve the OpenAI (/v1) and Ollama (/api) APIs on 127.0.0.1:\(port) for your apps, through the router "
            + "(on-device when the Homebase cannot answer). A non-loopback --listen needs --token "
            + "(or HOMEBASE_SERVE_TOKEN); no CORS unless --cors ORIGIN."
    }

    /// Parses the words after `serve`. `--allow-host` may repeat.
    ///
    /// - Throws: `UsageError` naming what is wrong, prefixed `TOOL serve:`.
    public static func parse(_ args: [String], tool: String, environment: [String: String]) throws(UsageError)
        -> ServeInvocation
    {
        var s = ServeInvocation(port: tool == "guest" ? Self.guestPort : Self.handsetPort)
        var i = 0
        func value(_ name: String, _ inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            i += 1
            guard i < args.count else { throw UsageError("\(tool) serve: --\(name) needs a value") }
            return args[i]
        }
        var token: String?
        while i < args.count {
            var name = args[i]
            var inline: String?
            if let eq = name.firstIndex(of: "="), name.hasPrefix("--") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            switch name {
            case "--listen":
                (s.host, s.port) = try Self.listen(try value("listen", inline), tool: tool)
            case "--token":
                token = try value("token", inline)
            case "--cors":
                let origin = try value("cors", inline)
                guard origin.hasPrefix("http://") || origin.hasPrefix("https://"), !origin.hasSuffix("/") else {
                    throw UsageError(
                        "\(tool) serve: --cors takes an origin such as http://localhost:3000, not '\(origin)'")
                }
                s.corsOrigin = origin
            case "--allow-host":
                let host = try value("allow-host", inline)
                guard !host.isEmpty, !host.contains(where: { $0 == "/" || $0 == " " }) else {
                    throw UsageError("\(tool) serve: --allow-host takes a host name, not '\(host)'")
                }
                s.allowedHosts.append(host.lowercased())
            case "--host" where tool == "guest":
                s.guestHost = try DeviceCommandLine.publicKey(try value("host", inline), "--host")
            default:
                throw UsageError("\(tool) serve: unknown option '\(args[i])'")
            }
            i += 1
        }
        s.token = token ?? environment["HOMEBASE_SERVE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if let problem = LocalAPIGate.bindProblem(tool: tool, listenHost: s.host, token: s.token) {
            throw UsageError(problem)
        }
        return s
    }

    /// `HOST:PORT` (an IPv4 address or `localhost`).
    static func listen(_ text: String, tool: String) throws(UsageError) -> (String, UInt16) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]),
              port > 0, !text[..<colon].isEmpty
        else { throw UsageError("\(tool) serve: --listen takes HOST:PORT (e.g. 127.0.0.1:11435), not '\(text)'") }
        let host = String(text[..<colon])
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        let ipv4 = octets.count == 4 && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && UInt8($0) != nil }
        guard ipv4 || host == "localhost" else {
            throw UsageError("\(tool) serve: --listen takes an IPv4 address or localhost, not '\(host)'")
        }
        return (host, port)
    }
}
