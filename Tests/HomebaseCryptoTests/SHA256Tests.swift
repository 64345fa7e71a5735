import HomebaseCore
import Testing
@testable import HomebaseCrypto

@Suite struct SHA256Tests {
    @Test func knownAnswers() {
        // FIPS 180-2 examples.
        #expect(Hex.encode(SHA256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hex.encode(SHA256.hash([UInt8]()))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func piecesHashLikeTheWhole() {
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = SHA256Hasher()
        var i = 0
        for size in [1, 63, 64, 65, 4096, 31_000] {
            hasher.update(data[i..<min(i + size, data.count)])
            i += size
        }
        data[i...].withUnsafeBytes { hasher.update(raw: $0) }
        #expect(hasher.finalize() == SHA256.hash(data))
    }
}
