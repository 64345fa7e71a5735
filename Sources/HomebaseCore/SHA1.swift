/// SHA-1 (RFC 3174), used only for the WebSocket handshake's `Sec-WebSocket-Accept` (RFC 6455 §4.2.2).
///
/// SHA-1 is not collision resistant and must never protect anything here: the handshake uses it only to prove
/// that the server understood a WebSocket request. Neither libsodium nor Foundation on Linux offers it
/// (platform-notes.md §6), so this is a small pure-Swift implementation.
public enum SHA1 {
    /// Size of a digest in bytes.
    public static let digestByteCount = 20

    /// Returns the 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        // Copy once, then pad in place: message || 0x80 || zeros || bit length (u64 big-endian), a multiple of 64.
        var message = [UInt8]()
        let count = bytes.count
        let paddedCount = (count + 8) / 64 * 64 + 64
        message.reserveCapacity(paddedCount)
        message.append(contentsOf: bytes)
        message.append(0x80)
        message.append(contentsOf: repeatElement(0, count: paddedCount - count - 9))
        let bitCount = UInt64(count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            message.append(UInt8(truncatingIfNeeded: bitCount >> UInt64(shift)))
        }

        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
        )
        var w = [UInt32](repeating: 0, count: 80)
        message.withUnsafeBufferPointer { block in
            var offset = 0
            while offset < block.count {
                for t in 0..<16 {
                    let i = offset + t * 4
                    w[t] =
                        UInt32(block[i]) << 24 | UInt32(block[i + 1]) << 16 | UInt32(block[i + 2]) << 8
                        | UInt32(block[i + 3])
                }
                for t in 16..<80 {
                    w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotatedLeft(by: 1)
                }
                var (a, b, c, d, e) = h
                for t in 0..<80 {
                    let f: UInt32
                    let k: UInt32
                    switch t {
                    case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                    case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                    case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                    default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                    }
                    let temp = a.rotatedLeft(by: 5) &+ f &+ e &+ k &+ w[t]
                    (e, d, c, b, a) = (d, c, b.rotatedLeft(by: 30), a, temp)
                }
                h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
                offset += 64
            }
        }

        var digest = [UInt8]()
        digest.reserveCapacity(Self.digestByteCount)
        for word in [h.0, h.1, h.2, h.3, h.4] {
            digest.append(UInt8(truncatingIfNeeded: word >> 24))
            digest.append(UInt8(truncatingIfNeeded: word >> 16))
            digest.append(UInt8(truncatingIfNeeded: word >> 8))
            digest.append(UInt8(truncatingIfNeeded: word))
        }
        return digest
    }
}

extension UInt32 {
    @inline(__always)
    fileprivate func rotatedLeft(by n: UInt32) -> UInt32 {
        (self << n) | (self >> (32 - n))
    }
}
