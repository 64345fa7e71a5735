/// The order in which a relay writes frames to one recipient's connection (Protocol/relay.md §5): stored frames
/// oldest first, and a live frame never before a stored frame that was sent to the recipient before it — "one
/// sender, one order" holds across the mailbox and the live path.
///
/// Pure: the connection (its I/O) tells it what happened and does what it answers. STOREs routed to the recipient
/// while it is connected are numbered 1, 2, … as they are issued (`storeIssued`); each is later committed with its
/// delivery id, or refused (`storeCompleted`). A live frame may be written at once only when READY is out, nothing
/// is held, every STORE issued before it is complete and every committed one has been written (`canWriteLiveNow`);
/// otherwise it is held (`hold`) behind the STORE number issued last, and released (`releasable`) once that STORE
/// and all before it are complete and their frames written. Stored frames come from the mailbox a page at a time
/// after the cursor (`requestDrain`, `pageStarted`, `delivered`, `pageFinished`); one page is read at a time.
public struct RelayDeliveryOrder: Sendable {
    /// The highest delivery id written on this connection: the next page is read after it.
    public private(set) var cursor: UInt64 = 0
    /// READY has been written: frames may follow.
    public private(set) var readySent = false
    /// A mailbox read (the READY count or a page) is in flight. True from the start: the READY count is read first.
    public private(set) var isDraining = true
    /// Another page is wanted once the read in flight is handled (or the backlog has drained).
    public private(set) var wantsDrain = false
    /// STOREs issued to this recipient while connected, numbered from 1.
    private var storeSeq = 0
    /// Every STORE numbered up to this is complete (committed or refused).
    private var completedThrough = 0
    /// STORE numbers completed before an earlier one (announced by another edge of a fleet).
    private var completedAhead: Set<Int> = []
    /// Committed STOREs as (number, delivery id), kept while a held live frame may depend on them; the newest
    /// is always kept, for `canWriteLiveNow`.
    private var storedPairs: [(seq: Int, id: UInt64)] = []
    /// Live frames held behind STOREs: the last STORE number issued before each, and its framed bytes.
    private var held: [(afterSeq: Int, frame: [UInt8])] = []
    private var heldHead = 0
    /// Bytes in `held`, counted in the connection's queue.
    public private(set) var heldBytes = 0

    public init() {}

    /// STOREs issued and not complete yet.
    public var storesInFlight: Int { self.storeSeq - self.completedThrough }

    /// Live frames held now.
    public var heldCount: Int { self.held.count - self.heldHead }

    // MARK: Events

    /// READY went out announcing `stored` frames: the delivery id after which the first page is to be read, or
    /// nil when there is nothing to read now (then write `releasable()`).
    public mutating func readyWritten(stored: Int, backlogged: Bool) -> UInt64? {
        self.readySent = true
        self.isDraining = false
        // A store notice that came before READY asked for a page too.
        guard stored > 0 || self.wantsDrain else { return nil }
        return self.requestDrain(backlogged: backlogged)
    }

    /// A STORE to this recipient is issued while it is connected: its number, to hand back to `storeCompleted`.
    public mutating func storeIssued() -> Int {
        self.storeSeq += 1
        return self.storeSeq
    }

    /// STORE `seq` is complete: committed at `deliveryID`, or refused (nil). Completions of STOREs made here come
    /// in order (the mailbox worker is FIFO).
    public mutating func storeCompleted(seq: Int, deliveryID: UInt64?) {
        self.completedThrough = max(self.completedThrough, seq)
        while self.completedAhead.remove(self.completedThrough + 1) != nil { self.completedThrough += 1 }
        if let deliveryID { self.storedPairs.append((seq, max(deliveryID, self.storedPairs.last?.id ?? 0))) }
    }

    /// Another edge committed a STORE for this recipient at `deliveryID`: it takes the next number, already
    /// complete, so live frames arriving after it wait for its delivery as for a STORE made here.
    public mutating func storeAnnounced(deliveryID: UInt64) {
        self.storeSeq += 1
        if self.completedThrough == self.storeSeq - 1 {
            self.completedThrough = self.storeSeq
        } else {
            self.completedAhead.insert(self.storeSeq)
        }
        self.storedPairs.append((self.storeSeq, max(deliveryID, self.storedPairs.last?.id ?? 0)))
    }

    /// Whether a live frame may be written now rather than held: READY is out, nothing is held, and every STORE
    /// issued before it is complete and delivered.
    public var canWriteLiveNow: Bool {
        self.readySent && self.heldCount == 0 && self.storesInFlight == 0
            && self.cursor >= (self.storedPairs.last?.id ?? 0)
    }

    /// A live frame that may not be written now (`canWriteLiveNow` is false), held behind the STOREs issued so far.
    public mutating func hold(_ frame: [UInt8]) {
        self.heldBytes += frame.count
        self.held.append((self.storeSeq, frame))
    }

