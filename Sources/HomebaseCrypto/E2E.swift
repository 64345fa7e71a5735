internal import CSodium
public import HomebaseCore

/// The end-to-end key between two devices (protocol-v1 §3), the same in both directions.
public enum E2E {
    /// The BLAKE2b key that binds the derivation to this protocol: ASCII "homebase-e2e-v1" (15 bytes; libsodium
    /// accepts any key up to `crypto_generichash_KEYBYTES_MAX`, `KEYBYTES_MIN` is only a recommendation).
    static let derivationKey = Array("homebase-e2e-v1".utf8)

    /// Derives the key that seals envelopes between `selfSecret` and `peer`:
    /// `s = crypto_scalarmult(x25519_sk_self, x25519_pk_peer)`, `(lo, hi)` = the two Ed25519 public keys sorted
    /// bytewise, `key = crypto_generichash(32, s || lo || hi, key = "homebase-e2e-v1")`.
    ///
    /// - Throws: `CryptoError.invalidPublicKey` when `peer` is not a usable Ed25519 point (it cannot be converted
    ///   to X25519: not on the curve, small order, or outside the main subgroup), and
    ///   `CryptoError.allZeroSharedSecret` when the shared secret is all zeroes.
    public static func deriveKey(selfSecret: SigningSecretKey, peer: PublicKey) throws(CryptoError) -> SymmetricKey {
        let peerX25519 = try X25519.publicKey(for: peer)
        let selfX25519 = try selfSecret.x25519SecretKey()
        return try Self.deriveKey(
            selfX25519Secret: selfX25519, peerX25519Public: peerX25519, selfPublic: selfSecret.publicKey, peer: peer)
    }

    /// The derivation from X25519 keys on: split out so vectors can reach the all-zero check, which the Ed25519
    /// conversion above already makes unreachable for honest-looking keys.
    static func deriveKey(
        selfX25519Secret: SecretBytes, peerX25519Public: [UInt8], selfPublic: PublicKey, peer: PublicKey
    ) throws(CryptoError) -> SymmetricKey {
        let n = Int(crypto_scalarmult_BYTES)
        guard peerX25519Public.count == n else { throw .wrongLength(expected: n, actual: peerX25519Public.count) }
        guard selfX25519Secret.count == Int(crypto_scalarmult_SCALARBYTES) else {
            throw .wrongLength(expected: Int(crypto_scalarmult_SCALARBYTES), actual: selfX25519Secret.count)
        }
        let shared = try SecretBytes(count: n) { (s) throws(CryptoError) -> Void in
            let base = s.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let rc = selfX25519Secret.withUnsafeBytes { sk in
                crypto_scalarmult(base, sk.baseAddress!.assumingMemoryBound(to: UInt8.self), peerX25519Public)
            }
            // Unlike swift-crypto, which deliberately skips this check, protocol-v1 §3 requires refusing an
            // all-zero s: a low-order peer point would make the "shared" secret a constant an attacker knows.
            // libsodium's crypto_scalarmult already returns -1 for exactly that case; sodium_is_zero is checked
            // as well so the rule does not rest on one library version's behaviour.
            if rc != 0 || sodium_is_zero(base, n) == 1 { throw .allZeroSharedSecret }
        }
        let (lo, hi) = selfPublic < peer ? (selfPublic, peer) : (peer, selfPublic)
        var hasher = GenericHasher(outputLength: SymmetricKey.byteCount, key: Self.derivationKey)
        shared.withUnsafeBytes { hasher.update(raw: $0) }
        hasher.update(lo.bytes)
        hasher.update(hi.bytes)
        // `shared` is wiped when it goes out of scope here; the key goes straight into secret storage.
        return SymmetricKey(storage: hasher.finalizeIntoSecret())
    }
}

extension PublicKey {
    /// Whether messages can be sealed to this key: a valid Ed25519 point of the main subgroup. A key mistyped by
    /// hand almost always is not (a typo found before anything is sent, issue 39); one that is still names nobody.
    public var acceptsSealedMessages: Bool { (try? X25519.publicKey(for: self)) != nil }
}

/// X25519 conversions (protocol-v1 §1), internal except for what vectors and other implementations need.
enum X25519 {
    /// `crypto_sign_ed25519_pk_to_curve25519`. libsodium refuses small-order points, points not on the curve and
    /// points outside the main subgroup (it returns -1); all of those become `invalidPublicKey`.
    static func publicKey(for ed25519: PublicKey) throws(CryptoError) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: Int(crypto_scalarmult_curve25519_BYTES))
        guard crypto_sign_ed25519_pk_to_curve25519(&out, ed25519.bytes) == 0 else { throw .invalidPublicKey }
        return out
    }
}
