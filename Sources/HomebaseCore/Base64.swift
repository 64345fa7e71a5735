/// Standard base64 (RFC 4648 §4: `A–Z a–z 0–9 + /`, `=` padding), pure and strict.
///
/// Used for the WebSocket handshake keys (RFC 6455 §4.1, §4.2.2). Decoding accepts only the canonical form:
/// a length that is a multiple of 4, padding only at the end, no whitespace, and zero bits in the unused low bits
/// of the last character (RFC 4648 §3.5), so every byte string has exactly one accepted encoding.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let padding = UInt8(ascii: "=")

    /// 0...63 for an alphabet character, 0xFF for anything else.
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in Self.alphabet.enumerated() {
            table[Int(character)] = UInt8(index)
        }
        return table
    }()

    /// Encodes `bytes` with padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            let group = UInt32(b0) << 16 | UInt32(b1 ?? 0) << 8 | UInt32(b2 ?? 0)
            out.append(Self.alphabet[Int(group >> 18 & 0x3F)])
            out.append(Self.alphabet[Int(group >> 12 & 0x3F)])
            out.append(b1 == nil ? Self.padding : Self.alphabet[Int(group >> 6 & 0x3F)])
            out.append(b2 == nil ? Self.padding : Self.alphabet[Int(group & 0x3F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes canonical padded base64; returns `nil` for any other input (see the type's documentation).
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        let input = Array(string.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let isLastGroup = index + 4 == input.count
            let c0 = Self.reverse[Int(input[index])]
            let c1 = Self.reverse[Int(input[index + 1])]
            guard c0 != 0xFF, c1 != 0xFF else { return nil }
            let p2 = input[index + 2] == Self.padding
            let p3 = input[index + 3] == Self.padding
            if p2 || p3 {
                // Padding only in the last group, and "x=" followed by a character is not padding.
                guard isLastGroup, p3 else { return nil }
                if p2 {
                    guard c1 & 0x0F == 0 else { return nil }
                    out.append(c0 << 2 | c1 >> 4)
                } else {
                    let c2 = Self.reverse[Int(input[index + 2])]
                    guard c2 != 0xFF, c2 & 0x03 == 0 else { return nil }
                    out.append(c0 << 2 | c1 >> 4)
                    out.append(c1 << 4 | c2 >> 2)
                }
            } else {
                let c2 = Self.reverse[Int(input[index + 2])]
                let c3 = Self.reverse[Int(input[index + 3])]
                guard c2 != 0xFF, c3 != 0xFF else { return nil }
                out.append(c0 << 2 | c1 >> 4)
                out.append(c1 << 4 | c2 >> 2)
                out.append(c2 << 6 | c3)
            }
            index += 4
        }
        return out
    }
}
