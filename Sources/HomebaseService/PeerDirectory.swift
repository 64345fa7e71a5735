import HomebaseCore
import HomebaseNode
import Synchronization

/// Answers whether a key is a contact (a guest), and whether its grant is in force; the daemon's guest registry.
public protocol ContactLookup: AnyObject, Sendable {
    func isContact(_ key: PublicKey) -> Bool
    /// A granted guest (not pending, not revoked): the only contacts that make v2 sessions (envelope.md §7.7).
    func isGranted(_ key: PublicKey) -> Bool
}

extension GuestRegistry: ContactLookup {}

/// Who the Homebase's peers are, answered from memory on every inbound envelope (the messenger's
/// `RelationLookup`) and for every fan-out (adverts, rosters).
///
/// Siblings are the devices of the current signed roster. Contacts come from a `ContactLookup` the daemon
/// installs (`setContactLookup`); without one, nobody is a contact.
public final class PeerDirectory: Sendable {
    private struct Snapshot {
        var roster: StoredRoster?
        var siblings: Set<PublicKey> = []
    }

    /// This Homebase's device key; it is in its own roster but is never its own sibling.
    public let selfKey: PublicKey
    private let snapshot: Mutex<Snapshot>
    /// An object rather than a closure: a closure kept in a generic `Mutex` is re-wrapped in a reabstraction
    /// thunk on every read, and this is read for every inbound envelope.
    private let contacts: Mutex<(any ContactLookup)?>

    public init(selfKey: PublicKey, roster: StoredRoster?, contacts: (any ContactLookup)? = nil) {
        self.selfKey = selfKey
        self.contacts = Mutex(contacts)
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

    /// Replaces the contact lookup (the daemon installs its guest registry).
    public func setContactLookup(_ contacts: any ContactLookup) {
        self.contacts.withLock { $0 = contacts }
    }

    public var roster: StoredRoster? { self.snapshot.withLock { $0.roster } }

    /// The other devices of the roster, in key order.
    public var siblings: [PublicKey] { self.snapshot.withLock { $0.siblings }.sorted() }

    public func relation(of sender: PublicKey) -> SenderRelation {
        let contacts = self.contacts.withLock { $0 }
        return SenderRelation(isSibling: self.snapshot.withLock { $0.siblings.contains(sender) },
                              isContact: contacts?.isContact(sender) ?? false,
                              isGranted: contacts?.isGranted(sender) ?? false)
    }

    /// For the messenger's entitlement rule.
    public var relationLookup: RelationLookup {
        { [self] sender in self.relation(of: sender) }
    }
}
