import Foundation
import HomebaseCore
import HomebaseCrypto

/// The receiver rules of Protocol/envelope.md §5 run end to end with our codecs and crypto, in the spec's order,
/// returning `"valid"` or the drop reason: `EnvelopeReceiver.open`, which `RelayMessenger` runs too, plus the
/// replay check over a set of ids. Vectors are checked against this.
public enum ReceiverRules {
    public struct Accepted: Equatable, Sendable {
        public var plaintext: [UInt8]
        public var message: Message
    }

    /// - Returns: the accepted plaintext and message, or the drop reason.
    public static func receive(
        envelope bytes: [UInt8], receiver: SigningSecretKey, deliverSender: PublicKey, nowMs: UInt64,
        relation: SenderRelation, seenIDs: Set<[UInt8]>
    ) -> Result<Accepted, EnvelopeError> {
        let rules = EnvelopeReceiver(selfKey: receiver.publicKey)
        let opened = rules.open(bytes[...], deliveredBy: deliverSender, nowMs: nowMs,
                                key: { try? E2E.deriveKey(selfSecret: receiver, peer: $0) }, relation: { _ in relation })
        switch opened {
        case .failure(let error):
            return .failure(error)
        case .success(let envelope):
            if seenIDs.contains(envelope.header.messageID) { return .failure(.replay) }
            return .success(Accepted(plaintext: envelope.plaintext, message: envelope.message))
        }
    }

    public static func relation(named name: String) -> SenderRelation? {
        switch name {
        case "stranger": .stranger
        case "sibling": .sibling
        case "contact": .contact
        default: nil
        }
    }

    /// The `MessageDecodingError` as vectors spell it.
    public static func name(of error: MessageDecodingError) -> String {
        switch error {
        case .notAMessage: "not_a_message"
        case .invalidFields: "invalid_fields"
        case .invalidBase64: "invalid_base64"
        }
    }

    /// Verifies a signed payload the way a receiver must (`SignedPayloadVerifier`, as the devices do). Returns
    /// `"valid"` or the reason.
    public static func verifySigned(kind: String, payload: [UInt8], signature: [UInt8], signer: PublicKey) -> String {
        func check<T: SignerNamingPayload>(_ type: T.Type) -> String {
            switch SignedPayloadVerifier.verify(type, payload: payload, signature: signature, signer: signer) {
            case .success: "valid"
            case .failure(let rejection): rejection.rawValue
            }
        }
        switch kind {
        case "advert": return check(AdvertPayload.self)
        case "roster": return check(RosterPayload.self)
        case "grant": return check(GrantPayload.self)
        default: return "unknown_kind"
        }
    }
}
