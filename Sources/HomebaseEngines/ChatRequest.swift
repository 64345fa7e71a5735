import HomebaseCore

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
