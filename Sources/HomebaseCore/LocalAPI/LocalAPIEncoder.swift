/// The bytes the local API answers with (issue 36): OpenAI's chat completions (SSE chunks, `[DONE]`, the whole
/// body, errors, `/v1/models`) and Ollama's native shapes (NDJSON lines, `/api/tags`, `/api/show`, `/api/ps`,
/// `/api/version`). Pure: everything the shell knows (ids, times, the route) comes in as parameters.

/// Where an answer came from, for the `homebase` object of the last chunk / line / body:
/// `{"route", "provider", "model", "fallback": {"from", "reason"} | null}`.
public struct LocalAPIOrigin: Sendable, Equatable {
    /// `route --json`'s route raw value.
    public var route: String
    /// The provider kind's raw value (`remote`, `cross-account`, `ollama`, `openai`, `anthropic`, `on-device`).
    public var provider: String
    public var model: String
    /// Set when a fallback answered: the provider meant to answer and why it did not.
    public var fallbackFrom: String?
    public var fallbackReason: String?

    public init(route: String, provider: String, model: String, fallbackFrom: String? = nil,
                fallbackReason: String? = nil) {
        self.route = route
        self.provider = provider
        self.model = model
        self.fallbackFrom = fallbackFrom
        self.fallbackReason = fallbackReason
    }

    var node: JSONNode {
        let fallback: JSONNode
        if let from = self.fallbackFrom, let reason = self.fallbackReason {
            fallback = .object([.init(key: "from", value: .string(from)), .init(key: "reason", value: .string(reason))])
        } else {
            fallback = .null
        }
        return .object([
            .init(key: "route", value: .string(self.route)), .init(key: "provider", value: .string(self.provider)),
            .init(key: "model", value: .string(self.model)), .init(key: "fallback", value: fallback),
        ])
    }
}

/// A tool call in an answer; `arguments` is JSON text as the model produced it.
public struct LocalAPIToolCall: Sendable, Equatable {
    public var id: String
    public var name: String
    public var arguments: String
    public init(id: String, name: String, arguments: String) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// A whole answer, for the non-streamed bodies and the last streamed pieces.
public struct LocalAPIAnswer: Sendable, Equatable {
    public var text: String
    public var reasoning: String?
    public var toolCalls: [LocalAPIToolCall]
    /// `stop`, `length` or `tool_calls`.
    public var finishReason: String
    public var usage: Usage?
    public var origin: LocalAPIOrigin

    public init(text: String, reasoning: String? = nil, toolCalls: [LocalAPIToolCall] = [],
                finishReason: String = "stop", usage: Usage? = nil, origin: LocalAPIOrigin) {
        self.text = text
        self.reasoning = reasoning
        self.toolCalls = toolCalls
        self.finishReason = finishReason
        self.usage = usage
        self.origin = origin
    }
}

/// A model the device can reach now, for `/v1/models`, `/api/tags`, `/api/show` and `/api/ps`.
public struct LocalAPIModel: Sendable, Equatable {
    public var id: String
    /// Which route serves it: `homebase`, `friend:<name>`, `device`, `openai`, `anthropic`.
    public var ownedBy: String
    public var family: String?
    public var parameterSize: String?
    public var quantization: String?
    public var capabilities: [String]
    public var contextLength: Int?
    /// Loaded in its runtime now (`/api/ps`).
    public var loaded: Bool

    public init(id: String, ownedBy: String, family: String? = nil, parameterSize: String? = nil,
                quantization: String? = nil, capabilities: [String] = ["completion"], contextLength: Int? = nil,
                loaded: Bool = false) {
        self.id = id
        self.ownedBy = ownedBy
        self.family = family
        self.parameterSize = parameterSize
        self.quantization = quantization
        self.capabilities = capabilities
        self.contextLength = contextLength
        self.loaded = loaded
    }
}

/// OpenAI's shapes.
public enum OpenAIEncoder {
    /// One streamed piece of an answer.
    public enum Delta: Sendable, Equatable {
        /// The first chunk: `{"role":"assistant","content":""}`.
        case role
        case content(String)
        /// Reasoning as `delta.reasoning_content` (what llama-server and vLLM emit).
        case reasoning(String)
        case toolCall(index: Int, LocalAPIToolCall)
    }

