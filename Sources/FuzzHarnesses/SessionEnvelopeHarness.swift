import HomebaseCore
import HomebaseCrypto

/// The v2 envelope opener (Protocol/envelope.md §7.7): `SessionEnvelope(decoding:)` (rules 1-2), the common
/// header rules (3-7, `EnvelopeReceiver.checkHeader` on `commonHeader`), the initiation's entitlement, the
/// session table (rule 8: handshake messages and transport messages under their epoch key), then the message
/// and entitlement rules for a transport message (9-11), in the order `RelayMessenger` runs them (the replay
/// rule is the seen-id store's, not fuzzed here). Identities a and b and every handshake value are those of
/// `Fixtures/envelope-v2-vectors.json`: a initiated, b responded, session `5e5510f1d0000001`.
///
/// Input: `mode || bytes`. Mode bits 0-1 pick what `bytes` is, bits 2-3 how the receiver knows the sender
/// (stranger, sibling, contact, both), bit 4 the channel a message is sealed on (contact, sync), bit 5 the
/// receiver (b, from a; or a, from b), bit 6 the receiver's state (the session established; or before it:
/// b has no session, a's initiation is pending), bit 7 a variant of modes 1 and 2.
///
/// - mode 0: a whole envelope as DELIVERed, by the sender its header names (the vectors are seeds). An
///   envelope that opens satisfies every receiver rule for its kind, its layout encodes back to its bytes,
///   and a transport message's plaintext is its ciphertext's under the epoch key, its message the plaintext's.
/// - mode 1: a plaintext that the peer seals now on the established session: it opens to that plaintext
///   padded, with exactly the verdict the message and entitlement rules give. Sealed by the session table,
///   its bytes are those of an independent ENCRYPT with the vectors' transport key; with bit 7, it is sealed
///   independently at a counter from the input (epoch 0 to 11), and opens exactly when its epoch is at most
///   `SessionTable.maxEpochsAhead` ahead.
/// - mode 2: the same sealed envelope (bit 7: the handshake message the receiver waits for, the vectors'
///   initiation or response) with one byte changed (position and mask from the input): it never opens.
/// - mode 3: a whole envelope as DELIVERed by the peer, whatever its header says.
enum SessionEnvelopeHarness {
    static let target = FuzzTarget(
        "envelope-v2", "v2 envelope opener: rules hold on acceptance, seal→open exact, a changed byte never opens",
        seeds: Self.seeds, run: Self.run)

    /// The vectors' receiver clock; messages are sealed at it.
    static let nowMs: UInt64 = 1_764_400_001_000
    static let sessionID: [UInt8] = Hex.decode("5e5510f1d0000001")!

    /// One side of the session: its identity, its table before and after the handshake, and the key it
    /// receives transport messages under in epoch 0 (from the vectors, computed there with PyNaCl).
    struct Side: Sendable {
        let key: SigningSecretKey
        /// b with no session; a before it initiated (see `table(of:established:)`).
        let before: SessionTable
        let established: SessionTable
        let receiveKey: SymmetricKey
    }

    struct Sides: Sendable {
        let a: Side
        let b: Side
        /// The vectors' message 1 (a to b) and message 2 (b to a), in their envelopes.
        let initiation: [UInt8]
        let response: [UInt8]
        /// The vectors' handshake ephemerals: fresh ones per input would cost a key generation each.
        let initiatorEphemeral: NoiseKeyPair
        let responderEphemeral: NoiseKeyPair
    }

    /// a's initiation of the vectors, made on `table`.
    static func initiate(_ table: inout SessionTable, ephemeral: NoiseKeyPair) throws(CryptoError) -> [UInt8] {
        try table.initiate(
            to: EnvelopeHarness.keys.b.publicKey, channel: .sibling, sessionID: Self.sessionID, ephemeral: ephemeral,
            messageID: [UInt8](repeating: 0x11, count: 16), sentAtMs: 1_764_400_000_000, nowMs: 1_764_400_000_000)
    }

