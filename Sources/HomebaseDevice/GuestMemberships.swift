import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseRouter

/// What became of one contact-channel message offered to `GuestMemberships.handle(_:)`.
public enum GuestInboundOutcome: Equatable, Sendable {
    case granted
    case advertStored
    case revoked
    /// A message of ours, but dropped (forged, expired, unknown host, stale `seq`, …).
    case dropped
    /// Not a contact-channel message this type handles.
    case ignored
}

/// The guest side of sharing (Protocol/messages.md §5): which friends' Homebases this device asked to join,
/// was granted, or was revoked by, over a `JoinedHomebaseStore`.
///
/// A host becomes `joined` only on a grant verified by `GrantVerifier` (its key, over the exact bytes,
/// addressed to us, in force). The grant's model scope and the last advert `seq` per host are kept in `backend`
/// so adverts can be filtered and replays refused.
public struct GuestMemberships: Sendable {
    public enum Key {
        static func scope(_ host: PublicKey) -> String { "grant.models." + host.hex }
        static func advertSeq(_ host: PublicKey) -> String { "advert.seq." + host.hex }
        static func joinSent(_ host: PublicKey) -> String { "join.sent." + host.hex }
    }

    /// When the last `contact.join` to `host` went out (ms), for "join sent N min ago".
    public func joinSentMs(_ host: PublicKey) -> UInt64? {
        self.backend.string(forKey: Key.joinSent(host)).flatMap { UInt64($0) }
    }

    public let store: any JoinedHomebaseStore
    public let backend: any SettingsBackend
    public let selfKey: PublicKey
    public let clock: @Sendable () -> UInt64

    public init(store: any JoinedHomebaseStore, backend: any SettingsBackend, selfKey: PublicKey,
                clock: @escaping @Sendable () -> UInt64) {
        self.store = store
        self.backend = backend
        self.selfKey = selfKey
        self.clock = clock
    }

    /// Hosts in the store, whatever their state, are contacts: a pending host's grant and a revoked host's
    /// later re-grant must get through the entitlement rule.
    public func relation(of sender: PublicKey) -> SenderRelation {
        self.store.record(for: sender) == nil ? .stranger : .contact
    }

    // MARK: Commands

    /// Records `host` as pending (unless already joined) and sends `contact.join{name}`, stored, so an offline
    /// host receives it when it reconnects.
    ///
    /// - Returns: the relay's answer (`.receipt(.stored)` when the host is offline).
    @discardableResult
    public func join(host: PublicKey, name: String, messenger: any PeerMessenger) async throws -> SendOutcome {
        if self.store.record(for: host)?.state != .joined {
            let previous = self.store.record(for: host)
            try self.store.upsert(JoinedHomebase(host: host, name: previous?.name, state: .pending,
                                                 models: [], lastHeardMs: previous?.lastHeardMs ?? 0))
        }
        try self.backend.set(String(self.clock()), forKey: Key.joinSent(host))
        return await messenger.sendAndWait(.contactJoin(name: name), to: host, channel: .contact, store: true)
    }

    /// Sends `contact.leave` (stored) and forgets `host`.
    @discardableResult
    public func leave(host: PublicKey, messenger: any PeerMessenger) async throws -> SendOutcome {
        let outcome = await messenger.sendAndWait(.contactLeave, to: host, channel: .contact, store: true)
        try self.store.remove(host)
        try self.backend.removeValue(forKey: Key.scope(host))
        try self.backend.removeValue(forKey: Key.advertSeq(host))
        try self.backend.removeValue(forKey: Key.joinSent(host))
        return outcome
    }

    // MARK: Inbound

    /// Handles `contact.grant`, `advert` and `contact.revoke` from a host in the store; any contact frame from a
    /// known host refreshes its `lastHeardMs`.
    @discardableResult
    public func handle(_ inbound: InboundMessage) -> GuestInboundOutcome {
        guard inbound.channel == .contact else { return .ignored }
        let host = inbound.sender
        guard var record = self.store.record(for: host) else {
            switch inbound.message {
            case .contactGrant, .advert, .contactRevoke: return .dropped
            default: return .ignored
            }
        }
        let now = self.clock()
        switch inbound.message {
        case .contactGrant(let blob):
            guard let grant = GrantVerifier(selfKey: self.selfKey).verify(blob, from: host),
                grant.isInForce(nowMs: now)
            else { return .dropped }
            record.state = .joined
            if case .only(let tags) = grant.models {
                record.models = tags.map { AdvertPayload.Model.tagOnly($0) }
            }
            record.lastHeardMs = max(record.lastHeardMs, now)
            do {
                try self.backend.setJSON(grant.models, forKey: Key.scope(host))
                try self.store.upsert(record)
            } catch { return .dropped }
            return .granted
        case .advert(let blob):
            guard record.state == .joined, let advert = Ed25519AdvertVerifier.verify(blob, from: host) else {
                return .dropped
            }
            let lastSeq = self.backend.string(forKey: Key.advertSeq(host)).flatMap(UInt64.init) ?? 0
            guard advert.seq > lastSeq else { return .dropped }
            let scope = self.backend.decodedJSON(GrantPayload.GrantedModels.self, forKey: Key.scope(host)) ?? .all
            record.models = advert.models.filter { scope.allows($0.tag) }
            record.lastHeardMs = max(record.lastHeardMs, now)
            do {
                try self.backend.set(String(advert.seq), forKey: Key.advertSeq(host))
                try self.store.upsert(record)
            } catch { return .dropped }
            return .advertStored
        case .contactRevoke:
            record.state = .revoked
            record.lastHeardMs = max(record.lastHeardMs, now)
            do { try self.store.upsert(record) } catch { return .dropped }
            return .revoked
        default:
            try? self.store.noteHostAlive(host, atMs: now)
            return .ignored
        }
    }

    /// The model the guest chats with on `host`: `requested` if given, else the first advertised or granted one.
    public func model(on host: PublicKey, requested: String?) -> String? {
        if let requested, !requested.isEmpty { return requested }
        return self.store.record(for: host)?.models.first?.tag
    }
}
