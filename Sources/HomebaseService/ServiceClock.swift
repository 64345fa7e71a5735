#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Time for the Homebase's services: the wall clock (adverts' `issued_at`, pairing expiry), a monotonic clock
/// (chunk coalescing, which must not stall when the wall clock is set back) and sleeping (coalescer flushes).
/// Injected so tests can fix the time.
public struct ServiceClock: Sendable {
    /// Milliseconds since the Unix epoch.
    public var nowMs: @Sendable () -> UInt64
    /// Milliseconds from an arbitrary origin that never goes back.
    public var monotonicMs: @Sendable () -> UInt64
    public var sleep: @Sendable (Duration) async throws -> Void

    public init(nowMs: @escaping @Sendable () -> UInt64,
                monotonicMs: @escaping @Sendable () -> UInt64 = { ServiceClock.monotonicClockMs() },
                sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }) {
        self.nowMs = nowMs
        self.monotonicMs = monotonicMs
        self.sleep = sleep
    }

    /// CLOCK_REALTIME, CLOCK_MONOTONIC and `Task.sleep`.
    public static let system = ServiceClock(nowMs: { ServiceClock.wallClockMs() })

    public static func monotonicClockMs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(max(0, ts.tv_sec)) * 1_000 + UInt64(max(0, ts.tv_nsec)) / 1_000_000
    }

    public static func wallClockMs() -> UInt64 {
        var ts = timespec()
        // Cannot fail with a valid pointer and clock id.
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(max(0, ts.tv_sec)) * 1_000 + UInt64(max(0, ts.tv_nsec)) / 1_000_000
    }
}
