import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// A guest's view of one host over a `RawRelayClient`: seals contact-channel envelopes itself and opens what the
/// host delivers with the receiver rules of Protocol/envelope.md §5, logging every message in arrival order.
/// Only the codecs and crypto are used, as any third-party guest would. Blocking; one thread at a time.
///
/// With `speaksV2`, inference messages go on a v2 session (envelope.md §7) once the host's signed grant or advert
/// said it speaks v2, and a v1 inference message from such a host is a `downgrade` drop; without, the guest is a
/// v1-only peer (and the host must serve it in v1).
final class HomebaseGuestSession {
    /// One message from the host, with the moment it was read.
    struct Received {
        var message: Message
        var at: ContinuousClock.Instant
    }

    let client: RawRelayClient
    let host: PublicKey
    private let key: SigningSecretKey
    private let e2e: SymmetricKey
    private let receiver: EnvelopeReceiver
    private var seenMessageIDs = Set<[UInt8]>()
    private var nextSendID: UInt32 = 1
    /// v2 sessions with the host (nil: this guest speaks v1 only).
    private var sessions: SessionTable?
    /// The highest envelope version the host advertised in a signed grant or advert, or spoke.
    private(set) var hostVersion: UInt8 = 1
    /// v2 traffic so far: handshakes completed, transport messages sent and opened.
    private(set) var handshakes = 0
    private(set) var sessionSent = 0
    private(set) var sessionOpened = 0
    private var handshakeDone = false

    /// Every message the host sent, in arrival order.
    private(set) var log: [Received] = []
    /// RECEIPT status by SEND id.
    private(set) var receipts: [UInt32: ReceiptStatus] = [:]
    /// Envelopes from the host that broke a receiver rule, by reason: a conforming host sends none.
    private(set) var drops: [String: Int] = [:]

    init(options: RelayCheckOptions, key: SigningSecretKey, host: PublicKey, speaksV2: Bool = true) throws {
        guard let e2e = try? E2E.deriveKey(selfSecret: key, peer: host) else {
            throw CheckFailure("no end-to-end key for host \(host.hex) (not a valid Ed25519 point)")
        }
        self.key = key
        self.host = host
        self.e2e = e2e
        self.receiver = EnvelopeReceiver(selfKey: key.publicKey)
        self.sessions = speaksV2 ? try SessionTable(identity: key) : nil
        self.client = try RawRelayClient.loggedIn(options, key: key)
    }

    var speaksV2: Bool { self.sessions != nil }

    var publicKey: PublicKey { self.key.publicKey }

    func close() { self.client.close() }

    // MARK: Sending

    /// Seals `message` for the host on the contact channel: padded JSON, fresh message id and nonce.
    func seal(_ message: Message) -> [UInt8] {
        let header = EnvelopeHeader(channel: .contact, sender: self.publicKey, recipient: self.host,
                                    messageID: SecureRandom.bytes(16), sentAtMs: Posix.wallClockMs,
                                    nonce: SecureRandom.bytes(24))
        return EnvelopeSealer.sealEncoded(header: header, unpaddedPlaintext: message.jsonBytes(), key: self.e2e)
    }

    /// Sends `message` (STORE when `store`) and returns the exact SEND payload: on a v2 session for an inference
    /// message when both sides speak v2 (always live then), in v1 otherwise.
    @discardableResult
    func send(_ message: Message, store: Bool) throws -> [UInt8] {
        if self.speaksV2, EnvelopeVersions.version(forSending: message.type, peerVersion: self.hostVersion) == 2 {
            let payload = try self.sealOnSession(message)
            try self.sendRaw(payload, store: false)
            return payload
        }
        let payload = self.seal(message)
        try self.sendRaw(payload, store: store)
        return payload
    }

