internal import CSodium
import HomebaseCore

/// Randomness from libsodium's `randombytes_buf` (the OS CSPRNG): nonces, seeds, message ids, request ids.
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
