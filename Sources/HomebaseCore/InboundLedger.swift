/// When a receiver hands a delivered message on and when it acknowledges the stored frame to the relay
/// (Protocol/relay.md §5, envelope.md §5 rule 11): the order of those steps for each message, as actions for
/// the messenger to carry out.
///
/// Most messages are acted on as they are handed on (a request is served, a chunk shown): their replay id is
/// recorded, they are handed on, their frame is acknowledged. A message whose effect is state the receiver keeps
/// (the Homebase's `pair.request`, `contact.join`, `contact.leave`) is handled asynchronously, and a crash before
/// that state is committed must not lose it: the relay deletes a frame once acknowledged, and its replay id would
/// refuse a resend. So such a message's id is recorded *unsettled* (still before it is handed on: ids stay
/// durable before acting), its frame is acknowledged only when the handler says its effect is durable (or a
/// defined refusal final), and only then is the id marked settled. A redelivery finds one of two records:
/// - settled: the effect is durable, the crash came before the ACK went: dropped as a replay, and acknowledged;
/// - unsettled: the crash came before the effect: handed on again (the handler is idempotent for these
///   messages), acknowledged once handled.
///
/// Bounded: at most `capacity` messages wait for their handler; past that the oldest is forgotten. Its frame stays
/// unacknowledged, and the relay delivers it again on the next connection (its record is still unsettled).
public struct InboundLedger: Sendable {
    /// A message, by its sender and envelope `message_id`.
    public struct Key: Hashable, Sendable {
        public var sender: PublicKey
        public var messageID: [UInt8]
        public init(sender: PublicKey, messageID: [UInt8]) {
            self.sender = sender
            self.messageID = messageID
        }
    }

    /// What the replay store said when the id was recorded.
    public enum Record: Equatable, Sendable {
        /// Not seen before: recorded now.
        case fresh
        /// Recorded before, its effect never confirmed (a crash came between receipt and effect).
        case unsettled
        /// Recorded before and settled (or refused by the store's floor): a replay.
        case settled
    }

    /// One step for the messenger, in the order given.
    public enum Action: Equatable, Sendable {
        /// Pass the message to its handler.
        case handOn
        /// Drop it as a replay (envelope.md §5 rule 11).
        case dropReplay
        /// Mark its replay record settled; what follows it happens only once that is committed.
        case markSettled
        /// Acknowledge the stored frame (relay.md §5).
        case ack(deliveryID: UInt64)
    }

    /// The Homebase's messages whose effect is its own state (pairing, the guest list): acknowledged once settled.
    public static let hostSettledTypes: Set<String> = [
        MessageType.pairRequest, MessageType.contactJoin, MessageType.contactLeave,
    ]

    public let capacity: Int
    /// Messages handed on whose handler has not finished: the frames to acknowledge when it does (none for a
    /// live frame), and the order they came in (for eviction).
    private var waiting: [Key: (order: UInt64, deliveryIDs: [UInt64])] = [:]
    private var arrivals: [(order: UInt64, key: Key)] = []
    private var arrivalsHead = 0
    private var nextOrder: UInt64 = 0

    public init(capacity: Int = 4096) {
        precondition(capacity > 0, "the ledger needs room for a message")
        self.capacity = capacity
    }

    /// Messages waiting for their handler.
    public var waitingCount: Int { self.waiting.count }

    /// A delivered message that passed every rule before the replay check, and what the replay store said of
    /// its id (recorded settled unless `awaitsSettlement`). `deliveryID` 0 is a live frame (nothing to ACK).
    public mutating func received(_ key: Key, deliveryID: UInt64, record: Record, awaitsSettlement: Bool)
        -> [Action]
    {
        let ack: [Action] = deliveryID == 0 ? [] : [.ack(deliveryID: deliveryID)]
        guard awaitsSettlement else {
            // Acted on as it is handed on. An unsettled record cannot come from such a message's own receipt:
            // treated as the replay it is.
            return record == .fresh ? [.handOn] + ack : [.dropReplay] + ack
        }
        switch record {
        case .settled:
            return [.dropReplay] + ack
        case .fresh, .unsettled:
            if var entry = self.waiting[key] {
                // Delivered again while its handler runs (a reconnect meanwhile): one handling acknowledges both.
                if deliveryID != 0, !entry.deliveryIDs.contains(deliveryID) { entry.deliveryIDs.append(deliveryID) }
                self.waiting[key] = entry
                return []
            }
            if self.waiting.count >= self.capacity { self.evictOldest() }
            self.waiting[key] = (self.nextOrder, deliveryID == 0 ? [] : [deliveryID])
            self.arrivals.append((self.nextOrder, key))
            self.nextOrder += 1
            if self.arrivals.count - self.arrivalsHead > 2 * self.capacity {
                // One message that waits long holds the head: what was handled behind it goes.
                self.arrivals = self.arrivals[self.arrivalsHead...].filter { self.waiting[$0.key]?.order == $0.order }
                self.arrivalsHead = 0
            }
            return [.handOn]
        }
    }

    /// The handler of a message that awaited settlement finished. `durable`: its effect is committed, or its
    /// refusal final (a rate limit, a bad code); false: it failed (the store), and the frame stays
    /// unacknowledged so that the relay delivers it again on the next connection.
    public mutating func handled(_ key: Key, durable: Bool) -> [Action] {
        let entry = self.waiting.removeValue(forKey: key)
        self.trimArrivals()
        guard durable else { return [] }
        return [.markSettled] + (entry?.deliveryIDs ?? []).map { .ack(deliveryID: $0) }
    }

    private mutating func evictOldest() {
        self.trimArrivals()
        guard self.arrivalsHead < self.arrivals.count else { return }
        self.waiting[self.arrivals[self.arrivalsHead].key] = nil
        self.arrivalsHead += 1
        self.trimArrivals()
    }

    /// Skips arrivals no longer waiting (handled, or evicted) at the head, and drops them once they are half the
    /// list or more (`received` drops those behind a head that waits long).
    private mutating func trimArrivals() {
        while self.arrivalsHead < self.arrivals.count {
            let (order, key) = self.arrivals[self.arrivalsHead]
            if self.waiting[key]?.order == order { break }
            self.arrivalsHead += 1
        }
        guard self.arrivalsHead > 0, self.arrivalsHead * 2 >= self.arrivals.count else { return }
        self.arrivals.removeFirst(self.arrivalsHead)
        self.arrivalsHead = 0
    }
}
