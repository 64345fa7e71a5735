import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// Every crypto value in crosscheck-v1.json (computed independently with PyNaCl) is reproduced exactly.
@Suite struct CrosscheckV1Tests {
    let vectors: Crosscheck
    let a: SigningSecretKey
    let b: SigningSecretKey

    init() throws {
        self.vectors = try Fixtures.crosscheck
        self.a = try SigningSecretKey(seed: unhex(self.vectors.identityA.ed25519Seed))
        self.b = try SigningSecretKey(seed: unhex(self.vectors.identityB.ed25519Seed))
    }

    @Test func fixtureCopyMatchesSharedDesignFileWhenPresent() throws {
        // In CI shared/ sits beside the clone; locally it may not. The copy in Fixtures/ is what tests read.
        let shared = Fixtures.repositoryRoot.deletingLastPathComponent()
            .appendingPathComponent("shared/design/crosscheck-v1.json")
        guard FileManager.default.fileExists(atPath: shared.path) else { return }
        #expect(try Data(contentsOf: shared) == Data(contentsOf: Fixtures.url("crosscheck-v1.json")))
    }

    @Test func seedsGiveTheExpectedEd25519AndX25519Keys() throws {
        #expect(self.a.publicKey.hex == self.vectors.identityA.ed25519Pk)
        #expect(self.b.publicKey.hex == self.vectors.identityB.ed25519Pk)
        #expect(self.a.seedBytes() == (try unhex(self.vectors.identityA.ed25519Seed)))

        let x25519Secret = try self.a.x25519SecretKey().withUnsafeBytes { Array($0) }
        #expect(Hex.encode(x25519Secret) == self.vectors.identityA.x25519Sk)
        #expect(Hex.encode(try X25519.publicKey(for: self.a.publicKey)) == self.vectors.identityA.x25519Pk)
    }

    @Test func relayAuthSignatureMatchesTheAuthFrame() throws {
        let nonce = try unhex(self.vectors.relayAuth.challengeNonce)
        let frame = try unhex(self.vectors.relayAuth.authFrameFromA)
        // The CHALLENGE frame carries this nonce at bytes 2..<34 (type, version, nonce, relay_time_ms).
        #expect(Array(try unhex(self.vectors.relayAuth.challengeFrame)[2..<34]) == nonce)

        let signature = self.a.sign(nonce, context: SignatureContext.relayAuth)
        #expect(frame.first == 0x02)  // AUTH
        #expect(Array(frame.dropFirst()) == self.a.publicKey.bytes + signature)
        #expect(
            Signature.verify(
                signature, message: nonce, context: SignatureContext.relayAuth, publicKey: self.a.publicKey))
        // The same signature must not pass as another key's, or for another nonce.
        #expect(
            !Signature.verify(
                signature, message: nonce, context: SignatureContext.relayAuth, publicKey: self.b.publicKey))
        #expect(
            !Signature.verify(
                signature, message: nonce.dropLast() + [0xAB], context: SignatureContext.relayAuth,
                publicKey: self.a.publicKey))
    }

    @Test func e2eKeyIsTheSameInBothDirections() throws {
        let ab = try E2E.deriveKey(selfSecret: self.a, peer: self.b.publicKey)
        let ba = try E2E.deriveKey(selfSecret: self.b, peer: self.a.publicKey)
        #expect(ab.withUnsafeBytes { Hex.encode($0) } == self.vectors.e2eKeyAB)
        #expect(ba.withUnsafeBytes { Hex.encode($0) } == self.vectors.e2eKeyAB)
        #expect(ab == ba)
    }

    private func envelopeInputs() throws -> (header: EnvelopeHeader, plaintext: [UInt8], key: SymmetricKey) {
        let e = self.vectors.envelopeAToB
        let header = EnvelopeHeader(
            channel: Channel(rawValue: e.channel), sender: self.a.publicKey, recipient: self.b.publicKey,
            messageID: try unhex(e.messageId), sentAtMs: e.sentAtMs, nonce: try unhex(e.nonce))
        let key = try E2E.deriveKey(selfSecret: self.a, peer: self.b.publicKey)
        return (header, Array(e.plaintextUtf8.utf8), key)
    }

    @Test func envelopeSealsToTheExactBytes() throws {
        let (header, plaintext, key) = try self.envelopeInputs()
        #expect(plaintext.count == 256)
        let envelope = EnvelopeSealer.seal(header: header, plaintext: plaintext, key: key)
        #expect(Hex.encode(envelope.encoded()) == self.vectors.envelopeAToB.bytes)
    }

    @Test func envelopeOpensWithTheKeyFromEitherSide() throws {
        let bytes = try unhex(self.vectors.envelopeAToB.bytes)
        let envelope = try Envelope(decoding: bytes)
        let (_, plaintext, _) = try self.envelopeInputs()
        let receiverKey = try E2E.deriveKey(selfSecret: self.b, peer: self.a.publicKey)
        #expect(try EnvelopeSealer.open(envelope, key: receiverKey) == plaintext)
    }

    @Test func flippingAnyEnvelopeByteFailsToOpen() throws {
        let bytes = try unhex(self.vectors.envelopeAToB.bytes)
        let key = try E2E.deriveKey(selfSecret: self.b, peer: self.a.publicKey)
        for index in bytes.indices {
            var tampered = bytes
            tampered[index] ^= 0x01
            let envelope = try Envelope(decoding: tampered)
            #expect(throws: CryptoError.authenticationFailure, "byte \(index)") {
                try EnvelopeSealer.open(envelope, key: key)
            }
        }
    }

    @Test func advertSignatureMatchesAndBase64Agrees() throws {
        let advert = self.vectors.advertSignedByA
        let payload = Array(advert.payloadUtf8.utf8)
        let signature = self.a.sign(payload, context: SignatureContext.advert)
        #expect(Hex.encode(signature) == advert.sig)
        #expect(Data(signature).base64EncodedString() == advert.messageJson.sig)
        #expect(Data(payload).base64EncodedString() == advert.messageJson.payload)
        #expect(advert.messageJson.type == "advert")
        #expect(
            Signature.verify(signature, message: payload, context: SignatureContext.advert, publicKey: self.a.publicKey)
        )

        var tampered = payload
        tampered[tampered.count / 2] ^= 0x01
        #expect(
            !Signature.verify(
                signature, message: tampered, context: SignatureContext.advert, publicKey: self.a.publicKey))
        // An advert signature is not a roster signature over the same bytes.
        #expect(
            !Signature.verify(
                signature, message: payload, context: SignatureContext.roster, publicKey: self.a.publicKey))
    }

    @Test func conversationBaseDigestMatches() throws {
        let c = self.vectors.conversationBaseDigest
        #expect(ConversationDigest.compute(messages: c.messages.map { ($0.role, $0.content) }) == c.baseDigest)
    }
}
