import HomebaseCore

/// The one model-facing seam (design.md §R1): every brain, local or remote, hides behind `LLMProvider`.
///
/// ## Errors
/// A concrete provider (HTTP, relay) may fail: `complete` throws `ProviderError` and a stream ends with
/// `.failed`. The router never hands such a provider out bare: every provider it returns is wrapped so
/// that any failure re-runs the same request on the on-device provider (`FallbackProvider`), and the
/// on-device floor cannot fail. So what the router returns never throws and never emits `.failed`; the
/// router itself has no error path.
///
/// ## Streaming and a fallback after partial output
/// When the primary fails after it has already streamed text, the stream emits `.restart(reason)`:
/// the caller discards what it printed so far (the CLI prints a marker line), and then the fallback's
/// whole answer streams. The final `.done` result is always whole and from one provider, and it
/// carries `fallback` {from, reason} whenever a fallback answered.
public protocol LLMProvider: Sendable {
    /// Which kind of brain this is, for `chat --json`'s `provider` and for fallback reports.
    var kind: ProviderKind { get }
    /// The whole answer.
    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult
    /// The answer as events: text and tool calls as they come, then exactly one terminal
    /// `.done` or `.failed`. `.restart` may appear before the terminal event (see the type's docs).
    func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent>
}

