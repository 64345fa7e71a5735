/// Writes RFC 6455 frames (§5.2). Pure: the caller supplies the masking key (client role) from its own randomness.
public enum WebSocketFrameEncoder {
    /// Largest header: 2 bytes, a 64-bit extended length and a masking key.
    public static let maxHeaderByteCount = 14

    /// Appends one frame to `out`.
    ///
    /// The length uses the shortest form (7, 16 or 64 bits), as §5.2 requires. With a `maskingKey` the payload
    /// is masked in place after being appended, so it is copied exactly once.
    /// - Precondition: a control opcode (close, ping, pong) has `fin` set and at most 125 bytes of payload;
    ///   breaking that is a bug in the caller, not something a peer can cause.
    @inlinable  // specialized in the caller's module for its payload type, not run generically per frame
    public static func encode(
        opcode: WebSocketOpcode,
        payload: some Collection<UInt8>,
        fin: Bool = true,
        maskingKey: (UInt8, UInt8, UInt8, UInt8)? = nil,
        into out: inout [UInt8]
    ) {
        let length = payload.count
        if opcode.isControl {
            precondition(fin && length <= 125, "control frames are unfragmented and at most 125 bytes (§5.5)")
        }
        out.reserveCapacity(out.count + Self.maxHeaderByteCount + length)
        out.append((fin ? 0x80 : 0x00) | opcode.rawValue)
        let maskBit: UInt8 = maskingKey == nil ? 0x00 : 0x80
        switch length {
        case 0...125:
            out.append(maskBit | UInt8(length))
        case 126...0xFFFF:
            out.append(maskBit | 126)
            out.append(UInt8(truncatingIfNeeded: length >> 8))
            out.append(UInt8(truncatingIfNeeded: length))
        default:
            out.append(maskBit | 127)
            let length64 = UInt64(length)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: length64 >> UInt64(shift)))
            }
        }
        if let key = maskingKey {
            out.append(key.0)
            out.append(key.1)
            out.append(key.2)
            out.append(key.3)
        }
        let payloadStart = out.count
        out.append(contentsOf: payload)
        if let key = maskingKey {
            WebSocketMasking.apply(key: key, to: &out, range: payloadStart..<out.count)
        }
    }

    /// Returns one frame as a new array; see `encode(opcode:payload:fin:maskingKey:into:)`.
    public static func encode(
        opcode: WebSocketOpcode,
        payload: some Collection<UInt8>,
        fin: Bool = true,
        maskingKey: (UInt8, UInt8, UInt8, UInt8)? = nil
    ) -> [UInt8] {
        var out = [UInt8]()
        Self.encode(opcode: opcode, payload: payload, fin: fin, maskingKey: maskingKey, into: &out)
        return out
    }

    /// The payload of a close frame: `code` big-endian, then `reason` as UTF-8 (§5.5.1).
    ///
    /// The reason is cut to fit the 125-byte control-frame limit (123 bytes after the code), at a character
    /// boundary so the result stays valid UTF-8.
    public static func closePayload(code: UInt16, reason: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(truncatingIfNeeded: code >> 8), UInt8(truncatingIfNeeded: code)]
        let budget = 125 - 2
        let utf8 = reason.utf8
        if utf8.count <= budget {
            out.append(contentsOf: utf8)
        } else {
            // Step back from the budget to the start of a scalar (not a 10xxxxxx continuation byte).
            var end = utf8.index(utf8.startIndex, offsetBy: budget)
            while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 {
                end = utf8.index(before: end)
            }
            out.append(contentsOf: utf8[utf8.startIndex..<end])
        }
        return out
    }
}
