import FoundationEssentials

/// One plaintext message inside an envelope: a UTF-8 JSON object with a string `type`
/// (Protocol/messages.md). Unknown types decode to `.unknown` so a newer peer's messages are ignored,
/// not treated as errors.
public enum Message: Equatable, Sendable {
    case inferRequest(InferRequest)
    case inferAccept(InferAccept)
    case inferQueued(InferQueued)
    case inferChunk(InferChunk)
    case inferDone(InferDone)
    case inferError(InferError)
    case inferCancel(id: String)
    case advert(SignedBlob)
    case advertRequest
    case pairRequest(secret: String, name: String)
    case pairAccept(roster: SignedBlob)
    case pairReject(reason: String)
    case roster(SignedBlob)
    case modelChoice(ModelChoice)
    case contactJoin(name: String)
    case contactGrant(SignedBlob)
    case contactRevoke(reason: String)
    case contactLeave
    case unknown(type: String)

    /// The wire `type` string.
    public var type: String {
        switch self {
        case .inferRequest: MessageType.inferRequest
        case .inferAccept: MessageType.inferAccept
        case .inferQueued: MessageType.inferQueued
        case .inferChunk: MessageType.inferChunk
        case .inferDone: MessageType.inferDone
        case .inferError: MessageType.inferError
        case .inferCancel: MessageType.inferCancel
        case .advert: MessageType.advert
        case .advertRequest: MessageType.advertRequest
        case .pairRequest: MessageType.pairRequest
        case .pairAccept: MessageType.pairAccept
        case .pairReject: MessageType.pairReject
        case .roster: MessageType.roster
        case .modelChoice: MessageType.modelChoice
        case .contactJoin: MessageType.contactJoin
        case .contactGrant: MessageType.contactGrant
        case .contactRevoke: MessageType.contactRevoke
        case .contactLeave: MessageType.contactLeave
        case .unknown(let t): t
        }
    }
}

/// The `type` strings of protocol v1.
public enum MessageType {
    public static let inferRequest = "infer.request"
    public static let inferAccept = "infer.accept"
    public static let inferQueued = "infer.queued"
    public static let inferChunk = "infer.chunk"
    public static let inferDone = "infer.done"
    public static let inferError = "infer.error"
    public static let inferCancel = "infer.cancel"
    public static let advert = "advert"
    public static let advertRequest = "advert.request"
    public static let pairRequest = "pair.request"
    public static let pairAccept = "pair.accept"
    public static let pairReject = "pair.reject"
    public static let roster = "roster"
    public static let modelChoice = "settings.model_choice"
    public static let contactJoin = "contact.join"
    public static let contactGrant = "contact.grant"
    public static let contactRevoke = "contact.revoke"
    public static let contactLeave = "contact.leave"
}

/// A chat message as carried by `infer.request` and hashed by `base_digest`.
public struct ChatMessage: Codable, Equatable, Hashable, Sendable {
    public var role: String
    public var content: String
    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }
}

/// How much a reasoning model should think (`infer.request` `options.think`): `false` (not at all), `true`
/// (the model's default), or an effort `low`, `medium`, `high`. Absent: the runtime's default (Ollama thinks
/// for a model with the `thinking` capability).
public enum ThinkSetting: String, Codable, Equatable, Hashable, Sendable, CaseIterable {
    case off = "false", on = "true", low, medium, high

    /// From a command line or JSON text: `false`/`no`/`off`, `true`/`on`, `low`, `medium`, `high`.
    public init?(text: String) {
        switch text.lowercased() {
        case "false", "no", "off", "none": self = .off
        case "true", "yes", "on": self = .on
        case "low": self = .low
        case "medium": self = .medium
        case "high": self = .high
        default: return nil
        }
    }

    /// JSON `false` / `true`, or the effort as a string.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let flag = try? c.decode(Bool.self) {
            self = flag ? .on : .off
            return
        }
        let text = try c.decode(String.self)
        guard let setting = ThinkSetting(rawValue: text), setting != .off, setting != .on else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "think is false, true, low, medium or high")
        }
        self = setting
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .off: try c.encode(false)
        case .on: try c.encode(true)
        default: try c.encode(self.rawValue)
        }
    }

    /// OpenAI-compatible `reasoning_effort` (Ollama reads `none` as think off); nil for the default.
    public var reasoningEffort: String? {
        switch self {
        case .off: "none"
        case .on: nil
        case .low, .medium, .high: self.rawValue
        }
    }
}

/// Generation options of `infer.request`; every field optional.
public struct InferOptions: Codable, Equatable, Sendable {
    public var temperature: Double?
    public var topP: Double?
    public var maxTokens: Int?
    public var stop: [String]?
    public var seed: Int?
    /// How much a reasoning model thinks; nil keeps the runtime's default.
    public var think: ThinkSetting?

    public init(temperature: Double? = nil, topP: Double? = nil, maxTokens: Int? = nil, stop: [String]? = nil,
                seed: Int? = nil, think: ThinkSetting? = nil) {
        self.temperature = temperature
        self.topP = topP
        self.maxTokens = maxTokens
        self.stop = stop
        self.seed = seed
        self.think = think
    }

