import Testing
@testable import HomebaseCore

@Suite struct PairingCodeTests {
    static let key = String(repeating: "ab", count: 32)
    static let secret = "00112233445566778899aabbccddeeff"
    static let valid = "hb1:\(key):\(secret)@wss://relay.example.org/v1"

    @Test func formatsAndParsesTheExactLayout() throws {
        let code = PairingCode(homebase: PublicKey(hex: Self.key)!, secret: Hex.decode(Self.secret)!,
                               relayURL: "wss://relay.example.org/v1")
        #expect(code.text == Self.valid)
        #expect(try PairingCode.parse(Self.valid) == code)
        #expect(code.secretHex == Self.secret)
    }

    @Test func toleratesSurroundingWhitespaceAndUppercaseHex() throws {
        let code = try PairingCode.parse("  hb1:\(Self.key.uppercased()):\(Self.secret.uppercased())@wss://r\n")
        #expect(code.homebase.hex == Self.key)
        #expect(code.secretHex == Self.secret)
    }

    @Test func anAtSignInsideTheURLDoesNotShiftTheSplit() throws {
        let code = try PairingCode.parse("hb1:\(Self.key):\(Self.secret)@ws://user@host:8080/v1")
        #expect(code.relayURL == "ws://user@host:8080/v1")
    }

    @Test(arguments: [
        ("", PairingCode.ParseError.empty),
        ("   \n", .empty),
        ("hb2:\(key):\(secret)@wss://r", .wrongPrefix),
        ("\(key):\(secret)@wss://r", .wrongPrefix),
        ("hb1:\(key.dropLast(2)):\(secret)@wss://r", .badPublicKey),
        ("hb1:\(key)zz:\(secret)@wss://r", .badPublicKey),
        ("hb1:\(String(repeating: "g", count: 64)):\(secret)@wss://r", .badPublicKey),
        ("hb1:\(key)", .badPublicKey),
        ("hb1:\(key):\(secret.dropLast(2))@wss://r", .badSecret),
        ("hb1:\(key):\(secret)00@wss://r", .badSecret),
        ("hb1:\(key):\(String(repeating: "x", count: 32))@wss://r", .badSecret),
        ("hb1:\(key):", .badSecret),
        ("hb1:\(key):\(secret)", .missingRelayURL),
        ("hb1:\(key):\(secret)@", .missingRelayURL),
        ("hb1:\(key):\(secret)@https://relay.example.org", .badRelayURL),
        ("hb1:\(key):\(secret)@wss://", .badRelayURL),
        ("hb1:\(key):\(secret)@wss://relay example", .badRelayURL),
        ("hb1:\(key):\(secret)@wss://relay\u{7}", .badRelayURL),
        ("hb1:\(key):\(secret)@wss://r\u{e9}lay", .badRelayURL),
    ])
    func rejectsMalformedCodes(input: String, expected: PairingCode.ParseError) {
        #expect(throws: expected) { try PairingCode.parse(input) }
    }

    @Test func rejectsOversizedInputBeforeLookingAtIt() {
        let huge = Self.valid + String(repeating: "a", count: PairingCode.maxLength)
        #expect(throws: PairingCode.ParseError.tooLong) { try PairingCode.parse(huge) }
    }

    @Test func truncatedCodesNeverParse() {
        let bytes = Array(Self.valid.utf8)
        // Every prefix short of the URL's first byte after the scheme is incomplete.
        for n in 0..<(bytes.count - "relay.example.org/v1".utf8.count) {
            let prefix = String(decoding: bytes[0..<n], as: UTF8.self)
            #expect(throws: PairingCode.ParseError.self) { try PairingCode.parse(prefix) }
        }
    }

    @Test func nonASCIIInTheHexFieldsIsRejected() {
        let key = "é" + Self.key.dropFirst(2)
        #expect(throws: PairingCode.ParseError.badPublicKey) { try PairingCode.parse("hb1:\(key):\(Self.secret)@wss://r") }
    }
}
