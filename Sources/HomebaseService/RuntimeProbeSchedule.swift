/// When the runtime monitor probes next. Pure: the caller passes monotonic milliseconds.
///
/// - After a successful probe, the next is `probeInterval` later; `reverifyRequested` brings it forward to
///   `reverifyDelay` from now, so a burst of failed requests costs one probe.
/// - After `n` failed probes in a row, the next is `min(firstRetryDelay * 2^(n-1), maxRetryDelay)` later,
///   whether or not a reverification is requested: a runtime that is down is not hammered by every request
///   that fails against it, and one that comes back is noticed within `maxRetryDelay`.
/// - A request that arrives during a probe is applied when the probe finishes (the probe may have run before
///   the failure the request reports).
public struct RuntimeProbeSchedule: Sendable, Equatable {
    public var probeInterval: Duration
    public var reverifyDelay: Duration
    public var firstRetryDelay: Duration
    public var maxRetryDelay: Duration

    /// When the next probe is due (monotonic ms). 0 at first: probe at once.
    public private(set) var nextProbeAtMs: UInt64 = 0
    public private(set) var consecutiveFailures = 0
    private var probing = false
    private var reverifyPending = false

    public init(probeInterval: Duration, reverifyDelay: Duration, firstRetryDelay: Duration,
                maxRetryDelay: Duration) {
        precondition(probeInterval > .zero && firstRetryDelay > .zero && maxRetryDelay >= firstRetryDelay,
                     "probe delays must be positive and the retry cap at least the first retry")
        self.probeInterval = probeInterval
        self.reverifyDelay = reverifyDelay
        self.firstRetryDelay = firstRetryDelay
        self.maxRetryDelay = maxRetryDelay
    }

    /// The delay after `failures` failed probes in a row (0: the regular interval).
    public func delayAfter(failures: Int) -> Duration {
        guard failures > 0 else { return self.probeInterval }
        let first = Self.ms(self.firstRetryDelay)
        let cap = Self.ms(self.maxRetryDelay)
        // Doubling 63 times overflows; the cap is reached long before.
        let shift = UInt64(min(failures - 1, 40))
        let (scaled, overflow) = first.multipliedReportingOverflow(by: 1 << shift)
        return .milliseconds(overflow ? cap : min(scaled, cap))
    }

    public mutating func probeStarted() {
        self.probing = true
    }

    public mutating func probeFinished(succeeded: Bool, atMs now: UInt64) {
        self.probing = false
        self.consecutiveFailures = succeeded ? 0 : self.consecutiveFailures + 1
        self.nextProbeAtMs = now + Self.ms(self.delayAfter(failures: self.consecutiveFailures))
        if self.reverifyPending {
            self.reverifyPending = false
            self.applyReverify(atMs: now)
        }
    }

    public mutating func reverifyRequested(atMs now: UInt64) {
        if self.probing {
            self.reverifyPending = true
        } else {
            self.applyReverify(atMs: now)
        }
    }

    private mutating func applyReverify(atMs now: UInt64) {
        // While failing, the backoff deadline stands: that is the point of backing off.
        guard self.consecutiveFailures == 0 else { return }
        self.nextProbeAtMs = min(self.nextProbeAtMs, now + Self.ms(self.reverifyDelay))
    }

    static func ms(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000 + UInt64(max(0, attoseconds)) / 1_000_000_000_000_000
    }
}