    /// `data: {chat.completion.chunk}\n\n` with one delta and no finish reason.
    public static func chunk(id: String, created: Int, model: String, delta: Delta) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        Self.chunkPrefix(id: id, created: created, model: model, to: &out)
        out += #""delta":{"#.utf8
        switch delta {
        case .role: out += #""role":"assistant","content":"""#.utf8
        case .content(let text):
            out += #""content":"#.utf8
            JSONStringWriter.append(text, to: &out)
        case .reasoning(let text):
            out += #""reasoning_content":"#.utf8
            JSONStringWriter.append(text, to: &out)
        case .toolCall(let index, let call):
            out += #""tool_calls":["#.utf8
            Self.toolCall(call, index: index).write(to: &out)
            out += "]".utf8
        }
        out += #"},"logprobs":null,"finish_reason":null}]}"#.utf8
        out += "\n\n".utf8
        return out
    }

    /// The chunk with `finish_reason` and the `homebase` object.
    public static func finalChunk(id: String, created: Int, model: String, finishReason: String,
                                  origin: LocalAPIOrigin) -> [UInt8] {
        var out: [UInt8] = []
        Self.chunkPrefix(id: id, created: created, model: model, to: &out)
        out += #""delta":{},"logprobs":null,"finish_reason":"#.utf8
        JSONStringWriter.append(finishReason, to: &out)
        out += #"}],"homebase":"#.utf8
        origin.node.write(to: &out)
        out += "}\n\n".utf8
        return out
    }

    /// `stream_options.include_usage`'s last chunk: empty `choices` and `usage`.
    public static func usageChunk(id: String, created: Int, model: String, usage: Usage) -> [UInt8] {
        var out: [UInt8] = Array("data: ".utf8)
        JSONNode.object(Self.envelope(id: id, object: "chat.completion.chunk", created: created, model: model) + [
            .init(key: "choices", value: .array([])), .init(key: "usage", value: Self.usage(usage)),
        ]).write(to: &out)
        out += "\n\n".utf8
        return out
    }

    /// The stream's end.
    public static let done: [UInt8] = Array("data: [DONE]\n\n".utf8)

    /// The whole `chat.completion` object of a non-streamed answer.
    public static func completion(id: String, created: Int, model: String, answer: LocalAPIAnswer) -> [UInt8] {
        var message: [JSONNode.Member] = [.init(key: "role", value: .string("assistant"))]
        message.append(.init(key: "content", value: answer.toolCalls.isEmpty || !answer.text.isEmpty
            ? .string(answer.text) : .null))
        if let reasoning = answer.reasoning, !reasoning.isEmpty {
            message.append(.init(key: "reasoning_content", value: .string(reasoning)))
        }
        if !answer.toolCalls.isEmpty {
            message.append(.init(key: "tool_calls", value: .array(answer.toolCalls.enumerated().map {
                Self.toolCall($0.element, index: nil)
            })))
        }
        var members = Self.envelope(id: id, object: "chat.completion", created: created, model: model)
        members.append(.init(key: "choices", value: .array([.object([
            .init(key: "index", value: .number(0)), .init(key: "message", value: .object(message)),
            .init(key: "logprobs", value: .null), .init(key: "finish_reason", value: .string(answer.finishReason)),
        ])])))
        let usage = answer.usage ?? Usage(promptTokens: 0, completionTokens: 0)
        members.append(.init(key: "usage", value: Self.usage(usage)))
        members.append(.init(key: "homebase", value: answer.origin.node))
        return JSONNode.object(members).serialized()
    }

    /// `{"error":{"message","type","param","code"}}`.
    public static func error(_ error: LocalAPIError) -> [UInt8] {
        JSONNode.object([.init(key: "error", value: .object([
            .init(key: "message", value: .string(error.message)), .init(key: "type", value: .string(error.type)),
            .init(key: "param", value: error.param.map { .string($0) } ?? .null),
            .init(key: "code", value: error.code.map { .string($0) } ?? .null),
        ]))]).serialized()
    }

    /// `GET /v1/models`.
    public static func models(_ models: [LocalAPIModel], created: Int) -> [UInt8] {
        JSONNode.object([
            .init(key: "object", value: .string("list")),
            .init(key: "data", value: .array(models.map { Self.model($0, created: created) })),
        ]).serialized()
    }

    /// `GET /v1/models/{id}`.
    public static func model(_ model: LocalAPIModel, created: Int) -> JSONNode {
        .object([
            .init(key: "id", value: .string(model.id)), .init(key: "object", value: .string("model")),
            .init(key: "created", value: .number(created)), .init(key: "owned_by", value: .string(model.ownedBy)),
        ])
    }

