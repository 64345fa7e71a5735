import HomebaseCore
import Testing

@testable import HomebaseCrypto

@Suite struct EnvelopeSealerTests {
    let sender = SigningSecretKey.generate()
    let recipient = SigningSecretKey.generate()

    private func header(nonce: [UInt8] = SecureRandom.bytes(24)) -> EnvelopeHeader {
        EnvelopeHeader(
            channel: .sibling, sender: self.sender.publicKey, recipient: self.recipient.publicKey,
            messageID: SecureRandom.bytes(16), sentAtMs: 1_764_400_000_000, nonce: nonce)
    }

    @Test func sealedEnvelopeSurvivesEncodingAndOpensForTheRecipient() throws {
        let plaintext = EnvelopePadding.pad(Array(#"{"type":"advert.request"}"#.utf8))
        let sendKey = try E2E.deriveKey(selfSecret: self.sender, peer: self.recipient.publicKey)
        let envelope = EnvelopeSealer.seal(header: self.header(), plaintext: plaintext, key: sendKey)
        #expect(envelope.ciphertext.count == plaintext.count + 16)

        let received = try Envelope(decoding: envelope.encoded())
        let receiveKey = try E2E.deriveKey(selfSecret: self.recipient, peer: self.sender.publicKey)
        #expect(try EnvelopeSealer.open(received, key: receiveKey) == plaintext)
    }

    @Test func sealingInOneBufferGivesTheBytesOfSealThenEncode() throws {
        // Lengths around the padding blocks, and JSON-like and binary bytes.
        let key = try E2E.deriveKey(selfSecret: self.sender, peer: self.recipient.publicKey)
        for count in [0, 1, 25, 255, 256, 257, 511, 512, 1_000, 4_097] {
            let plaintext = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let header = self.header()
            let reference = EnvelopeSealer.seal(header: header, plaintext: EnvelopePadding.pad(plaintext), key: key)
                .encoded()
            let fused = EnvelopeSealer.sealEncoded(header: header, unpaddedPlaintext: plaintext, key: key)
            #expect(fused == reference, "\(count) bytes")
            #expect(fused.count == EnvelopeHeader.byteCount + EnvelopePadding.paddedCount(count) + 16)
            let receiveKey = try E2E.deriveKey(selfSecret: self.recipient, peer: self.sender.publicKey)
            #expect(EnvelopePadding.unpad(try EnvelopeSealer.open(try Envelope(decoding: fused), key: receiveKey))
                        .elementsEqual(EnvelopePadding.unpad(EnvelopePadding.pad(plaintext))))
        }
    }

    @Test func sealingAfterAFrameHeadLeavesTheHeadAndSealsTheRest() throws {
        let key = try E2E.deriveKey(selfSecret: self.sender, peer: self.recipient.publicKey)
        let head: [UInt8] = Array(repeating: 0xEE, count: 38)
        for count in [0, 200, 256, 300] {
            let plaintext = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let h = self.header()
            var out = head
            EnvelopeSealer.seal(channel: h.channel, sender: h.sender, recipient: h.recipient, messageID: h.messageID,
                                sentAtMs: h.sentAtMs, nonce: h.nonce, key: key, appendingTo: &out) { $0 += plaintext }
            let reference = EnvelopeSealer.seal(header: h, plaintext: EnvelopePadding.pad(plaintext), key: key).encoded()
            #expect(out == head + reference, "\(count) bytes")
        }
    }

    @Test func aThirdPartyKeyCannotOpen() throws {
        let key = try E2E.deriveKey(selfSecret: self.sender, peer: self.recipient.publicKey)
        let envelope = EnvelopeSealer.seal(header: self.header(), plaintext: [1, 2, 3], key: key)
        let eavesdropper = try E2E.deriveKey(selfSecret: SigningSecretKey.generate(), peer: self.sender.publicKey)
        #expect(throws: CryptoError.authenticationFailure) { try EnvelopeSealer.open(envelope, key: eavesdropper) }
    }

    @Test func rewrittenHeaderFieldsFailToOpen() throws {
        let key = SymmetricKey.generate()
        let envelope = EnvelopeSealer.seal(header: self.header(), plaintext: [1, 2, 3], key: key)

        var redirected = envelope
        redirected.header.recipient = SigningSecretKey.generate().publicKey
        var rechanneled = envelope
        rechanneled.header.channel = .contact
        var backdated = envelope
        backdated.header.sentAtMs -= 1
        for tampered in [redirected, rechanneled, backdated] {
            #expect(throws: CryptoError.authenticationFailure) { try EnvelopeSealer.open(tampered, key: key) }
        }
    }

    @Test func malformedNonceOrShortCiphertextThrowsWrongLength() throws {
        let key = SymmetricKey.generate()
        var envelope = EnvelopeSealer.seal(header: self.header(), plaintext: [1], key: key)
        var shortNonce = envelope
        shortNonce.header.nonce = Array(envelope.header.nonce.prefix(12))
        #expect(throws: CryptoError.wrongLength(expected: 24, actual: 12)) {
            try EnvelopeSealer.open(shortNonce, key: key)
        }
        envelope.ciphertext = Array(envelope.ciphertext.prefix(3))
        #expect(throws: CryptoError.wrongLength(expected: 16, actual: 3)) {
            try EnvelopeSealer.open(envelope, key: key)
        }
    }
}
