#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wake-ups of other threads, held back until the end of a batch of work on this thread.
///
/// An I/O thread that hands many items to another thread in one pass (the HTTP loop turning 100 streams'
/// reads into relay frames) would wake the other thread for the first item, let it run, and wake it again for
/// the next. Inside `batch`, `wake(_:_:)` records the wake-up instead, once per target, and runs it when the
/// batch ends; outside a batch it runs at once. Per thread: batches on other threads are independent. The relay
/// link's action at a batch's end writes the queued frames from the batching thread itself (the HTTP loop's
/// pass, and the link's own I/O thread handling what it received).
public enum DeferredWakes {
    private final class Pending {
        var targets: [ObjectIdentifier] = []
        var actions: [() -> Void] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // Never deleted: one key for the process. The value is set only for the length of a batch.
        let created = pthread_key_create(&key, nil)
        precondition(created == 0, "pthread_key_create failed")
        return key
    }()

    /// Runs `body`; wake-ups asked for inside it run after it returns, each target once, in first-asked order.
    /// Nested batches join the outer one.
    public static func batch<T>(_ body: () throws -> T) rethrows -> T {
        if pthread_getspecific(Self.key) != nil { return try body() }
        let pending = Pending()
        let pointer = Unmanaged.passRetained(pending)
        pthread_setspecific(Self.key, pointer.toOpaque())
        defer {
            pthread_setspecific(Self.key, nil)
            pointer.release()
            for action in pending.actions { action() }
        }
        return try body()
    }

    /// Whether a batch is running on this thread: a wake-up asked for now would run at its end.
    public static var isBatching: Bool { pthread_getspecific(Self.key) != nil }

    /// Runs `action` now, or at the end of this thread's batch if one is running (once per `target`).
    public static func wake(_ target: AnyObject, _ action: @escaping () -> Void) {
        guard let raw = pthread_getspecific(Self.key) else {
            action()
            return
        }
        let pending = Unmanaged<Pending>.fromOpaque(raw).takeUnretainedValue()
        let id = ObjectIdentifier(target)
        guard !pending.targets.contains(id) else { return }
        pending.targets.append(id)
        pending.actions.append(action)
    }
}
