import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import HomebaseTransport
import Synchronization

/// The real `PeerMessenger`: seals messages into envelopes (Protocol/envelope.md), sends them through a
/// `RelayLink`, and opens what arrives, applying every receiver rule in order, with replay protection persisted
/// in the device's state database.
///
/// It speaks v2 (envelope.md §7) unless made v1-only: inference messages to a peer recorded at v2 go on a
/// session (`SessionTable`), made on demand with the messages held meanwhile; everything else is v1. The
/// protocol's rules live in `SessionTable` and `EnvelopeVersions`; this class draws randomness and time and moves
/// frames.
public final class RelayMessenger: PeerMessenger {
    public let publicKey: PublicKey
    public var inbound: InboundMessages { self.inboundQueue.messages }
    public let events: AsyncStream<MessengerEvent>
    /// What was handed on and not yet taken, bounded without loss: a message that does not fit is refused before
    /// its id is recorded or its frame acknowledged (`accept`).
    private let inboundQueue: InboundQueue
    private let eventsContinuation: AsyncStream<MessengerEvent>.Continuation
    private let key: SigningSecretKey
    private let seen: SeenMessageStore?
    private let relation: RelationLookup
    private let wallClock: @Sendable () -> UInt64
    private let logger: Logger
    private let receiver: EnvelopeReceiver
    private let state = Mutex(State())
    private let linkBox = Mutex<RelayLink?>(nil)
    /// Which connection problems were logged at info level (issue 39): once per cause, then on change.
    private let problemReport = Mutex(RelayProblemReport())
    private let inlineHandler = CallbackSlot<InboundMessage, Bool>()
    private let replayPruneInterval: Duration
    private let pruneTask = Mutex<Task<Void, Never>?>(nil)
    private let sweepTask = Mutex<Task<Void, Never>?>(nil)
    /// Whether this device speaks v2 (envelope.md §7); a v1-only messenger is what an older peer is.
    public let speaksV2: Bool
    /// Where the peers' envelope versions are kept across restarts (nil: in memory only).
    private let versionStore: PeerVersionStore?
    /// Message types whose stored frames are acknowledged once their handler settles them (`settle`), not as
    /// they are handed on (`InboundLedger`).
    private let settledTypes: Set<String>

    private struct State {
        var receipts = PendingReceipts<@Sendable (SendOutcome) -> Void>()
        var keys: [PublicKey: SymmetricKey] = [:]
        var drops: [String: Int] = [:]
        var maxPayload = RelayLimits().maxPayloadBytes
        /// The last SEND's round trip to its RECEIPT, ms (`relayRoundTripMs`).
        var roundTripMs: UInt64?
        /// Warnings of a full backlog: one per 10 s, not one per refused frame.
        var backlogWarnings = TokenBucket(ratePerSecond: 0.1, capacity: 1, nowMs: Posix.monotonicMs)
        /// Likewise for messages refused because the consumer is behind (`inbound_full`).
        var inboundWarnings = TokenBucket(ratePerSecond: 0.1, capacity: 1, nowMs: Posix.monotonicMs)
        /// v2 sessions (nil for a v1-only messenger, or a key that has no X25519 form). Taken out (`take()`) to
        /// be changed and put back, so its dictionary is never copied.
        var sessions: SessionTable?
        /// The highest envelope version each peer advertised or spoke (envelope.md §7.8).
        var versions = PeerVersionBook()
        /// v2 messages waiting for a handshake, per peer, in send order (at most `maxHeld` each).
        var held: [PublicKey: [Held]] = [:]
        var sessionCounts = SessionCounts()
        /// Messages of `settledTypes` handed on and not yet settled, with the frames to acknowledge when they are.
        var ledger = InboundLedger()
    }

    /// What went through v2 so far (tests, the bench, diagnostics).
    public struct SessionCounts: Equatable, Sendable {
        /// Handshakes completed as initiator and as responder.
        public var initiated = 0
        public var responded = 0
        /// Transport messages sealed and opened.
        public var sealed = 0
        public var opened = 0
    }

    public var sessionCounts: SessionCounts { self.state.withLock { $0.sessionCounts } }

    /// A v2 message waiting for its peer's session.
    private struct Held {
        var message: Message
        var channel: Channel
        var onReceipt: (@Sendable (SendOutcome) -> Void)?
    }

    /// envelope.md §7.5: held messages per peer.
    static let maxHeld = 64

    /// Messages handed on and not yet taken by the consumer. A consumer that far behind is stuck, not busy.
    public static let defaultInboundCapacity = 4096

