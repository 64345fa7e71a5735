import HomebaseCore
import HomebaseCrypto

/// A `contact.grant` whose signature and addressing have been checked.
public struct VerifiedGrant: Sendable, Equatable {
    public var host: PublicKey
    public var guest: PublicKey
    public var models: GrantPayload.GrantedModels
    public var issuedAtMs: UInt64
    public var expiresAtMs: UInt64?

    /// Not expired at `nowMs` (a grant without `expires_at` never expires; exactly at expiry is expired).
    public func isInForce(nowMs: UInt64) -> Bool {
        guard let expiresAtMs = self.expiresAtMs else { return true }
        return nowMs < expiresAtMs
    }
}

/// Verifies grants (Protocol/messages.md §5): the signature by the sender's key over the exact payload bytes
/// with context `homebase-grant-v1`, then `v == 1`, `host` = the envelope sender and `guest` = this device.
/// A guest treats a host as joined only after such a grant.
public struct GrantVerifier: Sendable {
    /// This guest device's key.
    public let selfKey: PublicKey

    public init(selfKey: PublicKey) {
        self.selfKey = selfKey
    }

    /// The grant in `payload`, or `nil` when the signature, the payload or its addressing is wrong.
    public func verifiedGrant(payload: [UInt8], signature: [UInt8], sender: PublicKey) -> VerifiedGrant? {
        guard case .success(let grant) = SignedPayloadVerifier.verify(
            GrantPayload.self, payload: payload, signature: signature, signer: sender),
            PublicKey(hex: grant.guest) == self.selfKey
        else { return nil }
        return VerifiedGrant(host: sender, guest: self.selfKey, models: grant.models, issuedAtMs: grant.issuedAt,
                             expiresAtMs: grant.expiresAt)
    }

    /// Verifies the `contact.grant` body `blob` received from `sender`.
    public func verify(_ blob: SignedBlob, from sender: PublicKey) -> VerifiedGrant? {
        self.verifiedGrant(payload: blob.payload, signature: blob.signature, sender: sender)
    }
}
