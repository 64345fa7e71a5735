/// Byte-level helpers shared by the WebSocket encoder and parser: masking and UTF-8 validation.
@usableFromInline
enum WebSocketMasking {
    /// XORs `array[range]` in place with the 4-byte masking key, starting at key byte 0 (RFC 6455 §5.3).
    ///
    /// Works 8 bytes at a time with a key word repeated twice; masking is its own inverse, so this both masks
    /// and unmasks.
    @usableFromInline
    static func apply(key: (UInt8, UInt8, UInt8, UInt8), to array: inout [UInt8], range: Range<Int>) {
        guard !range.isEmpty else { return }
        array.withUnsafeMutableBytes { raw in
            Self.apply(key: key, to: UnsafeMutableRawBufferPointer(rebasing: raw[range]))
        }
    }

    static func apply(key: (UInt8, UInt8, UInt8, UInt8), to buffer: UnsafeMutableRawBufferPointer) {
        let count = buffer.count
        // Build the repeated key in memory order so the XOR is right on either endianness.
        var keyWord: UInt64 = 0
        withUnsafeMutableBytes(of: &keyWord) { word in
            for i in 0..<8 {
                switch i & 3 {
                case 0: word[i] = key.0
                case 1: word[i] = key.1
                case 2: word[i] = key.2
                default: word[i] = key.3
                }
            }
        }
        var index = 0
        while index + 8 <= count {
            let word = buffer.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            buffer.storeBytes(of: word ^ keyWord, toByteOffset: index, as: UInt64.self)
            index += 8
        }
        // `index` is a multiple of 8 here, so the key phase restarts at byte 0.
        while index < count {
            switch index & 3 {
            case 0: buffer[index] ^= key.0
            case 1: buffer[index] ^= key.1
            case 2: buffer[index] ^= key.2
            default: buffer[index] ^= key.3
            }
            index += 1
        }
    }
}

/// Strict UTF-8 validation (Unicode Table 3-7): rejects overlong forms, surrogates, values above U+10FFFF and
/// truncated sequences, as RFC 6455 §8.1 requires for text messages and close reasons.
enum WebSocketUTF8 {
    static func isValid(_ bytes: [UInt8], range: Range<Int>) -> Bool {
        bytes.withUnsafeBytes { raw in Self.isValid(UnsafeRawBufferPointer(rebasing: raw[range])) }
    }

    static func isValid(_ buffer: UnsafeRawBufferPointer) -> Bool {
        let count = buffer.count
        var i = 0
        while i < count {
            // ASCII fast path: 8 bytes at a time while no byte has its high bit set.
            while i + 8 <= count,
                buffer.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
            {
                i += 8
            }
            guard i < count else { break }
            let b0 = buffer[i]
            if b0 < 0x80 {
                i += 1
                continue
            }
            let length: Int
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF:
                length = 2
            case 0xE0...0xEF:
                length = 3
                if b0 == 0xE0 { lower = 0xA0 }  // overlong
                if b0 == 0xED { upper = 0x9F }  // UTF-16 surrogates
            case 0xF0...0xF4:
                length = 4
                if b0 == 0xF0 { lower = 0x90 }  // overlong
                if b0 == 0xF4 { upper = 0x8F }  // above U+10FFFF
            default:
                return false  // continuation byte, overlong 0xC0/0xC1, or 0xF5...0xFF
            }
            guard i + length <= count else { return false }
            let b1 = buffer[i + 1]
            guard b1 >= lower, b1 <= upper else { return false }
            for j in 2..<length where buffer[i + j] & 0xC0 != 0x80 {
                return false
            }
            i += length
        }
        return true
    }
}
