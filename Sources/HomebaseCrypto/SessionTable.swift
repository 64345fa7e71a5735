public import HomebaseCore

/// A device's v2 sessions with its peers (Protocol/envelope.md §7.3-§7.6): handshakes, transport sealing and
/// opening with per-epoch keys, lifetimes and erasure. Pure apart from the crypto: time, ephemerals, message ids
/// and session ids come in as parameters, so tests and vectors are deterministic; the messenger draws them.
///
/// Not thread-safe: its owner keeps it under a lock. Keys live in wiped storage (`SymmetricKey`), so a key
/// replaced or a session dropped is erased when its last reference goes.
public struct SessionTable: Sendable {
    /// `homebase-envelope-v2` (§7.1).
    public static let prologue = Array("homebase-envelope-v2".utf8)
    /// Messages per epoch: the key moves forward every 1,024 messages per direction (§7.3).
    public static let epochShift: UInt64 = 10
    /// How many epochs beyond the newest a receiver derives to open a message (§7.3).
    public static let maxEpochsAhead: UInt64 = 8
    public static let rekeyAfterMs: UInt64 = 5 * 60 * 1000
    public static let rekeyAfterMessages: UInt64 = 65_536
    public static let rejectAfterMs: UInt64 = 10 * 60 * 1000
    public static let rejectAfterMessages: UInt64 = 131_072
    public static let eraseAfterMs: UInt64 = 11 * 60 * 1000
    public static let handshakeTimeoutMs: UInt64 = 10_000
    public static let sessionsPerPeer = 4

    private let identity: PublicKey
    private let staticKey: NoiseKeyPair
    private var peers: [PublicKey: PeerState] = [:]

    public init(identity: SigningSecretKey) throws(CryptoError) {
        self.identity = identity.publicKey
        self.staticKey = try NoiseKeyPair.deviceStatic(identity)
    }

    // MARK: State

    struct SendCipher {
        var key: SymmetricKey
        var epoch: UInt64 = 0
        var next: UInt64 = 0
    }

    struct ReceiveCipher {
        var newest: (epoch: UInt64, key: SymmetricKey)
        var previous: (epoch: UInt64, key: SymmetricKey)?
    }

    struct Session {
        var id: [UInt8]
        /// The channel of its handshake: the session carries only messages on it (§7.2).
        var channel: Channel
        /// When this side established it (a responder: processed message 1; an initiator: message 2); its age for
        /// `rekey_after`, `reject_after` and `erase_after` counts from here (§7.4).
        var establishedAtMs: UInt64
        var send: SendCipher
        var receive: ReceiveCipher
        var handshakeHash: [UInt8]

        init(id: [UInt8], channel: Channel, establishedAtMs: UInt64, send: SymmetricKey, receive: SymmetricKey,
             handshakeHash: [UInt8]) {
            self.id = id
            self.channel = channel
            self.establishedAtMs = establishedAtMs
            self.send = SendCipher(key: send)
            self.receive = ReceiveCipher(newest: (0, receive), previous: nil)
            self.handshakeHash = handshakeHash
        }

        func maySend(nowMs: UInt64) -> Bool {
            nowMs &- self.establishedAtMs < SessionTable.rejectAfterMs && self.send.next < SessionTable.rejectAfterMessages
                && nowMs >= self.establishedAtMs
        }
    }

    struct Pending {
        var id: [UInt8]
        var channel: Channel
        var startedAtMs: UInt64
        var handshake: NoiseIKInitiator
    }

    struct PeerState {
        /// Oldest first.
        var sessions: [Session] = []
        var pending: Pending?