    /// A transport envelope for `message`, making a session first when none may send: the initiation goes live
    /// and the response is awaited for up to 5 s (frames read meanwhile are handled as usual).
    private func sealOnSession(_ message: Message) throws -> [UInt8] {
        guard var table = self.sessions else { throw CheckFailure("this guest speaks v1 only") }
        if case .ready = table.readiness(for: self.host, nowMs: Posix.wallClockMs) {} else {
            try self.handshake()
            table = self.sessions!
        }
        var out: [UInt8] = []
        let now = Posix.wallClockMs
        guard table.sealTransport(to: self.host, channel: .contact, messageID: SecureRandom.bytes(16), sentAtMs: now,
                                  nowMs: now, appendingTo: &out, plaintext: { message.appendJSON(to: &$0) })
        else { throw CheckFailure("no v2 session with the host to send on") }
        self.sessions = table
        self.sessionSent += 1
        return out
    }

    /// Makes a v2 session with the host: the initiation, then the host's response within 5 s.
    func handshake() throws {
        guard var table = self.sessions else { throw CheckFailure("this guest speaks v1 only") }
        let now = Posix.wallClockMs
        let initiation = try table.initiate(
            to: self.host, channel: .contact, sessionID: SecureRandom.bytes(SessionEnvelopeHeader.sessionIDByteCount),
            ephemeral: .generate(), messageID: SecureRandom.bytes(16), sentAtMs: now, nowMs: now)
        self.sessions = table
        self.handshakeDone = false
        try self.sendRaw(initiation, store: false)
        guard try self.pump(timeout: .seconds(5), until: { self.handshakeDone }) else {
            throw CheckFailure("no handshake response (envelope.md §7.5) within 5 s of the initiation")
        }
    }

    /// Sends already sealed envelope bytes, unchanged.
    @discardableResult
    func sendRaw(_ payload: [UInt8], store: Bool) throws -> UInt32 {
        let id = self.nextSendID
        self.nextSendID &+= 1
        try self.client.send(.send(sendID: id, recipient: self.host, flags: store ? SendFlags.store : 0,
                                   payload: payload[...]))
        return id
    }

    // MARK: Receiving

