import Foundation
import HomebaseCore
import HomebaseStore
import Synchronization

/// The relay's mailbox in a NATS JetStream stream, shared by every edge of a fleet (README, "Relay fleet").
///
/// One stream (file storage, `replicas` copies) with one subject per recipient (`hb.mbox.<key>`); the stream
/// sequence is the delivery id, so ids are non-zero, increasing and never reused, across every edge. The server
/// enforces the frame limit per recipient exactly (`max_msgs_per_subject`, new messages refused: RECEIPT 3) and
/// the lifetime (`max_age`). Stored frames are read with `STREAM.MSG.GET` (`next_by_subj` from the cursor),
/// answered by the stream leader, so a frame acknowledged through one edge is never served again by another.
/// A client's ACK deletes the message, so it is delivered again on every connection until acknowledged.
///
/// The byte limit per recipient has no JetStream counterpart: each edge counts the bytes it has seen stored
/// for a recipient (counted from the stream on first use, recounted before it refuses), so concurrent STOREs
/// to one recipient through several edges can pass 16 MiB by what the other edges stored since this edge last
/// counted; one edge alone keeps it exactly.
///
/// Every call blocks its thread (the relay's mailbox worker) on request/reply round trips; a batch of STOREs
/// is published at once and its acknowledgements awaited together.
public final class JetStreamMailbox: Mailbox, @unchecked Sendable {
    public let stream: String
    private let bus: FleetBus
    private let limits: MailboxLimits
    private let apiTimeoutMs: UInt64 = 5_000
    /// Frames this edge handed out and their recipient and size: an ACK is checked against it without a round
    /// trip. Bounded; an id not here is checked with the stream.
    private let handedOut = Mutex([UInt64: (recipient: PublicKey, bytes: Int)]())
    private let tallies = Mutex([PublicKey: Int]())
    static let maxRemembered = 200_000

    /// Connects the mailbox to `stream`, creating it (or updating its limits) first. JetStream that does not
    /// answer yet (a cluster electing its meta leader, a node restarting beside this edge) is asked again with a
    /// growing pause until `startupDeadlineMs` has passed; `waiting` hears each refusal. An answer that refuses the
    /// stream is final at once.
    public init(bus: FleetBus, stream: String = "HOMEBASE_MAILBOX", limits: MailboxLimits, replicas: Int,
                maxPayloadBytes: Int, startupDeadlineMs: UInt64 = 30_000,
                waiting: (String) -> Void = { _ in }) throws
    {
        self.bus = bus
        self.stream = stream
        self.limits = limits
        let config = JetStreamWire.StreamConfig(
            name: stream, subjects: [FleetSubjects.mailboxWildcard], maxMessagesPerSubject: limits.maxFrames,
            maxAgeMs: limits.lifetimeMs, maxMessageBytes: maxPayloadBytes + FleetStoredFrame.headerBytes + 1_024,
            replicas: replicas)
        let start = ContinuousClock.now
        var pauseMs: UInt64 = 100
        while true {
            do {
                var result = try self.api("CREATE", config.json())
                if case .failure(let e) = result, e.errCode == 10058 {  // name in use: keep it, update limits
                    result = try self.api("UPDATE", config.json())
                }
                if case .failure(let e) = result { throw NatsError("cannot create the mailbox stream \(stream): \(e)") }
                return
            } catch let e as JetStreamUnanswered {
                let elapsedMs = UInt64((ContinuousClock.now - start) / .milliseconds(1))
                guard elapsedMs + pauseMs < startupDeadlineMs else {
                    throw NatsError("\(e.message) (asked for \(elapsedMs) ms)")
                }
                waiting(e.message)
                Thread.sleep(forTimeInterval: Double(pauseMs) / 1000)
                pauseMs = min(pauseMs * 2, 2_000)
            }
        }
    }

    /// JetStream did not answer at all (no responders, or no answer in time): worth asking again at startup.
    struct JetStreamUnanswered: Error, CustomStringConvertible {
        let message: String
        var description: String { self.message }
    }