    static let sides: Sides = {
        do throws(CryptoError) {
            let keys = EnvelopeHarness.keys
            let aFresh = try SessionTable(identity: keys.a)
            var a = aFresh
            let initiatorEphemeral = try NoiseKeyPair(secretBytes: [UInt8](repeating: 0xA1, count: 32))
            let initiation = try Self.initiate(&a, ephemeral: initiatorEphemeral)
            let bFresh = try SessionTable(identity: keys.b)
            var b = bFresh
            let responderEphemeral = try NoiseKeyPair(secretBytes: [UInt8](repeating: 0xB2, count: 32))
            guard case .success(.initiation(let responder)) = b.receive(
                try! SessionEnvelope(decoding: initiation[...]), nowMs: 1_764_400_000_005,
                ephemeral: { responderEphemeral }, replyMessageID: { [UInt8](repeating: 0x22, count: 16) },
                replySentAtMs: 1_764_400_000_005)
            else { preconditionFailure("the vectors' initiation does not open") }
            b.commit(responder)
            guard case .success(.established) = a.receive(
                try! SessionEnvelope(decoding: responder.reply[...]), nowMs: 1_764_400_000_006,
                ephemeral: { preconditionFailure("an initiator makes no response") }, replyMessageID: { [] },
                replySentAtMs: 0)
            else { preconditionFailure("the vectors' response does not open") }
            let aToB = try SymmetricKey(bytes: Hex.decode("247d915b75728550190f2409add01f4e0fe434a6a05816b3b31acf488ead5f41")!)
            let bToA = try SymmetricKey(bytes: Hex.decode("3a808a0781caf99edf0cc848ed24a984f840644b0d20d09adaf946cf520e22c6")!)
            return Sides(
                a: Side(key: keys.a, before: aFresh, established: a, receiveKey: bToA),
                b: Side(key: keys.b, before: bFresh, established: b, receiveKey: aToB),
                initiation: initiation, response: responder.reply, initiatorEphemeral: initiatorEphemeral,
                responderEphemeral: responderEphemeral)
        } catch {
            preconditionFailure("fixed test keys: \(error)")
        }
    }()

    /// The receiver's table for one input. a's pending initiation is made for each: its handshake state (a
    /// `NoiseIKInitiator`, shared by every copy of the table) reads one message 2 and is over.
    static func table(of receiver: Side, established: Bool) -> SessionTable {
        if established { return receiver.established }
        var table = receiver.before
        if receiver.key.publicKey == Self.sides.a.key.publicKey {
            _ = try! Self.initiate(&table, ephemeral: Self.sides.initiatorEphemeral)
        }
        return table
    }

