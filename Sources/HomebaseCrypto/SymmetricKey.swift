internal import CSodium

/// A 32-byte symmetric key for XChaCha20-Poly1305 (protocol-v1 §3).
///
/// The bytes live in memory zeroed with `sodium_memzero` on release. `@unchecked Sendable`: immutable after
/// `init`, so shared reads cannot race. Equality is constant-time (`sodium_memcmp`).
public final class SymmetricKey: @unchecked Sendable, Equatable {
    /// `crypto_aead_xchacha20poly1305_ietf_KEYBYTES`.
    public static let byteCount = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)

    let storage: SecretBytes

    /// Wraps existing key bytes (test vectors, or a key restored from storage).
    ///
    /// - Throws: `CryptoError.wrongLength` unless `bytes` is exactly 32 bytes.
    public init(bytes: some Collection<UInt8>) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .wrongLength(expected: Self.byteCount, actual: bytes.count) }
        self.storage = SecretBytes(copying: bytes)
    }

    /// Takes ownership of an already-filled secret buffer of the right size.
    init(storage: SecretBytes) {
        precondition(storage.count == Self.byteCount, "symmetric keys are 32 bytes")
        self.storage = storage
    }

    /// A fresh random key (`randombytes_buf`).
    public static func generate() -> SymmetricKey {
        Sodium.ensureInitialized()
        return SymmetricKey(
            storage: SecretBytes(count: Self.byteCount) { buffer in
                randombytes_buf(buffer.baseAddress!, buffer.count)
            })
    }

    /// Read access to the key bytes for the duration of `body`; the pointer must not escape.
    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try self.storage.withUnsafeBytes(body)
    }

    /// Constant-time comparison.
    public static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool {
        lhs.storage.constantTimeEquals(rhs.storage)
    }
}