    private func api(_ verb: String, _ body: [UInt8]) throws -> Result<[UInt8], JetStreamWire.APIError> {
        switch self.bus.requestSync("$JS.API.STREAM.\(verb).\(self.stream)", body, kind: .jetStreamAPI,
                                    timeoutMs: self.apiTimeoutMs)
        {
        case .reply(let bytes):
            if case .failure(let e) = JetStreamWire.parse(bytes) { return .failure(e) }
            return .success(bytes)
        case .noResponders: throw JetStreamUnanswered(message: "JetStream is not available (no responders for STREAM.\(verb))")
        case .timedOut:
            throw JetStreamUnanswered(message: "JetStream did not answer STREAM.\(verb) within \(self.apiTimeoutMs) ms")
        case .failed(let why): throw NatsError(why)
        }
    }

    // MARK: Mailbox

    public func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64) throws
        -> MailboxEnqueueResult
    {
        try self.enqueueBatch([MailboxItem(recipient: recipient, sender: sender, payload: payload)], nowMs: nowMs)[0]
    }

    public func enqueueBatch(_ items: [MailboxItem], nowMs: UInt64) throws -> [MailboxEnqueueResult] {
        var results = [MailboxEnqueueResult?](repeating: nil, count: items.count)
        var publishes: [(index: Int, subject: String, data: [UInt8])] = []
        for (i, item) in items.enumerated() {
            guard try self.reserve(item.payload.count, for: item.recipient) else {
                results[i] = .mailboxFull
                continue
            }
            publishes.append((i, FleetSubjects.mailbox(item.recipient),
                              FleetStoredFrame.encode(sender: item.sender, storedAtMs: nowMs, payload: item.payload)))
        }
        let replies = self.bus.requestAll(publishes.map { ($0.subject, $0.data) }, kind: .jetStreamPublish,
                                          timeoutMs: self.apiTimeoutMs)
        for (p, reply) in zip(publishes, replies) {
            let item = items[p.index]
            switch reply {
            case .reply(let bytes):
                switch JetStreamWire.parsePublishAck(bytes) {
                case .success(let seq):
                    results[p.index] = .stored(deliveryID: seq)
                    continue
                case .failure(let e) where e.isSubjectFull:
                    results[p.index] = .mailboxFull
                case .failure(let e):
                    results[p.index] = .unavailable("\(e)")
                }
            case .noResponders: results[p.index] = .unavailable("JetStream is not available")
            case .timedOut: results[p.index] = .unavailable("JetStream did not acknowledge in time")
            case .failed(let why): results[p.index] = .unavailable(why)
            }
            self.release(item.payload.count, for: item.recipient)
        }
        return results.map { $0! }
    }

    /// Counts `bytes` against `recipient`'s byte limit; false (nothing counted) when they do not fit even after
    /// a recount from the stream.
    private func reserve(_ bytes: Int, for recipient: PublicKey) throws -> Bool {
        let known = self.tallies.withLock { $0[recipient] }
        var current = try known ?? self.count(recipient).bytes
        if !self.limits.admitsBytes(current, adding: bytes), known != nil {
            current = try self.count(recipient).bytes  // another edge may have delivered and deleted some
        }
        guard self.limits.admitsBytes(current, adding: bytes) else {
            self.tallies.withLock { $0[recipient] = current }
            return false
        }
        self.tallies.withLock { t in
            if t.count >= Self.maxRemembered { t.removeAll() }
            t[recipient] = current + bytes
        }
        return true
    }

    private func release(_ bytes: Int, for recipient: PublicKey) {
        self.tallies.withLock { t in if let n = t[recipient] { t[recipient] = max(0, n - bytes) } }
    }

    /// Frames and payload bytes held for `recipient`, read from the stream (one round trip per frame).
    private func count(_ recipient: PublicKey) throws -> (frames: Int, bytes: Int) {
        var frames = 0, bytes = 0, seq: UInt64 = 1
        while let m = try self.next(recipient, from: seq) {
            frames += 1
            bytes += max(0, m.data.count - FleetStoredFrame.headerBytes)
            seq = m.sequence + 1
        }
        return (frames, bytes)
    }

    /// The first message for `recipient` at or after `seq`, or nil.
    private func next(_ recipient: PublicKey, from seq: UInt64) throws -> JetStreamWire.Message? {
        let subject = FleetSubjects.mailbox(recipient)
        switch try self.api("MSG.GET", JetStreamWire.nextMessageRequest(from: seq, subject: subject)) {
        case .success(let bytes):
            return try JetStreamWire.parseNextMessage(bytes, from: seq, subject: subject).get()
        case .failure(let e) where e.isNotFound: return nil
        case .failure(let e): throw e
        }
    }

    public func pending(recipient: PublicKey, after: UInt64, limit: Int, nowMs: UInt64) throws -> [StoredFrame] {
        var out: [StoredFrame] = []
        var seq = after + 1
        while out.count < limit, let m = try self.next(recipient, from: seq) {
            seq = m.sequence + 1
            guard let f = FleetStoredFrame.decode(m.data) else { continue }  // not ours: never delivered
            let expires = self.limits.expiry(storedAtMs: f.storedAtMs)
            guard nowMs < expires else { continue }
            out.append(StoredFrame(deliveryID: m.sequence, sender: f.sender, payload: f.payload,
                                   storedAtMs: f.storedAtMs, expiresAtMs: expires))
        }
        self.handedOut.withLock { h in
            if h.count + out.count > Self.maxRemembered { h.removeAll() }
            for f in out { h[f.deliveryID] = (recipient, f.payload.count) }
        }
        return out
    }

    public func acknowledge(recipient: PublicKey, deliveryID: UInt64) throws -> Bool {
        try self.acknowledgeAll([(recipient, deliveryID)])[0]
    }

    public func acknowledgeBatch(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws {
        _ = try self.acknowledgeAll(acks)
    }

    /// Deletes the acknowledged frames that belong to their recipient, all requests at once.
    private func acknowledgeAll(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws -> [Bool] {
        var owned: [(index: Int, recipient: PublicKey, id: UInt64, bytes: Int)] = []
        for (i, a) in acks.enumerated() where a.deliveryID != 0 {
            if let known = self.handedOut.withLock({ $0[a.deliveryID] }) {
                if known.recipient == a.recipient { owned.append((i, a.recipient, a.deliveryID, known.bytes)) }
                continue
            }
            // Not handed out by this edge (it restarted, say): ask the stream whose it is.
            switch try self.api("MSG.GET", JetStreamWire.messageRequest(sequence: a.deliveryID)) {
            case .success(let bytes):
                let m = try JetStreamWire.parseMessage(bytes).get()
                if FleetSubjects.recipient(ofMailbox: m.subject) == a.recipient {
                    owned.append((i, a.recipient, a.deliveryID, max(0, m.data.count - FleetStoredFrame.headerBytes)))
                }
            case .failure: continue
            }
        }
        var done = [Bool](repeating: false, count: acks.count)
        let replies = self.bus.requestAll(
            owned.map { ("$JS.API.STREAM.MSG.DELETE.\(self.stream)", JetStreamWire.deleteRequest(sequence: $0.id)) },
            kind: .jetStreamAPI, timeoutMs: self.apiTimeoutMs)
        for (o, reply) in zip(owned, replies) {
            self.handedOut.withLock { _ = $0.removeValue(forKey: o.id) }
            guard case .reply(let bytes) = reply, case .success = JetStreamWire.parseSuccess(bytes) else { continue }
            done[o.index] = true
            self.release(o.bytes, for: o.recipient)
        }
        return done
    }

    public func depth(recipient: PublicKey) throws -> (frames: Int, bytes: Int) { try self.count(recipient) }

    /// JetStream deletes frames past their lifetime itself (`max_age`); `pending` skips one the server has not
    /// reached yet.
    public func expire(nowMs: UInt64) throws -> Int { 0 }

    public func totalDepth() throws -> (frames: Int, bytes: Int, mailboxes: Int) {
        let s = try JetStreamWire.parseStreamInfo(try self.api("INFO", JetStreamWire.infoRequest(subjectsFilter: nil)).get()).get()
        return (s.messages, s.bytes, s.subjectCount)
    }

    public func pendingCount(recipient: PublicKey, nowMs: UInt64) throws -> Int {
        let subject = FleetSubjects.mailbox(recipient)
        let s = try JetStreamWire.parseStreamInfo(
            try self.api("INFO", JetStreamWire.infoRequest(subjectsFilter: subject)).get()).get()
        return s.subjects[subject] ?? 0
    }
}

extension MailboxLimits {
    /// Whether a mailbox holding `bytes` payload bytes can take `adding` more.
    func admitsBytes(_ bytes: Int, adding: Int) -> Bool { bytes <= self.maxBytes && adding <= self.maxBytes - bytes }
}