    /// What an envelope that passed every rule but the replay rule gave.
    enum Opened: Equatable {
        case initiation(SessionEnvelopeHeader)
        case established(SessionEnvelopeHeader)
        case transport(SessionEnvelopeHeader, plaintext: [UInt8], message: Message)
    }

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let mode = input.first else { return }
        let bytes = input[1...]
        let relation = [SenderRelation.stranger, .sibling, .contact, SenderRelation(isSibling: true, isContact: true)][
            Int(mode >> 2) & 3]
        let channel: Channel = mode & 0x10 == 0 ? .contact : .sibling
        let (receiver, sender) = mode & 0x20 == 0 ? (Self.sides.b, Self.sides.a) : (Self.sides.a, Self.sides.b)
        let established = mode & 0x40 == 0
        let variant = mode & 0x80 != 0
        switch mode & 3 {
        case 0:
            let named = bytes.count >= 34 ? PublicKey(bytes: bytes.dropFirst(2).prefix(32)) : nil
            try Self.openDelivered(bytes, from: named ?? sender.key.publicKey, by: receiver,
                                   established: established, relation: relation)
        case 1:
            if variant {
                guard bytes.count >= 2 else { return }
                let counter = UInt64(bytes[bytes.startIndex] % 12) << SessionTable.epochShift
                    | UInt64(bytes[bytes.startIndex + 1])
                try Self.sealAndOpen(plaintext: Array(bytes.dropFirst(2)), counter: counter, channel: channel,
                                     from: sender, to: receiver, relation: relation)
            } else {
                try Self.sealAndOpen(plaintext: Array(bytes), counter: nil, channel: channel, from: sender,
                                     to: receiver, relation: relation)
            }
        case 2:
            guard bytes.count >= 3 else { return }
            let position = Int(bytes[bytes.startIndex]) << 8 | Int(bytes[bytes.startIndex + 1])
            let mask = bytes[bytes.startIndex + 2] == 0 ? 1 : bytes[bytes.startIndex + 2]
            // With bit 7, the handshake message this receiver waits for, to a receiver still waiting for it.
            var sealed = !variant ? Self.seal(Array(bytes.dropFirst(3)), channel: channel, from: sender, to: receiver)
                : receiver.key.publicKey == Self.sides.b.key.publicKey ? Self.sides.initiation : Self.sides.response
            sealed[position % sealed.count] ^= mask
            let result = Self.open(sealed[...], from: sender.key.publicKey, by: receiver, established: !variant,
                                   relation: relation)
            try check(!result.isSuccess, "an envelope with byte \(position % sealed.count) changed opened")
        default:
            try Self.openDelivered(bytes, from: sender.key.publicKey, by: receiver, established: established,
                                   relation: relation)
        }
    }

    /// The receiver rules of §7.7 up to the replay rule, on a copy of the receiver's table.
    static func open(
        _ bytes: ArraySlice<UInt8>, from relaySender: PublicKey, by receiver: Side, established: Bool,
        relation: SenderRelation
    ) -> Result<Opened, EnvelopeError> {
        let rules = EnvelopeReceiver(selfKey: receiver.key.publicKey)
        let envelope: SessionEnvelope
        do {
            envelope = try SessionEnvelope(decoding: bytes)
            try rules.checkHeader(envelope.header.commonHeader, deliveredBy: relaySender, nowMs: Self.nowMs,
                                  expectedVersion: SessionEnvelopeHeader.version)
            if envelope.header.kind == .initiation {
                try rules.checkSessionEntitlement(channel: envelope.header.channel, relation: relation)
            }
        } catch {
            return .failure(error)
        }
        var table = Self.table(of: receiver, established: established)
        let ephemeral = Self.sides.responderEphemeral
        let received = table.receive(
            envelope, nowMs: Self.nowMs, ephemeral: { ephemeral },
            replyMessageID: { [UInt8](repeating: 0x22, count: 16) }, replySentAtMs: Self.nowMs)
        switch received {
        case .failure(let error):
            return .failure(error)
        case .success(.initiation(let responder)):
            return .success(.initiation(responder.header))
        case .success(.established(let header)):
            return .success(.established(header))
        case .success(.transport(let header, let plaintext)):
            guard let message = try? Message(json: EnvelopePadding.unpad(plaintext)) else {
                return .failure(.malformedPlaintext)
            }
            do throws(EnvelopeError) {
                try rules.checkEntitlement(channel: header.channel, messageType: message.type, relation: relation)
            } catch {
                return .failure(error)
            }
            return .success(.transport(header, plaintext: plaintext, message: message))
        }
    }

    static func openDelivered(
        _ bytes: ArraySlice<UInt8>, from sender: PublicKey, by receiver: Side, established: Bool,
        relation: SenderRelation
    ) throws(InvariantViolation) {
        let result = Self.open(bytes, from: sender, by: receiver, established: established, relation: relation)
        let layout = Result { () throws(EnvelopeError) in try SessionEnvelope(decoding: bytes) }
        switch layout {
        case .success(let envelope):
            try checkEqual(envelope.encoded(), Array(bytes), "v2 envelope layout round trip")
        case .failure(let error):
            try checkEqual(result.failure, error, "verdict on an envelope whose layout is refused")
        }
        guard case .success(let opened) = result, case .success(let envelope) = layout else { return }
        let header = envelope.header
        try check(bytes.first == SessionEnvelopeHeader.version, "opened version \(bytes.first ?? 0)")
        try check(header.recipient == receiver.key.publicKey, "opened an envelope for someone else")
        try check(header.sender == sender, "opened an envelope whose sender is not the relay's")
        try check(header.sentAtMs <= Self.nowMs + EnvelopeReceiver.maxFutureSkewMs, "opened one from the future")
        try check(Self.nowMs - min(Self.nowMs, header.sentAtMs) <= RelayLimits().storedFrameLifetimeMs,
                  "opened an expired one")
        switch opened {
        case .initiation(let responded):
            try checkEqual(responded, header, "the initiation's header")
            try check(header.kind == .initiation && header.counter == 0, "an initiation with counter \(header.counter)")
            try check(receiver.key.publicKey == Self.sides.b.key.publicKey, "a made no initiation of its own")
            try check(!established || header.sessionID != Self.sessionID, "an initiation reused the session id")
            try check(header.channel == .sibling ? relation.isSibling : relation.isContact && relation.isGranted,
                      "a session made by a sender not entitled to the channel")
        case .established(let answered):
            try checkEqual(answered, header, "the response's header")
            try check(header.kind == .response && header.counter == 0, "a response with counter \(header.counter)")
            try check(!established && receiver.key.publicKey == Self.sides.a.key.publicKey
                      && header.sessionID == Self.sessionID, "a response to no pending initiation")
        case .transport(let opened, let plaintext, let message):
            try checkEqual(opened, header, "the transport message's header")
            try check(established && header.sessionID == Self.sessionID, "a transport message on no session")
            try check(header.channel == .sibling, "a transport message on another channel than its session's")
            try check(plaintext.count % EnvelopePadding.blockSize == 0 && !plaintext.isEmpty, "an unpadded plaintext")
            try check(header.counter < SessionTable.rejectAfterMessages, "a counter past reject_after")
            let epoch = header.counter >> SessionTable.epochShift
            try check(epoch <= SessionTable.maxEpochsAhead, "opened a message \(epoch) epochs ahead")
            try checkEqual(Self.encrypt(plaintext, header: header, key: receiver.receiveKey), Array(bytes),
                           "the opened plaintext sealed again")
            try checkEqual(try? Message(json: EnvelopePadding.unpad(plaintext)), message,
                           "opened message against its plaintext")
            let entitled = Result { () throws(EnvelopeError) in
                try EnvelopeReceiver(selfKey: receiver.key.publicKey).checkEntitlement(
                    channel: header.channel, messageType: message.type, relation: relation)
            }
            try check(entitled.isSuccess, "opened a message the sender is not entitled to")
        }
    }

    static func header(counter: UInt64, channel: Channel, from sender: Side, to receiver: Side) -> SessionEnvelopeHeader {
        SessionEnvelopeHeader(
            channel: channel, sender: sender.key.publicKey, recipient: receiver.key.publicKey,
            messageID: (0..<16).map { UInt8($0) }, sentAtMs: Self.nowMs, kind: .transport, sessionID: Self.sessionID,
            counter: counter)
    }

    /// `plaintext` padded and sealed by the sender's table on the established session (its first message: counter 0);
    /// on another channel than the session's (sync_delta), where the table has no session, sealed independently.
    static func seal(_ plaintext: [UInt8], channel: Channel, from sender: Side, to receiver: Side) -> [UInt8] {
        guard channel == .sibling else {
            return Self.encrypt(EnvelopePadding.pad(plaintext),
                                header: Self.header(counter: 0, channel: channel, from: sender, to: receiver),
                                key: receiver.receiveKey)
        }
        var table = sender.established
        var out: [UInt8] = []
        let sealed = table.sealTransport(
            to: receiver.key.publicKey, channel: channel, messageID: (0..<16).map { UInt8($0) }, sentAtMs: Self.nowMs,
            nowMs: Self.nowMs, appendingTo: &out, plaintext: { $0 += plaintext })
        precondition(sealed, "the established session may send")
        return out
    }

    /// The transport envelope of `plaintext` (already padded) under the epoch key for `header.counter`, made
    /// from the spec alone: `REKEY` applied once per epoch to the epoch-0 key, `ENCRYPT` with the header as
    /// additional data.
    static func encrypt(_ plaintext: [UInt8], header: SessionEnvelopeHeader, key: SymmetricKey) -> [UInt8] {
        var key = key
        for _ in 0..<(header.counter >> SessionTable.epochShift) {
            let block = NoiseIKVectors.encrypt(key: key, n: UInt64.max, ad: [], plaintext: [UInt8](repeating: 0, count: 32))
            key = try! SymmetricKey(bytes: block.prefix(32))
        }
        let ad = header.encoded()
        return ad + NoiseIKVectors.encrypt(key: key, n: header.counter, ad: ad, plaintext: plaintext)
    }

    static func sealAndOpen(
        plaintext: [UInt8], counter: UInt64?, channel: Channel, from sender: Side, to receiver: Side,
        relation: SenderRelation
    ) throws(InvariantViolation) {
        let padded = EnvelopePadding.pad(plaintext)
        let header = Self.header(counter: counter ?? 0, channel: channel, from: sender, to: receiver)
        let independent = Self.encrypt(padded, header: header, key: receiver.receiveKey)
        let sealed: [UInt8]
        if counter == nil && channel == .sibling {
            sealed = Self.seal(plaintext, channel: channel, from: sender, to: receiver)
            try checkEqual(sealed, independent, "the session table's sealing against ENCRYPT")
        } else {
            sealed = independent
        }
        let expected: Result<Message, EnvelopeError>
        if channel != .sibling {
            expected = .failure(.noSession)  // the session is bound to its handshake's channel
        } else if header.counter >> SessionTable.epochShift > SessionTable.maxEpochsAhead {
            expected = .failure(.openFailed)
        } else if let message = try? Message(json: EnvelopePadding.unpad(padded)) {
            let entitled = Result { () throws(EnvelopeError) in
                try EnvelopeReceiver(selfKey: receiver.key.publicKey).checkEntitlement(
                    channel: channel, messageType: message.type, relation: relation)
            }
            expected = entitled.map { message }
        } else {
            expected = .failure(.malformedPlaintext)
        }
        let result = Self.open(sealed[...], from: sender.key.publicKey, by: receiver, established: true,
                               relation: relation)
        let message = result.map { opened -> Message? in
            if case .transport(_, _, let message) = opened { return message }
            return nil
        }
        try checkEqual(message, expected.map { Optional($0) }, "verdict on a sealed plaintext")
        if case .success(.transport(_, let opened, _)) = result {
            try checkEqual(opened, padded, "opened plaintext")
        }
    }

    static func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        let vectors = FixtureFiles.bytes("envelope-v2-vectors.json").withUnsafeBufferPointer { try? JSONNode.parse($0) }
        // Message 1 to b before the session exists; message 2 to a, its initiation pending.
        if let hex = vectors?["initiation"]?["envelope"]?.stringValue, let envelope = Hex.decode(hex) {
            out.append(envelope.prefixed(0x40 | 1 << 2))
            out.append([0x82 | 1 << 2, 0, 40, 0x80])
        }
        if let hex = vectors?["response"]?["envelope"]?.stringValue, let envelope = Hex.decode(hex) {
            out.append(envelope.prefixed(0x20 | 0x40))
        }
        for vector in vectors?["transport"]?.arrayValue ?? [] {
            guard let hex = vector["envelope"]?.stringValue, let envelope = Hex.decode(hex) else { continue }
            let toA: UInt8 = vector["from"]?.stringValue == "responder" ? 0x20 : 0
            out.append(envelope.prefixed(toA | 3 << 2))
        }
        for vector in vectors?["receiver_vectors"]?.arrayValue ?? [] {
            guard let hex = vector["envelope"]?.stringValue, let envelope = Hex.decode(hex) else { continue }
            let toA: UInt8 = vector["receiver"]?.stringValue == "initiator" ? 0x20 : 0
            out.append(envelope.prefixed(toA | 3 << 2))
        }
        for json in FixtureFiles.textValues("json", in: "message-vectors.json") {
            out.append(json.prefixed(0x01 | 2 << 2))
            out.append(json.prefixed(0x21 | 0x10 | 1 << 2))
            out.append(json.prefixed(0x81 | 3 << 2, 8, 0xFF))
        }
        out.append(Array(#"{"type":"infer.chunk","id":"r","seq":1,"text":"x"}"#.utf8).prefixed(0x02 | 2 << 2, 0, 120, 1))
        out.append(Array(#"{"type":"infer.chunk","id":"r","seq":1,"text":"x"}"#.utf8).prefixed(0x81 | 2 << 2, 9, 0))
        return out
    }
}
