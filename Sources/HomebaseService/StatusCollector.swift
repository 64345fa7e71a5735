import HomebaseCore
import HomebaseNode
import Synchronization

/// Gathers the status page's report from the running daemon, keeps what the daemon does not (the relay link's
/// history, the last hour's chart), and carries out the page's actions on the state database.
///
/// Memory is bounded: the chart is a fixed window (`ActivitySeries`), the rest is read from the daemon's bounded
/// parts when a report is built. `sample()` must be called about once a second for the chart to place tokens in
/// the right bucket; a report can be built at any time, on any thread.
public final class StatusCollector: Sendable {
    private struct Sampling {
        var series = ActivitySeries()
        var link = RelayLinkHistory()
        /// The totals at the last sample (the chart counts differences).
        var requests = 0
        var tokens = 0
    }

    public let daemon: HomebaseDaemon
    /// When the page began to watch: the daemon's start, near enough.
    public let startedAtMs: UInt64
    private let sampling = Mutex(Sampling())

    public init(daemon: HomebaseDaemon) {
        self.daemon = daemon
        self.startedAtMs = daemon.clock.nowMs()
        let activity = daemon.inference.activity
        self.sampling.withLock {
            $0.requests = activity.requestsTotal
            $0.tokens = activity.tokensTotal
        }
    }

    /// The relay link logged in or was lost (the messenger's events).
    public func relayEvent(_ event: MessengerEvent) {
        let now = self.daemon.clock.nowMs()
        self.sampling.withLock { s in
            switch event {
            case .connected(let stored): s.link.connected(atMs: now, stored: stored)
            case .disconnected(let code): s.link.disconnected(atMs: now, closeCode: code)
            }
        }
    }

    /// Adds what was admitted and streamed since the last sample to the chart.
    public func sample() {
        let activity = self.daemon.inference.activity
        let now = self.daemon.clock.nowMs()
        self.sampling.withLock { s in
            s.series.add(tokens: activity.tokensTotal - s.tokens, requests: activity.requestsTotal - s.requests,
                         atMs: now)
            s.requests = activity.requestsTotal
            s.tokens = activity.tokensTotal
        }
    }

    /// The report as of now.
    public func report() throws -> StatusReport {
        let daemon = self.daemon
        let now = daemon.clock.nowMs()
        let settings = try daemon.state.settings()
        let roster = daemon.directory.roster
        let siblings = (roster?.payload.devices ?? []).filter { $0.pk != daemon.publicKey.hex }.map { device in
            StatusReport.Sibling(pk: device.pk, name: device.name, role: device.role,
                                 lastHeardMs: PublicKey(hex: device.pk).flatMap(daemon.lastHeard.lastHeard))
        }
        var guests: [StatusReport.Guest] = []
        if let registry = daemon.contacts?.registry {
            for summary in try registry.guests(nowMs: now) {
                guard let key = PublicKey(hex: summary.pubkey) else { continue }
                let daily = try registry.dailyUsage(guest: key).suffix(StatusReport.usageDays).map {
                    StatusReport.DailyUsage(day: $0.day, usage: $0.usage)
                }
                guests.append(StatusReport.Guest(summary: summary, lastHeardMs: daemon.lastHeard.lastHeard(key),
                                                 daily: Array(daily)))
            }
        }
        let (link, window) = self.sampling.withLock { ($0.link, $0.series.window(nowMs: now)) }
        let limits = daemon.inference.currentLimits
        return StatusReport(
            generatedAtMs: now, startedAtMs: self.startedAtMs, device: daemon.publicKey.hex, name: settings.deviceName,
            relay: StatusReport.Relay(url: settings.relayURL, link: link, roundTripMs: daemon.relayRoundTripMs),
            ollamaURL: settings.ollamaURL,
            runtime: daemon.runtime.current, pinnedModels: settings.pinnedModels,
            maxConcurrent: limits.maxConcurrent, maxQueued: limits.maxQueued, siblings: siblings, guests: guests,
            activity: daemon.inference.activity, series: window)
    }

    /// Carries out one of the page's actions, as `homebase grant`, `revoke` and `config --pin` do: through the
    /// state database, which the daemon re-reads within a second (and then sends the grant or the revocation).
    /// - Returns: a sentence for the page.
    public func perform(_ command: StatusPageCommand) throws -> String {
        let now = self.daemon.clock.nowMs()
        switch command {
        case .grant(let guest, let models, let hours):
            let expiresAt = hours.map { now + UInt64($0) * 3_600_000 }
            try self.registry().grant(guest: guest, models: models, expiresAt: expiresAt, nowMs: now)
            return "granted \(guest.short); the grant is sent within a second"
        case .revoke(let guest):
            try self.registry().revoke(guest: guest, nowMs: now)
            return "revoked \(guest.short): refused from its next request; a stream in progress is stopped"
        case .decline(let guest):
            let registry = try self.registry()
            guard let record = try registry.currentRecord(for: guest) else {
                throw ActionRefused("\(guest.short) has not asked to join")
            }
            guard record.state == .pending else {
                throw ActionRefused("\(guest.short) is \(record.state.rawValue), not pending: revoke it instead")
            }
            try registry.remove(guest: guest)
            return "declined \(guest.short): its join is forgotten"
        case .stop(let peer, let id):
            guard self.daemon.inference.stop(id: id, from: peer) else {
                throw ActionRefused("that request has already ended")
            }
            return "stopped the request of \(peer.short); it falls back, and nobody was revoked"
        case .pair:
            let code = try self.createPairingCode()
            return "a pairing code for 10 minutes, single use: " + code
        case .pin(let model, let pinned):
            var settings = try self.daemon.state.settings()
            var tags = settings.pinnedModels.filter { $0 != model }
            if pinned { tags.append(model) }
            settings = try settings.applying([.pin(tags)])
            try self.daemon.state.setSettings(settings)
            return pinned ? "\(model) is kept loaded from now on" : "\(model) is no longer kept loaded"
        }
    }

    /// A new one-time pairing code, as `homebase pair` prints it (10 minutes, single use).
    public func createPairingCode() throws -> String {
        try self.daemon.pairing.createPairingCode(relayURL: try self.daemon.state.settings().relayURL,
                                                  nowMs: self.daemon.clock.nowMs())
    }

    /// Only a pending join can be declined, only a running request stopped; the page shows the sentence (409).
    struct ActionRefused: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    private func registry() throws -> GuestRegistry {
        try self.daemon.contacts?.registry ?? GuestRegistry(state: self.daemon.state)
    }
}
