import HomebaseCore
import HomebaseCrypto

/// The envelope opener (`EnvelopeReceiver.open`: layout, header rules, AEAD, message, entitlement), as
/// receiver b of the vectors, with a's and c's keys. Input: `mode || bytes`; mode bits 0-1 pick what `bytes`
/// is, bits 2-3 how b knows the sender (stranger, sibling, contact, both), bit 4 the channel a seals on.
///
/// - mode 0: a whole envelope as DELIVERed, by the sender its header names (the fixtures' sealed envelopes
///   are seeds). An envelope that opens satisfies every receiver rule, its layout encodes back to its
///   bytes, and its message is its plaintext's.
/// - mode 1: a plaintext that a seals to b now: it opens to that plaintext padded, with exactly the verdict
///   the message and entitlement rules give, and both sealing paths make the same bytes.
/// - mode 2: the same, then one byte of the sealed envelope changed (position and mask from the input): it
///   never opens.
/// - mode 3: a whole envelope as DELIVERed by a, whatever its header says.
enum EnvelopeHarness {
    static let target = FuzzTarget(
        "envelope", "envelope opener: rules hold on acceptance, seal→open exact, a changed byte never opens",
        seeds: Self.seeds, run: Self.run)

    static let nowMs: UInt64 = 1_764_400_000_000

    /// Identities of the vectors: a (seed 01..20), b the receiver (65..84), c (c3 × 32).
    struct Keys: Sendable {
        let a: SigningSecretKey
        let b: SigningSecretKey
        let c: SigningSecretKey
        let ab: SymmetricKey
        let cb: SymmetricKey
    }