    // MARK: Pieces

    private static func chunkPrefix(id: String, created: Int, model: String, to out: inout [UInt8]) {
        out += #"data: {"id":"#.utf8
        JSONStringWriter.append(id, to: &out)
        out += #","object":"chat.completion.chunk","created":"#.utf8
        out += String(created).utf8
        out += #","model":"#.utf8
        JSONStringWriter.append(model, to: &out)
        out += #","choices":[{"index":0,"#.utf8
    }

    private static func envelope(id: String, object: String, created: Int, model: String) -> [JSONNode.Member] {
        [.init(key: "id", value: .string(id)), .init(key: "object", value: .string(object)),
         .init(key: "created", value: .number(created)), .init(key: "model", value: .string(model))]
    }

    static func usage(_ usage: Usage) -> JSONNode {
        .object([
            .init(key: "prompt_tokens", value: .number(usage.promptTokens)),
            .init(key: "completion_tokens", value: .number(usage.completionTokens)),
            .init(key: "total_tokens", value: .number(usage.promptTokens + usage.completionTokens)),
        ])
    }

    static func toolCall(_ call: LocalAPIToolCall, index: Int?) -> JSONNode {
        var members: [JSONNode.Member] = []
        if let index { members.append(.init(key: "index", value: .number(index))) }
        members += [
            .init(key: "id", value: .string(call.id)), .init(key: "type", value: .string("function")),
            .init(key: "function", value: .object([
                .init(key: "name", value: .string(call.name)), .init(key: "arguments", value: .string(call.arguments)),
            ])),
        ]
        return .object(members)
    }
}

/// Ollama's native shapes.
public enum OllamaEncoder {
    /// One NDJSON line of a streamed `/api/chat`: a piece of content or of thinking, `done: false`.
    public static func chatLine(model: String, createdAt: String, content: String, thinking: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        out += #"{"model":"#.utf8
        JSONStringWriter.append(model, to: &out)
        out += #","created_at":"#.utf8
        JSONStringWriter.append(createdAt, to: &out)
        out += #","message":{"role":"assistant","content":"#.utf8
        JSONStringWriter.append(content, to: &out)
        if let thinking {
            out += #","thinking":"#.utf8
            JSONStringWriter.append(thinking, to: &out)
        }
        out += #"},"done":false}"#.utf8
        out += "\n".utf8
        return out
    }

    /// The `done: true` object: the last NDJSON line (`includeMessage` false: empty content, as Ollama streams)
    /// or the whole non-streamed answer. Durations are integer nanoseconds.
    public static func chatDone(model: String, createdAt: String, answer: LocalAPIAnswer, includeMessage: Bool,
                                totalNs: Int, evalNs: Int, newline: Bool) -> [UInt8] {
        var message: [JSONNode.Member] = [
            .init(key: "role", value: .string("assistant")),
            .init(key: "content", value: .string(includeMessage ? answer.text : "")),
        ]
        if includeMessage, let reasoning = answer.reasoning, !reasoning.isEmpty {
            message.append(.init(key: "thinking", value: .string(reasoning)))
        }
        if !answer.toolCalls.isEmpty {
            message.append(.init(key: "tool_calls", value: .array(answer.toolCalls.map { call in
                .object([.init(key: "function", value: .object([
                    .init(key: "name", value: .string(call.name)),
                    .init(key: "arguments", value: Self.argumentsObject(call.arguments)),
                ]))])
            })))
        }
        let usage = answer.usage ?? Usage(promptTokens: 0, completionTokens: 0)
        let doneReason = answer.finishReason == "tool_calls" ? "stop" : answer.finishReason
        var out = JSONNode.object([
            .init(key: "model", value: .string(model)), .init(key: "created_at", value: .string(createdAt)),
            .init(key: "message", value: .object(message)), .init(key: "done", value: .bool(true)),
            .init(key: "done_reason", value: .string(doneReason)),
            .init(key: "total_duration", value: .number(max(0, totalNs))),
            .init(key: "load_duration", value: .number(0)),
            .init(key: "prompt_eval_count", value: .number(usage.promptTokens)),
            .init(key: "prompt_eval_duration", value: .number(0)),
            .init(key: "eval_count", value: .number(usage.completionTokens)),
            .init(key: "eval_duration", value: .number(max(0, evalNs))),
            .init(key: "homebase", value: answer.origin.node),
        ]).serialized()
        if newline { out.append(UInt8(ascii: "\n")) }
        return out
    }

