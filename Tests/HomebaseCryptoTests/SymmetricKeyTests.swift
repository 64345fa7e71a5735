import Testing

@testable import HomebaseCrypto

@Suite struct SymmetricKeyTests {
    @Test(arguments: [0, 16, 31, 33, 64])
    func wrongLengthThrows(length: Int) {
        #expect(throws: CryptoError.wrongLength(expected: 32, actual: length)) {
            try SymmetricKey(bytes: [UInt8](repeating: 1, count: length))
        }
    }

    @Test func equalityComparesEveryByte() throws {
        let bytes = [UInt8](0..<32)
        var lastDiffers = bytes
        lastDiffers[31] ^= 1
        var firstDiffers = bytes
        firstDiffers[0] ^= 1
        let key = try SymmetricKey(bytes: bytes)
        #expect(key == (try SymmetricKey(bytes: bytes)))
        #expect(key != (try SymmetricKey(bytes: lastDiffers)))
        #expect(key != (try SymmetricKey(bytes: firstDiffers)))
    }

    @Test func keepsTheBytesItWasGiven() throws {
        let bytes = [UInt8](100..<132)
        #expect(try SymmetricKey(bytes: bytes).withUnsafeBytes { Array($0) } == bytes)
    }

    @Test func generatedKeysAreDistinct() {
        #expect(SymmetricKey.generate() != SymmetricKey.generate())
    }
}
