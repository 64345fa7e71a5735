import HomebaseCore
import HomebaseCrypto
import Testing
@testable import HomebaseRouter

@Suite struct Ed25519AdvertVerifierTests {
    static let host = try! SigningSecretKey(seed: [UInt8](repeating: 7, count: 32))
    static let other = try! SigningSecretKey(seed: [UInt8](repeating: 9, count: 32))

    static func payload(host: PublicKey = Self.host.publicKey, v: Int = 1) -> [UInt8] {
        var advert = AdvertPayload(
            host: host, seq: 42, issuedAt: 1_800_000_000_000, runtime: .init(version: "0.5.1"),
            models: [.init(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B", quantization: "Q4_K_M",
                           capabilities: ["completion", "tools"], contextLength: 32_768, loaded: true)])
        advert.v = v
        return SignedPayloadJSON.encode(advert)
    }

    @Test func aGoodAdvertVerifiesAndMaps() throws {
        let payload = Self.payload()
        let sig = Self.host.sign(payload, context: SignatureContext.advert)
        let advert = try #require(
            Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey).verifiedAdvert(payload: payload, signature: sig))
        #expect(advert.host == Self.host.publicKey)
        #expect(advert.seq == 42)
        #expect(advert.issuedAtMs == 1_800_000_000_000)
        #expect(advert.runtimeVersion == "0.5.1")
        #expect(advert.models == [AdvertPayload.Model(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B",
                                                      quantization: "Q4_K_M", capabilities: ["completion", "tools"],
                                                      contextLength: 32_768, loaded: true)])
        #expect(Ed25519AdvertVerifier.verify(SignedBlob(payload: payload, signature: sig), from: Self.host.publicKey)
            == advert)
    }

    @Test func aForgedSignatureIsRejected() {
        let payload = Self.payload()
        var sig = Self.host.sign(payload, context: SignatureContext.advert)
        sig[0] ^= 1
        let verifier = Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
        #expect(verifier.verifiedAdvert(payload: payload, signature: sig) == nil)
        // Signed by another key that claims to be the host.
        let impostor = Self.other.sign(payload, context: SignatureContext.advert)
        #expect(verifier.verifiedAdvert(payload: payload, signature: impostor) == nil)
    }

    @Test func aPayloadSignedForAnotherContextIsRejected() {
        let payload = Self.payload()
        for context in [SignatureContext.grant, SignatureContext.roster, SignatureContext.relayAuth] {
            let sig = Self.host.sign(payload, context: context)
            #expect(Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
                .verifiedAdvert(payload: payload, signature: sig) == nil)
        }
    }

    @Test func aHostMismatchIsRejected() {
        // Validly signed by `other`, but the payload names the host: the sender is not the host it claims.
        let payload = Self.payload(host: Self.host.publicKey)
        let sig = Self.other.sign(payload, context: SignatureContext.advert)
        #expect(Ed25519AdvertVerifier(expectedSigner: Self.other.publicKey)
            .verifiedAdvert(payload: payload, signature: sig) == nil)
    }

    @Test func anotherVersionIsRejected() {
        let payload = Self.payload(v: 2)
        let sig = Self.host.sign(payload, context: SignatureContext.advert)
        #expect(Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
            .verifiedAdvert(payload: payload, signature: sig) == nil)
    }

    @Test(arguments: [[UInt8](), Array("{".utf8), Array("[]".utf8), Array(#"{"v":1}"#.utf8),
                      [UInt8](repeating: 0xFF, count: 70_000)])
    func malformedSignedPayloadsAreRejected(payload: [UInt8]) {
        let sig = Self.host.sign(payload, context: SignatureContext.advert)
        #expect(Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
            .verifiedAdvert(payload: payload, signature: sig) == nil)
    }

    @Test(arguments: [[UInt8](), [UInt8](repeating: 0, count: 63), [UInt8](repeating: 0, count: 65)])
    func truncatedOrOversizedSignaturesAreRejected(sig: [UInt8]) {
        #expect(Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
            .verifiedAdvert(payload: Self.payload(), signature: sig) == nil)
    }

    @Test func theStoreTakesOnlyVerifiedAdverts() throws {
        let store = ExternalModelsAdvertStore(backend: InMemorySettingsBackend())
        let payload = Self.payload()
        let verifier = Ed25519AdvertVerifier(expectedSigner: Self.host.publicKey)
        let forged = Self.other.sign(payload, context: SignatureContext.advert)
        #expect(try !store.receive(payload: payload, signature: forged, verifier: verifier))
        let good = Self.host.sign(payload, context: SignatureContext.advert)
        #expect(try store.receive(payload: payload, signature: good, verifier: verifier))
        #expect(store.advert?.seq == 42)
    }
}