    /// The answer to a chat with no messages: Ollama loads the model and says so (`done_reason: "load"`); apps
    /// send it to warm a model up.
    public static func loaded(model: String, createdAt: String) -> [UInt8] {
        JSONNode.object([
            .init(key: "model", value: .string(model)), .init(key: "created_at", value: .string(createdAt)),
            .init(key: "message", value: .object([.init(key: "role", value: .string("assistant")),
                                                  .init(key: "content", value: .string(""))])),
            .init(key: "done_reason", value: .string("load")), .init(key: "done", value: .bool(true)),
        ]).serialized()
    }

    /// `{"error": "…"}`, Ollama's error body (also the last line of a stream that failed).
    public static func error(_ message: String) -> [UInt8] {
        JSONNode.object([.init(key: "error", value: .string(message))]).serialized()
    }

    /// `GET /api/version`.
    public static func version(_ version: String) -> [UInt8] {
        JSONNode.object([.init(key: "version", value: .string(version))]).serialized()
    }

    /// `GET /api/tags`.
    public static func tags(_ models: [LocalAPIModel], modifiedAt: String) -> [UInt8] {
        JSONNode.object([.init(key: "models", value: .array(models.map { m in
            .object([
                .init(key: "name", value: .string(m.id)), .init(key: "model", value: .string(m.id)),
                .init(key: "modified_at", value: .string(modifiedAt)), .init(key: "size", value: .number(0)),
                .init(key: "digest", value: .string("")), .init(key: "details", value: Self.details(m)),
                .init(key: "capabilities", value: .array(m.capabilities.map { .string($0) })),
            ])
        }))]).serialized()
    }

    /// `POST /api/show` for one model.
    public static func show(_ m: LocalAPIModel, modifiedAt: String) -> [UInt8] {
        let arch = m.family ?? "unknown"
        var info: [JSONNode.Member] = [.init(key: "general.architecture", value: .string(arch))]
        if let context = m.contextLength { info.append(.init(key: "\(arch).context_length", value: .number(context))) }
        return JSONNode.object([
            .init(key: "modelfile", value: .string("")), .init(key: "parameters", value: .string("")),
            .init(key: "template", value: .string("")), .init(key: "details", value: Self.details(m)),
            .init(key: "model_info", value: .object(info)),
            .init(key: "capabilities", value: .array(m.capabilities.map { .string($0) })),
            .init(key: "modified_at", value: .string(modifiedAt)),
        ]).serialized()
    }

    /// `GET /api/ps`: the loaded ones.
    public static func ps(_ models: [LocalAPIModel], expiresAt: String) -> [UInt8] {
        JSONNode.object([.init(key: "models", value: .array(models.filter(\.loaded).map { m in
            var members: [JSONNode.Member] = [
                .init(key: "name", value: .string(m.id)), .init(key: "model", value: .string(m.id)),
                .init(key: "size", value: .number(0)), .init(key: "digest", value: .string("")),
                .init(key: "details", value: Self.details(m)), .init(key: "expires_at", value: .string(expiresAt)),
                .init(key: "size_vram", value: .number(0)),
            ]
            if let context = m.contextLength { members.append(.init(key: "context_length", value: .number(context))) }
            return .object(members)
        }))]).serialized()
    }

    static func details(_ m: LocalAPIModel) -> JSONNode {
        let family = m.family ?? ""
        return .object([
            .init(key: "parent_model", value: .string("")), .init(key: "format", value: .string("gguf")),
            .init(key: "family", value: .string(family)),
            .init(key: "families", value: family.isEmpty ? .null : .array([.string(family)])),
            .init(key: "parameter_size", value: .string(m.parameterSize ?? "")),
            .init(key: "quantization_level", value: .string(m.quantization ?? "")),
        ])
    }

    /// Ollama carries tool arguments as an object; text that is not a JSON object becomes `{}`.
    static func argumentsObject(_ text: String) -> JSONNode {
        guard let node = try? JSONNode.parse(text), node.isObject else { return .object([]) }
        return node
    }

    /// RFC 3339 UTC with milliseconds (`2026-12-07T14:57:10.123Z`) for Unix milliseconds: Ollama's `created_at`.
    public static func timestamp(unixMs: UInt64) -> String {
        let ms = Int(unixMs % 1000)
        let seconds = Int(unixMs / 1000)
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(ms, 3))Z"
    }
}
