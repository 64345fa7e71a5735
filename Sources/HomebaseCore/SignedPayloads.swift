import FoundationEssentials

/// The signed JSON payload of an `advert` (Protocol/messages.md, Adverts), signed by the host's device key
/// with context `homebase-advert-v1`.
public struct AdvertPayload: SignedPayload {
    public var v: Int
    public var host: String
    public var seq: UInt64
    public var issuedAt: UInt64
    public var runtime: Runtime
    public var models: [Model]
    /// The envelope versions the host speaks (Protocol/envelope.md §7.8); absent (v1-only hosts) means `[1]`.
    public var envelopes: [Int]?

    public struct Runtime: Codable, Equatable, Sendable {
        public var kind: String
        public var version: String
        public init(kind: String = "ollama", version: String) {
            self.kind = kind
            self.version = version
        }
    }

    /// One model on the host's runtime: the one type for "a model on a runtime" from the wire to the
    /// device's stores (issue 38 item 6; the router reads stored ones with `AdvertPayload.Model.Stored`).
    public struct Model: Codable, Hashable, Sendable {
        public var tag: String
        public var family: String
        public var parameterSize: String
        public var quantization: String
        public var capabilities: [String]
        public var contextLength: Int?
        public var loaded: Bool
        /// `true` for a cloud model the owner shares: the host's runtime forwards prompts to a third party.
        /// Absent for a local model.
        public var cloud: Bool?
        /// Where `context_length` comes from: `served` (the runtime reports it, the model is loaded) or
        /// `default` (the runtime's default, not yet confirmed). Absent from hosts that do not say.
        public var contextSource: String?
        /// Fields the host's runtime cannot tell (an OpenAI-compatible server that lists only ids), e.g.
        /// `["quantization", "loaded"]`: those hold their empty value, which then means "unknown", not "none".
        /// Absent when everything is known (Ollama).
        public var unknown: [String]?

        public init(tag: String, family: String, parameterSize: String, quantization: String,
                    capabilities: [String], contextLength: Int?, loaded: Bool, cloud: Bool? = nil,
                    contextSource: String? = nil, unknown: [String]? = nil) {
            self.unknown = unknown
            self.tag = tag
            self.family = family
            self.parameterSize = parameterSize
            self.quantization = quantization
            self.capabilities = capabilities
            self.contextLength = contextLength
            self.loaded = loaded
            self.cloud = cloud
            self.contextSource = contextSource
        }

        enum CodingKeys: String, CodingKey {
            case tag, family, parameterSize = "parameter_size", quantization, capabilities
            case contextLength = "context_length", loaded, cloud, contextSource = "context_source", unknown
        }
    }

    public init(host: PublicKey, seq: UInt64, issuedAt: UInt64, runtime: Runtime, models: [Model],
                envelopes: [Int]? = nil) {
        self.v = 1
        self.host = host.hex
        self.seq = seq
        self.issuedAt = issuedAt
        self.runtime = runtime
        self.models = models
        self.envelopes = envelopes
    }

    enum CodingKeys: String, CodingKey { case v, host, seq, issuedAt = "issued_at", runtime, models, envelopes }
}

/// The signed roster payload (Protocol/messages.md, Account), signed by the account key with context
/// `homebase-roster-v1`.
public struct RosterPayload: SignedPayload {
    public var v: Int
    public var account: String
    public var version: UInt64
    public var devices: [Device]

    public struct Device: Codable, Equatable, Sendable {
        public var pk: String
        public var name: String
        /// `homebase` or `handset`.
        public var role: String
        public var addedAt: UInt64
        /// The envelope versions the device speaks, as far as the Homebase knows (envelope.md §7.8); absent
        /// means `[1]`.
        public var envelopes: [Int]?
        public init(pk: String, name: String, role: String, addedAt: UInt64, envelopes: [Int]? = nil) {
            self.pk = pk
            self.name = name
            self.role = role
            self.addedAt = addedAt
            self.envelopes = envelopes
        }
        enum CodingKeys: String, CodingKey { case pk, name, role, addedAt = "added_at", envelopes }
    }

    public init(account: PublicKey, version: UInt64, devices: [Device]) {
        self.v = 1
        self.account = account.hex
        self.version = version
        self.devices = devices
    }

    /// The device keys listed, skipping malformed entries.
    public var devicePublicKeys: [PublicKey] { self.devices.compactMap { PublicKey(hex: $0.pk) } }
}

/// The signed grant payload of `contact.grant`, signed by the host's device key with context
/// `homebase-grant-v1`.
public struct GrantPayload: SignedPayload {
    public var v: Int
    public var host: String
    public var guest: String
    public var models: GrantedModels
    public var issuedAt: UInt64
    public var expiresAt: UInt64?
    /// The envelope versions the host speaks (envelope.md §7.8); absent means `[1]`.
    public var envelopes: [Int]?

    public enum GrantedModels: Codable, Equatable, Sendable {
        case all
        case only([String])

        public init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let s = try? c.decode(String.self) {
                guard s == "*" else {
                    throw DecodingError.dataCorruptedError(in: c, debugDescription: "models must be \"*\" or an array")
                }
                self = .all
            } else {
                self = .only(try c.decode([String].self))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .all: try c.encode("*")
            case .only(let tags): try c.encode(tags)
            }
        }

        public func allows(_ tag: String) -> Bool {
            switch self {
            case .all: true
            case .only(let tags): tags.contains(tag)
            }
        }
    }

    public init(host: PublicKey, guest: PublicKey, models: GrantedModels, issuedAt: UInt64, expiresAt: UInt64?,
                envelopes: [Int]? = nil) {
        self.v = 1
        self.host = host.hex
        self.guest = guest.hex
        self.models = models
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.envelopes = envelopes
    }

    enum CodingKeys: String, CodingKey {
        case v, host, guest, models, issuedAt = "issued_at", expiresAt = "expires_at", envelopes
    }
}

/// A signed JSON payload with a format version `v` (always 1 in protocol v1).
public protocol SignedPayload: Codable, Equatable, Sendable {
    var v: Int { get }
}

/// JSON helpers for signed payloads: our own payloads are encoded with sorted keys so they are stable.
public enum SignedPayloadJSON {
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return Array(try encoder.encode(value)) } catch { preconditionFailure("JSON encoding failed: \(error)") }
    }

    /// Parses payload bytes that have already been signature-checked; `nil` if they are not the expected shape
    /// or declare a version other than 1.
    public static func decode<T: SignedPayload>(_ type: T.Type, from bytes: [UInt8]) -> T? {
        guard let value = try? JSONDecoder().decode(T.self, from: Data(bytes)), value.v == 1 else { return nil }
        return value
    }
}
