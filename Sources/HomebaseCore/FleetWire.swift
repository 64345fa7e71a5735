/// What relay edges say to each other over NATS when the relay runs as a fleet (README, "Relay fleet").
///
/// Clients never see these messages: the wire protocol (Protocol/relay.md) is the same at every edge. Each
/// authenticated key has one subject (`FleetSubjects.key`), subscribed by the edge that holds the key; other
/// edges publish to it with a reply subject and read the one status byte that comes back. The encoding is a
/// version byte, a kind byte and fixed fields, so a decoder needs no allocation beyond the payload it returns.
public enum FleetMessage: Equatable, Sendable {
    /// A live frame for the subject's key. Reply: `FleetReplyStatus`.
    case live(sender: PublicKey, payload: ArraySlice<UInt8>)
    /// A STORE frame for the subject's key was committed to the stream at `deliveryID`. The holding edge
    /// delivers it (in order, before any later live frame). Reply: `FleetReplyStatus`.
    case stored(deliveryID: UInt64)
    /// An edge took the key (a newer login). Older holders close theirs with 4001. No reply.
    case claim(FleetClaim)

    public static let version: UInt8 = 1
    static let liveKind: UInt8 = 1
    static let storedKind: UInt8 = 2
    static let claimKind: UInt8 = 3
    /// Edge names are short identifiers (`--edge-id`), bounded so a claim stays small.
    public static let maxEdgeIDBytes = 64

    public enum DecodeError: Error, Equatable, Sendable {
        case truncated
        case unknownVersion(UInt8)
        case unknownKind(UInt8)
        case badEdgeID
        case trailingBytes
    }

    public func encoded() -> [UInt8] {
        var out: [UInt8] = [Self.version]
        switch self {
        case .live(let sender, let payload):
            out.reserveCapacity(2 + PublicKey.byteCount + payload.count)
            out.append(Self.liveKind)
            sender.withUnsafeBytes { out.append(contentsOf: $0) }
            out.append(contentsOf: payload)
        case .stored(let id):
            out.append(Self.storedKind)
            Self.appendU64(id, to: &out)
        case .claim(let c):
            out.append(Self.claimKind)
            Self.appendU64(c.atMs, to: &out)
            Self.appendU64(c.connection, to: &out)
            let edge = Array(c.edge.utf8.prefix(Self.maxEdgeIDBytes))
            out.append(UInt8(edge.count))
            out.append(contentsOf: edge)
        }
        return out
    }

    public static func decode(_ bytes: ArraySlice<UInt8>) throws(DecodeError) -> FleetMessage {
        guard bytes.count >= 2 else { throw .truncated }
        let v = bytes[bytes.startIndex], kind = bytes[bytes.startIndex + 1]
        guard v == Self.version else { throw .unknownVersion(v) }
        let body = bytes.dropFirst(2)
        switch kind {
        case Self.liveKind:
            guard body.count >= PublicKey.byteCount, let sender = PublicKey(bytes: body.prefix(PublicKey.byteCount))
            else { throw .truncated }
            return .live(sender: sender, payload: body.dropFirst(PublicKey.byteCount))
        case Self.storedKind:
            guard body.count >= 8 else { throw .truncated }
            guard body.count == 8 else { throw .trailingBytes }
            return .stored(deliveryID: Self.readU64(body))
        case Self.claimKind:
            guard body.count >= 17 else { throw .truncated }
            let at = Self.readU64(body), conn = Self.readU64(body.dropFirst(8))
            let n = Int(body[body.startIndex + 16])
            let rest = body.dropFirst(17)
            guard n > 0, n <= Self.maxEdgeIDBytes else { throw .badEdgeID }
            guard rest.count >= n else { throw .truncated }
            guard rest.count == n else { throw .trailingBytes }
            guard let edge = String(validating: rest, as: UTF8.self) else { throw .badEdgeID }
            return .claim(FleetClaim(atMs: at, edge: edge, connection: conn))
        default:
            throw .unknownKind(kind)
        }
    }

