import Foundation
import HomebaseCore

/// Everything the status page shows, as one value: built by `StatusCollector` from the running daemon, served as
/// `/api/status` (and every second on `/api/events`), and printed by `homebase status --json` when the daemon
/// serves the page. Never content: who, which model, how much, when.
///
/// Its JSON keeps `homebase status --json`'s contract (`device`, `relay`, `daemon_running`, `relay_connected`,
/// `ollama`, `runtime.{verified,available,version,error}`, `siblings[].{pk,name,role}`, `models[]`) and adds the
/// rest beside it. Keys are snake_case; absent values are `null`, so a script can rely on every key.
public struct StatusReport: Sendable, Equatable {
    public struct Relay: Sendable, Equatable {
        public var url: String
        public var link: RelayLinkHistory
        /// The last SEND's round trip to its RECEIPT, ms.
        public var roundTripMs: UInt64?
        public init(url: String, link: RelayLinkHistory, roundTripMs: UInt64? = nil) {
            self.url = url
            self.link = link
            self.roundTripMs = roundTripMs
        }
    }

    public struct Sibling: Sendable, Equatable {
        public var pk: String
        public var name: String
        public var role: String
        public var lastHeardMs: UInt64?
        public init(pk: String, name: String, role: String, lastHeardMs: UInt64?) {
            self.pk = pk
            self.name = name
            self.role = role
            self.lastHeardMs = lastHeardMs
        }
    }

    public struct Guest: Sendable, Equatable {
        public var summary: GuestSummary
        public var lastHeardMs: UInt64?
        /// Usage per UTC day, the last `StatusReport.usageDays` days that had any, oldest first.
        public var daily: [DailyUsage]
        public init(summary: GuestSummary, lastHeardMs: UInt64?, daily: [DailyUsage]) {
            self.summary = summary
            self.lastHeardMs = lastHeardMs
            self.daily = daily
        }
    }

    public struct DailyUsage: Sendable, Equatable {
        /// Days since 1970-01-01 (UTC).
        public var day: UInt64
        public var usage: GuestUsage
        public init(day: UInt64, usage: GuestUsage) {
            self.day = day
            self.usage = usage
        }
    }

    /// Days of per-guest usage the page shows: a week.
    public static let usageDays = 7

    public var generatedAtMs: UInt64
    /// When the daemon started (the page's chart covers no more than that).
    public var startedAtMs: UInt64
    public var device: String
    public var name: String
    public var relay: Relay
    public var ollamaURL: String
    public var runtime: RuntimeStatus
    public var pinnedModels: [String]
    public var maxConcurrent: Int
    public var maxQueued: Int
    public var siblings: [Sibling]
    public var guests: [Guest]
    public var activity: InferenceActivity
    public var series: ActivitySeries.Window

    public init(generatedAtMs: UInt64, startedAtMs: UInt64, device: String, name: String, relay: Relay, ollamaURL: String,
                runtime: RuntimeStatus, pinnedModels: [String], maxConcurrent: Int, maxQueued: Int,
                siblings: [Sibling], guests: [Guest], activity: InferenceActivity, series: ActivitySeries.Window) {
        self.generatedAtMs = generatedAtMs
        self.startedAtMs = startedAtMs
        self.device = device
        self.name = name
        self.relay = relay
        self.ollamaURL = ollamaURL
        self.runtime = runtime
        self.pinnedModels = pinnedModels
        self.maxConcurrent = maxConcurrent
        self.maxQueued = maxQueued
        self.siblings = siblings
        self.guests = guests
        self.activity = activity
        self.series = series
    }
}

extension StatusReport {
    /// The JSON object, keys sorted (`/api/status`).
    public func json() -> [UInt8] {
        let options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
        // Plain strings, numbers, booleans, arrays and dictionaries: serialising them cannot fail.
        return Array((try? JSONSerialization.data(withJSONObject: self.object, options: options)) ?? Data("{}".utf8))
    }

