import HomebaseCore
import Testing

@testable import HomebaseCrypto

@Suite struct E2ETests {
    let a: SigningSecretKey
    let b: SigningSecretKey

    init() throws {
        self.a = try SigningSecretKey(seed: [UInt8](repeating: 0xA1, count: 32))
        self.b = try SigningSecretKey(seed: [UInt8](repeating: 0xB2, count: 32))
    }

    @Test func bothSidesDeriveTheSameKey() throws {
        let ab = try E2E.deriveKey(selfSecret: self.a, peer: self.b.publicKey)
        let ba = try E2E.deriveKey(selfSecret: self.b, peer: self.a.publicKey)
        #expect(ab == ba)
    }

    @Test func differentPeersGiveDifferentKeys() throws {
        let c = SigningSecretKey.generate()
        let ab = try E2E.deriveKey(selfSecret: self.a, peer: self.b.publicKey)
        let ac = try E2E.deriveKey(selfSecret: self.a, peer: c.publicKey)
        #expect(ab != ac)
    }

    @Test func keyFromConvertedX25519KeysMatches() throws {
        // The Ed25519 entry point is the X25519 derivation applied to the converted keys (protocol-v1 §1, §3);
        // the construction itself is pinned by crosscheck-v1.json's e2e_key_a_b.
        let selfX = try self.a.x25519SecretKey()
        let peerX = try X25519.publicKey(for: self.b.publicKey)
        let fromX25519 = try E2E.deriveKey(
            selfX25519Secret: selfX, peerX25519Public: peerX, selfPublic: self.a.publicKey, peer: self.b.publicKey)
        #expect(fromX25519 == (try E2E.deriveKey(selfSecret: self.a, peer: self.b.publicKey)))
    }

    @Test func swappingTheEd25519KeysInTheHashDoesNotChangeTheKey() throws {
        // (lo, hi) are sorted, so which side is "self" does not matter for the hash input.
        let selfX = try self.a.x25519SecretKey()
        let peerX = try X25519.publicKey(for: self.b.publicKey)
        let forward = try E2E.deriveKey(
            selfX25519Secret: selfX, peerX25519Public: peerX, selfPublic: self.a.publicKey, peer: self.b.publicKey)
        let swapped = try E2E.deriveKey(
            selfX25519Secret: selfX, peerX25519Public: peerX, selfPublic: self.b.publicKey, peer: self.a.publicKey)
        #expect(forward == swapped)
    }

    @Test(arguments: [
        String(repeating: "00", count: 32),  // y = 0: small order
        "01" + String(repeating: "00", count: 31),  // the identity point
        "ec" + String(repeating: "ff", count: 30) + "7f",  // y = -1: order 2
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",  // order 8
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",  // order 8
    ])
    func lowOrderPeerKeyIsRejected(hex: String) throws {
        let peer = try publicKey(hex)
        #expect(throws: CryptoError.invalidPublicKey) { try E2E.deriveKey(selfSecret: self.a, peer: peer) }
        #expect(throws: CryptoError.invalidPublicKey) { try X25519.publicKey(for: peer) }
    }

    @Test(arguments: [
        String(repeating: "00", count: 32),  // u = 0
        "01" + String(repeating: "00", count: 31),  // u = 1
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",  // order 8
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",  // order 8
        "ec" + String(repeating: "ff", count: 30) + "7f",  // u = p - 1
        "ed" + String(repeating: "ff", count: 30) + "7f",  // u = p, reduces to 0
        "ee" + String(repeating: "ff", count: 30) + "7f",  // u = p + 1, reduces to 1
    ])
    func lowOrderX25519PointGivesAllZeroSecretAndIsRejected(hex: String) throws {
        let selfX = try self.a.x25519SecretKey()
        #expect(throws: CryptoError.allZeroSharedSecret) {
            try E2E.deriveKey(
                selfX25519Secret: selfX, peerX25519Public: try unhex(hex), selfPublic: self.a.publicKey,
                peer: self.b.publicKey)
        }
    }

    @Test func x25519PeerKeyOfWrongLengthThrows() throws {
        let selfX = try self.a.x25519SecretKey()
        #expect(throws: CryptoError.wrongLength(expected: 32, actual: 31)) {
            try E2E.deriveKey(
                selfX25519Secret: selfX, peerX25519Public: [UInt8](repeating: 9, count: 31),
                selfPublic: self.a.publicKey, peer: self.b.publicKey)
        }
    }

    @Test func randomBytesAsAPeerKeyNeverTrap() throws {
        // About half of random 32-byte strings are not curve points; each must throw or give a key, never trap.
        var rejected = 0
        for _ in 0..<100 {
            let peer = try #require(PublicKey(bytes: SecureRandom.bytes(32)))
            do {
                _ = try E2E.deriveKey(selfSecret: self.a, peer: peer)
            } catch {
                #expect(error == .invalidPublicKey)
                rejected += 1
            }
        }
        #expect(rejected > 0)
    }

    @Test func deriveKeyWithOneselfIsSymmetricToo() throws {
        let key = try E2E.deriveKey(selfSecret: self.a, peer: self.a.publicKey)
        #expect(key == (try E2E.deriveKey(selfSecret: self.a, peer: self.a.publicKey)))
    }
}
