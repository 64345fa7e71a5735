import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// `Fixtures/crypto-vectors.json`: Wycheproof-style vectors (style.md §10) for protocol-v1 §1, §3 and §4.
struct CryptoVectorFile: Codable, Equatable {
    var about: String
    var notes: [String: String]
    var vectors: [CryptoVector]

    static let fileName = "crypto-vectors.json"

    static func load() throws -> CryptoVectorFile {
        // Plain decoder: the keys are spelled out in CodingKeys, already snake_case.
        try JSONDecoder().decode(CryptoVectorFile.self, from: Data(contentsOf: Fixtures.url(Self.fileName)))
    }

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(self)
        data.append(0x0A)
        return data
    }
}

struct CryptoVector: Codable, Equatable, Sendable, CustomTestStringConvertible {
    enum Operation: String, Codable, Sendable {
        /// seed -> Ed25519 pk, X25519 sk and pk (crypto_sign_seed_keypair, crypto_sign_ed25519_*_to_curve25519).
        case ed25519SeedKeypair = "ed25519_seed_keypair"
        /// self seed + peer Ed25519 pk -> e2e key (protocol-v1 §3).
        case e2eKey = "e2e_key"
        /// The same derivation from X25519 keys directly, to reach the all-zero shared secret rule.
        case e2eKeyFromX25519 = "e2e_key_from_x25519"
        /// crypto_sign_detached / crypto_sign_verify_detached over ASCII(context) || message.
        case signature
        /// Conversation cache base_digest (protocol-v1 §4).
        case baseDigest = "base_digest"
        /// crypto_aead_xchacha20poly1305_ietf_encrypt / _decrypt.
        case aeadXChaCha20Poly1305IETF = "aead_xchacha20poly1305_ietf"
    }

    struct Message: Codable, Equatable, Sendable {
        var role: String
        var content: String
    }

    /// Hex unless noted: `context` is the ASCII string, `messages` are UTF-8 strings.
    struct Inputs: Codable, Equatable, Sendable {
        var seed: String?
        var selfSeed: String?
        var peerSeed: String?
        var peerPk: String?
        var selfPk: String?
        var selfX25519Sk: String?
        var peerX25519Pk: String?
        var pk: String?
        var context: String?
        var message: String?
        var sig: String?
        var key: String?
        var nonce: String?
        var ad: String?
        var plaintext: String?
        var ciphertext: String?
        var messages: [Message]?

        enum CodingKeys: String, CodingKey {
            case seed, context, message, sig, key, nonce, ad, plaintext, ciphertext, messages, pk
            case selfSeed = "self_seed"
            case peerSeed = "peer_seed"
            case peerPk = "peer_pk"
            case selfPk = "self_pk"
            case selfX25519Sk = "self_x25519_sk"
            case peerX25519Pk = "peer_x25519_pk"
        }
    }

    var name: String
    var operation: Operation
    var comment: String
    var inputs: Inputs
    /// The single output, when there is one.
    var hex: String?
    /// Named outputs, when there are several.
    var output: [String: String]?
    /// "valid", or the error: a `CryptoError` case name, or "signatureInvalid" for a signature that must not verify.
    var expect: String

    var testDescription: String { self.name }
}

extension CryptoError {
    /// The case name, as vectors spell it.
    var vectorName: String {
        switch self {
        case .wrongLength: "wrongLength"
        case .invalidPublicKey: "invalidPublicKey"
        case .allZeroSharedSecret: "allZeroSharedSecret"
        case .authenticationFailure: "authenticationFailure"
        case .libsodium: "libsodium"
        }
    }
}
