/// The local API of `handset serve` / `guest serve` (issue 36): what an app's request asks for, decoded from the
/// OpenAI Chat Completions shape or Ollama's `/api/chat`. Pure: bytes in, a request or a refusal out.
///
/// Bad input is normal input: every refusal is a `LocalAPIError` (400, OpenAI's `invalid_request_error`) naming
/// the field; nothing traps, and everything is bounded (`LocalAPILimits`) on top of the server's 1 MiB body limit.

/// Bounds on one decoded request, beyond the body size.
public struct LocalAPILimits: Sendable, Equatable {
    /// Messages in one conversation.
    public var maxMessages = 2048
    /// Tool definitions in one request.
    public var maxTools = 128
    /// Stop sequences (OpenAI allows 4).
    public var maxStops = 4
    /// Bytes of a model name.
    public var maxModelBytes = 256
    /// The largest `max_tokens` accepted.
    public var maxTokens = 1 << 20

    public init() {}
}

/// What an app asked for: one chat, in either API's shape.
public struct LocalChatRequest: Sendable, Equatable {
    /// The model asked for; nil for `auto`, empty or absent (the configured one answers).
    public var model: String?
    public var messages: [ChatMessage]
    /// Whether the answer streams (OpenAI's default: no; Ollama's: yes).
    public var stream: Bool
    /// `stream_options.include_usage`: a last chunk with empty `choices` and `usage`.
    public var includeUsage: Bool
    public var maxTokens: Int?
    public var temperature: Double?
    public var topP: Double?
    public var stop: [String]
    public var seed: Int?
    /// Tool definitions, each an OpenAI-style `{"type":"function","function":{…}}` object as compact JSON text
    /// (legacy `functions` entries are wrapped so). Non-empty: tools rules apply (never sent to a Homebase).
    public var tools: [String]
    /// `reasoning_effort` (OpenAI) or `think` (Ollama).
    public var think: ThinkSetting?

    public init(model: String? = nil, messages: [ChatMessage], stream: Bool = false, includeUsage: Bool = false,
                maxTokens: Int? = nil, temperature: Double? = nil, topP: Double? = nil, stop: [String] = [],
                seed: Int? = nil, tools: [String] = [], think: ThinkSetting? = nil) {
        self.model = model
        self.messages = messages
        self.stream = stream
        self.includeUsage = includeUsage
        self.maxTokens = maxTokens
        self.temperature = temperature
        self.topP = topP
        self.stop = stop
        self.seed = seed
        self.tools = tools
        self.think = think
    }
}

/// A refusal in both APIs' terms: the HTTP status, OpenAI's `type`/`code`/`param`, and one line for a person.
public struct LocalAPIError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String
    public var type: String
    public var param: String?
    public var code: String?

    public init(status: Int, message: String, type: String = "invalid_request_error", param: String? = nil,
                code: String? = nil) {
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
    }

    /// 400 `invalid_request_error` about `param`.
    public static func invalid(_ message: String, param: String? = nil, code: String? = nil) -> LocalAPIError {
        LocalAPIError(status: 400, message: message, param: param, code: code)
    }

    /// The body is not JSON at all.
    static func malformed(_ error: JSONNode.ParseError) -> LocalAPIError {
        .invalid("the request body is not valid JSON (\(error.reason) at byte \(error.offset))", code: "invalid_json")
    }
}

