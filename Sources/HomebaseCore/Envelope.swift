/// The sealed envelope, the payload of SEND and DELIVER (Protocol/envelope.md).
///
/// ```
/// version u8 (=1) || channel u8 || sender[32] || recipient[32] || message_id[16] || sent_at_ms u64
/// || nonce[24] || ciphertext
/// ```
/// The first 90 bytes are the AEAD's additional data. This type only lays out bytes; sealing and
/// opening live in HomebaseCrypto (`EnvelopeSealer`), and the receiver's rules in `EnvelopeReceiver`.
public struct EnvelopeHeader: Equatable, Sendable {
    public static let version: UInt8 = 1
    /// Bytes covered as additional data: version .. sent_at_ms.
    public static let adByteCount = 1 + 1 + 32 + 32 + 16 + 8
    public static let nonceByteCount = 24
    public static let messageIDByteCount = 16
    /// Header bytes including the nonce: where the ciphertext starts.
    public static let byteCount = adByteCount + nonceByteCount
    /// XChaCha20-Poly1305 tag: the smallest possible ciphertext.
    public static let tagByteCount = 16

    public var version: UInt8
    public var channel: Channel
    public var sender: PublicKey
    public var recipient: PublicKey
    public var messageID: [UInt8]
    public var sentAtMs: UInt64
    public var nonce: [UInt8]

    public init(
        version: UInt8 = EnvelopeHeader.version, channel: Channel, sender: PublicKey, recipient: PublicKey,
        messageID: [UInt8], sentAtMs: UInt64, nonce: [UInt8]
    ) {
        precondition(messageID.count == Self.messageIDByteCount, "message_id is 16 bytes")
        precondition(nonce.count == Self.nonceByteCount, "nonce is 24 bytes")
        self.version = version
        self.channel = channel
        self.sender = sender
        self.recipient = recipient
        self.messageID = messageID
        self.sentAtMs = sentAtMs
        self.nonce = nonce
    }

    /// The 90 bytes of additional data.
    public var additionalData: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.adByteCount)
        Self.appendAD(version: self.version, channel: self.channel, sender: self.sender, recipient: self.recipient,
                      messageID: self.messageID, sentAtMs: self.sentAtMs, to: &out)
        return out
    }

    /// The 114 header bytes (additional data, then the nonce), in an array with room for `extra` more bytes (a
    /// sealer appends the ciphertext without growing it).
    public func encoded(reservingCapacity extra: Int = 0) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.byteCount + max(0, extra))
        // Not `append`: a header whose fields were set to other lengths is encoded as it is (and fails to
        // open), as before, rather than trapping.
        Self.appendAD(version: self.version, channel: self.channel, sender: self.sender, recipient: self.recipient,
                      messageID: self.messageID, sentAtMs: self.sentAtMs, to: &out)
        out.append(contentsOf: self.nonce)
        return out
    }

    /// Appends the 114 header bytes of these fields to `out`: the one place the layout is written, for a sender
    /// that builds a whole frame in one buffer without making the header's arrays. Inlinable, so a caller in
    /// another module gets it specialized for its collections (generic, each append went through the runtime).
    @inlinable
    public static func append(
        version: UInt8 = EnvelopeHeader.version, channel: Channel, sender: PublicKey, recipient: PublicKey,
        messageID: some Collection<UInt8>, sentAtMs: UInt64, nonce: some Collection<UInt8>, to out: inout [UInt8]
    ) {
        precondition(messageID.count == Self.messageIDByteCount, "message_id is 16 bytes")
        precondition(nonce.count == Self.nonceByteCount, "nonce is 24 bytes")
        Self.appendAD(version: version, channel: channel, sender: sender, recipient: recipient, messageID: messageID,
                      sentAtMs: sentAtMs, to: &out)
        out.append(contentsOf: nonce)
    }

    @inlinable
    static func appendAD(
        version: UInt8, channel: Channel, sender: PublicKey, recipient: PublicKey, messageID: some Collection<UInt8>,
        sentAtMs: UInt64, to out: inout [UInt8]
    ) {
        out.append(version)
        out.append(channel.rawValue)
        out.append(contentsOf: sender.bytes)
        out.append(contentsOf: recipient.bytes)
        out.append(contentsOf: messageID)
        out.appendBigEndian(sentAtMs)
    }

    /// The message id in hex, the key receivers de-duplicate on.
    public var messageIDHex: String { Hex.encode(self.messageID) }
}

/// Envelope channels. Unknown values are kept so the receiver can drop them by rule, not by parse failure.
public enum Channel: Equatable, Hashable, Sendable {
    /// 0x01, `sync_delta` in Protocol/envelope.md: between siblings in one roster, the devices of one account
    /// (a handset and the account's own Homebase among them).
    case sibling
    /// 0x02: cross-account, 1:1.
    case contact
    case unknown(UInt8)