    /// Held live frames whose preceding STOREs are all complete and written, in order, now to be written.
    public mutating func releasable() -> [[UInt8]] {
        var out: [[UInt8]] = []
        while self.heldHead < self.held.count, self.mayRelease(afterSeq: self.held[self.heldHead].afterSeq) {
            out.append(self.held[self.heldHead].frame)
            self.heldBytes -= self.held[self.heldHead].frame.count
            self.held[self.heldHead].frame = []
            self.heldHead += 1
        }
        if self.heldHead == self.held.count {
            self.held.removeAll(keepingCapacity: true)
            self.heldHead = 0
        } else if self.heldHead >= 64, self.heldHead * 2 >= self.held.count {
            self.held.removeFirst(self.heldHead)
            self.heldHead = 0
        }
        // Committed STORE numbers no held frame depends on any more are forgotten (the newest stays).
        let oldestNeeded = self.heldHead < self.held.count ? self.held[self.heldHead].afterSeq : self.completedThrough
        if self.storedPairs.count > 1, let cut = self.storedPairs.lastIndex(where: { $0.seq <= oldestNeeded }), cut > 0 {
            self.storedPairs.removeFirst(cut)
        }
        return out
    }

    /// Stored frames are wanted (a STORE committed, a notice, the writer caught up): the delivery id to read the
    /// next page after, or nil when a read is in flight, the connection's backlog is over its mark, or READY is
    /// not out yet (each remembers the wish: `wantsDrain`).
    public mutating func requestDrain(backlogged: Bool) -> UInt64? {
        guard self.readySent, !self.isDraining, !backlogged else {
            self.wantsDrain = true
            return nil
        }
        self.isDraining = true
        self.wantsDrain = false
        return self.cursor
    }

    /// The connection's backlog went down: the page to read, if one was wanted and none is in flight.
    public mutating func writable(backlogged: Bool) -> UInt64? {
        guard self.readySent, !self.isDraining, self.wantsDrain else { return nil }
        return self.requestDrain(backlogged: backlogged)
    }

    /// A page read came back; its frames follow through `delivered`, then `pageFinished`.
    public mutating func pageStarted() {
        self.isDraining = false
    }

    /// Stored frame `deliveryID` of the page was written: the held live frames that may follow it now.
    public mutating func delivered(_ deliveryID: UInt64) -> [[UInt8]] {
        self.cursor = deliveryID
        return self.heldCount == 0 ? [] : self.releasable()
    }

    /// The page stopped early because the connection's queue is over its mark: read on from the cursor later.
    public mutating func pageCut() {
        self.wantsDrain = true
    }

    /// The page is written (`full`: it had as many frames as a page holds): the delivery id to read the next page
    /// after, or nil. Write `releasable()` first.
    public mutating func pageFinished(full: Bool, backlogged: Bool) -> UInt64? {
        guard full || self.wantsDrain else { return nil }
        self.wantsDrain = false
        return self.requestDrain(backlogged: backlogged)
    }

    private func mayRelease(afterSeq seq: Int) -> Bool {
        guard self.readySent, self.completedThrough >= seq else { return false }
        let needed = self.storedPairs.last(where: { $0.seq <= seq })?.id ?? 0
        return self.cursor >= needed
    }
}

/// The sender's side of the same order on a relay fleet: a live frame to a key held on another edge must not pass
/// a STORE its sender made before it, so it waits until every STORE issued before it is complete (committed or
/// refused). Bounded: past `maxHeldBytes` a frame is refused (not delivered, which a client sends again).
public struct FleetSendOrder<Frame>: Sendable where Frame: Sendable {
    public enum Decision: Equatable, Sendable {
        /// Nothing is in flight: send it now.
        case sendNow
        /// Held behind the STOREs in flight (`storeCompleted` releases it).
        case held
        /// Held frames are at their bound: refuse it.
        case refused
    }

    public let maxHeldBytes: Int
    private var issued = 0
    private var done = 0
    private var held: [(afterStore: Int, frame: Frame, bytes: Int)] = []
    /// Payload bytes held now.
    public private(set) var heldBytes = 0

    public init(maxHeldBytes: Int) {
        self.maxHeldBytes = maxHeldBytes
    }

    public var heldCount: Int { self.held.count }

    /// The sender issued a STORE.
    public mutating func storeIssued() {
        self.issued += 1
    }

    /// A live frame of `bytes` payload bytes: to send now, held (kept here), or refused. `frame` is made only
    /// when it is held (the common case sends at once and copies nothing).
    public mutating func live(_ frame: @autoclosure () -> Frame, bytes: Int) -> Decision {
        guard self.issued > self.done else { return .sendNow }
        guard self.heldBytes + bytes <= self.maxHeldBytes else { return .refused }
        self.heldBytes += bytes
        self.held.append((self.issued, frame(), bytes))
        return .held
    }

    /// One of the sender's STOREs is complete (they complete in order): the held frames that may go now, in order.
    public mutating func storeCompleted() -> [Frame] {
        self.done += 1
        var released = 0
        while released < self.held.count, self.held[released].afterStore <= self.done { released += 1 }
        guard released > 0 else { return [] }
        let out = self.held[..<released].map(\.frame)
        self.heldBytes -= self.held[..<released].reduce(0) { $0 + $1.bytes }
        self.held.removeFirst(released)
        return out
    }
}
