/// Why a cryptographic operation failed (protocol-v1 §1, §3).
///
/// Peer-supplied input (keys, signatures, ciphertexts) only ever produces one of these, never a trap.
/// Signature verification is not an error: `Signature.verify` answers `false`.
public enum CryptoError: Error, Equatable, Sendable {
    /// A key, seed or nonce had the wrong size. The caller rejects the input it came from.
    case wrongLength(expected: Int, actual: Int)
    /// An Ed25519 public key could not be converted to X25519 (not a point, small order, or outside the main
    /// subgroup). No key can be agreed with that peer; a receiver drops its envelopes.
    case invalidPublicKey
    /// The X25519 shared secret was all zeroes (a low-order peer point). The key is refused (protocol-v1 §3).
    case allZeroSharedSecret
    /// The AEAD did not open: wrong key, or tampered additional data, nonce or ciphertext. Counted as `open_failed`.
    case authenticationFailure
    /// A libsodium function returned a failure code where none was expected.
    case libsodium(function: String, code: Int32)
}
