import Testing

@testable import HomebaseCore

@Suite struct WebSocketFrameEncoderTests {
    static let hello = Array("Hello".utf8)
    static let key: (UInt8, UInt8, UInt8, UInt8) = (0x37, 0xFA, 0x21, 0x3D)  // RFC 6455 §5.7's masking key

    /// RFC 6455 §5.7: a single-frame unmasked text message.
    @Test func unmaskedHelloMatchesRFC() {
        #expect(
            WebSocketFrameEncoder.encode(opcode: .text, payload: Self.hello) == [
                0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F,
            ]
        )
    }

    /// RFC 6455 §5.7: a single-frame masked text message.
    @Test func maskedHelloMatchesRFC() {
        let frame = WebSocketFrameEncoder.encode(opcode: .text, payload: Self.hello, maskingKey: Self.key)
        #expect(frame == [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
    }

    /// RFC 6455 §5.7: "Hel" (FIN clear, text) then "lo" (FIN set, continuation), appended to one buffer.
    @Test func fragmentedHelloMatchesRFC() {
        var out: [UInt8] = []
        WebSocketFrameEncoder.encode(opcode: .text, payload: Self.hello[0..<3], fin: false, into: &out)
        WebSocketFrameEncoder.encode(opcode: .continuation, payload: Self.hello[3...], into: &out)
        #expect(out == [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F])
    }

    /// RFC 6455 §5.7: unmasked ping and masked pong, each carrying "Hello".
    @Test func pingAndPongMatchRFC() {
        #expect(
            WebSocketFrameEncoder.encode(opcode: .ping, payload: Self.hello) == [
                0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F,
            ]
        )
        let pong = WebSocketFrameEncoder.encode(opcode: .pong, payload: Self.hello, maskingKey: Self.key)
        #expect(pong == [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
    }

    /// RFC 6455 §5.7: 256 bytes take the 16-bit form (0x7E 0x0100); 64 KiB take the 64-bit form.
    @Test func extendedLengthsMatchRFC() {
        let small = WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 7, count: 256))
        #expect(Array(small.prefix(4)) == [0x82, 0x7E, 0x01, 0x00])
        #expect(small.count == 4 + 256)
        let large = WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 7, count: 65536))
        #expect(Array(large.prefix(10)) == [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00])
        #expect(large.count == 10 + 65536)
    }

    /// The shortest length form is used at each boundary (125/126, 65535/65536), masked or not.
    @Test(arguments: [(125, 2), (126, 4), (65535, 4), (65536, 10)])
    func lengthFormBoundaries(length: Int, headerCount: Int) {
        let plain = WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: length))
        #expect(plain.count == headerCount + length)
        let masked = WebSocketFrameEncoder.encode(
            opcode: .binary,
            payload: [UInt8](repeating: 0, count: length),
            maskingKey: (1, 2, 3, 4)
        )
        #expect(masked.count == headerCount + 4 + length)
        #expect(masked[1] & 0x80 == 0x80)
    }

    /// The 8-bytes-at-a-time masking equals the byte-wise definition (§5.3) for every tail length, and also
    /// when the frame is appended after existing bytes (an unaligned start).
    @Test func wordMaskingMatchesBytewiseDefinition() {
        let key: (UInt8, UInt8, UInt8, UInt8) = (0xA1, 0x02, 0xF3, 0x44)
        let keyBytes: [UInt8] = [0xA1, 0x02, 0xF3, 0x44]
        for length in 0...70 {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
            var out: [UInt8] = [0xEE, 0xEE, 0xEE]  // misaligns the payload
            WebSocketFrameEncoder.encode(opcode: .binary, payload: payload, maskingKey: key, into: &out)
            let masked = Array(out.suffix(length))
            let expected = payload.enumerated().map { $0.element ^ keyBytes[$0.offset % 4] }
            #expect(masked == expected, "length \(length)")
            #expect(Array(out.prefix(3)) == [0xEE, 0xEE, 0xEE])
        }
    }

    /// A close payload is the code big-endian followed by the UTF-8 reason.
    @Test func closePayloadCarriesCodeAndReason() {
        #expect(WebSocketFrameEncoder.closePayload(code: 1000, reason: "") == [0x03, 0xE8])
        #expect(WebSocketFrameEncoder.closePayload(code: 1009, reason: "big") == [0x03, 0xF1, 0x62, 0x69, 0x67])
    }

    /// An over-long reason is cut so the payload fits 125 bytes, never inside a multi-byte character.
    @Test func closePayloadTruncatesOnCharacterBoundary() throws {
        let ascii = WebSocketFrameEncoder.closePayload(code: 1000, reason: String(repeating: "a", count: 300))
        #expect(ascii.count == 125)
        // "é" is 2 bytes: 61 of them fill 122 of the 123 reason bytes; the 62nd would split.
        let twoByte = WebSocketFrameEncoder.closePayload(code: 1000, reason: String(repeating: "é", count: 100))
        #expect(twoByte.count == 2 + 122)
        // "😀" is 4 bytes: 30 fill 120 bytes.
        let fourByte = WebSocketFrameEncoder.closePayload(code: 1000, reason: String(repeating: "😀", count: 40))
        #expect(fourByte.count == 2 + 120)
        #expect(String(validating: fourByte[2...], as: UTF8.self) == String(repeating: "😀", count: 30))
        // The result is a valid close frame payload for our own parser.
        var parser = WebSocketParser(role: .client, maxMessageBytes: 0)
        parser.append(WebSocketFrameEncoder.encode(opcode: .close, payload: twoByte))
        #expect(try parser.next() == .close(code: 1000, reason: String(repeating: "é", count: 61)))
    }
}
