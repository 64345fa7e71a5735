/// The receiver's rules for an incoming envelope (Protocol/envelope.md §5), as pure checks.
///
/// A receiver runs them in this order: `checkHeader` (before spending CPU on the AEAD), open (crypto layer;
/// failure is `.openFailed`), decode the plaintext (`.malformedPlaintext`), `checkEntitlement`, and last the
/// replay check against its persisted set of seen `(sender, message_id)` (`.replay`), recording the id only
/// once every other rule has passed. Every violation is a silent, counted drop.
public struct EnvelopeReceiver: Sendable {
    /// How far ahead of our clock a `sent_at` may be (clock skew between devices).
    public static let maxFutureSkewMs: UInt64 = 5 * 60 * 1000

    /// Largest envelope a device opens from a stranger (neither sibling nor contact). The only messages a
    /// stranger may send, `pair.request` and `contact.join`, are a few hundred bytes; a larger envelope from one
    /// is dropped as `not_entitled` before it is decrypted or parsed, so a stranger cannot make a device open
    /// and parse 256 KiB of JSON per frame (issue 23: a stranger's huge JSON held a Homebase's inbound messages
    /// up for 200 ms). A device's own choice, checked before the rules of envelope.md §5 (`RelayMessenger`).
    public static let maxStrangerEnvelopeBytes = 4096

    public let selfKey: PublicKey
    /// Envelopes older than this are dropped; equals the relay's stored-frame lifetime, so anything a relay may
    /// still deliver is accepted, and the seen-id set only has to remember this far back.
    public let maxAgeMs: UInt64

    public init(selfKey: PublicKey, maxAgeMs: UInt64 = RelayLimits().storedFrameLifetimeMs) {
        self.selfKey = selfKey
        self.maxAgeMs = maxAgeMs
    }

    /// Rules that need no key: version, recipient, sender, channel, time window.
    /// `expectedVersion` is 1 for the v1 layout and 2 for a v2 envelope's common fields
    /// (`SessionEnvelopeHeader.commonHeader`).
    public func checkHeader(_ header: EnvelopeHeader, deliveredBy relaySender: PublicKey, nowMs: UInt64,
                            expectedVersion: UInt8 = EnvelopeHeader.version)
        throws(EnvelopeError)
    {
        guard header.version == expectedVersion else { throw .unknownVersion }
        guard header.recipient == self.selfKey else { throw .wrongRecipient }
        guard header.sender == relaySender else { throw .senderMismatch }
        if case .unknown = header.channel { throw .notEntitled }
        guard header.sentAtMs <= nowMs &+ Self.maxFutureSkewMs else { throw .fromTheFuture }
        guard nowMs <= header.sentAtMs || nowMs - header.sentAtMs <= self.maxAgeMs else { throw .expired }
    }

    /// Whether `sender` may use `channel` for a message of `messageType`.
    public func checkEntitlement(channel: Channel, messageType: String, relation: SenderRelation)
        throws(EnvelopeError)
    {
        switch channel {
        case .sibling:
            guard relation.isSibling || messageType == MessageType.pairRequest else { throw .notEntitled }
        case .contact:
            guard relation.isContact || messageType == MessageType.contactJoin else { throw .notEntitled }
        case .unknown:
            throw .notEntitled
        }
    }

    /// Rule 8a's entitlement (envelope.md §7.7): who may make a session on `channel`, whatever it will carry. A
    /// sibling on sync_delta; on contact, a contact whose grant is in force (a Homebase's granted guest, a guest's
    /// host): a pending or revoked guest, which may still send `contact.*` messages in v1, makes no session, so
    /// the sessions a Homebase holds are bounded by its siblings and granted guests (4 each, §7.4).
    public func checkSessionEntitlement(channel: Channel, relation: SenderRelation) throws(EnvelopeError) {
        switch channel {
        case .sibling:
            guard relation.isSibling else { throw .notEntitled }
        case .contact:
            guard relation.isContact && relation.isGranted else { throw .notEntitled }
        case .unknown:
            throw .notEntitled
        }
    }

    /// The oldest `sent_at` a replay record must be kept for; older records can be pruned, because an
    /// envelope that old is dropped as `.expired` before the replay check.
    public func replayHorizonMs(nowMs: UInt64) -> UInt64 {
        nowMs > self.maxAgeMs ? nowMs - self.maxAgeMs : 0
    }
}

/// What the receiver knows about a sender, from its roster and contact list.
public struct SenderRelation: Equatable, Sendable {
    /// In this device's signed roster.
    public var isSibling: Bool
    /// A known contact (a guest the host has heard a join from or granted, or a host the guest has joined).
    public var isContact: Bool
    /// A contact whose grant is in force: on a Homebase, a granted guest (not pending, not revoked); on a guest,
    /// its host. Only such a contact makes sessions (rule 8a of §7.7).
    public var isGranted: Bool

    /// `isGranted` defaults to `isContact` (a guest's view of its host).
    public init(isSibling: Bool, isContact: Bool, isGranted: Bool? = nil) {
        self.isSibling = isSibling
        self.isContact = isContact
        self.isGranted = isContact && (isGranted ?? true)
    }

    public static let stranger = SenderRelation(isSibling: false, isContact: false)
    public static let sibling = SenderRelation(isSibling: true, isContact: false)
    public static let contact = SenderRelation(isSibling: false, isContact: true)
}
