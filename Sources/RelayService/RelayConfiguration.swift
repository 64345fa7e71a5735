import Foundation
import HomebaseCore

/// Everything the relay is configured with. Sources, highest precedence first: command-line flags,
/// environment variables (`RELAY_<KEY>`), a config file (`key = value` lines), defaults.
public struct RelayConfiguration: Sendable, Equatable {
    public var listenHost = "0.0.0.0"
    public var listenPort: UInt16 = 8080
    /// A separate listener for `/metrics` only (then the main listener does not serve it).
    public var metricsHost: String?
    public var metricsPort: UInt16?
    /// Directory of the durable mailbox (`relay.db`).
    public var dataDirectory = "./relay-data"
    public var tokenFile: String?
    public var allowlistFile: String?
    public var logLevel: Logger.Level = .info
    /// `full` (default): a stored frame survives power loss. `normal`: it survives a crash of the relay
    /// process (kill -9) but maybe not of the machine; faster.
    public var durability = "full"
    public var limits = RelayLimits()
    /// Microseconds the event loop polls without blocking before it sleeps (0: off). Off by default: it buys
    /// the round trip's tail on a VM with CPU spent spinning after every wake-up (README, benchmarks).
    public var busyPollMicroseconds = 0
    /// NATS servers of a JetStream cluster: set, the relay runs as one edge of a fleet (README, "Relay fleet"):
    /// stored frames live in JetStream, presence and live frames cross edges over NATS; `dataDirectory` is unused.
    public var natsServers: [String] = []
    /// This edge's name in the fleet (claims and logs); defaults to the host name.
    public var edgeID = RelayConfiguration.hostEdgeID
    /// Copies JetStream keeps of the mailbox stream (3 in a three-node cluster; 1 for a single NATS server).
    public var natsReplicas = 3

    public init() {}

