/// Identifies a timer scheduled on an `EventLoop`, for `cancelTimer(_:)`.
public struct TimerHandle: Hashable, Sendable {
    let id: UInt64
}

/// A binary min-heap of timers keyed by (deadline, scheduling order), with lazy cancellation.
///
/// Cancelling only forgets the callback; the heap entry is skipped when it reaches the top. So that a
/// relay that re-arms an idle timer on every frame cannot grow the heap without bound, the heap is
/// rebuilt from the live entries whenever dead entries outnumber live ones (amortised O(1) per cancel).
struct TimerHeap {
    struct Entry {
        var deadlineNs: UInt64
        var id: UInt64

        /// Earlier deadline first; equal deadlines fire in the order they were scheduled.
        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            self.deadlineNs < other.deadlineNs || (self.deadlineNs == other.deadlineNs && self.id < other.id)
        }
    }

    private(set) var entries: [Entry] = []
    private var callbacks: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 1

    /// Live (scheduled, not cancelled, not fired) timers.
    var count: Int { self.callbacks.count }

    mutating func schedule(deadlineNs: UInt64, _ callback: @escaping () -> Void) -> TimerHandle {
        let id = self.nextID
        self.nextID += 1
        self.callbacks[id] = callback
        self.push(Entry(deadlineNs: deadlineNs, id: id))
        return TimerHandle(id: id)
    }

    /// Returns true when the timer was live. Cancelling a fired or cancelled timer does nothing.
    @discardableResult
    mutating func cancel(_ handle: TimerHandle) -> Bool {
        guard self.callbacks.removeValue(forKey: handle.id) != nil else { return false }
        if self.entries.count > 64 && self.entries.count > 2 * self.callbacks.count {
            self.compact()
        }
        return true
    }

    /// The earliest live deadline, discarding cancelled entries on top.
    mutating func nextDeadlineNs() -> UInt64? {
        while let top = self.entries.first {
            if self.callbacks[top.id] != nil { return top.deadlineNs }
            self.popTop()
        }
        return nil
    }

    /// Removes and returns the callback of the earliest live timer due at `nowNs`, if any.
    mutating func popExpired(nowNs: UInt64) -> (() -> Void)? {
        while let top = self.entries.first, top.deadlineNs <= nowNs {
            self.popTop()
            if let callback = self.callbacks.removeValue(forKey: top.id) { return callback }
        }
        return nil
    }

    private mutating func compact() {
        self.entries.removeAll { self.callbacks[$0.id] == nil }
        // Floyd's heapify: sift down every internal node, bottom up.
        var index = self.entries.count / 2
        while index > 0 {
            index -= 1
            self.siftDown(from: index)
        }
    }

    private mutating func push(_ entry: Entry) {
        self.entries.append(entry)
        var child = self.entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.entries[child].precedes(self.entries[parent]) else { break }
            self.entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popTop() {
        let last = self.entries.removeLast()
        guard !self.entries.isEmpty else { return }
        self.entries[0] = last
        self.siftDown(from: 0)
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        let count = self.entries.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            let right = left + 1
            if right < count && self.entries[right].precedes(self.entries[left]) { smallest = right }
            guard self.entries[smallest].precedes(self.entries[parent]) else { return }
            self.entries.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