    /// Reads frames until `condition` holds or `timeout` passes; true when it held.
    @discardableResult
    func pump(timeout: Duration, until condition: () -> Bool) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if condition() { return true }
            let left = deadline - .now
            if left <= .zero { return false }
            try self.readOne(timeout: left)
        }
    }

    /// Reads everything that arrives for `duration`.
    func linger(_ duration: Duration) throws {
        try self.pump(timeout: duration) { false }
    }

    /// Reads until nothing arrived for `quiet` (at most `limit`), so late stragglers of an earlier step do not
    /// count for the next one.
    func drain(quiet: Duration = .milliseconds(500), limit: Duration = .seconds(3)) throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let before = self.log.count
            try self.pump(timeout: min(quiet, deadline - .now)) { self.log.count > before }
            if self.log.count == before { return }
        }
    }

    private func readOne(timeout: Duration) throws {
        guard let frame = try self.client.nextOrNil(timeout: timeout) else { return }
        switch frame {
        case .receipt(let id, let status):
            self.receipts[id] = status
        case .deliver(let sender, let deliveryID, let payload):
            if sender == self.host { self.open(payload, sender: sender) }
            if deliveryID != 0 { try self.client.send(.ack(deliveryID: deliveryID)) }
        case .error(let code, let message):
            throw CheckFailure("relay sent ERROR \(code): \(message)")
        default:
            throw CheckFailure("relay sent an unexpected \(frame.type) frame")
        }
    }

    /// The receiver rules, in order; a violation is counted in `drops`, never logged as a message.
    private func open(_ payload: ArraySlice<UInt8>, sender: PublicKey) {
        if self.speaksV2, payload.first == SessionEnvelopeHeader.version { return self.openSession(payload, sender: sender) }
        // The host is this guest's contact; anyone else is a stranger (who may only ask to join).
        let host = self.host
        let e2e = self.e2e
        let opened = self.receiver.open(payload, deliveredBy: sender, nowMs: Posix.wallClockMs,
                                        key: { $0 == host ? e2e : nil },
                                        relation: { $0 == host ? .contact : .stranger })
        switch opened {
        case .failure(let error):
            self.drop(error.reason)
        case .success(let envelope):
            if self.speaksV2, EnvelopeVersions.isDowngrade(envelopeVersion: envelope.header.version,
                                                           type: envelope.message.type, peerVersion: self.hostVersion) {
                return self.drop(EnvelopeError.downgrade.reason)
            }
            guard self.seenMessageIDs.insert(envelope.header.messageID).inserted else { return self.drop("replay") }
            if let versions = EnvelopeVersions.advertised(in: envelope.message, from: sender) {
                self.hostVersion = max(self.hostVersion, EnvelopeVersions.highestCommon(versions))
            }
            self.log.append(Received(message: envelope.message, at: .now))
        }
    }

    /// The receiver rules of envelope.md §7.7 for a v2 envelope from the host.
    private func openSession(_ payload: ArraySlice<UInt8>, sender: PublicKey) {
        guard var table = self.sessions else { return }
        let envelope: SessionEnvelope
        do {
            envelope = try SessionEnvelope(decoding: payload)
            try self.receiver.checkHeader(envelope.header.commonHeader, deliveredBy: sender, nowMs: Posix.wallClockMs,
                                          expectedVersion: SessionEnvelopeHeader.version)
        } catch {
            return self.drop(error.reason)
        }
        let now = Posix.wallClockMs
        let result = table.receive(envelope, nowMs: now, ephemeral: { .generate() },
                                   replyMessageID: { SecureRandom.bytes(16) }, replySentAtMs: now)
        self.sessions = table
        switch result {
        case .failure(let error):
            self.drop(error.reason)
        case .success(.initiation(let responder)):
            guard self.seenMessageIDs.insert(envelope.header.messageID).inserted else { return self.drop("replay") }
            self.sessions?.commit(responder)
            self.hostVersion = 2
            try? self.sendRaw(responder.reply, store: false)
        case .success(.established):
            guard self.seenMessageIDs.insert(envelope.header.messageID).inserted else { return self.drop("replay") }
            self.hostVersion = 2
            self.handshakes += 1
            self.handshakeDone = true
        case .success(.transport(let header, let plaintext)):
            guard let message = try? Message(json: EnvelopePadding.unpad(plaintext)) else {
                return self.drop(EnvelopeError.malformedPlaintext.reason)
            }
            guard self.seenMessageIDs.insert(header.messageID).inserted else { return self.drop("replay") }
            self.sessionOpened += 1
            self.log.append(Received(message: message, at: .now))
        }
    }

    private func drop(_ reason: String) { self.drops[reason, default: 0] += 1 }

    /// `drops` as one phrase for failure reasons, or nil when nothing was dropped.
    var dropSummary: String? {
        self.drops.isEmpty ? nil : self.drops.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }
            .joined(separator: ", ")
    }

    // MARK: Views of the log

    /// The `infer.*` messages for `id` received at or after log index `from`, with their times.
    func inferMessages(id: String, from: Int = 0) -> [Received] {
        self.log[from...].filter { r in
            switch r.message {
            case .inferAccept(let a): a.id == id
            case .inferQueued(let q): q.id == id
            case .inferChunk(let c): c.id == id
            case .inferDone(let d): d.id == id
            case .inferError(let e): e.id == id
            default: false
            }
        }
    }

    /// Messages of wire `type` at or after log index `from`.
    func messages(ofType type: String, from: Int = 0) -> [Received] {
        self.log[from...].filter { $0.message.type == type }
    }
}

extension Message {
    /// True for `infer.done` and `infer.error`: nothing may follow them for the same id.
    var isInferTerminal: Bool {
        switch self {
        case .inferDone, .inferError: true
        default: false
        }
    }

    /// A short description for failure reasons.
    var brief: String {
        switch self {
        case .inferAccept: "infer.accept"
        case .inferQueued(let q): "infer.queued position \(q.position)"
        case .inferChunk(let c): "infer.chunk seq \(c.seq)\(c.reasoning.map { _ in " (reasoning)" } ?? "")"
        case .inferDone(let d): "infer.done (chunks \(d.chunks), \(d.finishReason))"
        case .inferError(let e): "infer.error \(e.code) (\(e.message))"
        default: self.type
        }
    }
}
