/// Input storage that idle connections gave back, lent to the next connection that reads: a connection that
/// reads one frame per wake-up would otherwise allocate and free its parser's storage every time.
///
/// Bounded twice, so that a burst of connections going idle cannot leave the relay holding their memory: at
/// most `maxCount` buffers, each of a capacity of at most `maxCapacity` (a connection that once took a large
/// frame keeps a large buffer; that one is freed, not kept).
struct SpareStorage {
    let maxCount: Int
    let maxCapacity: Int
    private var buffers: [[UInt8]] = []

    init(maxCount: Int, maxCapacity: Int) {
        self.maxCount = maxCount
        self.maxCapacity = maxCapacity
        self.buffers.reserveCapacity(maxCount)
    }

    /// Buffers held now.
    var count: Int { self.buffers.count }

    /// Bytes of capacity held now.
    var heldCapacity: Int { self.buffers.reduce(0) { $0 + $1.capacity } }

    /// Keeps `storage` if there is room and it is not too large; else it is freed. Returns whether it was kept.
    @discardableResult
    mutating func give(_ storage: [UInt8]) -> Bool {
        guard self.buffers.count < self.maxCount, storage.capacity <= self.maxCapacity else { return false }
        self.buffers.append(storage)
        return true
    }

    /// A spare buffer, if any.
    mutating func take() -> [UInt8]? {
        self.buffers.popLast()
    }
}
