import HomebaseCore
import Testing

@testable import HomebaseCrypto

@Suite struct SignatureTests {
    let key: SigningSecretKey
    let message = Array("advert payload".utf8)
    let signature: [UInt8]

    init() throws {
        self.key = try SigningSecretKey(seed: Array(1...32))
        self.signature = self.key.sign(self.message, context: SignatureContext.advert)
    }

    private func verify(
        _ signature: [UInt8], _ message: [UInt8], context: String = SignatureContext.advert, key: PublicKey? = nil
    ) -> Bool {
        Signature.verify(signature, message: message, context: context, publicKey: key ?? self.key.publicKey)
    }

    @Test func validSignatureVerifies() {
        #expect(self.verify(self.signature, self.message))
    }

    @Test func everyFlippedSignatureBitFails() {
        for bit in 0..<(self.signature.count * 8) {
            var tampered = self.signature
            tampered[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(!self.verify(tampered, self.message), "bit \(bit)")
        }
    }

    @Test func flippedMessageBitOrWrongContextFails() {
        var tampered = self.message
        tampered[0] ^= 0x80
        #expect(!self.verify(self.signature, tampered))
        #expect(!self.verify(self.signature, self.message, context: SignatureContext.grant))
        #expect(!self.verify(self.signature, self.message, context: ""))
        #expect(!self.verify(self.signature, Array(SignatureContext.advert.utf8) + self.message, context: "x"))
    }

    @Test(arguments: [0, 1, 32, 63, 65, 128, 4096])
    func signatureOfWrongSizeIsRejectedWithoutTrapping(size: Int) {
        let garbage = [UInt8](repeating: 0x5A, count: size)
        #expect(!self.verify(garbage, self.message))
    }

    @Test func validSignatureWithAByteAddedOrRemovedFails() {
        #expect(!self.verify(self.signature + [0], self.message))
        #expect(!self.verify(Array(self.signature.dropLast()), self.message))
    }

    @Test(arguments: [
        String(repeating: "00", count: 32),  // small order (y = 0)
        "01" + String(repeating: "00", count: 31),  // the identity
        "ec" + String(repeating: "ff", count: 30) + "7f",  // y = -1, order 2
        String(repeating: "ff", count: 32),  // non-canonical y
    ])
    func hostilePublicKeysAreRejectedWithoutTrapping(hex: String) throws {
        let hostile = try publicKey(hex)
        #expect(!self.verify(self.signature, self.message, key: hostile))
        #expect(!self.verify([UInt8](repeating: 0, count: 64), self.message, key: hostile))
        #expect(!self.verify([UInt8](repeating: 0, count: 64), [], key: hostile))
    }

    @Test func randomGarbageNeverVerifies() throws {
        for _ in 0..<200 {
            let garbageKey = try #require(PublicKey(bytes: SecureRandom.bytes(32)))
            let garbageSignature = SecureRandom.bytes(64)
            #expect(!self.verify(garbageSignature, SecureRandom.bytes(Int.random(in: 0..<100)), key: garbageKey))
        }
    }

    @Test func emptyMessageSignsAndVerifies() {
        let signature = self.key.sign([UInt8](), context: SignatureContext.relayAuth)
        #expect(self.verify(signature, [], context: SignatureContext.relayAuth))
        #expect(!self.verify(signature, [0], context: SignatureContext.relayAuth))
    }
}