/// Decodes request bodies of both APIs.
public enum LocalAPIRequestDecoder {
    /// `POST /v1/chat/completions`.
    public static func openAIChat(_ body: [UInt8], limits: LocalAPILimits = LocalAPILimits())
        throws(LocalAPIError) -> LocalChatRequest
    {
        let root = try Self.object(body)
        var request = LocalChatRequest(messages: [])
        request.model = try Self.model(root, limits: limits)
        guard let messages = root["messages"] else { throw .invalid("'messages' is required", param: "messages") }
        guard case .array(let items) = messages, !items.isEmpty else {
            throw .invalid("'messages' must be a non-empty array", param: "messages")
        }
        guard items.count <= limits.maxMessages else {
            throw .invalid("too many messages (at most \(limits.maxMessages))", param: "messages")
        }
        for (i, item) in items.enumerated() { request.messages.append(try Self.openAIMessage(item, index: i)) }
        request.stream = try Self.bool(root, "stream") ?? false
        if let options = root["stream_options"], !options.isNull {
            guard options.isObject else {
                throw .invalid("'stream_options' must be an object", param: "stream_options")
            }
            request.includeUsage = try Self.bool(options, "include_usage",
                                                 param: "stream_options.include_usage") ?? false
        }
        let maxCompletion = try Self.positiveInt(root, "max_completion_tokens", limit: limits.maxTokens)
        let maxTokens = try Self.positiveInt(root, "max_tokens", limit: limits.maxTokens)
        request.maxTokens = maxCompletion ?? maxTokens
        request.temperature = try Self.number(root, "temperature", in: 0...2)
        request.topP = try Self.number(root, "top_p", in: 0...1)
        request.seed = try Self.int(root, "seed")
        request.stop = try Self.stops(root["stop"], param: "stop", limits: limits)
        if let n = try Self.int(root, "n"), n != 1 {
            throw .invalid("only n = 1 is supported", param: "n")
        }
        if let effort = root["reasoning_effort"], !effort.isNull {
            guard let text = effort.stringValue, let setting = Self.effort(text) else {
                throw .invalid("'reasoning_effort' must be none, minimal, low, medium or high",
                               param: "reasoning_effort")
            }
            request.think = setting
        }
        request.tools = try Self.tools(root, limits: limits)
        return request
    }

    /// `POST /api/chat` (Ollama).
    public static func ollamaChat(_ body: [UInt8], limits: LocalAPILimits = LocalAPILimits())
        throws(LocalAPIError) -> LocalChatRequest
    {
        let root = try Self.object(body)
        var request = LocalChatRequest(messages: [], stream: true)
        request.model = try Self.model(root, limits: limits)
        if let messages = root["messages"], !messages.isNull {
            guard case .array(let items) = messages else {
                throw .invalid("'messages' must be an array", param: "messages")
            }
            guard items.count <= limits.maxMessages else {
                throw .invalid("too many messages (at most \(limits.maxMessages))", param: "messages")
            }
            for (i, item) in items.enumerated() { request.messages.append(try Self.ollamaMessage(item, index: i)) }
        }
        request.stream = try Self.bool(root, "stream") ?? true
        if let think = root["think"], !think.isNull {
            switch think {
            case .bool(let on): request.think = on ? .on : .off
            case .string(let text):
                guard let setting = Self.effort(text) else {
                    throw .invalid("'think' must be true, false, low, medium or high", param: "think")
                }
                request.think = setting
            default: throw .invalid("'think' must be true, false, low, medium or high", param: "think")
            }
        }
        if let options = root["options"], !options.isNull {
            guard options.isObject else { throw .invalid("'options' must be an object", param: "options") }
            request.temperature = try Self.number(options, "temperature", in: 0...2, param: "options.temperature")
            request.topP = try Self.number(options, "top_p", in: 0...1, param: "options.top_p")
            request.seed = try Self.int(options, "seed", param: "options.seed")
            // Ollama: -1 or -2 mean "no limit" / "fill the context".
            if let n = try Self.int(options, "num_predict", param: "options.num_predict"), n > 0 {
                guard n <= limits.maxTokens else {
                    throw .invalid("'options.num_predict' is larger than \(limits.maxTokens)",
                                   param: "options.num_predict")
                }
                request.maxTokens = n
            }
            request.stop = try Self.stops(options["stop"], param: "options.stop", limits: limits)
        }
        request.tools = try Self.tools(root, limits: limits)
        return request
    }

