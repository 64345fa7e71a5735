import HomebaseCore
import HomebaseNode
import Synchronization

/// Who the Homebase's peers are, answered from memory on every inbound envelope (the messenger's
/// `RelationLookup`) and for every fan-out (adverts, rosters).
///
/// Siblings are the devices of the current signed roster. Contacts come from `isContact`, a hook the daemon
/// points at its guest registry (`setContactLookup`).
public final class PeerDirectory: Sendable {
    private struct Snapshot {
        var roster: StoredRoster?
        var siblings: Set<PublicKey> = []
    }

    /// This Homebase's device key; it is in its own roster but is never its own sibling.
    public let selfKey: PublicKey
    private let snapshot: Mutex<Snapshot>
    private let isContact: Mutex<@Sendable (PublicKey) -> Bool>

    public init(selfKey: PublicKey, roster: StoredRoster?,
                isContact: @escaping @Sendable (PublicKey) -> Bool = { _ in false }) {
        self.selfKey = selfKey
        self.isContact = Mutex(isContact)
        self.snapshot = Mutex(Snapshot())
        self.update(roster: roster)
    }

    /// Replaces the roster (after pairing, or when the state database changed under us).
    public func update(roster: StoredRoster?) {
        let keys = Set(roster?.payload.devicePublicKeys ?? []).subtracting([self.selfKey])
        self.snapshot.withLock {
            $0.roster = roster
            $0.siblings = keys
        }
    }

    /// Replaces the contact hook (the daemon installs its guest registry's).
    public func setContactLookup(_ isContact: @escaping @Sendable (PublicKey) -> Bool) {
        self.isContact.withLock { $0 = isContact }
    }

    public var roster: StoredRoster? { self.snapshot.withLock { $0.roster } }

    /// The other devices of the roster, in key order.
    public var siblings: [PublicKey] { self.snapshot.withLock { $0.siblings }.sorted() }

    public func relation(of sender: PublicKey) -> SenderRelation {
        SenderRelation(isSibling: self.snapshot.withLock { $0.siblings.contains(sender) },
                       isContact: self.isContact.withLock { $0 }(sender))
    }

    /// For the messenger's entitlement rule.
    public var relationLookup: RelationLookup {
        { [self] sender in self.relation(of: sender) }
    }
}
