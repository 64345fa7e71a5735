import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// Expected values from Python's hashlib.blake2b (an independent BLAKE2b implementation) and RFC 7693 Appendix A.
@Suite struct GenericHashTests {
    @Test func emptyInputMatchesKnownDigest() {
        #expect(
            Hex.encode(GenericHash.hash([UInt8]()))
                == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
    }

    @Test func abcMatchesRFC7693() {
        #expect(
            Hex.encode(GenericHash.hash(Array("abc".utf8), outputLength: 64))
                == "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")
    }

    @Test func keyedHashesMatchKnownDigests() {
        #expect(
            Hex.encode(GenericHash.hash([UInt8](), outputLength: 64, key: Array(0..<64)))
                == "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786"
                + "b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568")
        // A one-byte key, below crypto_generichash_KEYBYTES_MIN: libsodium accepts it, as the e2e key needs.
        #expect(
            Hex.encode(GenericHash.hash(Array("homebase".utf8), outputLength: 16, key: Array("k".utf8)))
                == "0e8446e3925eef637d814b41cfbd79c8")
    }

    @Test func emptyKeyIsTheUnkeyedHash() {
        #expect(GenericHash.hash([1, 2, 3], key: []) == GenericHash.hash([1, 2, 3]))
    }

    @Test func incrementalHashingMatchesOneShotAtEverySplit() {
        let data = [UInt8](0..<200)
        let expected = GenericHash.hash(data, key: Array("homebase-e2e-v1".utf8))
        for split in [0, 1, 63, 64, 127, 128, 129, 200] {
            var hasher = GenericHasher(outputLength: 32, key: Array("homebase-e2e-v1".utf8))
            hasher.update(data[..<split])
            hasher.update(data[split...])
            #expect(hasher.finalize() == expected, "split at \(split)")
        }
    }

    @Test func nonContiguousCollectionsHashLikeArrays() {
        let data = [UInt8](0..<50)
        #expect(GenericHash.hash(data.reversed()) == GenericHash.hash(Array(data.reversed())))
        #expect(GenericHash.hash(data.lazy.map { $0 &+ 1 }) == GenericHash.hash(data.map { $0 &+ 1 }))
    }

    @Test func outputLengthIsHonoured() {
        #expect(GenericHash.hash([1], outputLength: 16).count == 16)
        #expect(GenericHash.hash([1], outputLength: 64).count == 64)
        #expect(GenericHash.hash([1], outputLength: 16) != Array(GenericHash.hash([1], outputLength: 64).prefix(16)))
    }
}
