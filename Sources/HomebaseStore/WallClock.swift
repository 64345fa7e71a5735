#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Milliseconds since the Unix epoch from CLOCK_REALTIME: the default clock for `updated_at` columns.
/// Stores take the clock as a parameter so tests can pass a fixed one.
func wallClockMs() -> UInt64 {
    var ts = timespec()
    // CLOCK_REALTIME cannot fail with a valid timespec pointer (EINVAL/EFAULT are the only errors).
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(max(0, ts.tv_sec)) * 1_000 + UInt64(max(0, ts.tv_nsec)) / 1_000_000
}

extension Int64 {
    /// A `UInt64` quantity (timestamp, id) as an SQLite integer; values past `Int64.max` cannot occur
    /// for milliseconds (292 million years) and are clamped rather than trapping.
    init(storing value: UInt64) { self = Int64(clamping: value) }
}

extension UInt64 {
    /// An SQLite integer we wrote from a `UInt64`; a negative one can only come from a corrupted file.
    init(stored value: Int64, table: String, column: String) throws {
        guard value >= 0 else { throw StoreError.corruptRow(table: table, reason: "negative \(column)") }
        self = UInt64(value)
    }
}
