#if HOMEBASE_TSAN
import Synchronization

/// `Synchronization.Mutex` with its acquire and release told to ThreadSanitizer: built only for
/// `tools/test --sanitize thread` (`-DHOMEBASE_TSAN`), where each module's `Mutex` is this type (`Mutex+TSan.swift`).
///
/// Why: on Linux the Mutex takes its lock inline with an atomic compare-and-swap that ThreadSanitizer sees, but a
/// contended lock or unlock goes through `_lockSlow`/`_unlockSlow` in the toolchain's uninstrumented
/// Synchronization library (a futex), where it sees nothing. Every value two threads take turns on under a
/// contended Mutex then looks like a race (reproduced with two threads appending to a `Mutex<[Int]>`; the count
/// comes out right). The annotations give it the edges the futex hides, and nothing more: an access made outside
/// the lock is still reported, however many locks surround it.
public struct TSanVisibleMutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {  // Sendable as Mutex is
    private let mutex: Synchronization.Mutex<Value>
    /// A heap object whose address names this lock to ThreadSanitizer (the struct itself has no stable address).
    private let token = Token()

    public init(_ initialValue: consuming sending Value) {
        self.mutex = Synchronization.Mutex(initialValue)
    }

    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = Unmanaged.passUnretained(self.token).toOpaque()
        return try self.mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            tsanAcquire(address)
            defer { tsanRelease(address) }
            return try body(&value)
        }
    }

    public borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        let address = Unmanaged.passUnretained(self.token).toOpaque()
        return try self.mutex.withLockIfAvailable { (value: inout sending Value) throws(E) -> sending Result in
            tsanAcquire(address)
            defer { tsanRelease(address) }
            return try body(&value)
        }
    }

    private final class Token: Sendable {}
}

@_silgen_name("__tsan_acquire") private func tsanAcquire(_ address: UnsafeMutableRawPointer)
@_silgen_name("__tsan_release") private func tsanRelease(_ address: UnsafeMutableRawPointer)
#endif