    static let keys: Keys = {
        do throws(CryptoError) {
            let a = try SigningSecretKey(seed: (1...32).map { UInt8($0) })
            let b = try SigningSecretKey(seed: (0x65...0x84).map { UInt8($0) })
            let c = try SigningSecretKey(seed: [UInt8](repeating: 0xC3, count: 32))
            return Keys(a: a, b: b, c: c, ab: try E2E.deriveKey(selfSecret: b, peer: a.publicKey),
                        cb: try E2E.deriveKey(selfSecret: b, peer: c.publicKey))
        } catch {
            preconditionFailure("fixed test keys: \(error)")
        }
    }()

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let mode = input.first else { return }
        let bytes = input[1...]
        let relation = [SenderRelation.stranger, .sibling, .contact, SenderRelation(isSibling: true, isContact: true)][
            Int(mode >> 2) & 3]
        let channel: Channel = mode & 0x10 == 0 ? .contact : .sibling
        switch mode & 3 {
        case 0:
            let named = bytes.count >= 34 ? PublicKey(bytes: bytes.dropFirst(2).prefix(32)) : nil
            try Self.openDelivered(bytes, from: named ?? Self.keys.a.publicKey, relation: relation)
        case 1:
            try Self.sealAndOpen(plaintext: Array(bytes), channel: channel, relation: relation)
        case 2:
            guard bytes.count >= 3 else { return }
            let position = Int(bytes[bytes.startIndex]) << 8 | Int(bytes[bytes.startIndex + 1])
            let mask = bytes[bytes.startIndex + 2] == 0 ? 1 : bytes[bytes.startIndex + 2]
            var sealed = Self.seal(Array(bytes.dropFirst(3)), channel: channel)
            sealed[position % sealed.count] ^= mask
            let result = Self.open(sealed[...], from: Self.keys.a.publicKey, relation: relation)
            try check(!result.isSuccess, "an envelope with byte \(position % sealed.count) changed opened")
        default:
            try Self.openDelivered(bytes, from: Self.keys.a.publicKey, relation: relation)
        }
    }

    static func open(
        _ bytes: ArraySlice<UInt8>, from sender: PublicKey, relation: SenderRelation
    ) -> Result<OpenedEnvelope, EnvelopeError> {
        let receiver = EnvelopeReceiver(selfKey: Self.keys.b.publicKey)
        return receiver.open(
            bytes, deliveredBy: sender, nowMs: Self.nowMs,
            key: { peer in
                peer == Self.keys.a.publicKey ? Self.keys.ab : peer == Self.keys.c.publicKey ? Self.keys.cb : nil
            },
            relation: { _ in relation })
    }

    static func openDelivered(
        _ bytes: ArraySlice<UInt8>, from sender: PublicKey, relation: SenderRelation
    ) throws(InvariantViolation) {
        let result = Self.open(bytes, from: sender, relation: relation)
        let layout = Result { () throws(EnvelopeError) in try Envelope(decoding: bytes) }
        switch layout {
        case .success(let envelope):
            try checkEqual(envelope.encoded(), Array(bytes), "envelope layout round trip")
        case .failure(let error):
            try checkEqual(result.failure, error, "verdict on an envelope whose layout is refused")
        }
        guard case .success(let opened) = result else { return }
        let header = opened.header
        try check(header.version == EnvelopeHeader.version, "opened version \(header.version)")
        try check(header.recipient == Self.keys.b.publicKey, "opened an envelope for someone else")
        try check(header.sender == sender, "opened an envelope whose sender is not the relay's")
        try check(header.sentAtMs <= Self.nowMs + EnvelopeReceiver.maxFutureSkewMs, "opened one from the future")
        try check(Self.nowMs - min(Self.nowMs, header.sentAtMs) <= RelayLimits().storedFrameLifetimeMs,
                  "opened an expired one")
        let message = try? Message(json: EnvelopePadding.unpad(opened.plaintext))
        try checkEqual(message, opened.message, "opened message against its plaintext")
        let entitled = Result { () throws(EnvelopeError) in
            try EnvelopeReceiver(selfKey: Self.keys.b.publicKey).checkEntitlement(
                channel: header.channel, messageType: opened.message.type, relation: relation)
        }
        try check(entitled.isSuccess, "opened a message the sender is not entitled to")
    }

    /// `plaintext` padded and sealed by a to b at `nowMs`.
    static func seal(_ plaintext: [UInt8], channel: Channel) -> [UInt8] {
        EnvelopeSealer.sealEncoded(header: Self.header(channel: channel), unpaddedPlaintext: plaintext, key: Self.keys.ab)
    }

    static func header(channel: Channel) -> EnvelopeHeader {
        EnvelopeHeader(channel: channel, sender: Self.keys.a.publicKey, recipient: Self.keys.b.publicKey,
                       messageID: (0..<16).map { UInt8($0) }, sentAtMs: Self.nowMs, nonce: [UInt8](repeating: 0x24, count: 24))
    }

    static func sealAndOpen(plaintext: [UInt8], channel: Channel, relation: SenderRelation) throws(InvariantViolation) {
        let sealed = Self.seal(plaintext, channel: channel)
        let padded = EnvelopePadding.pad(plaintext)
        let other = EnvelopeSealer.seal(header: Self.header(channel: channel), plaintext: padded, key: Self.keys.ab)
        try checkEqual(other.encoded(), sealed, "the two sealing paths")

        let expected: Result<Message, EnvelopeError>
        if let message = try? Message(json: EnvelopePadding.unpad(padded)) {
            let entitled = Result { () throws(EnvelopeError) in
                try EnvelopeReceiver(selfKey: Self.keys.b.publicKey).checkEntitlement(
                    channel: channel, messageType: message.type, relation: relation)
            }
            expected = entitled.map { message }
        } else {
            expected = .failure(.malformedPlaintext)
        }
        let result = Self.open(sealed[...], from: Self.keys.a.publicKey, relation: relation)
        try checkEqual(result.map(\.message), expected, "verdict on a sealed plaintext")
        if case .success(let opened) = result {
            try checkEqual(opened.plaintext, padded, "opened plaintext")
        }
    }

    static func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        for vector in FixtureFiles.vectors("envelope-vectors.json") {
            guard let inputs = vector["inputs"], let hex = inputs["envelope"]?.stringValue,
                let envelope = Hex.decode(hex)
            else { continue }
            let relation: UInt8 = switch inputs["relation"]?.stringValue {
            case "sibling": 1
            case "contact": 2
            default: 0
            }
            out.append(envelope.prefixed(relation << 2))
        }
        for json in FixtureFiles.textValues("json", in: "message-vectors.json") {
            out.append(json.prefixed(0x01 | 3 << 2))
            out.append(json.prefixed(0x11 | 1 << 2))
        }
        out.append(Array(#"{"type":"infer.chunk","id":"r","seq":1,"text":"x"}"#.utf8).prefixed(0x02 | 2 << 2, 0, 200, 1))
        return out
    }
}

extension Result {
    var isSuccess: Bool { !self.isFailure }

    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
