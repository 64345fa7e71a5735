internal import CSodium

/// XChaCha20-Poly1305 (IETF) authenticated encryption, the envelope cipher (protocol-v1 §3).
public enum AEAD {
    /// `crypto_aead_xchacha20poly1305_ietf_NPUBBYTES`.
    public static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// `crypto_aead_xchacha20poly1305_ietf_ABYTES`: ciphertext = plaintext + tag.
    public static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// Encrypts and authenticates `plaintext`, also authenticating `ad`.
    ///
    /// The nonce must never repeat under one key; 24 random bytes (`SecureRandom.bytes(24)`) make that safe.
    /// - Returns: ciphertext with the 16-byte tag appended (`plaintext.count + 16` bytes).
    /// - Throws: `CryptoError.wrongLength` unless `nonce` is 24 bytes.
    public static func seal(
        plaintext: some Collection<UInt8>, ad: some Collection<UInt8>, nonce: some Collection<UInt8>,
        key: SymmetricKey
    ) throws(CryptoError) -> [UInt8] {
        guard nonce.count == Self.nonceByteCount else {
            throw .wrongLength(expected: Self.nonceByteCount, actual: nonce.count)
        }
        Sodium.ensureInitialized()
        let message = Array(plaintext)
        let additional = Array(ad)
        let npub = Array(nonce)
        var out = [UInt8](repeating: 0, count: message.count + Self.tagByteCount)
        var outLength: UInt64 = 0
        let rc = key.withUnsafeBytes { k in
            crypto_aead_xchacha20poly1305_ietf_encrypt(
                &out, &outLength, message, UInt64(message.count), additional, UInt64(additional.count), nil, npub,
                k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        // Encryption fails only for messages longer than crypto_aead_xchacha20poly1305_ietf_MESSAGEBYTES_MAX
        // (about 2^64 bytes), which cannot be held in memory.
        precondition(rc == 0 && outLength == UInt64(out.count), "crypto_aead_xchacha20poly1305_ietf_encrypt failed")
        return out
    }

    /// Encrypts in place within `out`, laid out as `ad || nonce || message || tag space` (the first `adCount`
    /// bytes, the 24-byte nonce, then the message up to the last 16 bytes): the message is replaced by its
    /// ciphertext and the tag space by the tag, which together are `seal`'s output for that message, additional
    /// data and nonce.
    /// With `start`, the layout begins there and the bytes before it are left alone (a frame's head).
    @usableFromInline
    static func sealInPlace(_ out: inout [UInt8], from start: Int = 0, adCount: Int, key: SymmetricKey) {
        let messageCount = out.count - start - adCount - Self.nonceByteCount - Self.tagByteCount
        precondition(start >= 0 && adCount >= 0 && messageCount >= 0,
                     "sealInPlace: shorter than additional data, nonce and tag")
        Sodium.ensureInitialized()
        let rc = out.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress! + start
            let message = base + adCount + Self.nonceByteCount
            return key.withUnsafeBytes { k in
                // libsodium encrypts in place when c == m; the additional data and nonce are only read.
                crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                    message, message + messageCount, nil, message, UInt64(messageCount), base, UInt64(adCount), nil,
                    base + adCount, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        precondition(rc == 0, "crypto_aead_xchacha20poly1305_ietf_encrypt_detached failed")
    }

    /// Verifies and decrypts `ciphertext` (which ends in the 16-byte tag).
    ///
    /// - Throws: `CryptoError.wrongLength` for a nonce that is not 24 bytes or a ciphertext shorter than a tag;
    ///   `CryptoError.authenticationFailure` when the key, nonce, additional data or ciphertext do not match.
    public static func open(
        ciphertext: some Collection<UInt8>, ad: some Collection<UInt8>, nonce: some Collection<UInt8>,
        key: SymmetricKey
    ) throws(CryptoError) -> [UInt8] {
        guard nonce.count == Self.nonceByteCount else {
            throw .wrongLength(expected: Self.nonceByteCount, actual: nonce.count)
        }
        guard ciphertext.count >= Self.tagByteCount else {
            throw .wrongLength(expected: Self.tagByteCount, actual: ciphertext.count)
        }
        Sodium.ensureInitialized()
        let sealed = Array(ciphertext)
        let additional = Array(ad)
        let npub = Array(nonce)
        var out = [UInt8](repeating: 0, count: sealed.count - Self.tagByteCount)
        var outLength: UInt64 = 0
        let rc = key.withUnsafeBytes { k in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &out, &outLength, nil, sealed, UInt64(sealed.count), additional, UInt64(additional.count), npub,
                k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard rc == 0 else { throw .authenticationFailure }
        precondition(outLength == UInt64(out.count), "plaintext length is ciphertext minus tag")
        return out
    }
}
