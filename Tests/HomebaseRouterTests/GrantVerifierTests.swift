import HomebaseCore
import HomebaseCrypto
import Testing
@testable import HomebaseRouter

@Suite struct GrantVerifierTests {
    static let host = try! SigningSecretKey(seed: [UInt8](repeating: 3, count: 32))
    static let guest = try! SigningSecretKey(seed: [UInt8](repeating: 4, count: 32))
    static let stranger = try! SigningSecretKey(seed: [UInt8](repeating: 5, count: 32))

    static func payload(host: PublicKey = Self.host.publicKey, guest: PublicKey = Self.guest.publicKey,
                        expiresAt: UInt64? = 2_000) -> [UInt8] {
        SignedPayloadJSON.encode(GrantPayload(host: host, guest: guest, models: .only(["llama3.1:70b"]),
                                              issuedAt: 1_000, expiresAt: expiresAt))
    }

    var verifier: GrantVerifier { GrantVerifier(selfKey: Self.guest.publicKey) }

    @Test func aGoodGrantVerifies() throws {
        let payload = Self.payload()
        let sig = Self.host.sign(payload, context: SignatureContext.grant)
        let grant = try #require(self.verifier.verify(SignedBlob(payload: payload, signature: sig),
                                                      from: Self.host.publicKey))
        #expect(grant.host == Self.host.publicKey && grant.guest == Self.guest.publicKey)
        #expect(grant.models.allows("llama3.1:70b") && !grant.models.allows("other"))
        #expect(grant.isInForce(nowMs: 1_999) && !grant.isInForce(nowMs: 2_000))
    }

    func verify(_ payload: [UInt8], signedBy key: SigningSecretKey, context: String = SignatureContext.grant,
                sender: PublicKey = Self.host.publicKey) -> VerifiedGrant? {
        self.verifier.verifiedGrant(payload: payload, signature: key.sign(payload, context: context), sender: sender)
    }

    @Test func wrongContextForgedSignatureAndWrongAddressingAreRejected() {
        let payload = Self.payload()
        #expect(self.verify(payload, signedBy: Self.host, context: SignatureContext.advert) == nil)
        #expect(self.verify(payload, signedBy: Self.stranger) == nil)
        // Signed by the stranger but naming the host: host != sender.
        #expect(self.verify(payload, signedBy: Self.stranger, sender: Self.stranger.publicKey) == nil)
        // A grant for someone else.
        #expect(self.verify(Self.payload(guest: Self.stranger.publicKey), signedBy: Self.host) == nil)
        // Garbage, even when validly signed.
        #expect(self.verify(Array("{\"v\":1,\"host\":\"zz\"}".utf8), signedBy: Self.host) == nil)
        #expect(self.verify([], signedBy: Self.host) == nil)
    }
}
