import HomebaseCore

/// A frame held for a recipient who was offline (protocol-v1 §2, SEND flag STORE).
public struct StoredFrame: Sendable, Equatable {
    /// Non-zero, increasing and never reused: DELIVER carries it and ACK names it.
    public let deliveryID: UInt64
    /// The authenticated sender, reported in DELIVER.
    public let sender: PublicKey
    /// Opaque ciphertext, as received in SEND.
    public let payload: [UInt8]
    public let storedAtMs: UInt64
    /// The frame is gone (not delivered, deleted by `expire`) from this instant on.
    public let expiresAtMs: UInt64

    public init(deliveryID: UInt64, sender: PublicKey, payload: [UInt8], storedAtMs: UInt64, expiresAtMs: UInt64) {
        self.deliveryID = deliveryID
        self.sender = sender
        self.payload = payload
        self.storedAtMs = storedAtMs
        self.expiresAtMs = expiresAtMs
    }
}

/// Per-recipient mailbox bounds. Defaults are protocol-v1 §2's.
public struct MailboxLimits: Sendable, Equatable {
    /// Stored frames per recipient; one more gives RECEIPT status 3 (mailbox full).
    public var maxFrames: Int
    /// Stored payload bytes per recipient; a frame that would exceed it gives RECEIPT status 3.
    public var maxBytes: Int
    /// How long a frame waits for its recipient before it is deleted unread.
    public var lifetimeMs: UInt64

    public init(maxFrames: Int = 1_000, maxBytes: Int = 16 * 1024 * 1024, lifetimeMs: UInt64 = 7 * 24 * 3_600 * 1_000) {
        precondition(maxFrames >= 0 && maxBytes >= 0, "mailbox limits cannot be negative")
        self.maxFrames = maxFrames
        self.maxBytes = maxBytes
        self.lifetimeMs = lifetimeMs
    }
}

/// What `Mailbox.enqueue` did.
public enum MailboxEnqueueResult: Sendable, Equatable {
    /// Durably stored; the relay may now send RECEIPT status 1.
    case stored(deliveryID: UInt64)
    /// The recipient's mailbox holds `maxFrames` frames or the payload would take it past `maxBytes`
    /// (after dropping its expired frames): RECEIPT status 3, nothing stored.
    case mailboxFull
    /// A backend that lives elsewhere (JetStream) could not confirm the frame stored (it is down, or did not
    /// answer in time): the relay answers RECEIPT 2 and the sender tries again or falls back. The frame may
    /// still have been stored; a second copy is dropped by the receiver as a replay (envelope.md §5).
    case unavailable(String)
}

/// The relay's store-and-forward queues, one per recipient (protocol-v1 §2).
///
/// A small interface so that a different backend (NATS JetStream, say) can replace SQLite. Semantics every
/// implementation keeps, checked by the shared test suite against `MemoryMailbox` and `SQLiteMailbox`:
/// delivery ids are non-zero, increasing and never reused across recipients; a frame is expired when
/// `nowMs >= expiresAtMs` (= `storedAtMs + limits.lifetimeMs`); expired frames are never returned and
/// do not keep a mailbox full.
public protocol Mailbox: Sendable {
    /// Stores a frame for `recipient`. Durable when it returns (the caller sends RECEIPT 1 only after).
    func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64) throws
        -> MailboxEnqueueResult
    /// Oldest first, deliveryID ascending, excluding expired, at most `limit`, only those with deliveryID > after.
    func pending(recipient: PublicKey, after: UInt64, limit: Int, nowMs: UInt64) throws -> [StoredFrame]
    /// Deletes one frame; false if it was not there (double ACK, or an id of another recipient).
    func acknowledge(recipient: PublicKey, deliveryID: UInt64) throws -> Bool
    /// Deletes several frames at once, as `acknowledge` would one by one, in one write that need not be synced:
    /// an acknowledgement lost to a power cut only means a frame delivered again, which receivers drop as a
    /// replay. (One synced transaction per ACK let a client storing frames to itself and acknowledging each keep
    /// the mailbox busy with fsyncs while every other STORE waited behind them.)
    func acknowledgeBatch(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws
    /// Frames and payload bytes held for `recipient`, expired-but-not-yet-swept ones included.
    func depth(recipient: PublicKey) throws -> (frames: Int, bytes: Int)
    /// Deletes frames past their lifetime; returns how many.
    func expire(nowMs: UInt64) throws -> Int
    /// Totals over all recipients, for `/metrics`; `mailboxes` counts recipients holding at least one frame.
    func totalDepth() throws -> (frames: Int, bytes: Int, mailboxes: Int)
    /// Stores several frames at once (group commit: one durable write for all of them). Results are in the
    /// order of `items`; each is what `enqueue` would have returned at that point. Durable when it returns.
    func enqueueBatch(_ items: [MailboxItem], nowMs: UInt64) throws -> [MailboxEnqueueResult]
    /// Frames `pending` would return for `recipient` (expired ones excluded): READY's `stored` count.
    func pendingCount(recipient: PublicKey, nowMs: UInt64) throws -> Int
}

/// One frame to store with `enqueueBatch`.
public struct MailboxItem: Sendable, Equatable {
    public var recipient: PublicKey
    public var sender: PublicKey
    public var payload: [UInt8]
    public init(recipient: PublicKey, sender: PublicKey, payload: [UInt8]) {
        self.recipient = recipient
        self.sender = sender
        self.payload = payload
    }
}

extension Mailbox {
    public func acknowledgeBatch(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws {
        for a in acks { _ = try self.acknowledge(recipient: a.recipient, deliveryID: a.deliveryID) }
    }
}

extension MailboxLimits {
    /// Whether a mailbox at `depth` can take `payloadBytes` more. Full exactly when it would exceed a limit.
    func admits(frames: Int, bytes: Int, payloadBytes: Int) -> Bool {
        frames < self.maxFrames && bytes <= self.maxBytes && payloadBytes <= self.maxBytes - bytes
    }

    /// `storedAtMs + lifetimeMs`, saturated at `Int64.max` so that every backend (SQLite integers are
    /// signed) reports the same value for an absurd lifetime instead of trapping.
    public func expiry(storedAtMs: UInt64) -> UInt64 {
        let (sum, overflow) = storedAtMs.addingReportingOverflow(self.lifetimeMs)
        return overflow ? UInt64(Int64.max) : min(sum, UInt64(Int64.max))
    }
}
