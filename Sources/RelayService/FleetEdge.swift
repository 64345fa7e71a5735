import Foundation
import HomebaseCore
import HomebaseStore
import RelayFleet

/// This relay's part in a fleet of edges over NATS (README, "Relay fleet"): presence across edges, live frames
/// and store notices to keys held elsewhere, and the JetStream mailbox. Loop-confined except where noted; what
/// arrives from NATS is handed to the loop first.
///
/// - Each key this edge holds has a subscription on `FleetSubjects.key`; other edges publish to it with a reply
///   subject and get one status byte back (`FleetReplyStatus`), or "no responders" at once when no edge holds it.
/// - A login publishes a claim on the key's subject; an edge holding the key with an older claim closes its
///   connection with 4001 (newest wins, as on one relay), and one holding a newer claim says so again.
/// - A STORE frame committed for a key held on another edge is announced there (`stored`), so that edge delivers
///   it from the stream; the notice leaves before any later live frame of the same sender (one NATS connection
///   keeps publish order), and the holding edge holds live frames behind the stored ones as a single relay does.
final class FleetEdge {
    let bus: FleetBus
    let edgeID: String
    let mailbox: JetStreamMailbox
    /// Requests to other edges wait this long for the status byte: a live frame then gets RECEIPT 2.
    static let forwardTimeoutMs: UInt64 = 2_000
    private var held: [PublicKey: (claim: FleetClaim, subscription: NatsSubscription)] = [:]
    private(set) var connected = true

    init(configuration: RelayConfiguration, limits: MailboxLimits, waiting: (String) -> Void = { _ in },
         events: @escaping @Sendable (NatsConnectionEvent) -> Void) throws
    {
        let nats = try NatsConnection(servers: configuration.natsServers, name: "relay-edge-\(configuration.edgeID)",
                                      events: events)
        self.bus = try FleetBus(nats: nats)
        self.edgeID = configuration.edgeID
        self.mailbox = try JetStreamMailbox(bus: self.bus, limits: limits, replicas: configuration.natsReplicas,
                                           maxPayloadBytes: configuration.limits.maxPayloadBytes, waiting: waiting)
    }

    /// `key` logged in on this edge as connection `connection` at `atMs`: hold its subject and claim it.
    /// `deliver` is called (on the NATS thread) with every message other edges send to the key. `settled` is
    /// called once (on any thread) when the claim is known to the fleet: at once when this edge held the key
    /// already or no other edge holds it ("no responders"), else when the holder answers, after it closed its
    /// login (`true`), or said that its login is newer (`false`: this login must yield); after
    /// `forwardTimeoutMs` without an answer, `true`. The login's READY waits for it, so that a frame sent to the
    /// key after READY, through any edge, reaches the new login and not the old one.
    func hold(_ key: PublicKey, connection: UInt64, atMs: UInt64,
              deliver: @escaping @Sendable (FleetMessage, _ reply: String?) -> Void,
              settled: @escaping @Sendable (_ newest: Bool) -> Void) throws
    {
        let claim = FleetClaim(atMs: atMs, edge: self.edgeID, connection: connection)
        let subject = FleetSubjects.key(key)
        if let existing = self.held[key] {
            self.held[key] = (claim, existing.subscription)
            try self.bus.publish(subject, FleetMessage.claim(claim).encoded())
            return settled(true)
        }
        // Asked before this edge subscribes, so that its own subscription does not count as a responder.
        self.bus.request(subject, FleetMessage.claim(claim).encoded(), kind: .claim, timeoutMs: Self.forwardTimeoutMs) {
            reply in
            if case .reply(let b) = reply, b.first == FleetReplyStatus.notDelivered.rawValue { settled(false) } else { settled(true) }
        }
        let sub = try self.bus.nats.subscribe(subject) { m in
            guard let message = try? FleetMessage.decode(m.data[...]) else { return }  // not from an edge
            deliver(message, m.reply)
        }
        self.held[key] = (claim, sub)
        // Said again once subscribed: two edges whose requests crossed (each heard "no responders" before the other
        // subscribed) hear each other's claim now, and the older login yields. This edge's own copy is ignored.
        try self.bus.publish(subject, FleetMessage.claim(claim).encoded())
    }

