import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// `Noise_IK_25519_ChaChaPoly_BLAKE2b` against the published cacophony vector (Protocol/envelope.md §7.1).
@Suite struct NoiseTests {
    struct Cacophony: Decodable {
        struct Vector: Decodable {
            struct Message: Decodable {
                var payload: String
                var ciphertext: String
            }
            var protocolName: String
            var initPrologue: String
            var initStatic: String
            var initEphemeral: String
            var initRemoteStatic: String
            var respStatic: String
            var respEphemeral: String
            var handshakeHash: String
            var messages: [Message]
        }
        var vector: Vector
    }

    @Test func cacophonyVectorReplays() throws {
        let v = try Fixtures.load("noise-ik-cacophony.json", as: Cacophony.self).vector
        #expect(v.protocolName == String(decoding: Noise.protocolName, as: UTF8.self))
        let responderStatic = try NoiseKeyPair(secretBytes: unhex(v.respStatic))
        #expect(responderStatic.publicKey == (try unhex(v.initRemoteStatic)))

        let initiator = NoiseIKInitiator(
            prologue: try unhex(v.initPrologue), s: try NoiseKeyPair(secretBytes: unhex(v.initStatic)),
            e: try NoiseKeyPair(secretBytes: unhex(v.initEphemeral)), rs: responderStatic.publicKey)
        let m1 = try initiator.writeMessage1(payload: unhex(v.messages[0].payload))
        #expect(Hex.encode(m1) == v.messages[0].ciphertext)

        let r = try NoiseIKResponder.respond(
            prologue: try unhex(v.initPrologue), s: responderStatic,
            e: try NoiseKeyPair(secretBytes: unhex(v.respEphemeral)), message1: m1,
            payload2: try unhex(v.messages[1].payload))
        #expect(r.payload == (try unhex(v.messages[0].payload)))
        #expect(r.rs == (try NoiseKeyPair(secretBytes: unhex(v.initStatic))).publicKey)
        #expect(Hex.encode(r.message2) == v.messages[1].ciphertext)

        let (p2, keys) = try initiator.readMessage2(r.message2)
        #expect(p2 == (try unhex(v.messages[1].payload)))
        #expect(Hex.encode(keys.handshakeHash) == v.handshakeHash)
        #expect(Hex.encode(r.keys.handshakeHash) == v.handshakeHash)

        // Transport: alternating directions, implicit nonces from 0, empty additional data.
        var toResponder = NoiseCipherState(key: keys.initiatorToResponder)
        var toInitiator = NoiseCipherState(key: keys.responderToInitiator)
        var responderIn = NoiseCipherState(key: r.keys.initiatorToResponder)
        var initiatorIn = NoiseCipherState(key: r.keys.responderToInitiator)
        for (i, message) in v.messages.dropFirst(2).enumerated() {
            let payload = try unhex(message.payload)
            if i % 2 == 0 {
                #expect(Hex.encode(toResponder.encryptWithAd([], payload)) == message.ciphertext)
                #expect(try responderIn.decryptWithAd([], unhex(message.ciphertext)) == payload)
            } else {
                #expect(Hex.encode(toInitiator.encryptWithAd([], payload)) == message.ciphertext)
                #expect(try initiatorIn.decryptWithAd([], unhex(message.ciphertext)) == payload)
            }
        }
    }

    @Test func aTamperedMessage1DoesNotOpen() throws {
        let s = NoiseKeyPair.generate()
        let initiator = NoiseIKInitiator(prologue: [1], s: .generate(), e: .generate(), rs: s.publicKey)
        var m1 = try initiator.writeMessage1(payload: [9, 9])
        m1[40] ^= 1
        #expect(throws: CryptoError.authenticationFailure) {
            _ = try NoiseIKResponder.respond(prologue: [1], s: s, e: .generate(), message1: m1, payload2: [])
        }
        // A different prologue is a different handshake hash: the encrypted static does not open.
        let other = NoiseIKInitiator(prologue: [2], s: .generate(), e: .generate(), rs: s.publicKey)
        let m1b = try other.writeMessage1(payload: [])
        #expect(throws: CryptoError.authenticationFailure) {
            _ = try NoiseIKResponder.respond(prologue: [1], s: s, e: .generate(), message1: m1b, payload2: [])
        }
    }

    @Test func aLowOrderEphemeralAbortsTheHandshake() throws {
        let s = NoiseKeyPair.generate()
        // An all-zero point (order 1): DH gives all zeroes, which must abort rather than key the session.
        let m1 = [UInt8](repeating: 0, count: 32) + [UInt8](repeating: 7, count: 48 + 16)
        #expect(throws: CryptoError.allZeroSharedSecret) {
            _ = try NoiseIKResponder.respond(prologue: [], s: s, e: .generate(), message1: m1, payload2: [])
        }
    }

    @Test func rekeyIsTheFirst32BytesOfEncryptingZeroesAtMaxNonce() throws {
        let k = try SymmetricKey(bytes: [UInt8](repeating: 0x42, count: 32))
        let expected = Array(Noise.encrypt(key: k, n: .max, ad: [], plaintext: [UInt8](repeating: 0, count: 32))
            .prefix(32))
        #expect(Noise.rekey(k) == (try SymmetricKey(bytes: expected)))
        #expect(Noise.rekey(k) != k)
    }

    @Test func hmacMatchesRFC2104OverBLAKE2b() {
        // HMAC-BLAKE2b-512 as RFC 2104 defines it, checked against a reference value computed with Python's
        // hmac module over hashlib.blake2b (key "key", message "The quick brown fox jumps over the lazy dog").
        let mac = Noise.hmac(key: Array("key".utf8), Array("The quick brown fox jumps over the lazy dog".utf8))
        #expect(Hex.encode(mac) == "92294f92c0dfb9b00ec9ae8bd94d7e7d8a036b885a499f149dfe2fd2199394aa"
                + "af6b8894a1730cccb2cd050f9bcf5062a38b51b0dab33207f8ef35ae2c9df51b")
    }
}
