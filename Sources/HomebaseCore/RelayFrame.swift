/// One relay frame: one binary WebSocket message, `type u8 || body` (Protocol/relay.md §3).
///
/// Decoding checks every length before reading, rejects trailing bytes and never traps on peer input.
/// Which frames a side may *receive* is the state machines' business, not the codec's.
public enum RelayFrame: Equatable, Sendable {
    /// relay → client: `version u8 || nonce[32] || relay_time_ms u64`.
    case challenge(version: UInt8, nonce: [UInt8], relayTimeMs: UInt64)
    /// client → relay: `pk[32] || sig[64]` over `"homebase-relay-auth-v1" || nonce`.
    case auth(publicKey: PublicKey, signature: [UInt8])
    /// relay → client: `stored u32 || max_payload u32`.
    case ready(stored: UInt32, maxPayload: UInt32)
    /// client → relay: `send_id u32 || recipient[32] || flags u8 || payload`.
    case send(sendID: UInt32, recipient: PublicKey, flags: UInt8, payload: ArraySlice<UInt8>)
    /// relay → client: `sender[32] || delivery_id u64 || payload`.
    case deliver(sender: PublicKey, deliveryID: UInt64, payload: ArraySlice<UInt8>)
    /// client → relay: `delivery_id u64`.
    case ack(deliveryID: UInt64)
    /// relay → client: `send_id u32 || status u8`.
    case receipt(sendID: UInt32, status: ReceiptStatus)
    /// relay → client: `code u16 || utf8 message`; the relay closes after it.
    case error(code: UInt16, message: String)

    public var type: RelayFrameType {
        switch self {
        case .challenge: .challenge
        case .auth: .auth
        case .ready: .ready
        case .send: .send
        case .deliver: .deliver
        case .ack: .ack
        case .receipt: .receipt
        case .error: .error
        }
    }
}

/// The type byte of a relay frame.
public enum RelayFrameType: UInt8, Sendable, CaseIterable {
    case challenge = 0x01
    case auth = 0x02
    case ready = 0x03
    case send = 0x10
    case deliver = 0x11
    case ack = 0x12
    case receipt = 0x13
    case error = 0x7F
}

/// RECEIPT statuses (Protocol/relay.md §5). The raw values are the wire values.
public enum ReceiptStatus: Equatable, Hashable, Sendable {
    case delivered
    case stored
    case recipientOffline
    case mailboxFull
    case payloadTooLarge
    case rateLimited
    case badFlags
    /// A status this implementation does not know; kept so a client never rejects a newer relay's receipt.
    case unknown(UInt8)

    public init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .delivered
        case 1: self = .stored
        case 2: self = .recipientOffline
        case 3: self = .mailboxFull
        case 4: self = .payloadTooLarge
        case 5: self = .rateLimited
        case 6: self = .badFlags
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: UInt8 {
        switch self {
        case .delivered: 0
        case .stored: 1
        case .recipientOffline: 2
        case .mailboxFull: 3
        case .payloadTooLarge: 4
        case .rateLimited: 5
        case .badFlags: 6
        case .unknown(let v): v
        }
    }

    /// Statuses 2-5 mean the message did not reach its recipient and will not (Protocol/inference.md watchdogs).
    public var isFailure: Bool {
        switch self {
        case .delivered, .stored: false
        default: true
        }
    }
}

/// SEND flag bits.
public enum SendFlags {
    /// Keep the frame for later delivery if the recipient is not connected.
    public static let store: UInt8 = 0x01
    /// Bits that must be zero; a SEND with any of them set gets RECEIPT status 6.
    public static let reservedMask: UInt8 = 0xFE
}

/// Why a relay frame could not be decoded. Each case maps to close 1008 on the relay
/// (a peer that sends undecodable frames is breaking the protocol).
public enum RelayFrameError: Error, Equatable, Sendable {
    /// Empty message: there is no type byte.
    case empty
    /// The type byte is not a frame type of protocol v1.
    case unknownType(UInt8)
    /// The body is shorter than the frame's fixed fields.
    case truncated(type: UInt8)
    /// A fixed-size frame carries bytes after its last field.
    case trailingBytes(type: UInt8)
    /// An ERROR frame's message is not valid UTF-8.
    case invalidUTF8
}

extension RelayFrame {
    /// Bytes of the fixed part of a SEND frame before the payload (type, send_id, recipient, flags).
    public static let sendHeaderByteCount = 1 + 4 + 32 + 1
    /// Bytes of the fixed part of a DELIVER frame before the payload (type, sender, delivery_id).
    public static let deliverHeaderByteCount = 1 + 32 + 8

    /// Appends a SEND frame's fixed part to `out`, for a sender that appends the payload after it in the same
    /// buffer (the fields after the type byte are `encode`'s too).
    public static func appendSendHead(sendID: UInt32, recipient: PublicKey, flags: UInt8, to out: inout [UInt8]) {
        out.append(RelayFrameType.send.rawValue)
        Self.appendSendFields(sendID: sendID, recipient: recipient, flags: flags, to: &out)
    }

    /// SEND's fixed fields after the type byte.
    private static func appendSendFields(sendID: UInt32, recipient: PublicKey, flags: UInt8, to out: inout [UInt8]) {
        out.appendBigEndian(sendID)
        recipient.withUnsafeBytes { out.append(contentsOf: $0) }
        out.append(flags)
    }

