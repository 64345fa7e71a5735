import HomebaseCore
import Synchronization

/// The reference `Mailbox`: the same behaviour as `SQLiteMailbox`, in memory, lost on exit.
///
/// For tests and for a relay run without `--data`. Thread-safe through a `Mutex`.
public final class MemoryMailbox: Mailbox {
    private struct Box: Sendable {
        /// deliveryID ascending, because ids are issued in increasing order and appended.
        var frames: [StoredFrame] = []
        var bytes = 0
    }

    private struct State: Sendable {
        var boxes: [PublicKey: Box] = [:]
        var lastDeliveryID: UInt64 = 0
    }

    public let limits: MailboxLimits
    private let state = Mutex(State())

    public init(limits: MailboxLimits = MailboxLimits()) {
        self.limits = limits
    }

    public func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64) throws
        -> MailboxEnqueueResult
    {
        let limits = self.limits
        return self.state.withLock { state in
            var box = state.boxes[recipient] ?? Box()
            if !limits.admits(frames: box.frames.count, bytes: box.bytes, payloadBytes: payload.count) {
                let removed = Self.removeExpired(from: &box, nowMs: nowMs)
                guard removed > 0 else { return .mailboxFull }
                state.boxes[recipient] = box.frames.isEmpty ? nil : box
                guard limits.admits(frames: box.frames.count, bytes: box.bytes, payloadBytes: payload.count) else {
                    return .mailboxFull
                }
            }
            state.lastDeliveryID += 1
            let frame = StoredFrame(
                deliveryID: state.lastDeliveryID,
                sender: sender,
                payload: payload,
                storedAtMs: min(nowMs, UInt64(Int64.max)),
                expiresAtMs: limits.expiry(storedAtMs: nowMs)
            )
            box.frames.append(frame)
            box.bytes += payload.count
            state.boxes[recipient] = box
            return .stored(deliveryID: frame.deliveryID)
        }
    }

    public func pending(recipient: PublicKey, after: UInt64, limit: Int, nowMs: UInt64) throws -> [StoredFrame] {
        guard limit > 0 else { return [] }
        return self.state.withLock { state in
            guard let box = state.boxes[recipient] else { return [] }
            let start = Self.firstIndex(in: box.frames, after: after)
            return Array(box.frames[start...].lazy.filter { nowMs < $0.expiresAtMs }.prefix(limit))
        }
    }

    public func acknowledge(recipient: PublicKey, deliveryID: UInt64) throws -> Bool {
        self.state.withLock { state in
            guard var box = state.boxes[recipient] else { return false }
            let i = Self.firstIndex(in: box.frames, after: deliveryID &- 1)
            guard deliveryID > 0, i < box.frames.count, box.frames[i].deliveryID == deliveryID else { return false }
            box.bytes -= box.frames.remove(at: i).payload.count
            state.boxes[recipient] = box.frames.isEmpty ? nil : box
            return true
        }
    }

    public func depth(recipient: PublicKey) throws -> (frames: Int, bytes: Int) {
        self.state.withLock { state in
            let box = state.boxes[recipient]
            return (box?.frames.count ?? 0, box?.bytes ?? 0)
        }
    }

    public func expire(nowMs: UInt64) throws -> Int {
        self.state.withLock { state in
            var total = 0
            for recipient in Array(state.boxes.keys) {
                var box = state.boxes[recipient]!
                total += Self.removeExpired(from: &box, nowMs: nowMs)
                state.boxes[recipient] = box.frames.isEmpty ? nil : box
            }
            return total
        }
    }

    public func totalDepth() throws -> (frames: Int, bytes: Int, mailboxes: Int) {
        self.state.withLock { state in
            state.boxes.values.reduce((0, 0, 0)) { ($0.0 + $1.frames.count, $0.1 + $1.bytes, $0.2 + 1) }
        }
    }

    private static func removeExpired(from box: inout Box, nowMs: UInt64) -> Int {
        let before = box.frames.count
        box.frames.removeAll { nowMs >= $0.expiresAtMs }
        box.bytes = box.frames.reduce(0) { $0 + $1.payload.count }
        return before - box.frames.count
    }

    /// Index of the first frame with deliveryID > `after` (binary search; frames are sorted by id).
    private static func firstIndex(in frames: [StoredFrame], after: UInt64) -> Int {
        var low = 0
        var high = frames.count
        while low < high {
            let mid = (low + high) / 2
            if frames[mid].deliveryID <= after { low = mid + 1 } else { high = mid }
        }
        return low
    }

    public func enqueueBatch(_ items: [MailboxItem], nowMs: UInt64) throws -> [MailboxEnqueueResult] {
        try items.map { try self.enqueue(recipient: $0.recipient, sender: $0.sender, payload: $0.payload, nowMs: nowMs) }
    }

    public func pendingCount(recipient: PublicKey, nowMs: UInt64) throws -> Int {
        try self.pending(recipient: recipient, after: 0, limit: Int.max, nowMs: nowMs).count
    }
}
