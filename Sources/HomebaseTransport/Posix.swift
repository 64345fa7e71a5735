#if canImport(Glibc)
import Glibc
internal import CLinux
#elseif canImport(Darwin)
import Darwin
#endif
import HomebaseCore

/// Small portable POSIX helpers shared by the event loop and the client streams.
///
/// Everything here builds on Linux and macOS; Linux-only calls (epoll, eventfd, accept4) live in
/// `EventLoop` and `TCPListener`.
public enum Posix {
    /// Ignores SIGPIPE for the whole process, so a write to a closed socket returns EPIPE instead of
    /// killing us. Executables call this once at startup; our own sends also pass MSG_NOSIGNAL where
    /// the platform has it, but libraries underneath (OpenSSL inside libcurl) may not.
    public static func ignoreSIGPIPE() {
        _ = signal(SIGPIPE, SIG_IGN)
    }

    /// Names the calling thread for `top -H`, `perf` and /proc (the kernel keeps 15 bytes). Foundation's
    /// `Thread.name` does not reach the kernel on Linux, so threads inherit their creator's name without this.
    public static func nameCurrentThread(_ name: String) {
        #if canImport(Glibc)
        // At most 15 bytes, cut on a character boundary (a cut inside one would not be valid UTF-8).
        var short = Substring(name)
        while short.utf8.count > 15 { short.removeLast() }
        _ = CLinux.pthread_setname_np(pthread_self(), String(short))
        #endif
    }

    /// Starts the kernel writing `count` bytes of `fd` from `offset` back to disk without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a later `fsync` waits for less. Only a head start: it
    /// reports nothing, and the `fsync` still decides. A no-op where Linux's call does not exist.
    public static func startWriteback(_ fd: Int32, offset: Int64, count: Int64) {
        #if os(Linux)
        _ = CLinux.sync_file_range(fd, __off64_t(offset), __off64_t(count), clinux_sync_file_range_write)
        #endif
    }

    /// Raises the soft limit on open descriptors to the hard limit and returns the soft limit in force. A server
    /// holds one per connection, and the soft limit is often 1,024 where the hard one allows far more.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// This process's resident memory in bytes (Linux: /proc/self/statm); nil where unavailable.
    public static var residentMemoryBytes: Int? {
        #if os(Linux)
        // "size resident shared ...", in pages; one short read, cheap enough for every /metrics scrape.
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let fields = buffer[..<n].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        #else
        return nil
        #endif
    }

    /// Milliseconds on the monotonic clock (CLOCK_MONOTONIC): for deadlines and intervals, never dates.
    public static var monotonicMs: UInt64 { self.monotonicNs / 1_000_000 }

    /// Nanoseconds on the monotonic clock (CLOCK_MONOTONIC).
    public static var monotonicNs: UInt64 {
        var ts = timespec()
        // Cannot fail for CLOCK_MONOTONIC with a valid pointer.
        _ = clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Milliseconds since the Unix epoch on the wall clock (CLOCK_REALTIME): for timestamps only.
    public static var wallClockMs: UInt64 {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1000 &+ UInt64(ts.tv_nsec) / 1_000_000
    }

    /// The current thread's errno.
    static var errno: Int32 {
        #if canImport(Glibc)
        return Glibc.errno
        #else
        return Darwin.errno
        #endif
    }

    /// `strerror` as a Swift string.
    static func describe(errno code: Int32) -> String {
        guard let message = strerror(code) else { return "errno \(code)" }
        return String(cString: message)
    }

    /// Whole milliseconds in a duration, rounded up so a tiny positive timeout never becomes a busy poll;
    /// negative durations become 0, huge ones are clamped to Int32.max.
    static func milliseconds(roundingUp duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        if seconds >= Int64(Int32.max / 1000) { return Int32.max }
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(ms)
    }

    /// Nanoseconds in a duration, clamped to 0 ... UInt64.max / 2.
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        if seconds >= 1 << 32 { return UInt64.max / 2 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// Sets O_NONBLOCK; returns errno on failure.
    static func setNonBlocking(_ fd: Int32) -> Int32? {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { return self.errno }
        return nil
    }

    /// Sets an integer socket option; returns errno on failure.
    @discardableResult
    static func setSocketOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) -> Int32? {
        var value = value
        let rc = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        return rc == 0 ? nil : self.errno
    }

    /// The pending error on a socket (SO_ERROR), 0 if none.
    static func socketError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return self.errno }
        return value
    }

    /// Closes a descriptor, ignoring the result: after close() the descriptor is gone even on EINTR
    /// (Linux semantics), and there is nothing useful to do about EIO on a socket.
    static func closeDescriptor(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
    }

    /// Whole milliseconds from now to `deadlineNs` (monotonic), rounded up so a waiter never wakes just
    /// before the deadline and spins with 0 ms; 0 once it has passed, at most Int32.max.
    static func millisecondsUntil(_ deadlineNs: UInt64) -> Int32 {
        let now = self.monotonicNs
        guard deadlineNs > now else { return 0 }
        return Int32(clamping: (deadlineNs - now + 999_999) / 1_000_000)
    }

    /// Polls one descriptor for `events`, retrying EINTR until `deadlineNs` (monotonic; nil = forever).
    /// Returns the revents, or 0 on timeout, or nil with errno on failure.
    static func poll(_ fd: Int32, events: Int16, deadlineNs: UInt64?) -> Result<Int16, TransportError> {
        while true {
            let timeoutMs = deadlineNs.map { self.millisecondsUntil($0) } ?? -1
            var entry = pollfd(fd: fd, events: events, revents: 0)
            #if canImport(Glibc)
            let rc = Glibc.poll(&entry, 1, timeoutMs)
            #else
            let rc = Darwin.poll(&entry, 1, timeoutMs)
            #endif
            if rc > 0 { return .success(entry.revents) }
            if rc == 0 {
                // poll can return a few microseconds early; only report a timeout once the deadline passed.
                if let deadlineNs, self.monotonicNs < deadlineNs { continue }
                return .success(0)
            }
            let code = self.errno
            if code == EINTR { continue }
            return .failure(.io(code))
        }
    }
}

extension WallClock {
    /// The system's time of day (CLOCK_REALTIME).
    public static let system = WallClock { Posix.wallClockMs }
}

extension MonotonicClock {
    /// The system's monotonic clock (CLOCK_MONOTONIC).
    public static let system = MonotonicClock { Posix.monotonicMs }
}
