import FoundationEssentials
import Testing
@testable import HomebaseCore

@Suite struct EnvelopeTests {
    struct Cross: Decodable {
        struct Env: Decodable {
            var channel: UInt8
            var message_id: String
            var sent_at_ms: UInt64
            var nonce: String
            var plaintext_utf8: String
            var bytes: String
        }
        var envelope_a_to_b: Env
    }

    static let a = PublicKey(hex: "79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664")!
    static let b = PublicKey(hex: "da29e95b02e00ffa15645775fb1d2ba222a1943395eea06b94e2c057b7be69d0")!

    @Test func headerLayoutMatchesTheCrosscheckEnvelope() throws {
        let c = try Fixtures.load("crosscheck-v1.json", as: Cross.self).envelope_a_to_b
        let bytes = unhex(c.bytes)
        let env = try Envelope(decoding: bytes)
        #expect(env.header.version == 1)
        #expect(env.header.channel == .contact)
        #expect(env.header.sender == Self.a)
        #expect(env.header.recipient == Self.b)
        #expect(env.header.messageID == unhex(c.message_id))
        #expect(env.header.sentAtMs == c.sent_at_ms)
        #expect(env.header.nonce == unhex(c.nonce))
        #expect(env.header.additionalData == Array(bytes[0..<90]))
        #expect(env.encoded() == bytes)
        // ciphertext = padded plaintext + 16-byte tag
        #expect(env.ciphertext.count == c.plaintext_utf8.utf8.count + 16)
    }

    @Test func shortEnvelopesAreTruncated() {
        let header = EnvelopeHeader(channel: .sibling, sender: Self.a, recipient: Self.b,
                                    messageID: [UInt8](repeating: 1, count: 16), sentAtMs: 5,
                                    nonce: [UInt8](repeating: 2, count: 24))
        let full = header.encoded() + [UInt8](repeating: 0, count: 16)
        #expect((try? Envelope(decoding: full)) != nil)
        for n in [0, 1, 89, 90, 113, 114, 129] {
            #expect(throws: EnvelopeError.truncated) { _ = try Envelope(decoding: Array(full[0..<n])) }
        }
    }

    @Test func unknownChannelAndVersionAreKeptForTheReceiverToJudge() throws {
        var bytes = EnvelopeHeader(channel: .unknown(9), sender: Self.a, recipient: Self.b,
                                   messageID: [UInt8](repeating: 1, count: 16), sentAtMs: 5,
                                   nonce: [UInt8](repeating: 2, count: 24)).encoded() + [UInt8](repeating: 0, count: 16)
        bytes[0] = 7
        let env = try Envelope(decoding: bytes)
        #expect(env.header.version == 7)
        #expect(env.header.channel == .unknown(9))
        #expect(env.header.channel.rawValue == 9)
    }

    @Test(arguments: [(0, 256), (1, 256), (255, 256), (256, 256), (257, 512), (600, 768)])
    func paddingReachesTheNextMultipleOf256(length: Int, padded: Int) {
        let p = EnvelopePadding.pad([UInt8](repeating: UInt8(ascii: "x"), count: length))
        #expect(p.count == padded)
        #expect(p[length...].allSatisfy { $0 == 0x20 })
        #expect(EnvelopePadding.unpad(p).count == length)
    }

    @Test func unpadAcceptsAnyTrailingWhitespace() {
        let p = Array("{\"type\":\"x\"} \t\r\n  ".utf8)
        #expect(Array(EnvelopePadding.unpad(p)) == Array("{\"type\":\"x\"}".utf8))
    }

    @Test func crosscheckPlaintextIsPaddedTo256() throws {
        let c = try Fixtures.load("crosscheck-v1.json", as: Cross.self).envelope_a_to_b
        let m = try Message(json: Array(c.plaintext_utf8.utf8))
        #expect(m == .advertRequest)
        #expect(m.paddedPlaintext().count == 256)
    }
}
