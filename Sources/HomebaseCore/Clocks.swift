/// Milliseconds since the Unix epoch: the time other devices read, or that must survive a restart (envelope and
/// advert stamps, freshness windows, grant expiry, "last heard"). It can step (NTP, a laptop waking up, a user
/// setting the date), so it never times a deadline: that is `MonotonicClock`'s job. The two are distinct types so a
/// watchdog cannot be handed the wall clock by mistake (issue 38, defect 2).
public struct WallClock: Sendable {
    private let read: @Sendable () -> UInt64

    public init(_ read: @escaping @Sendable () -> UInt64) {
        self.read = read
    }

    /// Now, in Unix milliseconds.
    public var nowMs: UInt64 { self.read() }

    /// A clock stopped at `ms` (tests).
    public static func fixed(_ ms: UInt64) -> WallClock { WallClock { ms } }
}

/// Milliseconds on a clock that never steps (CLOCK_MONOTONIC), from an arbitrary origin: for deadlines and
/// durations in this process (the inference watchdogs, timers, rates). Its values mean nothing to another process
/// or after a restart: never stamp a message or a record with it.
public struct MonotonicClock: Sendable {
    private let read: @Sendable () -> UInt64

    public init(_ read: @escaping @Sendable () -> UInt64) {
        self.read = read
    }

    /// Now, in milliseconds from the clock's origin.
    public var nowMs: UInt64 { self.read() }
}
