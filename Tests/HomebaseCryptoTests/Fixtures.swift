import Foundation
import HomebaseCore

/// Finds and decodes files in the repository's `Fixtures/` folder (outside every target), located from
/// `#filePath` as swift-crypto does for its Wycheproof files.
enum Fixtures {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The repository root: this file is `Tests/HomebaseCryptoTests/Fixtures.swift`.
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    static func url(_ name: String) -> URL {
        Self.repositoryRoot.appendingPathComponent("Fixtures").appendingPathComponent(name)
    }

    static func load<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
        let data = try Data(contentsOf: Self.url(name))
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(T.self, from: data)
    }

    static var crosscheck: Crosscheck {
        get throws { try Self.load("crosscheck-v1.json", as: Crosscheck.self) }
    }
}

/// Decodes lowercase or uppercase hex, failing the test (not trapping) on a malformed fixture.
func unhex(_ string: String) throws -> [UInt8] {
    guard let bytes = Hex.decode(string) else { throw Fixtures.Malformed(description: "not hex: \(string)") }
    return bytes
}

func publicKey(_ string: String) throws -> PublicKey {
    guard let key = PublicKey(hex: string) else { throw Fixtures.Malformed(description: "not a public key: \(string)") }
    return key
}

/// `Fixtures/crosscheck-v1.json`: values computed independently with libsodium through PyNaCl
/// (a copy of shared/design/crosscheck-v1.json, so tests never depend on files outside the repository).
struct Crosscheck: Decodable {
    struct Identity: Decodable {
        var ed25519Seed: String
        var ed25519Pk: String
        var x25519Sk: String?
        var x25519Pk: String?
    }

    struct RelayAuth: Decodable {
        var challengeNonce: String
        var challengeFrame: String
        var authFrameFromA: String
    }

    struct EnvelopeAToB: Decodable {
        var channel: UInt8
        var messageId: String
        var sentAtMs: UInt64
        var nonce: String
        var plaintextUtf8: String
        var bytes: String
    }

    struct AdvertSignedByA: Decodable {
        struct MessageJSON: Decodable {
            var type: String
            var payload: String
            var sig: String
        }

        var payloadUtf8: String
        var sig: String
        var messageJson: MessageJSON
    }

    struct ConversationBaseDigest: Decodable {
        struct Message: Decodable {
            var role: String
            var content: String
        }

        var messages: [Message]
        var baseDigest: String
    }

    var identityA: Identity
    var identityB: Identity
    var relayAuth: RelayAuth
    var e2eKeyAB: String
    var envelopeAToB: EnvelopeAToB
    var advertSignedByA: AdvertSignedByA
    var conversationBaseDigest: ConversationBaseDigest

    enum CodingKeys: String, CodingKey {
        case identityA, identityB, relayAuth, envelopeAToB, advertSignedByA, conversationBaseDigest
        // convertFromSnakeCase turns "e2e_key_a_b" into "e2eKeyAB".
        case e2eKeyAB = "e2eKeyAB"
    }
}