    static func appendU64(_ v: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    static func readU64(_ b: ArraySlice<UInt8>) -> UInt64 {
        var v: UInt64 = 0
        for byte in b.prefix(8) { v = v << 8 | UInt64(byte) }
        return v
    }
}

/// The one byte an edge answers a `live` or `stored` message with.
public enum FleetReplyStatus: UInt8, Sendable {
    /// Written to the recipient's socket queue (or, for `stored`, the edge will deliver it from the stream).
    case delivered = 0
    /// The edge holds the key but could not take the frame (not yet READY, or its queue is over its bound).
    case notDelivered = 2
}

/// One edge's login of a key. The newest login wins across the fleet, as on one relay (4001): claims are
/// ordered by time, then edge, then connection, so that two edges comparing the same pair agree on the winner.
public struct FleetClaim: Equatable, Sendable, Comparable {
    /// Wall-clock milliseconds at the edge when the key authenticated.
    public var atMs: UInt64
    public var edge: String
    /// The edge's connection id; distinguishes two logins at one edge within a millisecond.
    public var connection: UInt64

    public init(atMs: UInt64, edge: String, connection: UInt64) {
        self.atMs = atMs
        self.edge = edge
        self.connection = connection
    }

    public static func < (a: FleetClaim, b: FleetClaim) -> Bool {
        (a.atMs, a.edge, a.connection) < (b.atMs, b.edge, b.connection)
    }

    /// What a holder of `self` does on hearing `other` for the same key.
    public func verdict(on other: FleetClaim) -> FleetClaimVerdict {
        if other == self { return .ignore }
        return other > self ? .yield : .reassert
    }
}

public enum FleetClaimVerdict: Equatable, Sendable {
    /// The other login is newer: close ours with 4001.
    case yield
    /// Ours is newer: say so again, so the older holder (which may have missed our claim) yields.
    case reassert
    /// Our own claim.
    case ignore
}

/// NATS subjects of the fleet. Keys appear in hex; subjects are ASCII without wildcards.
public enum FleetSubjects {
    /// Where the edge holding `key` listens for live frames, store notices and claims.
    public static func key(_ key: PublicKey) -> String { "hb.key." + key.hex }
    /// The stream subject holding `key`'s stored frames.
    public static func mailbox(_ key: PublicKey) -> String { "hb.mbox." + key.hex }
    /// Every mailbox subject: the stream's subject filter.
    public static let mailboxWildcard = "hb.mbox.*"
    /// The recipient a mailbox subject names, or nil.
    public static func recipient(ofMailbox subject: String) -> PublicKey? {
        guard subject.hasPrefix("hb.mbox.") else { return nil }
        return PublicKey(hex: subject.dropFirst("hb.mbox.".count))
    }
}

/// A stored frame as the fleet keeps it in the stream: `sender[32] || stored_at_ms u64 || payload`. The stream
/// sequence is its delivery id; the subject names the recipient.
public enum FleetStoredFrame {
    public static let headerBytes = PublicKey.byteCount + 8

    public static func encode(sender: PublicKey, storedAtMs: UInt64, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.headerBytes + payload.count)
        sender.withUnsafeBytes { out.append(contentsOf: $0) }
        FleetMessage.appendU64(storedAtMs, to: &out)
        out.append(contentsOf: payload)
        return out
    }

    /// The sender, storage time and payload, or nil for bytes too short to hold them.
    public static func decode(_ bytes: [UInt8]) -> (sender: PublicKey, storedAtMs: UInt64, payload: [UInt8])? {
        guard bytes.count >= Self.headerBytes, let sender = PublicKey(bytes: bytes[0..<PublicKey.byteCount]) else {
            return nil
        }
        let at = FleetMessage.readU64(bytes[PublicKey.byteCount..<Self.headerBytes])
        return (sender, at, Array(bytes[Self.headerBytes...]))
    }
}
