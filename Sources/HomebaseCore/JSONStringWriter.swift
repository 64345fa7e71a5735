/// Writes a JSON string literal the way Foundation's `JSONEncoder` does with `.withoutEscapingSlashes`:
/// `"` and `\` escaped, `\b \f \n \r \t` for those controls, `\u00XX` (lowercase hex) for the other controls
/// below U+0020, everything else (DEL and non-ASCII included) as its UTF-8 bytes.
public enum JSONStringWriter {
    public static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { Self.append(utf8: $0, to: &out) }
    }

    /// `append` for a string's UTF-8 bytes: runs that need no escape are copied whole.
    static func append(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var runStart = 0
        for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
            runStart = index + 1
            Self.appendEscaped(byte, to: &out)
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        out.append(UInt8(ascii: "\""))
    }

    /// One byte that needs an escape: `"`, `\` or a control character.
    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
        case 0x08: out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(UInt8(ascii: "f"))
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            let hex: StaticString = "0123456789abcdef"
            out += [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex.utf8Start[Int(byte >> 4)], hex.utf8Start[Int(byte & 0xF)]]
        }
    }
}
