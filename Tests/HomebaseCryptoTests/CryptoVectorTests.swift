import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// Re-checks every vector in `Fixtures/crypto-vectors.json` against the code, and the file against its generator.
@Suite struct CryptoVectorTests {
    static let vectors: [CryptoVector] = (try? CryptoVectorFile.load().vectors) ?? []

    @Test func vectorFileLoadsAndCoversEveryOperation() throws {
        let file = try CryptoVectorFile.load()
        let operations = Set(file.vectors.map(\.operation.rawValue))
        #expect(
            operations == [
                "ed25519_seed_keypair", "e2e_key", "e2e_key_from_x25519", "signature", "base_digest",
                "aead_xchacha20poly1305_ietf",
            ])
        #expect(Set(file.vectors.map(\.name)).count == file.vectors.count, "vector names are unique")
        for expect in [
            "valid", "wrongLength", "invalidPublicKey", "allZeroSharedSecret", "signatureInvalid",
            "authenticationFailure",
        ] {
            #expect(file.vectors.contains { $0.expect == expect }, "no \(expect) vector")
        }
    }

    @Test func vectorFileIsWhatTheGeneratorProduces() throws {
        // Regenerate with HOMEBASE_WRITE_CRYPTO_VECTORS=1 (see CryptoVectorGenerator) after an intended change.
        #expect(try CryptoVectorFile.load() == CryptoVectorGenerator.make())
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["HOMEBASE_WRITE_CRYPTO_VECTORS"] != nil))
    func regenerateVectorFile() throws {
        let data = try CryptoVectorGenerator.make().encoded()
        try data.write(to: Fixtures.url(CryptoVectorFile.fileName))
        print(String(decoding: data, as: UTF8.self))
    }

    @Test(arguments: Self.vectors)
    func vectorHolds(_ vector: CryptoVector) throws {
        switch vector.operation {
        case .ed25519SeedKeypair: try Self.checkKeypair(vector)
        case .e2eKey: try Self.checkE2E(vector)
        case .e2eKeyFromX25519: try Self.checkE2EFromX25519(vector)
        case .signature: try Self.checkSignature(vector)
        case .baseDigest: try Self.checkBaseDigest(vector)
        case .aeadXChaCha20Poly1305IETF: try Self.checkAEAD(vector)
        }
    }

    // MARK: Checks

    private static func required(_ value: String?, _ field: String) throws -> String {
        guard let value else { throw Fixtures.Malformed(description: "missing \(field)") }
        return value
    }

    /// Runs `body`; if the vector expects an error, requires exactly that one.
    private static func expectOutcome<T>(_ vector: CryptoVector, _ body: () throws(CryptoError) -> T) -> T? {
        do {
            let result = try body()
            #expect(vector.expect == "valid", "expected \(vector.expect), got success")
            return result
        } catch {
            #expect(error.vectorName == vector.expect, "expected \(vector.expect), got \(error)")
            return nil
        }
    }

    private static func checkKeypair(_ vector: CryptoVector) throws {
        let seed = try unhex(required(vector.inputs.seed, "seed"))
        guard let key = Self.expectOutcome(vector, { () throws(CryptoError) in try SigningSecretKey(seed: seed) })
        else { return }
        let output = try #require(vector.output)
        #expect(key.publicKey.hex == output["ed25519_pk"])
        #expect(try key.x25519SecretKey().withUnsafeBytes { Hex.encode($0) } == output["x25519_sk"])
        #expect(Hex.encode(try X25519.publicKey(for: key.publicKey)) == output["x25519_pk"])
        #expect(key.seedBytes() == seed)
    }

    private static func checkE2E(_ vector: CryptoVector) throws {
        let me = try SigningSecretKey(seed: unhex(required(vector.inputs.selfSeed, "self_seed")))
        let peer = try publicKey(required(vector.inputs.peerPk, "peer_pk"))
        guard
            let key = Self.expectOutcome(
                vector, { () throws(CryptoError) in try E2E.deriveKey(selfSecret: me, peer: peer) })
        else { return }
        #expect(key.withUnsafeBytes { Hex.encode($0) } == vector.hex)
        if let peerSeed = vector.inputs.peerSeed {
            let other = try SigningSecretKey(seed: unhex(peerSeed))
            #expect(other.publicKey == peer)
            #expect(try E2E.deriveKey(selfSecret: other, peer: me.publicKey) == key, "the other direction agrees")
        }
    }

    private static func checkE2EFromX25519(_ vector: CryptoVector) throws {
        let secret = SecretBytes(copying: try unhex(required(vector.inputs.selfX25519Sk, "self_x25519_sk")))
        let peerX = try unhex(required(vector.inputs.peerX25519Pk, "peer_x25519_pk"))
        let selfPk = try publicKey(required(vector.inputs.selfPk, "self_pk"))
        let peerPk = try publicKey(required(vector.inputs.pk, "pk"))
        let key = Self.expectOutcome(vector) { () throws(CryptoError) in
            try E2E.deriveKey(selfX25519Secret: secret, peerX25519Public: peerX, selfPublic: selfPk, peer: peerPk)
        }
        if let key { #expect(key.withUnsafeBytes { Hex.encode($0) } == vector.hex) }
    }

    private static func checkSignature(_ vector: CryptoVector) throws {
        let pk = try publicKey(required(vector.inputs.pk, "pk"))
        let context = try required(vector.inputs.context, "context")
        let message = try unhex(required(vector.inputs.message, "message"))
        let sig = try unhex(required(vector.inputs.sig, "sig"))
        let verified = Signature.verify(sig, message: message, context: context, publicKey: pk)
        switch vector.expect {
        case "valid":
            #expect(verified)
            // Ed25519 is deterministic: re-signing gives the same bytes.
            let key = try SigningSecretKey(seed: unhex(required(vector.inputs.seed, "seed")))
            #expect(key.publicKey == pk)
            #expect(key.sign(message, context: context) == sig)
        case "signatureInvalid":
            #expect(!verified)
        default:
            Issue.record("unknown expect \(vector.expect)")
        }
    }

    private static func checkBaseDigest(_ vector: CryptoVector) throws {
        let messages = try #require(vector.inputs.messages).map { (role: $0.role, content: $0.content) }
        #expect(ConversationDigest.compute(messages: messages) == vector.hex)
    }

    private static func checkAEAD(_ vector: CryptoVector) throws {
        let key = try SymmetricKey(bytes: unhex(required(vector.inputs.key, "key")))
        let nonce = try unhex(required(vector.inputs.nonce, "nonce"))
        let ad = try unhex(required(vector.inputs.ad, "ad"))
        if vector.expect == "valid" {
            let plaintext = try unhex(required(vector.inputs.plaintext, "plaintext"))
            let sealed = try AEAD.seal(plaintext: plaintext, ad: ad, nonce: nonce, key: key)
            #expect(Hex.encode(sealed) == vector.hex)
            #expect(try AEAD.open(ciphertext: sealed, ad: ad, nonce: nonce, key: key) == plaintext)
        } else {
            let ciphertext = try unhex(required(vector.inputs.ciphertext, "ciphertext"))
            _ = Self.expectOutcome(vector) { () throws(CryptoError) in
                try AEAD.open(ciphertext: ciphertext, ad: ad, nonce: nonce, key: key)
            }
        }
    }
}
