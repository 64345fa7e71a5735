/// A token bucket with time passed in (milliseconds), for per-connection rate limits.
public struct TokenBucket: Sendable, Equatable {
    public let ratePerSecond: Double
    public let capacity: Double
    public private(set) var tokens: Double
    private var lastMs: UInt64

    public init(ratePerSecond: Double, capacity: Double, nowMs: UInt64) {
        precondition(ratePerSecond > 0 && capacity > 0, "a token bucket needs a positive rate and capacity")
        self.ratePerSecond = ratePerSecond
        self.capacity = capacity
        self.tokens = capacity
        self.lastMs = nowMs
    }

    /// Takes `cost` tokens if available. A cost larger than the capacity is allowed from a full bucket
    /// (it leaves the bucket in debt), so one large frame is not refused forever.
    public mutating func take(_ cost: Double, nowMs: UInt64) -> Bool {
        self.refill(nowMs: nowMs)
        guard self.tokens >= min(cost, self.capacity) else { return false }
        self.tokens -= cost
        return true
    }

    /// Takes `cost` tokens even when fewer are left (the bucket goes into debt) and returns how many
    /// milliseconds pass before it is out of debt again (0 when it is not in debt): for a cost already incurred,
    /// such as bytes already read.
    public mutating func spend(_ cost: Double, nowMs: UInt64) -> UInt64 {
        self.refill(nowMs: nowMs)
        self.tokens -= cost
        return self.tokens >= 0 ? 0 : UInt64((-self.tokens * 1000 / self.ratePerSecond).rounded(.up))
    }

    /// How long until `take(cost)` would succeed (0: now), without taking anything. Rounded up to whole
    /// milliseconds, so waiting that long always suffices.
    public func waitMs(for cost: Double, nowMs: UInt64) -> UInt64 {
        let elapsed = nowMs > self.lastMs ? Double(nowMs - self.lastMs) : 0
        let tokens = min(self.capacity, self.tokens + elapsed * self.ratePerSecond / 1000)
        let needed = min(cost, self.capacity) - tokens
        guard needed > 0 else { return 0 }
        return UInt64((needed * 1000 / self.ratePerSecond).rounded(.up))
    }

    private mutating func refill(nowMs: UInt64) {
        guard nowMs > self.lastMs else { return }
        self.tokens = min(self.capacity, self.tokens + Double(nowMs - self.lastMs) * self.ratePerSecond / 1000)
        self.lastMs = nowMs
    }
}