    /// Sets the send_id of the encoded SEND frame at the start of `frame` (made with `appendSendHead`), for a
    /// sender that learns the id once the payload is made.
    public static func setSendID(_ sendID: UInt32, inEncodedSend frame: inout [UInt8]) {
        precondition(frame.count >= Self.sendHeaderByteCount && frame[0] == RelayFrameType.send.rawValue,
                     "not an encoded SEND frame")
        frame.withUnsafeMutableBytes { $0.storeBytes(of: sendID.bigEndian, toByteOffset: 1, as: UInt32.self) }
    }

    /// Decodes one frame. Payload-carrying cases keep a slice of `bytes` (no copy).
    public init(decoding bytes: ArraySlice<UInt8>) throws(RelayFrameError) {
        var r = ByteReader(bytes)
        guard let typeByte = r.readUInt8() else { throw .empty }
        guard let type = RelayFrameType(rawValue: typeByte) else { throw .unknownType(typeByte) }
        switch type {
        case .challenge:
            guard let version = r.readUInt8(), let nonce = r.readBytes(32), let time = r.readUInt64() else {
                throw .truncated(type: typeByte)
            }
            guard r.isAtEnd else { throw .trailingBytes(type: typeByte) }
            self = .challenge(version: version, nonce: nonce, relayTimeMs: time)
        case .auth:
            guard let pk = r.readSlice(32), let sig = r.readBytes(64) else { throw .truncated(type: typeByte) }
            guard r.isAtEnd else { throw .trailingBytes(type: typeByte) }
            self = .auth(publicKey: PublicKey(bytes: pk)!, signature: sig)
        case .ready:
            guard let stored = r.readUInt32(), let max = r.readUInt32() else { throw .truncated(type: typeByte) }
            guard r.isAtEnd else { throw .trailingBytes(type: typeByte) }
            self = .ready(stored: stored, maxPayload: max)
        case .send:
            guard let sendID = r.readUInt32(), let pk = r.readSlice(32), let flags = r.readUInt8() else {
                throw .truncated(type: typeByte)
            }
            self = .send(sendID: sendID, recipient: PublicKey(bytes: pk)!, flags: flags, payload: r.readRest())
        case .deliver:
            guard let pk = r.readSlice(32), let id = r.readUInt64() else { throw .truncated(type: typeByte) }
            self = .deliver(sender: PublicKey(bytes: pk)!, deliveryID: id, payload: r.readRest())
        case .ack:
            guard let id = r.readUInt64() else { throw .truncated(type: typeByte) }
            guard r.isAtEnd else { throw .trailingBytes(type: typeByte) }
            self = .ack(deliveryID: id)
        case .receipt:
            guard let sendID = r.readUInt32(), let status = r.readUInt8() else { throw .truncated(type: typeByte) }
            guard r.isAtEnd else { throw .trailingBytes(type: typeByte) }
            self = .receipt(sendID: sendID, status: ReceiptStatus(rawValue: status))
        case .error:
            guard let code = r.readUInt16() else { throw .truncated(type: typeByte) }
            let rest = r.readRest()
            guard let message = String(validating: rest, as: UTF8.self) else { throw .invalidUTF8 }
            self = .error(code: code, message: message)
        }
    }

    public init(decoding bytes: [UInt8]) throws(RelayFrameError) {
        try self.init(decoding: bytes[...])
    }

    /// The frame's wire bytes.
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: self.encodedCount)
        self.encode(into: &w)
        return w.bytes
    }

    public func encode(into w: inout ByteWriter) {
        w.write(self.type.rawValue)
        switch self {
        case .challenge(let version, let nonce, let time):
            precondition(nonce.count == 32, "CHALLENGE nonce must be 32 bytes")
            w.write(version)
            w.write(nonce)
            w.write(time)
        case .auth(let pk, let sig):
            precondition(sig.count == 64, "AUTH signature must be 64 bytes")
            pk.withUnsafeBytes { w.write($0) }
            w.write(sig)
        case .ready(let stored, let max):
            w.write(stored)
            w.write(max)
        case .send(let sendID, let recipient, let flags, let payload):
            w.append { Self.appendSendFields(sendID: sendID, recipient: recipient, flags: flags, to: &$0) }
            w.write(payload)
        case .deliver(let sender, let id, let payload):
            sender.withUnsafeBytes { w.write($0) }
            w.write(id)
            w.write(payload)
        case .ack(let id):
            w.write(id)
        case .receipt(let sendID, let status):
            w.write(sendID)
            w.write(status.rawValue)
        case .error(let code, let message):
            w.write(code)
            w.write(Array(message.utf8))
        }
    }

    /// Exact encoded size, for preallocation.
    public var encodedCount: Int {
        switch self {
        case .challenge: 1 + 1 + 32 + 8
        case .auth: 1 + 32 + 64
        case .ready: 1 + 4 + 4
        case .send(_, _, _, let p): Self.sendHeaderByteCount + p.count
        case .deliver(_, _, let p): Self.deliverHeaderByteCount + p.count
        case .ack: 1 + 8
        case .receipt: 1 + 4 + 1
        case .error(_, let m): 1 + 2 + m.utf8.count
        }
    }
}

/// The bytes a client signs in AUTH: `"homebase-relay-auth-v1" || nonce` (the crypto layer prepends the context).
public enum RelayAuth {
    public static let signatureContext = "homebase-relay-auth-v1"
    public static let protocolVersion: UInt8 = 1
}
