import HomebaseCore
import HomebaseCrypto

/// Verifies adverts (Protocol/messages.md §3) with Ed25519: the signature over the exact payload bytes with
/// context `homebase-advert-v1` and the expected signer's key, then the payload: `v == 1` and `host` equal
/// to that signer (the envelope sender).
public struct Ed25519AdvertVerifier: AdvertVerifier {
    /// The key the advert must be signed by: the envelope's sender.
    public let expectedSigner: PublicKey

    public init(expectedSigner: PublicKey) {
        self.expectedSigner = expectedSigner
    }

    public func verifiedAdvert(payload: [UInt8], signature: [UInt8]) -> VerifiedAdvert? {
        // Signature first, over the bytes as received: the payload is not parsed until it is authentic.
        guard case .success(let advert) = SignedPayloadVerifier.verify(
            AdvertPayload.self, payload: payload, signature: signature, signer: self.expectedSigner)
        else { return nil }
        return VerifiedAdvert(
            host: self.expectedSigner, seq: advert.seq, issuedAtMs: advert.issuedAt,
            runtimeVersion: advert.runtime.version, models: advert.models)
    }

    /// Verifies the `advert` message body `blob` received from `sender`.
    public static func verify(_ blob: SignedBlob, from sender: PublicKey) -> VerifiedAdvert? {
        Ed25519AdvertVerifier(expectedSigner: sender).verifiedAdvert(payload: blob.payload, signature: blob.signature)
    }
}
