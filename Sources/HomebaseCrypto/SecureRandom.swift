internal import CSodium
import HomebaseCore
import Synchronization

/// Randomness from libsodium's `randombytes_buf` (the OS CSPRNG): seeds and keys (`bytes`), request ids, and
/// through a refilled pool (`publicBytes`) the nonces and message ids of sealed envelopes.
///
/// Pure code (HomebaseCore) never calls this; shells draw the bytes and pass them in, which keeps vectors
/// deterministic.
public enum SecureRandom {
    /// `count` random bytes (`count` >= 0).
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        guard count > 0 else { return [] }
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        randombytes_buf(&out, count)
        return out
    }

    /// `count` random bytes for values that travel in the clear (nonces, message ids), drawn from a pool of 4 KiB:
    /// ChaCha20's stream under a fresh 32-byte seed from the OS CSPRNG (libsodium's
    /// `randombytes_buf_deterministic`), so a refill costs one getrandom(2) and a sealed message none. Unique
    /// and unpredictable, as nonces need; the bytes only sat in this process's memory for a while. Keys and
    /// seeds use `bytes`.
    public static func publicBytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Self.poolBytes, "publicBytes takes 0...\(Self.poolBytes) bytes")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            Self.fillPublic(buffer)
            initialized = count
        }
    }

    /// Fills `buffer` as `publicBytes(buffer.count)` would, for a caller with storage of its own (a stack buffer
    /// for one message's id and nonce).
    public static func fillPublic(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        let count = buffer.count
        precondition(count <= Self.poolBytes, "publicBytes takes 0...\(Self.poolBytes) bytes")
        guard count > 0 else { return }
        Self.pool.withLock { pool in
            if pool.used + count > pool.bytes.count {
                Sodium.ensureInitialized()
                // libsodium's randombytes_buf asks getrandom(2) for at most 256 bytes a call (sixteen calls per
                // refill); a fresh 32-byte seed from it, expanded by ChaCha20, fills the pool with one.
                var seed = [UInt8](repeating: 0, count: Int(randombytes_SEEDBYTES))
                randombytes_buf(&seed, seed.count)
                pool.bytes.withUnsafeMutableBytes {
                    randombytes_buf_deterministic($0.baseAddress!, $0.count, seed)
                }
                sodium_memzero(&seed, seed.count)
                pool.used = 0
            }
            defer {
                // Never hand out the same bytes twice: zero what was taken.
                for i in pool.used..<(pool.used + count) { pool.bytes[i] = 0 }
                pool.used += count
            }
            pool.bytes.withUnsafeBufferPointer { bytes in
                _ = buffer.initialize(from: bytes[pool.used..<(pool.used + count)])
            }
        }
    }

    static let poolBytes = 4096

    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: SecureRandom.poolBytes)
        /// Bytes already handed out; starts full so the first call fills it.
        var used = SecureRandom.poolBytes
    }

    private static let pool = Mutex(Pool())

    /// A random RFC 4122 version 4 UUID in lowercase, e.g. `infer.request` ids (protocol-v1 §4).
    public static func uuidString() -> String {
        Self.uuidString(fromRandom: Self.bytes(16))
    }

    /// Formats 16 random bytes as a v4 UUID: version nibble 4 in byte 6, variant bits 10 in byte 8.
    static func uuidString(fromRandom random: [UInt8]) -> String {
        precondition(random.count == 16, "a UUID is 16 bytes")
        var b = random
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        let hex = Hex.encode(b)
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            let start = hex.index(hex.startIndex, offsetBy: range.lowerBound)
            let end = hex.index(hex.startIndex, offsetBy: range.upperBound)
            return String(hex[start..<end])
        }
        return parts.joined(separator: "-")
    }
}
