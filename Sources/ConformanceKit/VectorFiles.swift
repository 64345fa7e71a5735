import Foundation

/// `Fixtures/envelope-vectors.json`: one envelope per vector and the receiver's context; `expect` is `valid` or
/// the drop reason of Protocol/envelope.md §5.
public struct EnvelopeVectorFile: Codable, Equatable, Sendable {
    public var about: String
    public var vectors: [EnvelopeVector]
    public static let fileName = "envelope-vectors.json"
    public init(about: String, vectors: [EnvelopeVector]) {
        self.about = about
        self.vectors = vectors
    }
}

public struct EnvelopeVector: Codable, Equatable, Sendable {
    public struct Inputs: Codable, Equatable, Sendable {
        /// The receiver's Ed25519 seed (hex): its identity and its side of the e2e key.
        public var receiverSeed: String
        /// The relay's DELIVER.sender (hex pk).
        public var deliverSender: String
        /// The receiver's clock.
        public var nowMs: UInt64
        /// `stranger`, `sibling` or `contact`: the sender's relation to the receiver.
        public var relation: String
        /// Message ids (hex) already accepted from `deliverSender`.
        public var seenIds: [String]
        /// The envelope bytes (hex).
        public var envelope: String
        public init(receiverSeed: String, deliverSender: String, nowMs: UInt64, relation: String, seenIds: [String],
                    envelope: String) {
            self.receiverSeed = receiverSeed
            self.deliverSender = deliverSender
            self.nowMs = nowMs
            self.relation = relation
            self.seenIds = seenIds
            self.envelope = envelope
        }
        enum CodingKeys: String, CodingKey {
            case receiverSeed = "receiver_seed", deliverSender = "deliver_sender", nowMs = "now_ms", relation
            case seenIds = "seen_ids", envelope
        }
    }

    public var name: String
    public var comment: String
    public var inputs: Inputs
    /// For a valid vector: the opened plaintext (hex, padding included) and its message `type`.
    public var plaintext: String?
    public var messageType: String?
    public var expect: String

    public init(name: String, comment: String, inputs: Inputs, plaintext: String? = nil, messageType: String? = nil,
                expect: String) {
        self.name = name
        self.comment = comment
        self.inputs = inputs
        self.plaintext = plaintext
        self.messageType = messageType
        self.expect = expect
    }
    enum CodingKeys: String, CodingKey { case name, comment, inputs, plaintext, messageType = "message_type", expect }
}

/// `Fixtures/message-vectors.json`: message JSON (decode) and padding (pad, unpad) vectors.
public struct MessageVectorFile: Codable, Equatable, Sendable {
    public var about: String
    public var vectors: [MessageVector]
    public static let fileName = "message-vectors.json"
    public init(about: String, vectors: [MessageVector]) {
        self.about = about
        self.vectors = vectors
    }
}

public struct MessageVector: Codable, Equatable, Sendable {
    /// `decode`: `inputs.json` (UTF-8 text) is decoded as a message; `pad`/`unpad`: `inputs.hex` is padded or
    /// unpadded and must give `output` (hex).
    public var operation: String
    public var name: String
    public var comment: String
    public var inputs: [String: String]
    /// `decode` of a valid message: its `type`.
    public var type: String?
    public var output: String?
    /// `valid`, `not_a_message`, `invalid_fields` or `invalid_base64`.
    public var expect: String

    public init(operation: String, name: String, comment: String, inputs: [String: String], type: String? = nil,
                output: String? = nil, expect: String) {
        self.operation = operation
        self.name = name
        self.comment = comment
        self.inputs = inputs
        self.type = type
        self.output = output
        self.expect = expect
    }
}

/// `Fixtures/signed-payload-vectors.json`: adverts, rosters and grants as received in their messages.
public struct SignedPayloadVectorFile: Codable, Equatable, Sendable {
    public var about: String
    public var vectors: [SignedPayloadVector]
    public static let fileName = "signed-payload-vectors.json"
    public init(about: String, vectors: [SignedPayloadVector]) {
        self.about = about
        self.vectors = vectors
    }
}

public struct SignedPayloadVector: Codable, Equatable, Sendable {
    public struct Inputs: Codable, Equatable, Sendable {
        /// The key the receiver expects the payload to be signed by (hex pk): the host (advert, grant) or the
        /// pinned account key (roster).
        public var signer: String
        /// The whole message as received (UTF-8 JSON: `advert`, `roster` or `contact.grant`).
        public var message: String
        /// The payload bytes in hex (what `message.payload` decodes to), for readers without base64.
        public var payload: String
        public var sig: String
        /// The seed that made `sig` (hex), when it is not the signer's: for the wrong-signer case.
        public var signedWithSeed: String?
        /// The context string the signature was made with.
        public var signedWithContext: String
        public init(signer: String, message: String, payload: String, sig: String, signedWithSeed: String?,
                    signedWithContext: String) {
            self.signer = signer
            self.message = message
            self.payload = payload
            self.sig = sig
            self.signedWithSeed = signedWithSeed
            self.signedWithContext = signedWithContext
        }
        enum CodingKeys: String, CodingKey {
            case signer, message, payload, sig, signedWithSeed = "signed_with_seed"
            case signedWithContext = "signed_with_context"
        }
    }

    public var name: String
    public var comment: String
    /// `advert`, `roster` or `grant`.
    public var kind: String
    public var inputs: Inputs
    /// `valid`, `signature_invalid`, `unknown_version` or `malformed`.
    public var expect: String

    public init(name: String, comment: String, kind: String, inputs: Inputs, expect: String) {
        self.name = name
        self.comment = comment
        self.kind = kind
        self.inputs = inputs
        self.expect = expect
    }
}

extension Encodable {
    /// The fixture files' layout: pretty, sorted keys, unescaped slashes, trailing newline.
    public func fixtureJSON() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(self)
        data.append(0x0A)
        return data
    }
}