        /// `SessionTable.sealTransport` on this peer's newest session that may send.
        mutating func sealTransport(
            identity: PublicKey, to peer: PublicKey, channel: Channel, messageID: some Collection<UInt8>,
            sentAtMs: UInt64, nowMs: UInt64, appendingTo out: inout [UInt8],
            plaintext writePlaintext: (inout [UInt8]) -> Void
        ) -> Bool {
            guard let index = self.sessions.lastIndex(where: { $0.channel == channel && $0.maySend(nowMs: nowMs) })
            else { return false }
            let counter = self.sessions[index].send.next
            let epoch = counter >> SessionTable.epochShift
            while self.sessions[index].send.epoch < epoch {
                // The previous epoch's key is released (and wiped) as it is replaced.
                self.sessions[index].send.key = Noise.rekey(self.sessions[index].send.key)
                self.sessions[index].send.epoch += 1
            }
            self.sessions[index].send.next += 1
            // Header, plaintext padded as in v1, tag space; then encrypted in place (the header is the additional
            // data).
            let start = out.count
            SessionEnvelopeHeader.append(
                channel: channel, sender: identity, recipient: peer, messageID: messageID, sentAtMs: sentAtMs,
                kind: .transport, sessionID: self.sessions[index].id, counter: counter, to: &out)
            let plaintextStart = out.count
            writePlaintext(&out)
            let count = out.count - plaintextStart
            let padding = EnvelopePadding.paddedCount(count) - count
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: padding + Noise.tagLength))
            Noise.encryptInPlace(&out, from: start, adCount: SessionEnvelopeHeader.byteCount,
                                 key: self.sessions[index].send.key, n: counter)
            return true
        }

        func uses(_ id: [UInt8]) -> Bool {
            self.pending?.id == id || self.sessions.contains { $0.id == id }
        }

        mutating func add(_ session: Session) {
            self.sessions.append(session)
            let limit = SessionTable.sessionsPerPeer - (self.pending == nil ? 0 : 1)
            if self.sessions.count > limit { self.sessions.removeFirst(self.sessions.count - limit) }
        }
    }

    // MARK: Sending

    /// Whether a message can be sealed to `peer` now.
    public enum Readiness: Equatable, Sendable {
        /// A session may send; `rekeyDue` says a new handshake should start in the background (§7.4).
        case ready(rekeyDue: Bool)
        /// No session may send, and an initiation is under way: hold the message.
        case handshakePending
        /// No session may send and none is being made: initiate.
        case needsHandshake
    }

    public func readiness(for peer: PublicKey, nowMs: UInt64) -> Readiness {
        let state = self.peers[peer]
        let pending = state?.pending.map { nowMs &- $0.startedAtMs < Self.handshakeTimeoutMs } ?? false
        guard let session = state?.sessions.last(where: { $0.maySend(nowMs: nowMs) }) else {
            return pending ? .handshakePending : .needsHandshake
        }
        let due = nowMs &- session.establishedAtMs >= Self.rekeyAfterMs || session.send.next >= Self.rekeyAfterMessages
        // A rekey already under way, or one made since, is not due again.
        return .ready(rekeyDue: due && !pending && state?.sessions.last?.id == session.id)
    }

    /// Starts a handshake with `peer`: message 1 in an envelope (kind 1), sent live by the caller. Replaces an
    /// initiation still pending with the peer (its ephemeral is erased).
    /// - Parameters: `sessionID` (8 random bytes), `ephemeral` (`NoiseKeyPair.generate()`), `messageID` (16
    ///   random bytes) are drawn by the caller.
    public mutating func initiate(
        to peer: PublicKey, channel: Channel, sessionID: [UInt8], ephemeral: NoiseKeyPair, messageID: [UInt8],
        sentAtMs: UInt64, nowMs: UInt64
    ) throws(CryptoError) -> [UInt8] {
        let rs = try X25519.publicKey(for: peer)
        let header = SessionEnvelopeHeader(
            channel: channel, sender: self.identity, recipient: peer, messageID: messageID, sentAtMs: sentAtMs,
            kind: .initiation, sessionID: sessionID, counter: 0)
        let handshake = NoiseIKInitiator(prologue: Self.prologue, s: self.staticKey, e: ephemeral, rs: rs)
        let headerBytes = header.encoded()
        let body = try handshake.writeMessage1(payload: headerBytes)
        var state = self.peers[peer] ?? PeerState()
        state.pending = Pending(id: sessionID, channel: channel, startedAtMs: nowMs, handshake: handshake)
        if state.sessions.count > Self.sessionsPerPeer - 1 {
            state.sessions.removeFirst(state.sessions.count - (Self.sessionsPerPeer - 1))
        }
        self.peers[peer] = state
        return headerBytes + body
    }

    /// Seals a transport message (kind 3) to `peer` on the newest session that may send, appending the envelope
    /// to `out`; the plaintext `writePlaintext` appends is padded as in v1 (§4). False, with `out` unchanged,
    /// when no session may send (`readiness` says what to do).
    public mutating func sealTransport(
        to peer: PublicKey, channel: Channel, messageID: some Collection<UInt8>, sentAtMs: UInt64, nowMs: UInt64,
        appendingTo out: inout [UInt8], plaintext writePlaintext: (inout [UInt8]) -> Void
    ) -> Bool {
        // Changed in place through the dictionary (one lookup): a copy of the peer's state would copy its sessions
        // array on every message.
        self.peers[peer]?.sealTransport(
            identity: self.identity, to: peer, channel: channel, messageID: messageID, sentAtMs: sentAtMs,
            nowMs: nowMs, appendingTo: &out, plaintext: writePlaintext) ?? false
    }

    // MARK: Receiving

    /// A handshake initiation that opened, not yet committed: the caller applies the replay rule to its
    /// `header.messageID` first, then `commit`s it and sends `reply` live.
    public struct Responder: Sendable {
        public let peer: PublicKey
        public let header: SessionEnvelopeHeader
        /// Message 2 in its envelope (kind 2).
        public let reply: [UInt8]
        let session: Session
        public var handshakeHash: [UInt8] { self.session.handshakeHash }
    }

    public enum Received: Sendable {
        /// A peer's initiation opened (§7.7 rule 8a).
        case initiation(Responder)
        /// Our initiation was answered: a session with `header.sender` is established; held messages may go.
        case established(SessionEnvelopeHeader)
        /// A transport message opened; `plaintext` is padded (strip with `EnvelopePadding.unpad`).
        case transport(SessionEnvelopeHeader, plaintext: [UInt8])
    }

    /// Rule 8 of §7.7 for an envelope whose header already passed rules 1-7 (and, for an initiation, whose sender
    /// is a sibling or contact: the caller's relation check).
    /// - Parameters: for an initiation, `ephemeral`, `replyMessageID` and `replySentAtMs` make the response.
    public mutating func receive(
        _ envelope: SessionEnvelope, nowMs: UInt64, ephemeral: () -> NoiseKeyPair, replyMessageID: () -> [UInt8],
        replySentAtMs: UInt64
    ) -> Result<Received, EnvelopeError> {
        let header = envelope.header
        let peer = header.sender
        switch header.kind {
        case .initiation:
            guard header.counter == 0 else { return .failure(.openFailed) }
            if let state = self.peers[peer], state.uses(header.sessionID) { return .failure(.handshakeFailed) }
            guard let expectedStatic = try? X25519.publicKey(for: peer) else { return .failure(.handshakeFailed) }
            let reply = SessionEnvelopeHeader(
                channel: header.channel, sender: self.identity, recipient: peer, messageID: replyMessageID(),
                sentAtMs: replySentAtMs, kind: .response, sessionID: header.sessionID, counter: 0)
            let replyHeader = reply.encoded()
            let result: NoiseIKResponder.Result
            do {
                result = try NoiseIKResponder.respond(
                    prologue: Self.prologue, s: self.staticKey, e: ephemeral(), message1: envelope.body,
                    payload2: replyHeader)
            } catch .allZeroSharedSecret {
                return .failure(.handshakeFailed)
            } catch {
                return .failure(.openFailed)
            }
            guard result.payload == header.encoded() else { return .failure(.openFailed) }
            guard result.rs == expectedStatic else { return .failure(.handshakeFailed) }
            let session = Session(
                id: header.sessionID, channel: header.channel, establishedAtMs: nowMs,
                send: result.keys.responderToInitiator,
                receive: result.keys.initiatorToResponder, handshakeHash: result.keys.handshakeHash)
            return .success(.initiation(Responder(peer: peer, header: header, reply: replyHeader + result.message2,
                                                  session: session)))
        case .response:
            guard header.counter == 0, var state = self.peers[peer], let pending = state.pending,
                pending.id == header.sessionID, pending.channel == header.channel,
                nowMs &- pending.startedAtMs < Self.handshakeTimeoutMs
            else { return .failure(.noSession) }
            // Whatever the outcome, this initiation is over: Noise does not retry a failed message.
            state.pending = nil
            self.peers[peer] = state
            let payload: [UInt8], keys: NoiseTransportKeys
            do {
                (payload, keys) = try pending.handshake.readMessage2(envelope.body)
            } catch {
                return .failure(.openFailed)
            }
            guard payload == header.encoded() else { return .failure(.openFailed) }
            state.add(Session(id: header.sessionID, channel: header.channel, establishedAtMs: nowMs,
                              send: keys.initiatorToResponder,
                              receive: keys.responderToInitiator, handshakeHash: keys.handshakeHash))
            self.peers[peer] = state
            return .success(.established(header))
        case .transport:
            // A session is bound to its handshake's channel: another channel's message is not for it.
            guard let index = self.peers[peer]?.sessions.firstIndex(where: {
                $0.id == header.sessionID && $0.channel == header.channel
                    && nowMs &- $0.establishedAtMs < Self.eraseAfterMs
            })
            else { return .failure(.noSession) }
            // No sender uses a counter at or past `reject_after` (§7.4): not tried.
            guard header.counter < Self.rejectAfterMessages,
                let opened = Self.open(envelope, with: self.peers[peer]!.sessions[index].receive)
            else { return .failure(.openFailed) }
            self.peers[peer]!.sessions[index].receive = opened.cipher
            // Every v2 sender pads (§7.2): a plaintext that is not a whole number of blocks is refused (rule 9).
            guard !opened.plaintext.isEmpty, opened.plaintext.count % EnvelopePadding.blockSize == 0 else {
                return .failure(.malformedPlaintext)
            }
            return .success(.transport(header, plaintext: opened.plaintext))
        }
    }

    /// Opens a transport message under its epoch's key (§7.3): the newest or previous epoch held, or one up to
    /// `maxEpochsAhead` newer, derived and adopted only once the message opened.
    private static func open(_ envelope: SessionEnvelope, with cipher: ReceiveCipher)
        -> (plaintext: [UInt8], cipher: ReceiveCipher)?
    {
        let counter = envelope.header.counter
        guard counter < UInt64.max else { return nil }
        let epoch = counter >> Self.epochShift
        let ad = envelope.header.encoded()
        if epoch == cipher.newest.epoch || epoch == cipher.previous?.epoch {
            let key = epoch == cipher.newest.epoch ? cipher.newest.key : cipher.previous!.key
            guard let plaintext = try? Noise.decrypt(key: key, n: counter, ad: ad, ciphertext: envelope.body) else {
                return nil
            }
            return (plaintext, cipher)
        }
        guard epoch > cipher.newest.epoch, epoch - cipher.newest.epoch <= Self.maxEpochsAhead else { return nil }
        var previous = cipher.newest.key
        var key = Noise.rekey(previous)
        for _ in 0..<(epoch - cipher.newest.epoch - 1) {
            previous = key
            key = Noise.rekey(key)
        }
        guard let plaintext = try? Noise.decrypt(key: key, n: counter, ad: ad, ciphertext: envelope.body) else {
            return nil
        }
        return (plaintext, ReceiveCipher(newest: (epoch, key), previous: (epoch - 1, previous)))
    }

    /// Makes a responder's session live (after the replay rule passed for its initiation).
    public mutating func commit(_ responder: Responder) {
        var state = self.peers[responder.peer] ?? PeerState()
        guard !state.uses(responder.session.id) else { return }
        state.add(responder.session)
        self.peers[responder.peer] = state
    }

    /// Erases sessions past `eraseAfterMs` and initiations past `handshakeTimeoutMs`; returns the peers whose
    /// initiation timed out (what waited on it fails).
    public mutating func sweep(nowMs: UInt64) -> [PublicKey] {
        var timedOut: [PublicKey] = []
        for (peer, var state) in self.peers {
            if let pending = state.pending, nowMs &- pending.startedAtMs >= Self.handshakeTimeoutMs {
                state.pending = nil
                timedOut.append(peer)
            }
            state.sessions.removeAll { nowMs &- $0.establishedAtMs >= Self.eraseAfterMs }
            self.peers[peer] = state.sessions.isEmpty && state.pending == nil ? nil : state
        }
        return timedOut
    }

    /// Abandons the initiation pending with `peer` (the relay refused it); its ephemeral is erased.
    public mutating func abandonInitiation(to peer: PublicKey) {
        self.peers[peer]?.pending = nil
    }

    /// Sessions held with `peer` (tests, metrics).
    public func sessionCount(with peer: PublicKey) -> Int { self.peers[peer]?.sessions.count ?? 0 }

    /// The handshake hashes of the sessions held with `peer`, oldest first (tests: both sides agree).
    public func handshakeHashes(with peer: PublicKey) -> [[UInt8]] {
        self.peers[peer]?.sessions.map(\.handshakeHash) ?? []
    }
}