    public init(rawValue: UInt8) {
        switch rawValue {
        case 0x01: self = .sibling
        case 0x02: self = .contact
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: UInt8 {
        switch self {
        case .sibling: 0x01
        case .contact: 0x02
        case .unknown(let v): v
        }
    }
}

/// A parsed envelope: header plus ciphertext.
public struct Envelope: Equatable, Sendable {
    public var header: EnvelopeHeader
    public var ciphertext: [UInt8]

    public init(header: EnvelopeHeader, ciphertext: [UInt8]) {
        self.header = header
        self.ciphertext = ciphertext
    }

    /// Parses the layout only. The version byte is returned as read; `EnvelopeReceiver` judges it.
    public init(decoding bytes: ArraySlice<UInt8>) throws(EnvelopeError) {
        var r = ByteReader(bytes)
        guard let version = r.readUInt8(), let channel = r.readUInt8(), let sender = r.readSlice(32),
            let recipient = r.readSlice(32), let messageID = r.readBytes(16), let sentAt = r.readUInt64(),
            let nonce = r.readBytes(24)
        else { throw .truncated }
        let ciphertext = r.readRest()
        guard ciphertext.count >= EnvelopeHeader.tagByteCount else { throw .truncated }
        self.header = EnvelopeHeader(
            version: version, channel: Channel(rawValue: channel), sender: PublicKey(bytes: sender)!,
            recipient: PublicKey(bytes: recipient)!, messageID: messageID, sentAtMs: sentAt, nonce: nonce)
        self.ciphertext = Array(ciphertext)
    }

    public init(decoding bytes: [UInt8]) throws(EnvelopeError) {
        try self.init(decoding: bytes[...])
    }

    public func encoded() -> [UInt8] {
        var out = self.header.encoded()
        out.append(contentsOf: self.ciphertext)
        return out
    }
}

/// Why a receiver drops an envelope (Protocol/envelope.md §4). Every case is a silent drop that is counted;
/// none produces a reply, so a stranger learns nothing.
public enum EnvelopeError: Error, Equatable, Sendable, CaseIterable {
    /// Shorter than a header plus an AEAD tag.
    case truncated
    /// `version` is not 1.
    case unknownVersion
    /// `recipient` is not this device.
    case wrongRecipient
    /// `sender` differs from the relay's DELIVER.sender.
    case senderMismatch
    /// The AEAD did not open (wrong key, tampered header or ciphertext).
    case openFailed
    /// `sent_at` is more than 5 minutes ahead of the receiver's clock.
    case fromTheFuture
    /// `sent_at` is older than the relay's stored-frame lifetime.
    case expired
    /// `message_id` was already accepted from this sender.
    case replay
    /// The channel is unknown, or the sender is not entitled to it.
    case notEntitled
    /// The plaintext is not one UTF-8 JSON object with a string `type`.
    case malformedPlaintext
    /// v2: a response or transport message for a session this device does not hold (never made, or erased).
    case noSession
    /// v2: a handshake initiation that cannot make a session (the initiator's static key is not the sender's,
    /// its session id is in use, or a key is a low-order point).
    case handshakeFailed
    /// v2: a v1 envelope carrying an inference message from a peer that advertised v2 (envelope.md §7.8).
    case downgrade

    /// Label for the `envelopes_dropped_total{reason=…}` counter.
    public var reason: String {
        switch self {
        case .truncated: "truncated"
        case .unknownVersion: "unknown_version"
        case .wrongRecipient: "wrong_recipient"
        case .senderMismatch: "sender_mismatch"
        case .openFailed: "open_failed"
        case .fromTheFuture: "from_the_future"
        case .expired: "expired"
        case .replay: "replay"
        case .notEntitled: "not_entitled"
        case .malformedPlaintext: "malformed_plaintext"
        case .noSession: "no_session"
        case .handshakeFailed: "handshake_failed"
        case .downgrade: "downgrade"
        }
    }
}

/// Plaintext padding: senders pad with ASCII spaces to the next multiple of 256 bytes so chunk sizes do not
/// reveal token lengths; receivers accept any trailing whitespace.
public enum EnvelopePadding {
    public static let blockSize = 256

    /// The padded length of a `count`-byte plaintext: the next multiple of the block size, at least one block.
    public static func paddedCount(_ count: Int) -> Int {
        max(Self.blockSize, (count + Self.blockSize - 1) / Self.blockSize * Self.blockSize)
    }

    public static func pad(_ plaintext: [UInt8]) -> [UInt8] {
        let target = Self.paddedCount(plaintext.count)
        var out = plaintext
        out.reserveCapacity(target)
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: target - plaintext.count))
        return out
    }

    /// Strips trailing JSON whitespace (space, tab, CR, LF).
    public static func unpad(_ plaintext: [UInt8]) -> ArraySlice<UInt8> {
        var end = plaintext.endIndex
        while end > plaintext.startIndex {
            let c = plaintext[end - 1]
            guard c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D else { break }
            end -= 1
        }
        return plaintext[plaintext.startIndex..<end]
    }
}
