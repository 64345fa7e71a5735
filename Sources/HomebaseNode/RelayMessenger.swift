import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import HomebaseTransport
import Synchronization

/// The real `PeerMessenger`: seals messages into envelopes (Protocol/envelope.md), sends them through a
/// `RelayLink`, and opens what arrives, applying every receiver rule in order, with replay protection persisted
/// in the device's state database.
public final class RelayMessenger: PeerMessenger {
    public let publicKey: PublicKey
    public let inbound: AsyncStream<InboundMessage>
    public let events: AsyncStream<MessengerEvent>
    private let inboundContinuation: AsyncStream<InboundMessage>.Continuation
    private let eventsContinuation: AsyncStream<MessengerEvent>.Continuation
    private let key: SigningSecretKey
    private let seen: SeenMessageStore?
    private let relation: RelationLookup
    private let wallClock: @Sendable () -> UInt64
    private let logger: Logger
    private let receiver: EnvelopeReceiver
    private let state = Mutex(State())
    private let linkBox = Mutex<RelayLink?>(nil)
    private let inlineHandler = CallbackSlot<InboundMessage, Bool>()
    private let replayPruneInterval: Duration
    private let pruneTask = Mutex<Task<Void, Never>?>(nil)

    private struct State {
        var receipts = PendingReceipts<@Sendable (SendOutcome) -> Void>()
        var keys: [PublicKey: SymmetricKey] = [:]
        var drops: [String: Int] = [:]
        var maxPayload = RelayLimits().maxPayloadBytes
        /// Warnings of a full backlog: one per 10 s, not one per refused frame.
        var backlogWarnings = TokenBucket(ratePerSecond: 0.1, capacity: 1, nowMs: Posix.monotonicMs)
    }

    /// - Parameters:
    ///   - seen: the persisted replay set; nil keeps none (only for throwaway tools).
    ///   - relation: who a sender is to this device (roster, contacts), read per envelope.
    ///   - replayPruneInterval: how often replay records past the horizon are deleted while the messenger runs
    ///     (also at each login): a device that stays connected for weeks keeps only the records that can still
    ///     stop a replay, not every id up to the store's cap.
    public init(url: String, key: SigningSecretKey, seen: SeenMessageStore?, relation: @escaping RelationLookup,
                options: RelayLink.Options = RelayLink.Options(), logger: Logger,
                wallClock: @escaping @Sendable () -> UInt64 = { Posix.wallClockMs },
                replayPruneInterval: Duration = .seconds(3600)) {
        self.publicKey = key.publicKey
        self.replayPruneInterval = replayPruneInterval
        self.key = key
        self.seen = seen
        self.relation = relation
        self.wallClock = wallClock
        self.logger = logger
        self.receiver = EnvelopeReceiver(selfKey: key.publicKey)
        (self.inbound, self.inboundContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(4096))
        (self.events, self.eventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        let link = RelayLink(url: url, key: key, options: options) { [weak self] event in self?.handle(event) }
        self.linkBox.withLock { $0 = link }
    }

    public func start() {
        self.link?.start()
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
        self.link?.stop()
        self.failPendingReceipts()
        self.inboundContinuation.finish()
        self.eventsContinuation.finish()
    }

    private var link: RelayLink? { self.linkBox.withLock { $0 } }

    public func setInlineHandler(_ handler: (@Sendable (InboundMessage) -> Bool)?) {
        self.inlineHandler.set(handler)
    }

    public var isConnected: Bool { self.link?.isConnected ?? false }

    public var isSendPaced: Bool { self.link?.isPacing ?? false }

    /// Envelopes dropped so far, by reason (Protocol/envelope.md §5).
    public var dropCounts: [String: Int] { self.state.withLock { $0.drops } }

    public func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                     onReceipt: (@Sendable (SendOutcome) -> Void)?) {
        // The SEND frame is built in one buffer: its fixed part, then the envelope sealed after it. Its send_id
        // is known only once the frame is sure to go, so it is set then.
        guard var frame = self.seal(message, to: peer, channel: channel, after: {
            RelayFrame.appendSendHead(sendID: 0, recipient: peer, flags: store ? SendFlags.store : 0, to: &$0)
        }) else {
            onReceipt?(.receipt(.payloadTooLarge))
            return
        }
        let (sendID, evicted): (UInt32, (@Sendable (SendOutcome) -> Void)?) = self.state.withLock { s in
            guard let onReceipt else { return (0, nil) }
            return s.receipts.register(onReceipt)
        }
        evicted?(.notConnected)
        RelayFrame.setSendID(sendID, inEncodedSend: &frame)
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
            self.eventsContinuation.yield(.connected(stored: stored))
            self.pruneReplayRecords()
        case .disconnected(let code, let reason):
            self.logger.debug("Relay connection ended", metadata: ["close.code": code.map { "\($0)" } ?? "-",
                                                                   "reason": reason])
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
    /// recorded in one commit, then passed on, then acknowledged.
    func handle(_ frames: [RelayFrame]) {
        var opened: [InboundMessage] = []
        var acks: [UInt64] = []
        for frame in frames {
            switch frame {
            case .receipt(let sendID, let status):
                let cb = self.state.withLock { $0.receipts.complete(sendID) }
                cb?(.receipt(status))
            case .deliver(let sender, let deliveryID, let payload):
                if let message = self.check(payload, from: sender) { opened.append(message) }
                // Acknowledge after handling, dropped or not, so a bad frame is not redelivered forever.
                if deliveryID != 0 { acks.append(deliveryID) }
            default:
                break
            }
        }
        self.accept(opened)
        for id in acks { self.link?.enqueue(.ack(deliveryID: id)) }
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
        if let message = self.check(payload, from: relaySender) { self.accept([message]) }
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
            return InboundMessage(
                sender: relaySender, channel: envelope.header.channel, message: envelope.message,
                sentAtMs: envelope.header.sentAtMs, messageID: envelope.header.messageID)
        }
    }

    /// The replay rule for checked envelopes, their ids recorded in one commit (written before anything is
    /// passed on or acknowledged, and synced as the store does it: `SeenMessageStore.syncsEveryCommit`); the
    /// fresh ones go to the inline handler, then to `inbound`, in order. A store failure drops them all: passing
    /// on a message whose id could not be recorded would let it be replayed.
    private func accept(_ opened: [InboundMessage]) {
        guard !opened.isEmpty else { return }
        var fresh = Array(repeating: true, count: opened.count)
        if let seen = self.seen {
            let entries = opened.map {
                SeenMessageStore.Entry(sender: $0.sender, messageID: $0.messageID, sentAtMs: $0.sentAtMs)
            }
            fresh = (try? seen.insertIfNew(entries)) ?? Array(repeating: false, count: opened.count)
        }
        let inline = self.inlineHandler.current
        for (item, isFresh) in zip(opened, fresh) {
            if isFresh {
                if let inline, inline(item) { continue }
                self.inboundContinuation.yield(item)
            } else {
                self.drop(.replay, from: item.sender)
            }
        }
    }
}