    /// The drop reason of a message refused because the consumer has not taken what it was given
    /// (`inboundCapacity`); not an envelope rule, so not one of envelope.md §5's reasons.
    public static let inboundFullReason = "inbound_full"

    /// The drop reason of messages whose replay ids the state database could not record (they stay
    /// unacknowledged, so the relay delivers them again on the next connection).
    public static let storeErrorReason = "store_error"

    /// - Parameters:
    ///   - seen: the persisted replay set; nil keeps none (only for throwaway tools).
    ///   - relation: who a sender is to this device (roster, contacts), read per envelope.
    ///   - replayPruneInterval: how often replay records past the horizon are deleted while the messenger runs
    ///     (also at each login): a device that stays connected for weeks keeps only the records that can still
    ///     stop a replay, not every id up to the store's cap.
    ///   - settledTypes: message types whose effect is state the owner commits after `inbound` hands them over
    ///     (the Homebase's `InboundLedger.hostSettledTypes`): their frames are acknowledged only once the owner
    ///     calls `settle`, so a crash before the effect is committed does not lose them.
    ///   - inboundCapacity: messages handed on that the consumer has not taken yet, at most. Past it a stored frame
    ///     is left unacknowledged (the relay delivers it again on the next connection) and a live one is dropped,
    ///     both counted as `inbound_full`.
    public init(url: String, key: SigningSecretKey, seen: SeenMessageStore?, relation: @escaping RelationLookup,
                options: RelayLink.Options = RelayLink.Options(), logger: Logger,
                wallClock: @escaping @Sendable () -> UInt64 = { Posix.wallClockMs },
                replayPruneInterval: Duration = .seconds(3600), speaksV2: Bool = true,
                versionStore: PeerVersionStore? = nil, settledTypes: Set<String> = [],
                inboundCapacity: Int = RelayMessenger.defaultInboundCapacity) {
        self.publicKey = key.publicKey
        self.settledTypes = settledTypes
        self.speaksV2 = speaksV2
        self.versionStore = versionStore
        self.replayPruneInterval = replayPruneInterval
        self.key = key
        self.seen = seen
        self.relation = relation
        self.wallClock = wallClock
        self.logger = logger
        self.receiver = EnvelopeReceiver(selfKey: key.publicKey)
        self.inboundQueue = InboundQueue(capacity: inboundCapacity)
        (self.events, self.eventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        let link = RelayLink(url: url, key: key, options: options) { [weak self] event in self?.handle(event) }
        self.linkBox.withLock { $0 = link }
        if speaksV2 {
            let table = try? SessionTable(identity: key)
            let known = (try? versionStore?.all()) ?? []
            self.state.withLock { s in
                s.sessions = table
                for (peer, version) in known { s.versions.record(peer, version: version) }
            }
        }
    }

    public var envelopeVersions: [Int] { self.speaksV2 ? EnvelopeVersions.supported : [1] }

    public func recordEnvelopeVersions(_ versions: [Int]?, of peer: PublicKey) {
        guard self.speaksV2 else { return }
        self.raiseVersion(of: peer, to: EnvelopeVersions.highestCommon(versions))
    }

    /// Raises the record of `peer` (it only goes up), and keeps it when it went up.
    private func raiseVersion(of peer: PublicKey, to version: UInt8) {
        let raised = self.state.withLock { s -> Bool in
            let before = s.versions.version(of: peer)
            s.versions.record(peer, version: version)
            return s.versions.version(of: peer) > before
        }
        guard raised, let store = self.versionStore else { return }
        do { try store.raise(peer, to: version) } catch {
            self.logger.warning("Keeping a peer's envelope version failed", metadata: ["error": "\(error)"])
        }
    }

    /// The version inference messages to `peer` go in now (tests, diagnostics).
    public func envelopeVersion(for peer: PublicKey) -> UInt8 {
        self.state.withLock { $0.versions.version(of: peer) }
    }

    public func start() {
        self.link?.start()
        if self.speaksV2 {
            self.sweepTask.withLock { task in
                task?.cancel()
                // Once a second: handshakes time out after 10 s and sessions are erased after 11 minutes
                // (envelope.md §7.4); a second late is within both.
                task = Task { [weak self] in
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: .seconds(1)) } catch { return }
                        self?.sweepSessions()
                    }
                }
            }
        }
        guard self.seen != nil else { return }
        let interval = self.replayPruneInterval
        self.pruneTask.withLock { task in
            task?.cancel()
            task = Task { [weak self] in
                while !Task.isCancelled {
                    do { try await Task.sleep(for: interval) } catch { return }
                    self?.pruneReplayRecords()
                }
            }
        }
    }

    public func stop() {
        self.pruneTask.withLock { task in
            task?.cancel()
            task = nil
        }
        self.sweepTask.withLock { task in
            task?.cancel()
            task = nil
        }
        self.link?.stop()
        self.failPendingReceipts()
        self.inboundQueue.finish()
        self.eventsContinuation.finish()
    }

    private var link: RelayLink? { self.linkBox.withLock { $0 } }

    public func setInlineHandler(_ handler: (@Sendable (InboundMessage) -> Bool)?) {
        self.inlineHandler.set(handler)
    }

    public var isConnected: Bool { self.link?.isConnected ?? false }

    /// Why the relay cannot be used, from the last attempt's real result; nil while connected.
    public var connectProblem: RelayConnectProblem? { self.link?.problem }

    public var isSendPaced: Bool { self.link?.isPacing ?? false }

    /// Envelopes dropped so far, by reason (Protocol/envelope.md §5).
    public var dropCounts: [String: Int] { self.state.withLock { $0.drops } }

    public func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                     onReceipt: (@Sendable (SendOutcome) -> Void)?) {
        if self.speaksV2, EnvelopeVersions.isSessionMessage(message.type),
            self.state.withLock({ $0.versions.version(of: peer) }) >= 2
        {
            // Never downgraded: without a session the message waits for one or fails (envelope.md §7.8).
            return self.sendOnSession(message, to: peer, channel: channel, onReceipt: onReceipt)
        }
        // The SEND frame is built in one buffer: its fixed part, then the envelope sealed after it. Its send_id
        // is known only once the frame is sure to go, so it is set then.
        guard var frame = self.seal(message, to: peer, channel: channel, after: {
            RelayFrame.appendSendHead(sendID: 0, recipient: peer, flags: store ? SendFlags.store : 0, to: &$0)
        }) else {
            onReceipt?(.receipt(.payloadTooLarge))
            return
        }
        self.dispatch(&frame, onReceipt: onReceipt)
    }

    public var relayRoundTripMs: UInt64? { self.state.withLock { $0.roundTripMs } }

    /// Registers `onReceipt` (if any) under a send_id, sets it in the SEND frame, and enqueues the frame.
    private func dispatch(_ frame: inout [UInt8], onReceipt: (@Sendable (SendOutcome) -> Void)?) {
        let (sendID, evicted): (UInt32, (@Sendable (SendOutcome) -> Void)?) = self.state.withLock { s in
            guard let onReceipt else { return (0, nil) }
            // The receipt also times the relay's round trip, for the status page.
            let sentAt = Posix.monotonicMs
            return s.receipts.register { [weak self] outcome in
                if case .receipt = outcome {
                    let took = Posix.monotonicMs &- sentAt
                    self?.state.withLock { $0.roundTripMs = took }
                }
                onReceipt(outcome)
            }
        }
        evicted?(.notConnected)
        RelayFrame.setSendID(sendID, inEncodedSend: &frame)
        self.enqueue(frame, sendID: sendID)
    }

    /// Hands an encoded SEND frame, its send_id already set, to the link; a frame that cannot go fails its
    /// receipt callback.
    private func enqueue(_ frame: [UInt8], sendID: UInt32) {
        guard let link = self.link else { return self.failSend(sendID) }
        switch link.enqueue(encoded: frame) {
        case .queued:
            return
        case .backlogFull:
            let now = Posix.monotonicMs
            if self.state.withLock({ $0.backlogWarnings.take(1, nowMs: now) }) {
                self.logger.warning(
                    "The relay takes frames more slowly than they come; frames are refused until it catches up",
                    metadata: ["refused": "\(link.refusedFrames.load(ordering: .relaxed))"])
            }
            self.failSend(sendID)
        case .notConnected:
            self.failSend(sendID)
        }
    }

    /// A frame that did not go: its receipt callback, if any, hears `notConnected`.
    private func failSend(_ sendID: UInt32) {
        let cb = self.state.withLock { $0.receipts.complete(sendID) }
        cb?(.notConnected)
    }

    /// Seals one message: padded JSON, random message id and nonce, the e2e key for the peer. Nil when there
    /// is no key for `peer` or the envelope is larger than the relay takes.
    func seal(_ message: Message, to peer: PublicKey, channel: Channel) -> [UInt8]? {
        self.seal(message, to: peer, channel: channel, after: { _ in })
    }

    /// `seal(_:to:channel:)`'s envelope appended after what `writeHead` writes (at most a SEND frame's fixed
    /// part, which the buffer has room for); the relay's payload limit applies to the envelope.
    private func seal(_ message: Message, to peer: PublicKey, channel: Channel,
                      after writeHead: (inout [UInt8]) -> Void) -> [UInt8]? {
        guard let key = self.e2eKey(for: peer) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(RelayFrame.sendHeaderByteCount + EnvelopeHeader.byteCount
                            + EnvelopePadding.paddedCount(message.jsonCapacityHint) + EnvelopeHeader.tagByteCount)
        writeHead(&out)
        let headCount = out.count
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: EnvelopeHeader.messageIDByteCount
                                      + EnvelopeHeader.nonceByteCount) { random in
            // Both from the pool of public random bytes: no getrandom(2), and no array, per message.
            SecureRandom.fillPublic(random)
            let split = EnvelopeHeader.messageIDByteCount
            EnvelopeSealer.seal(
                channel: channel, sender: self.publicKey, recipient: peer,
                messageID: UnsafeBufferPointer(rebasing: random[..<split]), sentAtMs: self.wallClock(),
                nonce: UnsafeBufferPointer(rebasing: random[split...]), key: key, appendingTo: &out,
                plaintext: { message.appendJSON(to: &$0) })
        }
        let max = self.state.withLock { $0.maxPayload }
        return out.count - headCount <= max ? out : nil
    }

    private func e2eKey(for peer: PublicKey) -> SymmetricKey? {
        if let k = self.state.withLock({ $0.keys[peer] }) { return k }
        guard let k = try? E2E.deriveKey(selfSecret: self.key, peer: peer) else { return nil }
        self.state.withLock { s in
            if s.keys.count > 4096 { s.keys.removeAll() }  // bounded cache; keys are cheap to derive again
            s.keys[peer] = k
        }
        return k
    }

    // MARK: v2 sessions (envelope.md §7)

    /// An inference message to a v2 peer (§7.5): sealed on a session that may send, or held while one is made
    /// (initiating when none is under way). Always live (§7.6). Internal so a test can put another message type
    /// on a session, as another implementation may (§7.7: received, it is handled like a v1 one).
    func sendOnSession(_ message: Message, to peer: PublicKey, channel: Channel,
                               onReceipt: (@Sendable (SendOutcome) -> Void)?) {
        enum Next { case frame([UInt8]), held, tooLarge, refused }
        let now = self.wallClock()
        var initiation: [UInt8]?
        let next: Next = self.state.withLock { s in
            guard var table = s.sessions.take() else { return .refused }
            defer { s.sessions = table }
            let readiness = table.readiness(for: peer, nowMs: now)
            if case .ready(let rekeyDue) = readiness {
                if rekeyDue { initiation = Self.initiation(&table, to: peer, channel: channel, nowMs: now) }
                let frame = Self.sealOnSession(&table, message, to: peer, channel: channel, nowMs: now,
                                               maxPayload: s.maxPayload)
                if frame != nil { s.sessionCounts.sealed += 1 }
                return frame.map { .frame($0) } ?? .tooLarge
            }
            if readiness == .needsHandshake {
                initiation = Self.initiation(&table, to: peer, channel: channel, nowMs: now)
                guard initiation != nil else { return .refused }
            }
            var list = s.held[peer] ?? []
            guard list.count < Self.maxHeld else { return .refused }
            list.append(Held(message: message, channel: channel, onReceipt: onReceipt))
            s.held[peer] = list
            return .held
        }
        if var frame = initiation {
            self.dispatch(&frame) { [weak self] outcome in
                if outcome.isFailure { self?.abandonHandshake(with: peer, outcome: outcome) }
            }
        }
        switch next {
        case .frame(var frame): self.dispatch(&frame, onReceipt: onReceipt)
        case .held: break
        case .tooLarge: onReceipt?(.receipt(.payloadTooLarge))
        case .refused: onReceipt?(.notConnected)
        }
    }

    /// A SEND frame (live) carrying a new handshake initiation; nil when `peer` has no X25519 form.
    private static func initiation(_ table: inout SessionTable, to peer: PublicKey, channel: Channel,
                                   nowMs: UInt64) -> [UInt8]? {
        var out: [UInt8] = []
        RelayFrame.appendSendHead(sendID: 0, recipient: peer, flags: 0, to: &out)
        guard let envelope = try? table.initiate(
            to: peer, channel: channel, sessionID: SecureRandom.publicBytes(SessionEnvelopeHeader.sessionIDByteCount),
            ephemeral: .generate(), messageID: SecureRandom.publicBytes(EnvelopeHeader.messageIDByteCount),
            sentAtMs: nowMs, nowMs: nowMs)
        else { return nil }
        out += envelope
        return out
    }

    /// A SEND frame (live) carrying `message` on the newest session with `peer`; nil when none may send or the
    /// envelope is larger than the relay takes.
    private static func sealOnSession(_ table: inout SessionTable, _ message: Message, to peer: PublicKey,
                                      channel: Channel, nowMs: UInt64, maxPayload: Int) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(RelayFrame.sendHeaderByteCount + SessionEnvelopeHeader.byteCount
                            + EnvelopePadding.paddedCount(message.jsonCapacityHint) + EnvelopeHeader.tagByteCount)
        RelayFrame.appendSendHead(sendID: 0, recipient: peer, flags: 0, to: &out)
        let head = out.count
        guard table.sealTransport(
            to: peer, channel: channel, messageID: SecureRandom.publicBytes(EnvelopeHeader.messageIDByteCount),
            sentAtMs: nowMs, nowMs: nowMs, appendingTo: &out, plaintext: { message.appendJSON(to: &$0) })
        else { return nil }
        return out.count - head <= maxPayload ? out : nil
    }

    /// An initiation the relay refused: it is abandoned, and what waited on it fails with the relay's outcome
    /// (a client falls back as for RECEIPT 2, messages.md §2).
    private func abandonHandshake(with peer: PublicKey, outcome: SendOutcome) {
        let held = self.state.withLock { s -> [Held] in
            s.sessions?.abandonInitiation(to: peer)
            return s.held.removeValue(forKey: peer) ?? []
        }
        for h in held { h.onReceipt?(outcome) }
    }

    /// Erases expired sessions; messages held for a handshake that timed out fail as not connected.
    private func sweepSessions() {
        let now = self.wallClock()
        let failed = self.state.withLock { s -> [Held] in
            guard var table = s.sessions.take() else { return [] }
            let peers = table.sweep(nowMs: now)
            s.sessions = table
            return peers.flatMap { s.held.removeValue(forKey: $0) ?? [] }
        }
        for h in failed { h.onReceipt?(.notConnected) }
    }

    /// A session with `peer` is established: the held messages go on it, in order.
    private func flushHeld(to peer: PublicKey) {
        let now = self.wallClock()
        let (frames, failed) = self.state.withLock { s in
            var frames: [([UInt8], (@Sendable (SendOutcome) -> Void)?)] = []
            var failed: [(@Sendable (SendOutcome) -> Void)?] = []
            guard var table = s.sessions.take() else { return (frames, failed) }
            for h in s.held.removeValue(forKey: peer) ?? [] {
                if let frame = Self.sealOnSession(&table, h.message, to: peer, channel: h.channel, nowMs: now,
                                                  maxPayload: s.maxPayload) {
                    s.sessionCounts.sealed += 1
                    frames.append((frame, h.onReceipt))
                } else {
                    failed.append(h.onReceipt)
                }
            }
            s.sessions = table
            return (frames, failed)
        }
        for (frame, cb) in frames {
            var frame = frame
            self.dispatch(&frame, onReceipt: cb)
        }
        for cb in failed { cb?(.receipt(.payloadTooLarge)) }
    }

    /// A sibling or contact sent on a session this device does not hold (it restarted, or erased the session):
    /// a new handshake to it, unless one is under way or a session may send, so its next message finds a live
    /// session (§7.5). A stranger gets nothing, as always.
    private func initiateAfterLostSession(with peer: PublicKey, channel: Channel) {
        guard (try? self.receiver.checkSessionEntitlement(channel: channel, relation: self.relation(peer))) != nil
        else { return }
        let now = self.wallClock()
        let frame = self.state.withLock { s -> [UInt8]? in
            guard s.sessions?.readiness(for: peer, nowMs: now) == .needsHandshake, var table = s.sessions.take() else {
                return nil
            }
            defer { s.sessions = table }
            return Self.initiation(&table, to: peer, channel: channel, nowMs: now)
        }
        guard var frame else { return }
        self.dispatch(&frame, onReceipt: nil)
    }

    /// The replay rule for a handshake message (§7.6): its id recorded, false when seen before.
    private func recordHandshake(_ header: SessionEnvelopeHeader) -> Bool {
        guard let seen = self.seen else { return true }
        let entry = SeenMessageStore.Entry(sender: header.sender, messageID: header.messageID,
                                           sentAtMs: header.sentAtMs)
        return (try? seen.insertIfNew([entry]))?.first ?? false
    }

    /// The receiver rules of §7.7 for a v2 envelope. Handshake messages are handled here (a response is sent,
    /// held messages go); a transport message that passes comes back for the replay rule, like a v1 one.
    private func checkSession(_ payload: ArraySlice<UInt8>, from relaySender: PublicKey) -> InboundMessage? {
        let envelope: SessionEnvelope
        do { envelope = try SessionEnvelope(decoding: payload) } catch {
            self.drop(error, from: relaySender)
            return nil
        }
        let header = envelope.header
        let now = self.wallClock()
        do {
            try self.receiver.checkHeader(header.commonHeader, deliveredBy: relaySender, nowMs: now,
                                          expectedVersion: SessionEnvelopeHeader.version)
            if header.kind == .initiation {
                // Rule 8a: a sibling on sync_delta, a granted contact on contact; no stranger makes sessions.
                try self.receiver.checkSessionEntitlement(channel: header.channel, relation: self.relation(relaySender))
            }
        } catch {
            self.drop(error, from: relaySender)
            return nil
        }
        let result = self.state.withLock { s -> Result<SessionTable.Received, EnvelopeError> in
            guard var table = s.sessions.take() else { return .failure(.unknownVersion) }
            defer { s.sessions = table }
            return table.receive(envelope, nowMs: now, ephemeral: { .generate() },
                                 replyMessageID: { SecureRandom.publicBytes(EnvelopeHeader.messageIDByteCount) },
                                 replySentAtMs: now)
        }
        switch result {
        case .failure(let error):
            self.drop(error, from: relaySender)
            if error == .noSession, header.kind == .transport {
                self.initiateAfterLostSession(with: relaySender, channel: header.channel)
            }
            return nil
        case .success(.initiation(let responder)):
            guard self.recordHandshake(header) else {
                self.drop(.replay, from: relaySender)
                return nil
            }
            self.state.withLock { s in
                s.sessions?.commit(responder)
                s.sessionCounts.responded += 1
            }
            self.raiseVersion(of: relaySender, to: SessionEnvelopeHeader.version)
            var frame: [UInt8] = []
            RelayFrame.appendSendHead(sendID: 0, recipient: relaySender, flags: 0, to: &frame)
            frame += responder.reply
            self.dispatch(&frame, onReceipt: nil)
            return nil
        case .success(.established):
            _ = self.recordHandshake(header)
            self.state.withLock { $0.sessionCounts.initiated += 1 }
            self.raiseVersion(of: relaySender, to: SessionEnvelopeHeader.version)
            self.flushHeld(to: relaySender)
            return nil
        case .success(.transport(_, let plaintext)):
            self.state.withLock { $0.sessionCounts.opened += 1 }
            guard let message = try? Message(json: EnvelopePadding.unpad(plaintext)) else {
                self.drop(.malformedPlaintext, from: relaySender)
                return nil
            }
            do {
                try self.receiver.checkEntitlement(channel: header.channel, messageType: message.type,
                                                   relation: self.relation(relaySender))
            } catch {
                self.drop(error, from: relaySender)
                return nil
            }
            return InboundMessage(sender: relaySender, channel: header.channel, message: message,
                                  sentAtMs: header.sentAtMs, messageID: header.messageID)
        }
    }

    /// Deletes replay records older than the horizon: an envelope that old is dropped as expired before the
    /// replay check, so they can stop nothing.
    private func pruneReplayRecords() {
        guard let seen = self.seen else { return }
        do {
            let deleted = try seen.prune(olderThanMs: self.receiver.replayHorizonMs(nowMs: self.wallClock()))
            if deleted > 0 { self.logger.debug("Pruned replay records", metadata: ["deleted": "\(deleted)"]) }
        } catch {
            self.logger.warning("Pruning replay records failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Inbound

    private func handle(_ event: RelayLink.Event) {
        switch event {
        case .connected(let stored, let maxPayload):
            self.state.withLock { $0.maxPayload = maxPayload > 0 ? maxPayload : $0.maxPayload }
            self.logger.debug("Connected to relay", metadata: ["stored": "\(stored)"])
            if self.problemReport.withLock({ $0.connected() }) {
                self.logger.info("Connected to the relay again")
            }
            self.eventsContinuation.yield(.connected(stored: stored))
            self.pruneReplayRecords()
        case .disconnected(let code, let reason):
            self.logger.debug("Relay connection ended", metadata: ["close.code": code.map { "\($0)" } ?? "-",
                                                                   "reason": reason])
            if let problem = self.link?.problem, let fresh = self.problemReport.withLock({ $0.failed(problem) }) {
                self.logger.info("Cannot connect to the relay: \(fresh)")
            }
            self.failPendingReceipts()
            self.eventsContinuation.yield(.disconnected(closeCode: code))
        case .stopped(let reason):
            self.logger.debug("Relay link stopped", metadata: ["reason": reason])
            self.failPendingReceipts()
        case .frames(let frames):
            self.handle(frames)
        }
    }

    /// Frames received together: receipts at once; the delivered envelopes opened and checked, their ids
    /// recorded in one commit, then passed on, then acknowledged (those of `settledTypes` once settled).
    func handle(_ frames: [RelayFrame]) {
        var opened: [(message: InboundMessage, deliveryID: UInt64)] = []
        var acks: [UInt64] = []
        for frame in frames {
            switch frame {
            case .receipt(let sendID, let status):
                let cb = self.state.withLock { $0.receipts.complete(sendID) }
                cb?(.receipt(status))
            case .deliver(let sender, let deliveryID, let payload):
                if let message = self.checkDelivered(payload, from: sender) {
                    opened.append((message, deliveryID))
                } else if deliveryID != 0 {
                    // Dropped by a rule: acknowledged all the same, so a bad frame is not redelivered forever.
                    acks.append(deliveryID)
                }
            default:
                break
            }
        }
        acks += self.accept(opened)
        for id in acks { self.link?.enqueue(.ack(deliveryID: id)) }
    }

    public func settle(_ message: InboundMessage, durable: Bool) {
        guard self.settledTypes.contains(message.message.type) else { return }
        let key = InboundLedger.Key(sender: message.sender, messageID: message.messageID)
        let actions = self.state.withLock { $0.ledger.handled(key, durable: durable) }
        for action in actions {
            switch action {
            case .markSettled:
                do {
                    try self.seen?.markSettled([SeenMessageStore.Entry(
                        sender: message.sender, messageID: message.messageID, sentAtMs: message.sentAtMs)])
                } catch {
                    // Not acknowledged: the relay delivers it again on the next connection, and its unsettled id
                    // hands it on again.
                    self.logger.warning("Settling a message's replay id failed",
                                        metadata: ["error": "\(error)", "type": "\(message.message.type)"])
                    return
                }
            case .ack(let deliveryID):
                self.link?.enqueue(.ack(deliveryID: deliveryID))
            case .handOn, .dropReplay:
                break
            }
        }
    }

    private func failPendingReceipts() {
        let pending = self.state.withLock { s -> [@Sendable (SendOutcome) -> Void] in
            s.receipts.drain()
        }
        for cb in pending { cb(.notConnected) }
    }

    private func drop(_ error: EnvelopeError, from sender: PublicKey) {
        self.state.withLock { $0.drops[error.reason, default: 0] += 1 }
        self.logger.debug("Envelope dropped", metadata: ["reason": error.reason, "peer.pk": sender.short])
    }

    /// The receiver rules of Protocol/envelope.md §5, in order.
    func open(_ payload: ArraySlice<UInt8>, from relaySender: PublicKey) {
        if let message = self.checkDelivered(payload, from: relaySender) { _ = self.accept([(message, 0)]) }
    }

    /// The rules before the replay check for either version, by the envelope's first byte.
    private func checkDelivered(_ payload: ArraySlice<UInt8>, from sender: PublicKey) -> InboundMessage? {
        self.speaksV2 && payload.first == SessionEnvelopeHeader.version
            ? self.checkSession(payload, from: sender) : self.check(payload, from: sender)
    }

    /// The rules before the replay check (`EnvelopeReceiver.open`); nil (counted as a drop) when one fails.
    private func check(_ payload: ArraySlice<UInt8>, from relaySender: PublicKey) -> InboundMessage? {
        if payload.count > EnvelopeReceiver.maxStrangerEnvelopeBytes, self.relation(relaySender) == .stranger {
            self.drop(.notEntitled, from: relaySender)
            return nil
        }
        switch self.receiver.open(payload, deliveredBy: relaySender, nowMs: self.wallClock(),
                                  key: { self.e2eKey(for: $0) }, relation: { self.relation($0) }) {
        case .failure(let error):
            self.drop(error, from: relaySender)
            return nil
        case .success(let envelope):
            // Rule 12 of §7.7, before the replay rule so a refused message is not recorded.
            if self.speaksV2, EnvelopeVersions.isDowngrade(
                envelopeVersion: envelope.header.version, type: envelope.message.type,
                peerVersion: self.state.withLock({ $0.versions.version(of: relaySender) }))
            {
                self.drop(.downgrade, from: relaySender)
                return nil
            }
            return InboundMessage(
                sender: relaySender, channel: envelope.header.channel, message: envelope.message,
                sentAtMs: envelope.header.sentAtMs, messageID: envelope.header.messageID)
        }
    }

    /// The replay rule for checked envelopes, their ids recorded in one commit (written before anything is
    /// passed on or acknowledged, and synced as the store does it: `SeenMessageStore.syncsEveryCommit`); the
    /// fresh ones go to the inline handler, then to `inbound`, in order. Returns the frames to acknowledge now:
    /// those of `settledTypes` wait for `settle` (`InboundLedger` orders the steps). A store failure drops them
    /// all unacknowledged: passing on a message whose id could not be recorded would let it be replayed, and the
    /// relay delivers them again on the next connection.
    ///
    /// Each message needs a place in `inboundQueue` before anything is recorded: those past its room are refused
    /// here, unrecorded and unacknowledged (`inbound_full`), so a stored one comes again on the next connection.
    private func accept(_ all: [(message: InboundMessage, deliveryID: UInt64)]) -> [UInt64] {
        guard !all.isEmpty else { return [] }
        let room = self.inboundQueue.reserve(all.count)
        if room < all.count { self.refuseInboundFull(all[room...]) }
        let opened = all[..<room]
        guard !opened.isEmpty else { return [] }
        let awaits = opened.map { self.settledTypes.contains($0.message.message.type) }
        var records = Array(repeating: InboundLedger.Record.fresh, count: opened.count)
        if let seen = self.seen {
            let entries = zip(opened, awaits).map { item, awaits in
                SeenMessageStore.Entry(sender: item.message.sender, messageID: item.message.messageID,
                                       sentAtMs: item.message.sentAtMs, settled: !awaits)
            }
            guard let recorded = try? seen.record(entries) else {
                // Not a replay: the store failed. Counted as what it is (issue 38, defect 3).
                self.inboundQueue.release(opened.count)
                self.state.withLock { $0.drops[Self.storeErrorReason, default: 0] += opened.count }
                self.logger.warning("Recording replay ids failed; the messages stay unacknowledged",
                                    metadata: ["messages": "\(opened.count)"])
                return []
            }
            records = recorded
        }
        let steps = self.state.withLock { s in
            opened.indices.map { i in
                s.ledger.received(InboundLedger.Key(sender: opened[i].message.sender,
                                                    messageID: opened[i].message.messageID),
                                  deliveryID: opened[i].deliveryID, record: records[i],
                                  awaitsSettlement: awaits[i])
            }
        }
        let inline = self.inlineHandler.current
        var acks: [UInt64] = []
        for (item, actions) in zip(opened, steps) {
            // Its reserved place: taken by `inbound`, or given back.
            var placed = false
            defer { if !placed { self.inboundQueue.release() } }
            for action in actions {
                switch action {
                case .handOn:
                    let message = item.message
                    if self.speaksV2,
                        let versions = EnvelopeVersions.advertised(in: message.message, from: message.sender)
                    {
                        self.recordEnvelopeVersions(versions, of: message.sender)
                    }
                    if let inline, inline(message) { continue }
                    placed = true
                    self.inboundQueue.yield(message)
                case .dropReplay:
                    self.drop(.replay, from: item.message.sender)
                case .ack(let deliveryID):
                    acks.append(deliveryID)
                case .markSettled:
                    break
                }
            }
        }
        return acks
    }

    /// Messages with no place in `inboundQueue`: counted, logged (once per 10 s), neither recorded nor
    /// acknowledged.
    private func refuseInboundFull(_ refused: ArraySlice<(message: InboundMessage, deliveryID: UInt64)>) {
        let now = Posix.monotonicMs
        let warn = self.state.withLock { s -> Bool in
            s.drops[Self.inboundFullReason, default: 0] += refused.count
            return s.inboundWarnings.take(1, nowMs: now)
        }
        guard warn else { return }
        self.logger.warning(
            "Messages arrive faster than they are handled; refused until the handler catches up (stored ones come again on the next connection)",
            metadata: ["refused": "\(refused.count)", "waiting": "\(self.inboundQueue.count)"])
    }
}