    /// `key`'s connection `connection` ended: let go of its subject, unless a newer login on this edge holds it.
    func release(_ key: PublicKey, connection: UInt64) {
        guard let h = self.held[key], h.claim.connection == connection else { return }
        h.subscription.cancel()
        self.held[key] = nil
    }

    /// What to do with another edge's claim on `key`.
    func verdict(on claim: FleetClaim, for key: PublicKey) -> FleetClaimVerdict {
        guard let ours = self.held[key]?.claim else { return .ignore }
        return ours.verdict(on: claim)
    }

    func reassert(_ key: PublicKey) {
        guard let ours = self.held[key]?.claim else { return }
        try? self.bus.publish(FleetSubjects.key(key), FleetMessage.claim(ours).encoded())
    }

    /// Sends a live frame to the edge holding `recipient`; `done` gets whether it was written there.
    func forwardLive(to recipient: PublicKey, sender: PublicKey, payload: ArraySlice<UInt8>,
                     done: @escaping @Sendable (Bool) -> Void)
    {
        let message = FleetMessage.live(sender: sender, payload: payload).encoded()
        self.bus.request(FleetSubjects.key(recipient), message, kind: .live, timeoutMs: Self.forwardTimeoutMs) { r in
            if case .reply(let b) = r, b.first == FleetReplyStatus.delivered.rawValue { done(true) } else { done(false) }
        }
    }

    /// Sends a live frame to the edge holding `recipient` without asking how it went (no receipt wanted).
    func forwardLive(to recipient: PublicKey, sender: PublicKey, payload: ArraySlice<UInt8>) {
        try? self.bus.publish(FleetSubjects.key(recipient), FleetMessage.live(sender: sender, payload: payload).encoded())
    }

    /// Announces a committed STORE frame to the edge holding `recipient`; `done` gets whether an edge holds it.
    func announceStored(to recipient: PublicKey, deliveryID: UInt64, done: @escaping @Sendable (Bool) -> Void) {
        let message = FleetMessage.stored(deliveryID: deliveryID).encoded()
        self.bus.request(FleetSubjects.key(recipient), message, kind: .storedNotice,
                         timeoutMs: Self.forwardTimeoutMs) { r in
            if case .reply(let b) = r, b.first == FleetReplyStatus.delivered.rawValue { done(true) } else { done(false) }
        }
    }

    /// Answers a request from another edge (thread-safe).
    func reply(_ subject: String?, _ status: FleetReplyStatus) {
        guard let subject else { return }
        try? self.bus.publish(subject, [status.rawValue])
    }

    func stop() { self.bus.stop() }

    func setConnected(_ c: Bool) { self.connected = c }

    /// Prometheus lines for `/metrics`.
    func renderMetrics() -> String {
        let s = self.bus.nats.statistics()
        var out = "# HELP relay_nats_connected Whether this edge is connected to NATS.\n# TYPE relay_nats_connected gauge\n"
        out += "relay_nats_connected \(self.bus.nats.isConnected ? 1 : 0)\n"
        out += "# HELP relay_nats_reconnects_total Reconnections to NATS.\n# TYPE relay_nats_reconnects_total counter\n"
        out += "relay_nats_reconnects_total \(s.reconnects)\n"
        out += "# HELP relay_nats_messages_total NATS messages, by direction.\n# TYPE relay_nats_messages_total counter\n"
        out += "relay_nats_messages_total{direction=\"in\"} \(s.inMessages)\n"
        out += "relay_nats_messages_total{direction=\"out\"} \(s.outMessages)\n"
        out += "# HELP relay_fleet_keys_held Keys whose subject this edge holds.\n# TYPE relay_fleet_keys_held gauge\n"
        out += "relay_fleet_keys_held \(self.held.count)\n"
        out += "# HELP relay_fleet_requests_pending Requests to edges and JetStream awaiting an answer.\n"
        out += "# TYPE relay_fleet_requests_pending gauge\nrelay_fleet_requests_pending \(self.bus.pendingRequests)\n"
        out += self.bus.latencies.render()
        return out
    }
}