    /// `POST /api/show`: the model asked about (`model`, or the older `name`).
    public static func ollamaShow(_ body: [UInt8], limits: LocalAPILimits = LocalAPILimits())
        throws(LocalAPIError) -> String
    {
        let root = try Self.object(body)
        let model = try Self.model(root, limits: limits, key: "model")
        let older = try Self.model(root, limits: limits, key: "name")
        guard let name = model ?? older else { throw .invalid("'model' is required", param: "model") }
        return name
    }

    // MARK: Pieces

    static func object(_ body: [UInt8]) throws(LocalAPIError) -> JSONNode {
        let parsed: Result<JSONNode, JSONNode.ParseError> = body.withUnsafeBufferPointer { bytes in
            do throws(JSONNode.ParseError) {
                return .success(try JSONNode.parse(bytes))
            } catch {
                return .failure(error)
            }
        }
        let root: JSONNode
        switch parsed {
        case .success(let node): root = node
        case .failure(let error): throw LocalAPIError.malformed(error)
        }
        guard root.isObject else { throw .invalid("the request body must be a JSON object", code: "invalid_json") }
        return root
    }

    /// The model asked for: nil for absent, null, empty or `auto`.
    static func model(_ root: JSONNode, limits: LocalAPILimits, key: String = "model")
        throws(LocalAPIError) -> String?
    {
        guard let node = root[key], !node.isNull else { return nil }
        guard let text = node.stringValue else { throw .invalid("'\(key)' must be a string", param: key) }
        guard text.utf8.count <= limits.maxModelBytes else {
            throw .invalid("'\(key)' is longer than \(limits.maxModelBytes) bytes", param: key)
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalid("'\(key)' contains control characters", param: key)
        }
        let trimmed = text.trimmingCharacters(in: " ")
        if trimmed.isEmpty || trimmed.lowercased() == "auto" { return nil }
        return trimmed
    }

    static func openAIMessage(_ node: JSONNode, index: Int) throws(LocalAPIError) -> ChatMessage {
        let param = "messages[\(index)]"
        guard node.isObject else { throw .invalid("\(param) must be an object", param: param) }
        guard let role = node["role"]?.stringValue else {
            throw .invalid("\(param).role must be a string", param: "\(param).role")
        }
        let mapped: String
        switch role {
        case "system", "developer": mapped = "system"
        case "user", "assistant", "tool": mapped = role
        default:
            throw .invalid("\(param).role '\(Self.clip(role))' is not system, developer, user, assistant or tool",
                           param: "\(param).role")
        }
        let content: String
        switch node["content"] {
        case nil, .null?:
            // An assistant turn that only called tools has no content.
            guard mapped == "assistant" else {
                throw .invalid("\(param).content is required", param: "\(param).content")
            }
            content = ""
        case .string(let text)?:
            content = text
        case .array(let parts)?:
            var text = ""
            for (p, part) in parts.enumerated() {
                let partParam = "\(param).content[\(p)]"
                guard let type = part["type"]?.stringValue else {
                    throw .invalid("\(partParam).type must be a string", param: partParam)
                }
                guard type == "text" else {
                    throw .invalid("\(partParam) is '\(Self.clip(type))': only text content is supported here "
                                   + "(the models behind this API take text)", param: partParam,
                                   code: "unsupported_content")
                }
                guard let piece = part["text"]?.stringValue else {
                    throw .invalid("\(partParam).text must be a string", param: partParam)
                }
                text += piece
            }
            content = text
        default:
            throw .invalid("\(param).content must be a string or an array of text parts", param: "\(param).content")
        }
        return ChatMessage(role: mapped, content: content)
    }

    static func ollamaMessage(_ node: JSONNode, index: Int) throws(LocalAPIError) -> ChatMessage {
        let param = "messages[\(index)]"
        guard node.isObject else { throw .invalid("\(param) must be an object", param: param) }
        guard let role = node["role"]?.stringValue,
              ["system", "user", "assistant", "tool"].contains(role)
        else { throw .invalid("\(param).role must be system, user, assistant or tool", param: "\(param).role") }
        if let images = node["images"], !images.isNull, images != .array([]) {
            throw .invalid("\(param).images: only text content is supported here (the models behind this API "
                           + "take text)", param: "\(param).images", code: "unsupported_content")
        }
        let content: String
        switch node["content"] {
        case nil, .null?: content = ""
        case .string(let text)?: content = text
        default: throw .invalid("\(param).content must be a string", param: "\(param).content")
        }
        return ChatMessage(role: role, content: content)
    }