    enum CodingKeys: String, CodingKey {
        case temperature, topP = "top_p", maxTokens = "max_tokens", stop, seed, think
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.temperature = try c.decodeIfPresent(Double.self, forKey: .temperature)
        self.topP = try c.decodeIfPresent(Double.self, forKey: .topP)
        self.maxTokens = try c.decodeIfPresent(Int.self, forKey: .maxTokens)
        self.seed = try c.decodeIfPresent(Int.self, forKey: .seed)
        self.think = try c.decodeIfPresent(ThinkSetting.self, forKey: .think)
        // `stop` may be one string or an array of strings, as in OpenAI's API.
        if let one = try? c.decodeIfPresent(String.self, forKey: .stop) {
            self.stop = [one]
        } else {
            self.stop = try c.decodeIfPresent([String].self, forKey: .stop)
        }
    }
}

/// The incremental-conversation reference of `infer.request` (contact channel).
public struct ConversationRef: Codable, Equatable, Sendable {
    public var id: String
    public var baseCount: Int?
    public var baseDigest: String?

    public init(id: String, baseCount: Int? = nil, baseDigest: String? = nil) {
        self.id = id
        self.baseCount = baseCount
        self.baseDigest = baseDigest
    }

    enum CodingKeys: String, CodingKey { case id, baseCount = "base_count", baseDigest = "base_digest" }
}

public struct InferRequest: Equatable, Sendable {
    public var id: String
    public var model: String
    public var messages: [ChatMessage]
    public var options: InferOptions
    public var conversation: ConversationRef?
    /// True when the request carried a non-empty `tools` field. Such a request is never sent; a host that
    /// receives one answers `bad_request`.
    public var hasTools: Bool

    public init(id: String, model: String, messages: [ChatMessage], options: InferOptions = InferOptions(),
                conversation: ConversationRef? = nil, hasTools: Bool = false) {
        self.id = id
        self.model = model
        self.messages = messages
        self.options = options
        self.conversation = conversation
        self.hasTools = hasTools
    }
}

public struct InferAccept: Codable, Equatable, Sendable {
    public var id: String
    public var model: String
    public init(id: String, model: String) {
        self.id = id
        self.model = model
    }
}

/// `infer.queued`: an accepted request waits for the runtime; `position` 1 is next to start. Sent to a request
/// still queued 1 s after its accept (at most), then as it moves up; a requester counts an advance as progress.
public struct InferQueued: Codable, Equatable, Sendable {
    public var id: String
    public var position: Int
    public init(id: String, position: Int) {
        self.id = id
        self.position = position
    }
}

public struct InferChunk: Codable, Equatable, Sendable {
    public var id: String
    public var seq: Int
    /// A piece of the answer (empty in a chunk that carries only reasoning).
    public var text: String
    /// A piece of the model's reasoning before (or beside) the answer, never part of the answer; absent when
    /// there is none. A requester shows it apart and never mixes it into `text`.
    public var reasoning: String?
    public init(id: String, seq: Int, text: String, reasoning: String? = nil) {
        self.id = id
        self.seq = seq
        self.text = text
        self.reasoning = reasoning
    }
}

public struct Usage: Codable, Equatable, Hashable, Sendable {
    public var promptTokens: Int
    public var completionTokens: Int
    public init(promptTokens: Int, completionTokens: Int) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
    }
    enum CodingKeys: String, CodingKey { case promptTokens = "prompt_tokens", completionTokens = "completion_tokens" }
}

public struct InferDone: Codable, Equatable, Sendable {
    public var id: String
    public var finishReason: String
    public var usage: Usage
    public var chunks: Int
    public init(id: String, finishReason: String, usage: Usage, chunks: Int) {
        self.id = id
        self.finishReason = finishReason
        self.usage = usage
        self.chunks = chunks
    }
    enum CodingKeys: String, CodingKey { case id, finishReason = "finish_reason", usage, chunks }
}

/// `infer.error` codes (Protocol/inference.md).
public enum InferErrorCode: String, Codable, Sendable, CaseIterable {
    case modelUnavailable = "model_unavailable"
    case runtimeUnavailable = "runtime_unavailable"
    case busy
    case cacheMiss = "cache_miss"
    case notGranted = "not_granted"
    case badRequest = "bad_request"
    case hostError = "host_error"
    /// The answer's token budget (`max_tokens`) ran out while the model was still reasoning: no answer came.
    case reasoningBudget = "reasoning_budget"
    /// The conversation is longer than the context the runtime serves for the model (it would be cut silently).
    case contextExceeded = "context_exceeded"
}

public struct InferError: Codable, Equatable, Sendable {
    public var id: String
    /// Kept as a string so an unknown code from a newer host is still an error, not a parse failure.
    public var code: String
    public var message: String
    public init(id: String, code: String, message: String) {
        self.id = id
        self.code = code
        self.message = message
    }
    public init(id: String, code: InferErrorCode, message: String) {
        self.init(id: id, code: code.rawValue, message: message)
    }
}

/// A signed message body: `payload` bytes (sent base64) and a detached Ed25519 `sig` (sent base64).
/// Receivers verify `sig` over the exact payload bytes received, then parse them.
public struct SignedBlob: Equatable, Sendable {
    public var payload: [UInt8]
    public var signature: [UInt8]
    public init(payload: [UInt8], signature: [UInt8]) {
        self.payload = payload
        self.signature = signature
    }
}

/// `settings.model_choice`: the model picked on one sibling, applied on the others without re-sending.
public struct ModelChoice: Codable, Equatable, Hashable, Sendable {
    public var modelID: String
    public var vision: Bool
    public var origin: String
    public init(modelID: String, vision: Bool, origin: String) {
        self.modelID = modelID
        self.vision = vision
        self.origin = origin
    }
    enum CodingKeys: String, CodingKey { case modelID = "model_id", vision, origin }
}
