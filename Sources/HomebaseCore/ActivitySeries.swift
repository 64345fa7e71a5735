/// Tokens and requests per fixed time bucket over a sliding window (the status page's chart: the last hour in
/// 10-second buckets). Pure: the caller passes the time of each addition and of each reading.
///
/// Memory is fixed at two arrays of `bucketCount`, whatever the load. Time is in milliseconds of any clock that
/// does not jump; an addition older than the newest bucket (a clock stepped back) counts in the newest bucket,
/// and a jump forward past the window clears it.
public struct ActivitySeries: Sendable, Equatable {
    /// One reading of the window, oldest bucket first.
    public struct Window: Sendable, Equatable {
        /// Where the oldest bucket starts.
        public var startMs: UInt64
        public var bucketMs: UInt64
        public var tokens: [Int]
        public var requests: [Int]
    }

    public let bucketMs: UInt64
    public let bucketCount: Int
    private var tokens: [Int]
    private var requests: [Int]
    /// The absolute index (time / bucketMs) of the newest bucket written; slot = index % bucketCount.
    private var newest: UInt64?

    /// The last hour in 10 s buckets, by default.
    public init(bucketMs: UInt64 = 10_000, bucketCount: Int = 360) {
        precondition(bucketMs > 0 && bucketCount > 0, "a series needs buckets")
        self.bucketMs = bucketMs
        self.bucketCount = bucketCount
        self.tokens = Array(repeating: 0, count: bucketCount)
        self.requests = Array(repeating: 0, count: bucketCount)
    }

    /// Adds what happened up to `atMs` (negative amounts count as none).
    public mutating func add(tokens: Int, requests: Int, atMs: UInt64) {
        let index = self.advance(to: atMs / self.bucketMs)
        let slot = Int(index % UInt64(self.bucketCount))
        self.tokens[slot] += max(0, tokens)
        self.requests[slot] += max(0, requests)
    }

    /// The window ending with the bucket of `nowMs`: `bucketCount` buckets, zeros where nothing happened.
    public func window(nowMs: UInt64) -> Window {
        let last = max(nowMs / self.bucketMs, self.newest ?? 0)
        let count = UInt64(self.bucketCount)
        let first = last + 1 >= count ? last + 1 - count : 0
        var window = Window(startMs: first * self.bucketMs, bucketMs: self.bucketMs, tokens: [], requests: [])
        window.tokens.reserveCapacity(self.bucketCount)
        window.requests.reserveCapacity(self.bucketCount)
        for index in first...last {
            let written = self.newest.map { index <= $0 && $0 - index < count } ?? false
            let slot = Int(index % count)
            window.tokens.append(written ? self.tokens[slot] : 0)
            window.requests.append(written ? self.requests[slot] : 0)
        }
        return window
    }

    /// Moves the newest bucket to `index`, clearing the buckets it passes (all of them, at most, after a jump past
    /// the window); returns the bucket to write.
    private mutating func advance(to index: UInt64) -> UInt64 {
        guard let newest = self.newest else {
            self.newest = index
            return index
        }
        guard index > newest else { return newest }
        let skipped = min(index - newest, UInt64(self.bucketCount))
        for step in 1...skipped {
            let slot = Int((newest + step) % UInt64(self.bucketCount))
            self.tokens[slot] = 0
            self.requests[slot] = 0
        }
        self.newest = index
        return index
    }
}
