#if HOMEBASE_TSAN
import HomebaseCore

/// Under `tools/test --sanitize thread` this module's `Mutex` tells ThreadSanitizer about its locking (see
/// `TSanVisibleMutex`); every other build uses `Synchronization.Mutex` itself.
typealias Mutex<Value: ~Copyable> = TSanVisibleMutex<Value>
#endif
