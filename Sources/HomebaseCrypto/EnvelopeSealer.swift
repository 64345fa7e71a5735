public import HomebaseCore

/// Seals and opens envelopes (protocol-v1 §3): the AEAD's additional data is the header's first 90 bytes
/// (version .. sent_at_ms) and its nonce is the header's nonce.
public enum EnvelopeSealer {
    /// Encrypts `plaintext` (already padded by the caller, `EnvelopePadding.pad`) under `key`.
    ///
    /// - Precondition: `header.nonce` is 24 bytes, which `EnvelopeHeader.init` already enforces; the caller drew
    ///   it fresh from `SecureRandom.bytes(24)`.
    public static func seal(header: EnvelopeHeader, plaintext: [UInt8], key: SymmetricKey) -> Envelope {
        let ciphertext: [UInt8]
        do {
            ciphertext = try AEAD.seal(plaintext: plaintext, ad: header.additionalData, nonce: header.nonce, key: key)
        } catch {
            preconditionFailure("envelope nonce must be \(AEAD.nonceByteCount) bytes: \(error)")
        }
        return Envelope(header: header, ciphertext: ciphertext)
    }

    /// Authenticates the header and decrypts the ciphertext.
    ///
    /// - Returns: the padded plaintext (strip with `EnvelopePadding.unpad`).
    /// - Throws: `CryptoError.authenticationFailure` when any header byte, the nonce, the ciphertext or the key is
    ///   wrong; `CryptoError.wrongLength` for a nonce that is not 24 bytes or a ciphertext shorter than a tag.
    public static func open(_ envelope: Envelope, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try AEAD.open(
            ciphertext: envelope.ciphertext, ad: envelope.header.additionalData, nonce: envelope.header.nonce, key: key)
    }
}
