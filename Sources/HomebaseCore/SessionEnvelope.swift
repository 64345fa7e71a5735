/// The v2 envelope (Protocol/envelope.md §7.2): v1's first 90 header bytes, then `kind`, `session_id` and an
/// explicit transport `counter`, then the Noise message.
///
/// ```
/// version u8 (=2) || channel u8 || sender[32] || recipient[32] || message_id[16] || sent_at_ms u64
/// || kind u8 || session_id[8] || counter u64 || body
/// ```
/// Every header byte is authenticated (as the handshake payload, or as the transport AEAD's additional data).
/// This type only lays out bytes; the handshake and sessions live in HomebaseCrypto (`SessionTable`).
public struct SessionEnvelopeHeader: Equatable, Sendable {
    public static let version: UInt8 = 2
    public static let sessionIDByteCount = 8
    /// The whole header: v1's 90 bytes of additional data, kind, session id, counter.
    public static let byteCount = EnvelopeHeader.adByteCount + 1 + sessionIDByteCount + 8

    public enum Kind: UInt8, Sendable {
        case initiation = 1
        case response = 2
        case transport = 3
    }

    public var channel: Channel
    public var sender: PublicKey
    public var recipient: PublicKey
    public var messageID: [UInt8]
    public var sentAtMs: UInt64
    public var kind: Kind
    public var sessionID: [UInt8]
    public var counter: UInt64

    public init(channel: Channel, sender: PublicKey, recipient: PublicKey, messageID: [UInt8], sentAtMs: UInt64,
                kind: Kind, sessionID: [UInt8], counter: UInt64) {
        precondition(messageID.count == EnvelopeHeader.messageIDByteCount, "message_id is 16 bytes")
        precondition(sessionID.count == Self.sessionIDByteCount, "session_id is 8 bytes")
        self.channel = channel
        self.sender = sender
        self.recipient = recipient
        self.messageID = messageID
        self.sentAtMs = sentAtMs
        self.kind = kind
        self.sessionID = sessionID
        self.counter = counter
    }

    /// The 107 header bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.byteCount)
        self.append(to: &out)
        return out
    }

    public func append(to out: inout [UInt8]) {
        Self.append(channel: self.channel, sender: self.sender, recipient: self.recipient, messageID: self.messageID,
                    sentAtMs: self.sentAtMs, kind: self.kind, sessionID: self.sessionID, counter: self.counter,
                    to: &out)
    }

    /// Appends the 107 header bytes of these fields: the one place the layout is written, for a sealer that
    /// builds the envelope in one buffer without making the header's arrays (inlinable, as
    /// `EnvelopeHeader.append`, so it is specialized for the caller's collections).
    @inlinable
    public static func append(
        channel: Channel, sender: PublicKey, recipient: PublicKey, messageID: some Collection<UInt8>,
        sentAtMs: UInt64, kind: Kind, sessionID: some Collection<UInt8>, counter: UInt64, to out: inout [UInt8]
    ) {
        precondition(messageID.count == EnvelopeHeader.messageIDByteCount, "message_id is 16 bytes")
        precondition(sessionID.count == Self.sessionIDByteCount, "session_id is 8 bytes")
        EnvelopeHeader.appendAD(version: Self.version, channel: channel, sender: sender, recipient: recipient,
                                messageID: messageID, sentAtMs: sentAtMs, to: &out)
        out.append(kind.rawValue)
        out.append(contentsOf: sessionID)
        out.appendBigEndian(counter)
    }

    /// The v1 header fields the receiver rules of §5 judge (version, recipient, sender, channel, time); the
    /// nonce is not part of v2 and is left zero.
    public var commonHeader: EnvelopeHeader {
        EnvelopeHeader(version: Self.version, channel: self.channel, sender: self.sender, recipient: self.recipient,
                       messageID: self.messageID, sentAtMs: self.sentAtMs,
                       nonce: [UInt8](repeating: 0, count: EnvelopeHeader.nonceByteCount))
    }

    /// The body size each handshake kind requires (§7.2); transport bodies are at least a tag.
    public static func bodyCountIsValid(kind: Kind, count: Int) -> Bool {
        switch kind {
        case .initiation: count == Self.initiationBodyByteCount
        case .response: count == Self.responseBodyByteCount
        case .transport: count >= EnvelopeHeader.tagByteCount
        }
    }

    /// `e` || encrypted `s` || encrypted payload (the header).
    public static let initiationBodyByteCount = 32 + (32 + 16) + (byteCount + 16)
    /// `e` || encrypted payload (the header).
    public static let responseBodyByteCount = 32 + (byteCount + 16)
}

