import Foundation
public import HomebaseCore

/// A signed payload that names its own signer: the key its signature must verify with, and the context.
public protocol SignerNamingPayload: SignedPayload {
    /// The signature context of this kind (`SignatureContext`).
    static var signatureContext: String { get }
    /// The field naming the signer, as hex: an advert's or grant's `host`, a roster's `account`.
    var signerHex: String { get }
}

extension AdvertPayload: SignerNamingPayload {
    public static var signatureContext: String { SignatureContext.advert }
    public var signerHex: String { self.host }
}

extension RosterPayload: SignerNamingPayload {
    public static var signatureContext: String { SignatureContext.roster }
    public var signerHex: String { self.account }
}

extension GrantPayload: SignerNamingPayload {
    public static var signatureContext: String { SignatureContext.grant }
    public var signerHex: String { self.host }
}

/// The receiver's checks of a signed payload (Protocol/messages.md §3-§5), in order and written once: the
/// signature over the exact bytes with the kind's context and the expected signer, then the version, then the
/// shape, with the payload naming that same signer (as a key: hex in either case). Devices and the conformance
/// vectors both verify with this.
public enum SignedPayloadVerifier {
    /// Why a signed payload is refused, as the vectors spell it.
    public enum Rejection: String, Error, Sendable {
        case signatureInvalid = "signature_invalid"
        case unknownVersion = "unknown_version"
        case malformed
    }

    private struct Version: Decodable { var v: Int }

    public static func verify<T: SignerNamingPayload>(
        _ type: T.Type, payload: [UInt8], signature: [UInt8], signer: PublicKey
    ) -> Result<T, Rejection> {
        // Nothing of the payload is parsed before it is known to be authentic.
        guard Signature.verify(signature, message: payload, context: T.signatureContext, publicKey: signer) else {
            return .failure(.signatureInvalid)
        }
        return Self.judgeAuthentic(T.self, payload: payload, signer: signer)
    }

    /// The checks after the signature (version, shape, the signer named), for a payload whose signature by
    /// `signer` holds: `verify` runs them once it does. Apart so that the fuzz harness can run them on every
    /// input without making a signature for each (the signature check, Ed25519 over the context and the bytes,
    /// reads nothing of the payload).
    package static func judgeAuthentic<T: SignerNamingPayload>(
        _ type: T.Type, payload: [UInt8], signer: PublicKey
    ) -> Result<T, Rejection> {
        // One decode decides acceptance (shape and `v == 1`); only a refusal is looked at again, for its reason.
        if let value = SignedPayloadJSON.decode(T.self, from: payload) {
            return PublicKey(hex: value.signerHex) == signer ? .success(value) : .failure(.malformed)
        }
        guard (try? JSONSerialization.jsonObject(with: Data(payload))) is [String: Any] else { return .failure(.malformed) }
        let version = (try? JSONDecoder().decode(Version.self, from: Data(payload)))?.v
        return .failure(version == 1 ? .malformed : .unknownVersion)
    }

    /// `verify` of a message's signed blob.
    public static func verify<T: SignerNamingPayload>(_ type: T.Type, _ blob: SignedBlob, signer: PublicKey) -> T? {
        try? Self.verify(type, payload: blob.payload, signature: blob.signature, signer: signer).get()
    }
}

extension EnvelopeVersions {
    /// The envelope versions `sender` advertises in `message` (Protocol/envelope.md §7.8): the `envelopes` of an
    /// advert or grant that `sender` signed, verified here; nil for any other message or a payload that does not
    /// verify.
    public static func advertised(in message: Message, from sender: PublicKey) -> [Int]? {
        switch message {
        case .advert(let blob): SignedPayloadVerifier.verify(AdvertPayload.self, blob, signer: sender)?.envelopes
        case .contactGrant(let blob): SignedPayloadVerifier.verify(GrantPayload.self, blob, signer: sender)?.envelopes
        default: nil
        }
    }
}
