import HomebaseCore

/// The receipt callbacks a device is waiting for, by `send_id` (Protocol/relay.md §4), bounded.
///
/// Ids are handed out in sequence (1, 2, …, wrapping past 0, which means "no receipt"). A relay that never
/// answers must not make this grow without limit: when id `n` is issued, the callback for id `n - capacity`
/// (if still waiting) is evicted and told `.notConnected`, so at most `capacity` callbacks are ever held.
struct PendingReceipts<Callback> {
    let capacity: UInt32
    private(set) var nextID: UInt32 = 1
    private var waiting: [UInt32: Callback] = [:]

    init(capacity: UInt32 = 65_536) {
        precondition(capacity > 0 && capacity < UInt32.max / 2, "capacity must be positive and well below 2^31")
        self.capacity = capacity
    }

    var count: Int { self.waiting.count }

    /// Registers `callback`; returns the new send id and a callback evicted to stay within capacity.
    mutating func register(_ callback: Callback) -> (id: UInt32, evicted: Callback?) {
        let id = self.nextID
        self.nextID = self.nextID == UInt32.max ? 1 : self.nextID + 1
        self.waiting[id] = callback
        // The id issued `capacity` sends ago (skipping 0, which is never issued).
        var old = id &- self.capacity
        if old >= id { old &-= 1 }
        return (id, self.waiting.removeValue(forKey: old))
    }

    mutating func complete(_ id: UInt32) -> Callback? { self.waiting.removeValue(forKey: id) }

    /// Every waiting callback (the connection ended); none remain.
    mutating func drain() -> [Callback] {
        defer { self.waiting.removeAll() }
        return Array(self.waiting.values)
    }
}