extension LLMProvider {
    /// Streams by completing once: the whole text as one chunk, the tool calls, then `.done`.
    /// For providers with no incremental output (the floor, test fakes).
    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let provider = self
        return AsyncStream { continuation in
            let task = Task {
                do throws(ProviderError) {
                    let result = try await provider.complete(request)
                    if !result.text.isEmpty { continuation.yield(.text(result.text)) }
                    for call in result.toolCalls { continuation.yield(.toolCall(call)) }
                    continuation.yield(.done(result))
                } catch {
                    continuation.yield(.failed(error))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Which provider produced an answer; raw values are the `provider` field of `chat --json`.
public enum ProviderKind: String, Sendable, Hashable, Codable, CaseIterable {
    case remote
    case crossAccount = "cross-account"
    case ollama
    case openai
    case anthropic
    case onDevice = "on-device"
}

/// One chat message: HomebaseCore's `ChatMessage`, the shape `infer.request` carries.
extension ChatMessage {
    public static func system(_ content: String) -> ChatMessage { ChatMessage(role: "system", content: content) }
    public static func user(_ content: String) -> ChatMessage { ChatMessage(role: "user", content: content) }
    public static func assistant(_ content: String) -> ChatMessage { ChatMessage(role: "assistant", content: content) }
}

/// JSON kept as the text it arrived as (an OpenAI-style tool definition, tool-call arguments): the
/// router never interprets it, and providers splice it into their request bodies.
public struct RawJSON: Sendable, Hashable, CustomStringConvertible {
    public var text: String
    public init(_ text: String) { self.text = text }
    public var description: String { self.text }
}

/// Sampling options; `nil` leaves the provider's default.
public struct ChatOptions: Sendable, Hashable {
    public var temperature: Double?
    public var topP: Double?
    public var maxTokens: Int?
    public var stop: [String]
    public var seed: Int?
    /// How much a reasoning model thinks (`chat --think`); nil keeps the runtime's default.
    public var think: ThinkSetting?

    public init(temperature: Double? = nil, topP: Double? = nil, maxTokens: Int? = nil, stop: [String] = [],
                seed: Int? = nil, think: ThinkSetting? = nil) {
        self.temperature = temperature
        self.topP = topP
        self.maxTokens = maxTokens
        self.stop = stop
        self.seed = seed
        self.think = think
    }
}

/// What a call site asks of a brain.
public struct ChatRequest: Sendable, Hashable {
    public var messages: [ChatMessage]
    /// OpenAI-style tool definitions, one JSON object each. A request with tools never crosses the
    /// wire (design.md §R6): relay-routed providers hand it to their on-device fallback.
    public var tools: [RawJSON]
    public var options: ChatOptions

    public init(messages: [ChatMessage], tools: [RawJSON] = [], options: ChatOptions = ChatOptions()) {
        self.messages = messages
        self.tools = tools
        self.options = options
    }

    public var hasTools: Bool { !self.tools.isEmpty }
}

/// A tool call the model asked for; `arguments` is a JSON object as text (Anthropic's object is
/// re-serialised, OpenAI's string is passed through).
public struct ToolCall: Sendable, Hashable {
    public var id: String
    public var name: String
    public var arguments: RawJSON

    public init(id: String, name: String, arguments: RawJSON) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// Why a completion stopped.
public enum FinishReason: String, Sendable, Hashable, Codable {
    case stop
    case length
    case toolCalls = "tool_calls"
}


/// Why the answer came from somewhere other than the chosen provider; raw values are `chat --json`'s
/// `fallback.reason` (design.md §D).
public struct FallbackReason: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    // Routing time (layer one).
    /// The selected cloud has no key on its ring.
    public static let noKey = FallbackReason(rawValue: "no_key")
    /// The Ollama arm has no model tag selected.
    public static let noModelSelected = FallbackReason(rawValue: "no_model_selected")
    /// The selection names a friend's Homebase this device has not joined (unknown or pending).
    public static let notJoined = FallbackReason(rawValue: "not_joined")
    /// The friend's Homebase revoked the grant.
    public static let revoked = FallbackReason(rawValue: "revoked")
    /// The Homebase advertises no models.
    public static let noModels = FallbackReason(rawValue: "no_models")
    /// The Homebase's advert (or a joined host's last frame) is too old.
    public static let staleAdvert = FallbackReason(rawValue: "stale_advert")
    /// No verified local endpoint and no advert from a Homebase.
    public static let noEndpoint = FallbackReason(rawValue: "no_endpoint")

    // In call (layer two).
    public static let offline = FallbackReason(rawValue: "offline")
    public static let acceptTimeout = FallbackReason(rawValue: "accept_timeout")
    public static let firstOutputTimeout = FallbackReason(rawValue: "first_output_timeout")
    public static let stall = FallbackReason(rawValue: "stall")
    /// The request carried tools, which never cross the wire.
    public static let tools = FallbackReason(rawValue: "tools")
    /// The device model rung failed and the floor answered.
    public static let deviceModelFailed = FallbackReason(rawValue: "device_model_failed")

    /// A provider or host error with its code, e.g. `error:not_granted`, `error:http_401`.
    public static func error(_ code: String) -> FallbackReason { FallbackReason(rawValue: "error:" + code) }
}

/// Who was meant to answer, and why someone else did.
public struct Fallback: Sendable, Hashable {
    public var from: ProviderKind
    public var reason: FallbackReason

    public init(from: ProviderKind, reason: FallbackReason) {
        self.from = from
        self.reason = reason
    }
}

/// A provider's failure; the reason is what a fallback reports.
public struct ProviderError: Error, Sendable, Hashable {
    public var reason: FallbackReason
    /// One line for a person; never contains secrets or prompt text.
    public var detail: String

    public init(_ reason: FallbackReason, detail: String = "") {
        self.reason = reason
        self.detail = detail
    }
}

/// A whole answer.
public struct ChatResult: Sendable, Hashable {
    public var text: String
    public var toolCalls: [ToolCall]
    public var finishReason: FinishReason
    public var usage: Usage?
    /// The provider that actually answered.
    public var providerKind: ProviderKind
    /// The model that actually answered (`floor` for the built-in floor).
    public var model: String
    /// Set when the answer came from a fallback.
    public var fallback: Fallback?
    /// What a reasoning model thought before answering, apart from `text`; nil when none came.
    public var reasoning: String?

    public init(text: String, toolCalls: [ToolCall] = [], finishReason: FinishReason = .stop, usage: Usage? = nil,
                providerKind: ProviderKind, model: String, fallback: Fallback? = nil) {
        self.text = text
        self.toolCalls = toolCalls
        self.finishReason = finishReason
        self.usage = usage
        self.providerKind = providerKind
        self.model = model
        self.fallback = fallback
    }
}

/// One streaming event.
public enum ChatStreamEvent: Sendable, Hashable {
    /// More answer text.
    case text(String)
    /// More of the model's reasoning: shown apart, never part of the answer.
    case reasoning(String)
    /// The Homebase queued the request at `position` (1: next to start); the answer is still coming.
    case queued(position: Int)
    /// A tool call the model asked for.
    case toolCall(ToolCall)
    /// Discard everything streamed so far: a fallback is about to answer from the start.
    case restart(FallbackReason)
    /// A fallback takes over: from here on `provider` answers, because `fallback.from` failed with
    /// `fallback.reason`. No output of its own; it comes before the fallback's first output, so a caller that
    /// must name the answering provider before the answer (`serve`'s headers) knows it. `.restart` still marks
    /// output to discard.
    case fallingBack(Fallback, provider: ProviderKind)
    /// The whole result; terminal.
    case done(ChatResult)
    /// The provider failed; terminal. Never emitted by a provider the router returns.
    case failed(ProviderError)
}
