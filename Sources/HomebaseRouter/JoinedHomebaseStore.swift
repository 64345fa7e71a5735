import HomebaseCore
import Synchronization

/// Where a guest stands with a friend's Homebase (design.md §R4, the cross-account shape).
public enum JoinState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Asked to join, or invited, but no grant yet: never routes.
    case pending
    /// Granted: routes while fresh.
    case joined
    /// The host revoked the grant (or the guest left): never routes.
    case revoked
}

/// A friend's Homebase as this guest device knows it.
public struct JoinedHomebase: Sendable, Hashable {
    public var host: PublicKey
    /// The friend's display name, for the banner ("via Ana").
    public var name: String?
    public var state: JoinState
    /// Models from the host's last advert to this guest.
    public var models: [AdvertPayload.Model]
    /// The last time any frame from the host arrived (`noteHostAlive`) or an advert was received.
    public var lastHeardMs: UInt64

    public init(host: PublicKey, name: String? = nil, state: JoinState, models: [AdvertPayload.Model] = [],
                lastHeardMs: UInt64) {
        self.host = host
        self.name = name
        self.state = state
        self.models = models
        self.lastHeardMs = lastHeardMs
    }

    /// Spec value (design.md §R5): cross-account adverts are event-driven, so the window is 24 h.
    public static let freshnessWindowMs: UInt64 = 24 * 60 * 60 * 1000

    /// Heard from less than 24 h ago (exactly 24 h is stale).
    public func isFresh(nowMs: UInt64) -> Bool {
        Freshness.isFresh(stampMs: self.lastHeardMs, nowMs: nowMs, windowMs: Self.freshnessWindowMs)
    }

    /// Joined, at least one model, and fresh: the cross-account shape may be used.
    public func isRoutable(nowMs: UInt64) -> Bool {
        self.state == .joined && !self.models.isEmpty && self.isFresh(nowMs: nowMs)
    }
}

/// The guest side's record of friends' Homebases. A SQLite-backed implementation replaces the
/// in-memory one when the guest flow lands; the router depends only on this protocol.
public protocol JoinedHomebaseStore: Sendable {
    /// The record for `host`, if any.
    func record(for host: PublicKey) -> JoinedHomebase?
    /// Every record, sorted by host key.
    func all() -> [JoinedHomebase]
    /// Inserts or replaces the record for `record.host`.
    func upsert(_ record: JoinedHomebase) throws
    /// Refreshes `lastHeardMs` because a frame from `host` arrived; unknown hosts are ignored.
    func noteHostAlive(_ host: PublicKey, atMs: UInt64) throws
    /// Deletes the record for `host`.
    func remove(_ host: PublicKey) throws
}

/// A `JoinedHomebaseStore` in memory, for tests and until the SQLite one lands.
public final class InMemoryJoinedHomebaseStore: JoinedHomebaseStore {
    private let records = Mutex<[PublicKey: JoinedHomebase]>([:])

    public init(_ initial: [JoinedHomebase] = []) {
        self.records.withLock { dict in
            for record in initial { dict[record.host] = record }
        }
    }

    public func record(for host: PublicKey) -> JoinedHomebase? {
        self.records.withLock { $0[host] }
    }

    public func all() -> [JoinedHomebase] {
        self.records.withLock { Array($0.values) }.sorted { $0.host < $1.host }
    }

    public func upsert(_ record: JoinedHomebase) {
        self.records.withLock { $0[record.host] = record }
    }

    public func noteHostAlive(_ host: PublicKey, atMs: UInt64) {
        self.records.withLock { dict in
            // Never move the clock backwards: frames can arrive out of order.
            if var record = dict[host], atMs > record.lastHeardMs {
                record.lastHeardMs = atMs
                dict[host] = record
            }
        }
    }

    public func remove(_ host: PublicKey) {
        self.records.withLock { _ = $0.removeValue(forKey: host) }
    }
}