    /// The host name, reduced to what `edge_id` allows. Read once with `gethostname`: Foundation's
    /// `ProcessInfo.hostName` resolves the name through DNS, which every configuration would wait for.
    static let hostEdgeID: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        return Self.edgeID(fromHostName: host)
    }()

    static func edgeID(fromHostName host: String) -> String {
        let name = host.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
        return name.isEmpty ? "edge" : String(name.prefix(FleetMessage.maxEdgeIDBytes))
    }

    /// Descriptors the relay keeps for itself beyond one per connection (listeners, the mailbox, NATS, pipes).
    static let reservedDescriptors = 64

    /// The one line said at start when the descriptor limit (after raising the soft limit to the hard one) allows
    /// fewer connections than `max_connections` + `max_pending_auth`: how many it allows. Nil when it allows
    /// them all. Not a warning: nothing is wrong below that load (issue 39).
    public static func descriptorNotice(limit: Int, limits: RelayLimits) -> String? {
        let needed = limits.maxConnections + limits.maxPendingAuth + Self.reservedDescriptors
        guard limit < needed else { return nil }
        let allowed = max(0, limit - Self.reservedDescriptors)
        return "The descriptor limit (\(limit)) allows about \(allowed) connections at once (max_connections is "
            + "\(limits.maxConnections)); for more raise LimitNOFILE or ulimit -Hn to \(needed)"
    }

    /// The keys a config file or `RELAY_<KEY>` may set, with their help text (for `--help`).
    public static let keys: [(key: String, help: String)] = [
        ("listen", "HOST:PORT for WebSocket, /healthz and /metrics (default 0.0.0.0:8080)"),
        ("metrics_listen", "HOST:PORT of a separate /metrics listener (default: on the main listener)"),
        ("data", "directory of the durable mailbox (default ./relay-data)"),
        ("token_file", "file of access tokens, one per line; when set, upgrades need one (401 otherwise)"),
        ("allowlist_file", "file of allowed public keys (hex), one per line; others are closed 1008"),
        ("log_level", "trace, debug, info, notice, warning or error (default info)"),
        ("durability", "full (survive power loss, default) or normal (survive a relay crash)"),
        ("max_payload_bytes", "largest SEND payload (default 262144)"),
        ("mailbox_max_frames", "stored frames per recipient (default 1000)"),
        ("mailbox_max_bytes", "stored payload bytes per recipient (default 16777216)"),
        ("stored_frame_lifetime_s", "seconds a stored frame is kept (default 604800)"),
        ("auth_deadline_ms", "time to answer CHALLENGE (default 10000)"),
        ("ping_interval_ms", "WebSocket ping interval (default 30000)"),
        ("idle_timeout_ms", "silence before closing (default 90000)"),
        ("send_frames_per_second", "SEND token bucket rate per connection (default 2000)"),
        ("send_frames_burst", "SEND token bucket size (default twice the rate: 4000)"),
        ("send_bytes_per_second", "SEND byte bucket rate per connection (default 16777216)"),
        ("send_bytes_burst", "SEND byte bucket size (default twice the rate: 33554432)"),
        ("outbound_queue_max_bytes", "unsent bytes past which live frames to a connection are dropped (default 1048576)"),
        ("outbound_stall_ms", "time with unsent bytes and none taken before a reader is closed 4002 (default 10000)"),
        ("close_flush_timeout_ms", "time a closing connection gets to take its last bytes (default 5000)"),
        ("max_pending_auth", "connections not yet authenticated (default 4096)"),
        ("max_connections", "connections in all (default 50000)"),
        ("busy_poll_us", "poll this long without blocking before the loop sleeps (default 0: off; see README)"),
        ("nats", "nats://HOST:PORT[,…] of a JetStream cluster: run as a fleet edge, mailbox in JetStream (default: off)"),
        ("edge_id", "this edge's name in the fleet (default: the host name)"),
        ("nats_replicas", "copies of the mailbox stream in JetStream (default 3)"),
    ]

    /// Builds the configuration from flags (`--listen`, `--data`, `--config`, and `--KEY VALUE` for any key
    /// above, with `-` or `_`), the environment and the config file.
    public static func resolve(arguments: [String], environment: [String: String]) throws -> RelayConfiguration {
        var flags: [String: String] = [:]
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            guard arg.hasPrefix("--") else { throw RelayConfigurationError("unexpected argument '\(arg)'") }
            var name = String(arg.dropFirst(2)).replacingOccurrences(of: "-", with: "_")
            var value: String
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            } else {
                guard i + 1 < arguments.count else { throw RelayConfigurationError("--\(name) needs a value") }
                i += 1
                value = arguments[i]
            }
            guard name == "config" || Self.keys.contains(where: { $0.key == name }) else {
                throw RelayConfigurationError("unknown option --\(name.replacingOccurrences(of: "_", with: "-"))")
            }
            flags[name] = value
            i += 1
        }
        var settings: [String: String] = [:]
        if let path = flags["config"] ?? environment["RELAY_CONFIG"] {
            settings = try Self.parseFile(path)
        }
        for (key, _) in Self.keys {
            if let v = environment["RELAY_" + key.uppercased()] { settings[key] = v }
        }
        for (k, v) in flags where k != "config" { settings[k] = v }
        var c = RelayConfiguration()
        try c.apply(settings)
        return c
    }

    static func parseFile(_ path: String) throws -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else { throw RelayConfigurationError("cannot read config file \(path)") }
        return try Self.parseSettings(text, path: path)
    }

    /// The settings of a config file's text; `path` names the file in errors. Pure, for the fuzz harness.
    ///
    /// Lines end at any line break: to a `String`, CRLF is one `Character`, not a `"\n"`, so splitting at
    /// `"\n"` read a file saved with CRLF as one line (and its first value as the rest of the file).
    package static func parseSettings(_ text: String, path: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for (n, line) in ConfigLines.entries(of: text) {
            guard let (written, value) = ConfigLines.split(line, at: "="), !written.isEmpty, !value.isEmpty else {
                throw RelayConfigurationError("\(path):\(n): expected key = value")
            }
            // Spelled as in --help (metrics-listen) or with underscores (metrics_listen): the same key, as for
            // flags (issue 39).
            let key = written.replacingOccurrences(of: "-", with: "_")
            guard Self.keys.contains(where: { $0.key == key }) else {
                throw RelayConfigurationError("\(path):\(n): unknown key '\(written)'")
            }
            out[key] = value
        }
        return out
    }

    /// The longest stored-frame lifetime a configuration may give (10 years), and the longest other duration (a week).
    static let maxLifetimeSeconds = 3_650 * 86_400
    static let maxDurationMs = 7 * 86_400_000

    package mutating func apply(_ s: [String: String]) throws {
        func int(_ k: String) throws -> Int? {
            guard let v = s[k] else { return nil }
            guard let n = Int(v), n > 0 else { throw RelayConfigurationError("\(k) must be a positive integer, not '\(v)'") }
            return n
        }
        // Durations are bounded so that every deadline the relay adds to a clock, and the lifetime in ms (and
        // JetStream's max_age in ns), stays far inside 64 bits: a config file must not be able to trap the relay.
        func duration(_ k: String, max: Int = Self.maxDurationMs, unit: String = "a week") throws -> UInt64? {
            guard let n = try int(k) else { return nil }
            guard n <= max else { throw RelayConfigurationError("\(k) must be at most \(max) (\(unit)), not '\(n)'") }
            return UInt64(n)
        }
        func double(_ k: String) throws -> Double? {
            guard let v = s[k] else { return nil }
            guard let n = Double(v), n > 0, n.isFinite else {
                throw RelayConfigurationError("\(k) must be a positive number, not '\(v)'")
            }
            return n
        }
        if let v = s["listen"] { (self.listenHost, self.listenPort) = try Self.hostPort(v, key: "listen") }
        if let v = s["metrics_listen"] {
            let (h, p) = try Self.hostPort(v, key: "metrics_listen")
            (self.metricsHost, self.metricsPort) = (h, p)
        }
        if let v = s["data"] { self.dataDirectory = v }
        if let v = s["token_file"] { self.tokenFile = v }
        if let v = s["allowlist_file"] { self.allowlistFile = v }
        if let v = s["log_level"] {
            guard let l = Logger.Level(name: v) else { throw RelayConfigurationError("log_level '\(v)' is not a level") }
            self.logLevel = l
        }
        if let v = s["durability"] {
            guard v == "full" || v == "normal" else { throw RelayConfigurationError("durability must be full or normal") }
            self.durability = v
        }
        if let n = try int("max_payload_bytes") { self.limits.maxPayloadBytes = n }
        if let n = try int("mailbox_max_frames") { self.limits.mailboxMaxFrames = n }
        if let n = try int("mailbox_max_bytes") { self.limits.mailboxMaxBytes = n }
        if let n = try duration("stored_frame_lifetime_s", max: Self.maxLifetimeSeconds, unit: "10 years") {
            self.limits.storedFrameLifetimeMs = n * 1000
        }
        if let n = try duration("auth_deadline_ms") { self.limits.authDeadlineMs = n }
        if let n = try duration("ping_interval_ms") { self.limits.pingIntervalMs = n }
        if let n = try duration("idle_timeout_ms") { self.limits.idleTimeoutMs = n }
        // A rate given alone brings its burst along (twice the rate, as the defaults are): a relay told to take
        // 50 frames a second should not still take a first burst of 4,000.
        if let n = try double("send_frames_per_second") {
            self.limits.sendFramesPerSecond = n
            self.limits.sendFramesBurst = 2 * n
        }
        if let n = try double("send_frames_burst") { self.limits.sendFramesBurst = n }
        if let n = try double("send_bytes_per_second") {
            self.limits.sendBytesPerSecond = n
            self.limits.sendBytesBurst = 2 * n
        }
        if let n = try double("send_bytes_burst") { self.limits.sendBytesBurst = n }
        if let n = try int("outbound_queue_max_bytes") { self.limits.outboundQueueMaxBytes = n }
        if let n = try duration("outbound_stall_ms") { self.limits.outboundStallMs = n }
        if let n = try duration("close_flush_timeout_ms") {
            self.limits.closeFlushTimeoutMs = n
        }
        if let n = try int("max_pending_auth") { self.limits.maxPendingAuth = n }
        if let n = try int("max_connections") { self.limits.maxConnections = n }
        if let v = s["busy_poll_us"] {
            guard let n = Int(v), (0...10_000).contains(n) else {
                throw RelayConfigurationError("busy_poll_us must be 0 to 10000, not '\(v)'")
            }
            self.busyPollMicroseconds = n
        }
        if let v = s["nats"] {
            let urls = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for u in urls where !(u.hasPrefix("nats://") || u.hasPrefix("tls://")) || u.contains(where: \.isWhitespace) {
                throw RelayConfigurationError("nats must be a comma-separated list of nats://HOST:PORT, not '\(u)'")
            }
            guard !urls.isEmpty else { throw RelayConfigurationError("nats needs at least one nats://HOST:PORT") }
            self.natsServers = urls
        }
        if let v = s["edge_id"] {
            let ok = !v.isEmpty && v.utf8.count <= FleetMessage.maxEdgeIDBytes
                && v.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
            guard ok else { throw RelayConfigurationError("edge_id must be 1-64 of A-Z a-z 0-9 - _ ., not '\(v)'") }
            self.edgeID = v
        }
        if let n = try int("nats_replicas") {
            guard n <= 5 else { throw RelayConfigurationError("nats_replicas must be 1 to 5") }
            self.natsReplicas = n
        }
        guard self.limits.idleTimeoutMs > self.limits.pingIntervalMs else {
            throw RelayConfigurationError("idle_timeout_ms must exceed ping_interval_ms")
        }
    }

    static func hostPort(_ v: String, key: String) throws -> (String, UInt16) {
        guard let colon = v.lastIndex(of: ":"), let port = UInt16(v[v.index(after: colon)...]) else {
            throw RelayConfigurationError("\(key) must be HOST:PORT, not '\(v)'")
        }
        var host = String(v[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }
}
