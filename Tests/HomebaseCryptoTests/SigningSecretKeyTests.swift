import HomebaseCore
import Testing

@testable import HomebaseCrypto

@Suite struct SigningSecretKeyTests {
    @Test(arguments: [0, 1, 31, 33, 64])
    func seedOfWrongLengthThrows(length: Int) {
        #expect(throws: CryptoError.wrongLength(expected: 32, actual: length)) {
            try SigningSecretKey(seed: [UInt8](repeating: 7, count: length))
        }
    }

    @Test func generatedKeysAreDistinctAndRestoreFromTheirSeed() throws {
        let first = SigningSecretKey.generate()
        let second = SigningSecretKey.generate()
        #expect(first.publicKey != second.publicKey)
        #expect(first.seedBytes() != second.seedBytes())

        let restored = try SigningSecretKey(seed: first.seedBytes())
        #expect(restored.publicKey == first.publicKey)
        #expect(
            restored.sign([1, 2, 3], context: SignatureContext.grant)
                == first.sign([1, 2, 3], context: SignatureContext.grant))
    }

    @Test func signaturesAre64BytesDeterministicAndVerify() throws {
        let key = try SigningSecretKey(seed: [UInt8](repeating: 0x42, count: 32))
        let message = Array("roster payload".utf8)
        let signature = key.sign(message, context: SignatureContext.roster)
        #expect(signature.count == 64)
        #expect(key.sign(message, context: SignatureContext.roster) == signature)
        #expect(
            Signature.verify(signature, message: message, context: SignatureContext.roster, publicKey: key.publicKey))
    }

    @Test func signatureCoversContextThenMessage() throws {
        // The signed bytes are exactly ASCII(context) || message, with no separator or terminator.
        let key = try SigningSecretKey(seed: [UInt8](repeating: 0x42, count: 32))
        let message: [UInt8] = [0xAA, 0xBB]
        let withContext = key.sign(message, context: SignatureContext.relayAuth)
        let prefixed = key.sign(Array(SignatureContext.relayAuth.utf8) + message, context: "")
        #expect(withContext == prefixed)
    }

    @Test func eachContextGivesADifferentSignature() throws {
        let key = try SigningSecretKey(seed: [UInt8](repeating: 0x42, count: 32))
        let contexts = [
            SignatureContext.relayAuth, SignatureContext.advert, SignatureContext.roster, SignatureContext.grant,
        ]
        let signatures = Set(contexts.map { key.sign([9, 9, 9], context: $0) })
        #expect(signatures.count == contexts.count)
        #expect(
            contexts == ["homebase-relay-auth-v1", "homebase-advert-v1", "homebase-roster-v1", "homebase-grant-v1"])
    }

    @Test func signsAnyCollectionOfBytes() throws {
        let key = try SigningSecretKey(seed: [UInt8](repeating: 1, count: 32))
        let bytes: [UInt8] = [0, 1, 2, 3, 4, 5]
        #expect(
            key.sign(bytes[2...], context: SignatureContext.advert)
                == key.sign([2, 3, 4, 5], context: SignatureContext.advert))
        #expect(
            key.sign(bytes.reversed(), context: SignatureContext.advert)
                == key.sign([5, 4, 3, 2, 1, 0], context: SignatureContext.advert))
    }

    @Test func secretBytesWipeClearsMemory() {
        // deinit and init's error path both go through SecretBytes.wipe; check that it really zeroes.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
        SecretBytes.wipe(buffer)
        #expect(buffer.allSatisfy { $0 == 0 })
    }

    @Test func secretBytesInitErrorPropagatesAfterWiping() {
        struct Boom: Error, Equatable {}
        #expect(throws: Boom()) {
            _ = try SecretBytes(count: 32) { (buffer) throws(Boom) -> Void in
                buffer.initializeMemory(as: UInt8.self, repeating: 0xFF)
                throw Boom()
            }
        }
    }

    @Test func keysAreReleasedWhenDropped() throws {
        // Exercises deinit (sodium_memzero, then deallocate) many times; a double free or an overrun would crash.
        weak var weakKey: SigningSecretKey?
        do {
            let key = try SigningSecretKey(seed: [UInt8](repeating: 3, count: 32))
            weakKey = key
            #expect(weakKey != nil)
        }
        #expect(weakKey == nil)
        for _ in 0..<200 {
            _ = SigningSecretKey.generate().sign([1], context: SignatureContext.grant)
        }
    }

    @Test func signingFromManyTasksAtOnceAgrees() async throws {
        let key = try SigningSecretKey(seed: [UInt8](repeating: 5, count: 32))
        let expected = key.sign([7], context: SignatureContext.advert)
        let results = await withTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<16 { group.addTask { key.sign([7], context: SignatureContext.advert) } }
            return await group.reduce(into: [[UInt8]]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 == expected })
    }
}
