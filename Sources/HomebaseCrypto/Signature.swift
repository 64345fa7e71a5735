internal import CSodium
public import HomebaseCore

/// Ed25519 signature verification with a context prefix (protocol-v1 §2, §4).
public enum Signature {
    /// Checks `signature` over `context || message` with `crypto_sign_verify_detached`.
    ///
    /// Safe on any input from a peer: a signature that is not 64 bytes, a public key that is not a valid point,
    /// or any other garbage gives `false`, never a trap.
    public static func verify(
        _ signature: some Collection<UInt8>, message: some Collection<UInt8>, context: String, publicKey: PublicKey
    ) -> Bool {
        guard signature.count == SigningSecretKey.signatureByteCount,
            publicKey.bytes.count == Int(crypto_sign_PUBLICKEYBYTES)
        else { return false }
        Sodium.ensureInitialized()
        let sig = Array(signature)
        let signed = Self.contextPrefixed(message, context: context)
        return crypto_sign_verify_detached(sig, signed, UInt64(signed.count), publicKey.bytes) == 0
    }

    /// `ASCII(context) || message`. Contexts are ASCII, so their UTF-8 bytes are their ASCII bytes.
    static func contextPrefixed(_ message: some Collection<UInt8>, context: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(context.utf8.count + message.count)
        out.append(contentsOf: context.utf8)
        out.append(contentsOf: message)
        return out
    }
}