    /// `tools` and the legacy `functions`, each as an OpenAI tool object's compact JSON.
    static func tools(_ root: JSONNode, limits: LocalAPILimits) throws(LocalAPIError) -> [String] {
        var out: [String] = []
        for key in ["tools", "functions"] {
            guard let node = root[key], !node.isNull else { continue }
            guard case .array(let items) = node else { throw .invalid("'\(key)' must be an array", param: key) }
            for (i, item) in items.enumerated() {
                guard item.isObject else { throw .invalid("\(key)[\(i)] must be an object", param: "\(key)[\(i)]") }
                let tool: JSONNode = key == "tools" ? item : .object([
                    .init(key: "type", value: .string("function")), .init(key: "function", value: item),
                ])
                out.append(String(decoding: tool.serialized(), as: UTF8.self))
            }
        }
        guard out.count <= limits.maxTools else {
            throw .invalid("too many tools (at most \(limits.maxTools))", param: "tools")
        }
        return out
    }

    static func stops(_ node: JSONNode?, param: String, limits: LocalAPILimits) throws(LocalAPIError) -> [String] {
        switch node {
        case nil, .null?: return []
        case .string(let s)?: return [s]
        case .array(let items)?:
            guard items.count <= limits.maxStops else {
                throw .invalid("'\(param)' has more than \(limits.maxStops) entries", param: param)
            }
            var out: [String] = []
            for item in items {
                guard let s = item.stringValue else {
                    throw .invalid("'\(param)' entries must be strings", param: param)
                }
                out.append(s)
            }
            return out
        default: throw .invalid("'\(param)' must be a string or an array of strings", param: param)
        }
    }

    static func bool(_ root: JSONNode, _ key: String, param: String? = nil) throws(LocalAPIError) -> Bool? {
        switch root[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: throw .invalid("'\(param ?? key)' must be true or false", param: param ?? key)
        }
    }

    static func int(_ root: JSONNode, _ key: String, param: String? = nil) throws(LocalAPIError) -> Int? {
        guard let node = root[key], !node.isNull else { return nil }
        guard let value = node.intValue else {
            throw .invalid("'\(param ?? key)' must be an integer", param: param ?? key)
        }
        return value
    }

    static func positiveInt(_ root: JSONNode, _ key: String, limit: Int) throws(LocalAPIError) -> Int? {
        guard let value = try Self.int(root, key) else { return nil }
        guard value >= 1, value <= limit else { throw .invalid("'\(key)' must be between 1 and \(limit)", param: key) }
        return value
    }

    static func number(_ root: JSONNode, _ key: String, in range: ClosedRange<Double>, param: String? = nil)
        throws(LocalAPIError) -> Double?
    {
        let name = param ?? key
        switch root[key] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let value = Double(text), value.isFinite, range.contains(value) else {
                throw .invalid("'\(name)' must be a number from \(range.lowerBound) to \(range.upperBound)",
                               param: name)
            }
            return value
        default: throw .invalid("'\(name)' must be a number", param: name)
        }
    }

    static func effort(_ text: String) -> ThinkSetting? {
        switch text.lowercased() {
        case "none": return .off
        case "minimal", "low": return .low
        case "medium": return .medium
        case "high": return .high
        case "true": return .on
        case "false": return .off
        default: return nil
        }
    }

    /// A hostile value quoted back in an error, cut to 40 bytes of UTF-8.
    static func clip(_ text: String) -> String { LocalAPIGate.clip(text, maxBytes: 40) }
}

extension String {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        String(self.drop { $0 == set }.reversed().drop { $0 == set }.reversed())
    }
}
