internal import CSodium

/// libsodium's one-time initialisation.
enum Sodium {
    /// `sodium_init()` is thread-safe and idempotent, but running it once through a `static let` keeps it off every
    /// hot path. It fails only when the system has no usable entropy source, in which case no key, nonce or id this
    /// process could make would be safe: stopping is the only correct answer.
    static let initialized: Void = {
        guard sodium_init() >= 0 else { fatalError("sodium_init failed: no usable randomness source") }
    }()

    /// Call before any libsodium function.
    @inline(__always)
    static func ensureInitialized() {
        _ = Self.initialized
    }
}

/// A fixed-size buffer for secret bytes: zeroed with `sodium_memzero` and released on deinit.
///
/// `@unchecked Sendable` because the bytes are written only inside `init` and read-only afterwards; no method
/// mutates them, so sharing across threads cannot race.
final class SecretBytes: @unchecked Sendable {
    private let buffer: UnsafeMutableRawBufferPointer

    /// Allocates `count` bytes and lets `initialize` fill them (the pointer must not escape the closure).
    init<E: Error>(count: Int, initialize: (UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
        precondition(count > 0, "secret buffers are never empty")
        Sodium.ensureInitialized()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        do {
            try initialize(buffer)
        } catch {
            // deinit does not run when init throws, so wipe here.
            Self.wipe(buffer)
            buffer.deallocate()
            throw error
        }
        self.buffer = buffer
    }

    /// Copies `bytes` in; the caller checks the length first.
    convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { (buffer: UnsafeMutableRawBufferPointer) -> Void in
            buffer.copyBytes(from: bytes)
        }
    }

    var count: Int { self.buffer.count }

    /// Read access for the duration of `body` only.
    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(self.buffer))
    }

    /// Constant-time comparison (`sodium_memcmp`), so comparing secrets leaks nothing through timing.
    func constantTimeEquals(_ other: SecretBytes) -> Bool {
        guard self.count == other.count else { return false }
        return sodium_memcmp(self.buffer.baseAddress!, other.buffer.baseAddress!, self.count) == 0
    }

    /// Zeroes `buffer` with `sodium_memzero`, which the optimiser may not elide (a plain loop before `deallocate`
    /// is a dead store it can remove). Shared by `deinit` and the error path of `init`, and visible to tests.
    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        sodium_memzero(base, buffer.count)
    }

    deinit {
        Self.wipe(self.buffer)
        self.buffer.deallocate()
    }
}
