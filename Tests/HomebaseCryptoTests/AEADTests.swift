import Testing

@testable import HomebaseCrypto

@Suite struct AEADTests {
    let key = SymmetricKey.generate()
    let nonce = SecureRandom.bytes(24)
    let ad: [UInt8] = Array("header".utf8)
    let plaintext: [UInt8] = Array("hello, homebase".utf8)

    @Test func sealThenOpenRoundTrips() throws {
        let sealed = try AEAD.seal(plaintext: self.plaintext, ad: self.ad, nonce: self.nonce, key: self.key)
        #expect(sealed.count == self.plaintext.count + 16)
        #expect(try AEAD.open(ciphertext: sealed, ad: self.ad, nonce: self.nonce, key: self.key) == self.plaintext)
    }

    @Test func emptyPlaintextGivesJustATag() throws {
        let sealed = try AEAD.seal(plaintext: [UInt8](), ad: [UInt8](), nonce: self.nonce, key: self.key)
        #expect(sealed.count == 16)
        #expect(try AEAD.open(ciphertext: sealed, ad: [UInt8](), nonce: self.nonce, key: self.key) == [])
    }

    @Test(arguments: [0, 12, 23, 25, 32])
    func nonceOfWrongLengthThrows(length: Int) throws {
        let nonce = [UInt8](repeating: 1, count: length)
        #expect(throws: CryptoError.wrongLength(expected: 24, actual: length)) {
            try AEAD.seal(plaintext: self.plaintext, ad: self.ad, nonce: nonce, key: self.key)
        }
        let sealed = try AEAD.seal(plaintext: self.plaintext, ad: self.ad, nonce: self.nonce, key: self.key)
        #expect(throws: CryptoError.wrongLength(expected: 24, actual: length)) {
            try AEAD.open(ciphertext: sealed, ad: self.ad, nonce: nonce, key: self.key)
        }
    }

    @Test(arguments: [0, 1, 15])
    func ciphertextShorterThanATagThrows(length: Int) {
        #expect(throws: CryptoError.wrongLength(expected: 16, actual: length)) {
            try AEAD.open(
                ciphertext: [UInt8](repeating: 0, count: length), ad: self.ad, nonce: self.nonce, key: self.key)
        }
    }

    @Test func wrongKeyNonceAdOrTamperingFailsAuthentication() throws {
        let sealed = try AEAD.seal(plaintext: self.plaintext, ad: self.ad, nonce: self.nonce, key: self.key)
        var otherNonce = self.nonce
        otherNonce[23] ^= 1
        #expect(throws: CryptoError.authenticationFailure) {
            try AEAD.open(ciphertext: sealed, ad: self.ad, nonce: self.nonce, key: SymmetricKey.generate())
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try AEAD.open(ciphertext: sealed, ad: self.ad, nonce: otherNonce, key: self.key)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try AEAD.open(ciphertext: sealed, ad: self.ad + [0], nonce: self.nonce, key: self.key)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try AEAD.open(ciphertext: sealed.dropLast(), ad: self.ad, nonce: self.nonce, key: self.key)
        }
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x40
            #expect(throws: CryptoError.authenticationFailure, "byte \(index)") {
                try AEAD.open(ciphertext: tampered, ad: self.ad, nonce: self.nonce, key: self.key)
            }
        }
    }

    @Test func sameInputsGiveTheSameCiphertext() throws {
        // Deterministic given the nonce: all randomness is the caller's nonce, which keeps vectors reproducible.
        let first = try AEAD.seal(plaintext: self.plaintext, ad: self.ad, nonce: self.nonce, key: self.key)
        let second = try AEAD.seal(
            plaintext: self.plaintext[...], ad: self.ad[...], nonce: self.nonce[...], key: self.key)
        #expect(first == second)
    }
}