    /// The report as JSONSerialization objects.
    var object: [String: Any] {
        let names = self.peerNames
        let link = self.relay.link
        return [
            "generated_at": self.generatedAtMs,
            "started_at": self.startedAtMs,
            "device": self.device,
            "name": self.name,
            "daemon_running": true,
            "relay": self.relay.url,
            "relay_connected": link.connected,
            "relay_link": [
                "connected": link.connected,
                "since": Self.nullable(link.connectedSinceMs),
                "reconnects": link.reconnects,
                "last_loss_at": Self.nullable(link.lastLossAtMs),
                "last_close_code": Self.nullable(link.lastCloseCode),
                "round_trip_ms": Self.nullable(self.relay.roundTripMs),
                "stored_at_login": Self.nullable(link.storedAtLogin),
            ] as [String: Any],
            "ollama": self.ollamaURL,
            "runtime": [
                "verified": self.runtime.verified,
                "available": self.runtime.available,
                "version": Self.nullable(self.runtime.version),
                "error": Self.nullable(self.runtime.lastError),
                "checked_at": Self.nullable(self.runtime.checkedAtMs == 0 ? nil : self.runtime.checkedAtMs),
            ] as [String: Any],
            "models": self.runtime.models.map { m -> [String: Any] in
                [
                    "tag": m.tag, "family": m.family, "parameter_size": m.parameterSize,
                    "quantization": m.quantization, "capabilities": m.capabilities,
                    "context_length": Self.nullable(m.contextLength), "loaded": m.loaded,
                    "memory_bytes": Self.nullable(m.memoryBytes), "vram_bytes": Self.nullable(m.vramBytes),
                    "unloads_at": Self.nullable(m.unloadsAtMs),
                    "pinned": self.isPinned(m.tag), "cloud": m.cloud,
                    "context_source": m.contextLength == nil ? NSNull() : (m.contextServed ? "served" : "default"),
                    "shared": !m.cloud || self.runtime.isShared(m.tag),
                ]
            },
            "pinned_models": self.pinnedModels,
            "admission": [
                "max_concurrent": self.maxConcurrent, "max_queued": self.maxQueued,
                "streaming": self.activity.streams.filter(\.running).count,
                "queued": self.activity.streams.filter { !$0.running }.count,
            ],
            "siblings": self.siblings.map { s -> [String: Any] in
                ["pk": s.pk, "name": s.name, "role": s.role, "last_heard": Self.nullable(s.lastHeardMs)]
            },
            "guests": self.guests.map { g in
                Self.guestObject(g, live: self.activity.streams.filter {
                    $0.channel == .contact && $0.peer.hex == g.summary.pubkey
                })
            },
            "streams": self.activity.streams.map { s -> [String: Any] in
                [
                    "peer": s.peer.hex, "peer_name": names[s.peer] ?? "", "kind": Self.kind(s.channel),
                    "model": s.model, "state": s.running ? "streaming" : "queued", "admitted_at": s.admittedAtMs,
                    "tokens": s.tokens, "tokens_per_s": (s.tokensPerSecond * 10).rounded() / 10,
                    "id": s.id, "first_token_ms": Self.nullable(s.firstTokenMs),
                ]
            },
            "finished": self.activity.finished.reversed().map { f -> [String: Any] in
                [
                    "at": f.endedAtMs, "peer": f.peer.hex, "peer_name": names[f.peer] ?? "",
                    "kind": Self.kind(f.channel), "model": f.model, "tokens": f.tokens,
                    "first_token_ms": Self.nullable(f.firstTokenMs), "duration_ms": f.durationMs,
                    "outcome": f.outcome,
                ]
            },
            "events": self.activity.events.reversed().map { e -> [String: Any] in
                [
                    "at": e.atMs, "kind": e.kind.rawValue, "code": Self.nullable(e.code), "message": e.message,
                    "peer": e.peer.hex, "peer_name": names[e.peer] ?? "", "peer_kind": Self.kind(e.channel),
                    "model": e.model,
                ]
            },
            "totals": ["requests": self.activity.requestsTotal, "tokens": self.activity.tokensTotal],
            "series": [
                "start": self.series.startMs, "bucket_ms": self.series.bucketMs,
                "tokens": self.series.tokens, "requests": self.series.requests,
            ] as [String: Any],
        ]
    }

    /// Names by key: siblings from the roster, guests from their join.
    private var peerNames: [PublicKey: String] {
        var names: [PublicKey: String] = [:]
        for s in self.siblings { if let pk = PublicKey(hex: s.pk) { names[pk] = s.name } }
        for g in self.guests { if let pk = PublicKey(hex: g.summary.pubkey) { names[pk] = g.summary.name } }
        return names
    }

    private func isPinned(_ tag: String) -> Bool {
        // A pin without a tag means `:latest`, as Ollama reads it.
        self.pinnedModels.contains { $0 == tag || (!$0.contains(":") && $0 + ":latest" == tag) }
    }

    /// A guest, its usage counting the requests it has streaming or queued now (`live`): the registry records a
    /// request's usage when it ends, and the page showed "0 req · 0 tok" through a whole stream (issue 37).
    private static func guestObject(_ g: Guest, live: [LiveStream]) -> [String: Any] {
        let s = g.summary
        let liveTokens = live.reduce(0) { $0 + $1.tokens }
        func withLive(_ u: GuestUsage) -> GuestUsage {
            var u = u
            u.requests += live.count
            u.completionTokens += liveTokens
            return u
        }
        let models: Any
        switch s.models {
        case nil: models = NSNull()
        case .all?: models = ["*"]
        case .only(let tags)?: models = tags
        }
        return [
            "pubkey": s.pubkey, "name": s.name, "state": s.state.rawValue, "expired": s.expired, "models": models,
            "joined_at": Self.nullable(s.joinedAt), "issued_at": Self.nullable(s.issuedAt),
            "expires_at": Self.nullable(s.expiresAt), "revoked_at": Self.nullable(s.revokedAt),
            "last_heard": Self.nullable(g.lastHeardMs),
            "usage": Self.usageObject(withLive(s.usage)), "usage_today": Self.usageObject(withLive(s.usageToday)),
            "live_requests": live.count,
            "daily": g.daily.map { ["day": $0.day, "usage": Self.usageObject($0.usage)] as [String: Any] },
        ]
    }

    private static func usageObject(_ u: GuestUsage) -> [String: Any] {
        ["requests": u.requests, "prompt_tokens": u.promptTokens, "completion_tokens": u.completionTokens,
         "tokens": u.totalTokens]
    }

    private static func kind(_ channel: Channel) -> String {
        switch channel {
        case .sibling: "sibling"
        case .contact: "guest"
        case .unknown: "unknown"
        }
    }

    private static func nullable<T>(_ value: T?) -> Any { value.map { $0 as Any } ?? NSNull() }
}