/// A parsed v2 envelope.
public struct SessionEnvelope: Equatable, Sendable {
    public var header: SessionEnvelopeHeader
    public var body: [UInt8]

    public init(header: SessionEnvelopeHeader, body: [UInt8]) {
        self.header = header
        self.body = body
    }

    /// Parses the layout (rules 1 and 2 of §7.7): `truncated` for a short header or a body of the wrong size
    /// for its kind, `unknownVersion` for a version other than 2 or an unknown kind.
    public init(decoding bytes: ArraySlice<UInt8>) throws(EnvelopeError) {
        var r = ByteReader(bytes)
        guard let version = r.readUInt8(), let channel = r.readUInt8(), let sender = r.readSlice(32),
            let recipient = r.readSlice(32), let messageID = r.readBytes(16), let sentAt = r.readUInt64(),
            let kindByte = r.readUInt8(), let sessionID = r.readBytes(8), let counter = r.readUInt64()
        else { throw .truncated }
        guard version == SessionEnvelopeHeader.version, let kind = SessionEnvelopeHeader.Kind(rawValue: kindByte) else {
            throw .unknownVersion
        }
        let body = r.readRest()
        guard SessionEnvelopeHeader.bodyCountIsValid(kind: kind, count: body.count) else { throw .truncated }
        self.header = SessionEnvelopeHeader(
            channel: Channel(rawValue: channel), sender: PublicKey(bytes: sender)!,
            recipient: PublicKey(bytes: recipient)!, messageID: messageID, sentAtMs: sentAt, kind: kind,
            sessionID: sessionID, counter: counter)
        self.body = Array(body)
    }

    public func encoded() -> [UInt8] {
        var out = self.header.encoded()
        out += self.body
        return out
    }
}

/// Version negotiation (Protocol/envelope.md §7.8): which envelope version a message to or from a peer uses.
public enum EnvelopeVersions {
    /// What this implementation speaks, in the `envelopes` field of adverts, rosters, grants, `pair.request` and
    /// `contact.join`.
    public static let supported: [Int] = [1, 2]

    /// The `envelopes` field for a device speaking `versions`: omitted for v1 alone, so a v1 device's signed
    /// payloads are byte for byte what they were.
    public static func field(_ versions: [Int]) -> [Int]? {
        versions == [1] ? nil : versions
    }

    /// The highest version in an advertised list that we speak too; 1 for a missing or empty field.
    public static func highestCommon(_ advertised: [Int]?) -> UInt8 {
        let common = (advertised ?? [1]).filter { Self.supported.contains($0) }
        return UInt8(common.max() ?? 1)
    }

    /// Messages that need forward secrecy: the inference stream. Only they go in v2 (§7.8, §7.9).
    public static func isSessionMessage(_ type: String) -> Bool {
        type.hasPrefix("infer.")
    }

    /// The version a message of `type` to a peer recorded at `peerVersion` is sent in.
    public static func version(forSending type: String, peerVersion: UInt8) -> UInt8 {
        peerVersion >= 2 && Self.isSessionMessage(type) ? 2 : 1
    }

    /// Rule 12 of §7.7: a v1 envelope carrying an inference message from a peer recorded at 2 is a downgrade.
    public static func isDowngrade(envelopeVersion: UInt8, type: String, peerVersion: UInt8) -> Bool {
        envelopeVersion < 2 && peerVersion >= 2 && Self.isSessionMessage(type)
    }
}

/// Per peer, the highest envelope version it has advertised or spoken (§7.8). Only goes up; bounded.
public struct PeerVersionBook: Sendable {
    private var versions: [PublicKey: UInt8] = [:]
    public static let capacity = 65_536

    public init() {}

    public func version(of peer: PublicKey) -> UInt8 { self.versions[peer] ?? 1 }

    /// Records what `peer` advertised (a missing field is `[1]`, which changes nothing).
    public mutating func record(_ peer: PublicKey, advertised: [Int]?) {
        self.record(peer, version: EnvelopeVersions.highestCommon(advertised))
    }

    public mutating func record(_ peer: PublicKey, version: UInt8) {
        guard version > self.version(of: peer) else { return }
        // Peers at 1 are not stored, so the book holds only v2 peers: devices and contacts, far fewer than this.
        if self.versions.count >= Self.capacity { return }
        self.versions[peer] = version
    }
}
