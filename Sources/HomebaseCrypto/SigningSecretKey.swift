internal import CSodium
public import HomebaseCore

/// A device's (or an account's) Ed25519 secret key (protocol-v1 §1).
///
/// Holds libsodium's 64-byte secret key (seed || public key) in memory that is zeroed with `sodium_memzero`
/// when the object is released. `@unchecked Sendable`: every stored property is set in `init` and never changes
/// afterwards, and signing only reads the secret, so concurrent use cannot race.
public final class SigningSecretKey: @unchecked Sendable {
    /// Bytes in a seed, the form persisted in the state database.
    public static let seedByteCount = Int(crypto_sign_SEEDBYTES)
    /// Bytes in a detached signature.
    public static let signatureByteCount = Int(crypto_sign_BYTES)
    static let secretKeyByteCount = Int(crypto_sign_SECRETKEYBYTES)

    /// libsodium's expanded secret key: seed[32] || pk[32].
    let secret: SecretBytes
    /// This key's public half: the device's address everywhere.
    public let publicKey: PublicKey

    /// Rebuilds a key pair from its 32-byte seed (`crypto_sign_seed_keypair`), e.g. from the state database.
    ///
    /// - Throws: `CryptoError.wrongLength` unless `seed` is exactly 32 bytes.
    public init(seed: some Collection<UInt8>) throws(CryptoError) {
        guard seed.count == Self.seedByteCount else {
            throw .wrongLength(expected: Self.seedByteCount, actual: seed.count)
        }
        Sodium.ensureInitialized()
        var seedCopy = Array(seed)
        defer { sodium_memzero(&seedCopy, seedCopy.count) }
        var pk = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        self.secret = try SecretBytes(count: Self.secretKeyByteCount) { (sk) throws(CryptoError) -> Void in
            let rc = crypto_sign_seed_keypair(&pk, sk.baseAddress!.assumingMemoryBound(to: UInt8.self), &seedCopy)
            guard rc == 0 else { throw .libsodium(function: "crypto_sign_seed_keypair", code: rc) }
        }
        // 32 bytes by construction: crypto_sign_PUBLICKEYBYTES is PublicKey.byteCount.
        self.publicKey = PublicKey(bytes: pk)!
    }

    /// A fresh random key pair: 32 bytes from `randombytes_buf` as the seed.
    public static func generate() -> SigningSecretKey {
        var seed = SecureRandom.bytes(Self.seedByteCount)
        defer { sodium_memzero(&seed, seed.count) }
        do {
            return try SigningSecretKey(seed: seed)
        } catch {
            // The seed is 32 bytes by construction and crypto_sign_seed_keypair always returns 0 in libsodium
            // 1.0.18 (it only hashes), so this cannot happen.
            preconditionFailure("crypto_sign_seed_keypair failed on a fresh seed: \(error)")
        }
    }

    /// The 32-byte seed, for persisting in the state database (file mode 0600). The caller owns the copy and
    /// should not keep it around longer than needed.
    public func seedBytes() -> [UInt8] {
        self.secret.withUnsafeBytes { Array($0.prefix(Self.seedByteCount)) }
    }

    /// Signs `context || message` with `crypto_sign_detached` (protocol-v1 §2, §4).
    ///
    /// - Parameter context: one of `SignatureContext`'s strings (ASCII, no terminator), which keeps a signature
    ///   made for one purpose from being valid for another.
    /// - Returns: the 64-byte signature.
    public func sign(_ message: some Collection<UInt8>, context: String) -> [UInt8] {
        let signed = Signature.contextPrefixed(message, context: context)
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        let rc = self.secret.withUnsafeBytes { sk in
            crypto_sign_detached(
                &signature, nil, signed, UInt64(signed.count), sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        // crypto_sign_detached has no failure path for a well-formed 64-byte secret key, which init guarantees.
        precondition(rc == 0, "crypto_sign_detached returned \(rc)")
        return signature
    }

    /// The X25519 secret key derived from this key (`crypto_sign_ed25519_sk_to_curve25519`, protocol-v1 §1).
    func x25519SecretKey() throws(CryptoError) -> SecretBytes {
        try SecretBytes(count: Int(crypto_scalarmult_curve25519_BYTES)) { (out) throws(CryptoError) -> Void in
            let rc = self.secret.withUnsafeBytes { sk in
                crypto_sign_ed25519_sk_to_curve25519(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            guard rc == 0 else { throw .libsodium(function: "crypto_sign_ed25519_sk_to_curve25519", code: rc) }
        }
    }
}

/// The domain-separation strings prefixed to every signed message (protocol-v1 §2, §4).
public enum SignatureContext {
    /// Relay login: signs the CHALLENGE nonce.
    public static let relayAuth = "homebase-relay-auth-v1"
    /// Host adverts: signs the advert payload P.
    public static let advert = "homebase-advert-v1"
    /// Account rosters: signed by the account key.
    public static let roster = "homebase-roster-v1"
    /// Contact grants: signed by the host device key.
    public static let grant = "homebase-grant-v1"
}
