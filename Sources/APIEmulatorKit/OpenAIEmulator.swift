import Foundation
import HomebaseCore
import HomebaseTransport

/// An in-process stand-in for `api.openai.com/v1` (reference/model-apis.md §4), on `SimpleHTTPServer`,
/// 127.0.0.1, port 0.
///
/// - `GET /v1/models`: the list with a valid Bearer key, else 401 with OpenAI's body.
/// - `POST /v1/chat/completions`: 401 for a bad or missing key (the API's messages), 404 `model_not_found`,
///   400 for an empty `messages`; then, streamed, a role chunk (with `obfuscation` padding), content chunks,
///   a finish chunk with an empty delta, a usage chunk when `stream_options.include_usage`, and `[DONE]`;
///   every chunk carries `"usage":null` when usage is included. When tools are given and the last user
///   message names one, the answer is a tool call whose arguments arrive in fragments keyed by `index`.
///   Non-streamed requests get one `chat.completion`. `max_completion_tokens` (or `max_tokens`) cuts the
///   answer with `finish_reason: "length"`.
/// - The answer text is `EmulatorText.answer(for: last user message)`.
public final class OpenAIEmulator: Sendable {
    public static let defaultKey = "sk-proj-emulator-valid"
    let core: APIEmulatorCore

    public init(configuration: APIEmulatorConfiguration = APIEmulatorConfiguration(
        validKeys: [OpenAIEmulator.defaultKey], models: ["gpt-4o-mini", "gpt-4.1"]))
    {
        self.core = APIEmulatorCore(configuration: configuration)
    }

    /// Starts on 127.0.0.1 and a free port; returns the port. The API root is `http://127.0.0.1:PORT/v1`.
    @discardableResult
    public func start() throws -> UInt16 {
        try self.core.start { [self] request, writer in self.handle(request, writer) }
    }

    public func stop() { self.core.stop() }
    public var stats: APIEmulatorStats { self.core.stats }
    /// Sets (or clears) the fault for the following chat requests.
    public func setFault(_ fault: APIEmulatorFault?) { self.core.setFault(fault) }

    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        switch (request.method, request.path) {
        case ("GET", "/v1/models"):
            guard self.authorized(request, writer) else { return }
            self.core.countModelListing()
            let data = self.core.configuration.models.map { id -> EmulatorJSON in
                .object([("id", .string(id)), ("object", .string("model")), ("created", .int(1_715_367_049)),
                         ("owned_by", .string("system"))])
            }
            self.respond(writer, 200, .object([("object", .string("list")), ("data", .array(data))]))
        case ("POST", "/v1/chat/completions"):
            guard self.authorized(request, writer) else { return }
            self.chat(request, writer)
        default:
            self.error(writer, 404, "Invalid URL (\(request.method) \(request.path))", type: "invalid_request_error",
                       code: nil)
        }
    }

    private func authorized(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) -> Bool {
        guard let header = request.header("Authorization"), header.hasPrefix("Bearer "),
            !header.dropFirst(7).isEmpty
        else {
            self.error(writer, 401, "You didn't provide an API key. You need to provide your API key in an "
                + "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password "
                + "field (with blank username) if you're accessing the API from your browser and are prompted for a "
                + "username. You can obtain an API key from https://platform.openai.com/account/api-keys.",
                type: "invalid_request_error", code: nil)
            return false
        }
        let key = String(header.dropFirst(7))
        guard self.core.configuration.validKeys.contains(key) else {
            self.error(writer, 401, "Incorrect API key provided: \(key.prefix(6))***. You can find your API key at "
                + "https://platform.openai.com/account/api-keys.", type: "invalid_request_error", code: "invalid_api_key")
            return false
        }
        return true
    }

    private func chat(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        guard let body = EmulatorJSON.decodeObject(request.body) else {
            return self.error(writer, 400, "We could not parse the JSON body of your request.",
                              type: "invalid_request_error", code: nil)
        }
        guard let model = body["model"] as? String, !model.isEmpty else {
            return self.error(writer, 400, "you must provide a model parameter", type: "invalid_request_error", code: nil)
        }
        guard self.core.configuration.models.contains(model) else {
            return self.error(writer, 404, "The model `\(model)` does not exist or you do not have access to it.",
                              type: "invalid_request_error", code: "model_not_found")
        }
        guard let messages = body["messages"] as? [[String: Any]], !messages.isEmpty else {
            return self.error(writer, 400, "[] is too short - 'messages'", type: "invalid_request_error", code: nil)
        }
        let fault = self.core.fault
        switch fault {
        case .httpStatus(let status)?:
            let (message, type) = Self.statusError(status)
            return self.error(writer, status, message, type: type, code: status == 429 ? "rate_limit_exceeded" : nil)
        case .rawStream(let text)?:
            self.core.countCompletion()
            return self.core.sendRaw(text, writer: writer)
        default:
            break
        }
        self.core.countCompletion()

        let prompt = EmulatorText.text(of: messages.last { $0["role"] as? String == "user" }?["content"])
        var tokens = EmulatorText.tokens(for: prompt)
        var finish = "stop"
        let limit = (body["max_completion_tokens"] as? Int) ?? (body["max_tokens"] as? Int)
        if let limit, limit >= 0, limit < tokens.count {
            tokens = Array(tokens.prefix(limit))
            finish = "length"
        }
        let tools = (body["tools"] as? [[String: Any]]) ?? []
        let toolNames = tools.compactMap { ($0["function"] as? [String: Any])?["name"] as? String }
        var toolCall: (id: String, name: String, arguments: String)?
        if messages.last?["role"] as? String == "user", let name = EmulatorText.namedTool(in: prompt, names: toolNames) {
            let function = tools.first { ($0["function"] as? [String: Any])?["name"] as? String == name }?["function"]
            let schema = (function as? [String: Any])?["parameters"] as? [String: Any]
            let id = "call_" + String(String(EmulatorText.hash(prompt + name), radix: 36).prefix(24))
            toolCall = (id, name, EmulatorText.arguments(prompt: prompt, schema: schema).serialized(htmlSafe: false))
            tokens = []
            finish = "tool_calls"
        }
        let promptTokens = messages.reduce(0) { $0 + EmulatorText.estimateTokens(EmulatorText.text(of: $1["content"])) + 4 }
        let completionTokens = toolCall == nil ? tokens.count : 12
        let usage: EmulatorJSON = .object([
            ("prompt_tokens", .int(promptTokens)), ("completion_tokens", .int(completionTokens)),
            ("total_tokens", .int(promptTokens + completionTokens)),
        ])
        let id = "chatcmpl-" + String(String(EmulatorText.hash(prompt), radix: 36).prefix(20))
        let created = 1_776_470_822

        guard (body["stream"] as? Bool) == true else {
            let toolCalls: EmulatorJSON = toolCall.map { call in
                .array([.object([("id", .string(call.id)), ("type", .string("function")),
                                 ("function", .object([("name", .string(call.name)),
                                                       ("arguments", .string(call.arguments))]))])])
            } ?? .null
            var message: [(String, EmulatorJSON)] = [
                ("role", .string("assistant")), ("content", toolCall == nil ? .string(tokens.joined()) : .null),
                ("refusal", .null),
            ]
            if toolCall != nil { message.append(("tool_calls", toolCalls)) }
            return self.respond(writer, 200, .object([
                ("id", .string(id)), ("object", .string("chat.completion")), ("created", .int(created)),
                ("model", .string(model)),
                ("choices", .array([.object([("index", .int(0)), ("message", .object(message)), ("logprobs", .null),
                                             ("finish_reason", .string(finish))])])),
                ("usage", usage), ("service_tier", .string("default")), ("system_fingerprint", .string("fp_emulator")),
            ]))
        }

        let includeUsage = ((body["stream_options"] as? [String: Any])?["include_usage"] as? Bool) == true
        func chunk(_ choices: [EmulatorJSON], usage: EmulatorJSON? = nil, obfuscation: Bool = false) -> [UInt8] {
            var fields: [(String, EmulatorJSON)] = [
                ("id", .string(id)), ("object", .string("chat.completion.chunk")), ("created", .int(created)),
                ("model", .string(model)), ("service_tier", .string("default")),
                ("system_fingerprint", .string("fp_emulator")), ("choices", .array(choices)),
            ]
            if let usage { fields.append(("usage", usage)) } else if includeUsage { fields.append(("usage", .null)) }
            if obfuscation { fields.append(("obfuscation", .string("nqlUcq"))) }
            return Array("data: ".utf8) + EmulatorJSON.object(fields).plainBytes + Array("\n\n".utf8)
        }
        func choice(_ delta: [(String, EmulatorJSON)], finish: String? = nil) -> EmulatorJSON {
            .object([("index", .int(0)), ("delta", .object(delta)), ("logprobs", .null),
                     ("finish_reason", finish.map { .string($0) } ?? .null)])
        }
        guard writer.startStream(status: 200, headers: APIEmulatorCore.sseHeaders) else { return }
        var items: [[UInt8]] = []
        if let call = toolCall {
            items.append(chunk([choice([
                ("role", .string("assistant")), ("content", .null),
                ("tool_calls", .array([.object([
                    ("index", .int(0)), ("id", .string(call.id)), ("type", .string("function")),
                    ("function", .object([("name", .string(call.name)), ("arguments", .string(""))])),
                ])])),
            ])], obfuscation: true))
            for piece in EmulatorText.pieces(call.arguments, size: 4) {
                items.append(chunk([choice([("tool_calls", .array([.object([
                    ("index", .int(0)), ("function", .object([("arguments", .string(piece))])),
                ])]))])]))
            }
        } else {
            items.append(chunk([choice([("role", .string("assistant")), ("content", .string("")),
                                        ("refusal", .null)])], obfuscation: true))
            for token in tokens { items.append(chunk([choice([("content", .string(token))])])) }
        }
        // The role chunk goes out at once; faults count text tokens (or argument fragments) after it.
        guard writer.writeChunk(items[0]) else { return self.core.noteGone() }
        let outcome = self.core.paced(items.count - 1, fault: fault, writer: writer) { writer.writeChunk(items[$0 + 1]) }
        switch outcome {
        case .cut:
            return
        case .error:
            let error: EmulatorJSON = .object([("error", .object([
                ("message", .string("The server had an error while processing your request. Sorry about that!")),
                ("type", .string("server_error")), ("param", .null), ("code", .null),
            ]))])
            _ = writer.writeChunk(Array("data: ".utf8) + error.plainBytes + Array("\n\n".utf8))
            return writer.finish()
        case .completed:
            break
        }
        _ = writer.writeChunk(chunk([choice([], finish: finish)]))
        if includeUsage { _ = writer.writeChunk(chunk([], usage: usage)) }
        _ = writer.writeChunk(Array("data: [DONE]\n\n".utf8))
        writer.finish()
    }

    static func statusError(_ status: Int) -> (String, String) {
        switch status {
        case 429: return ("Rate limit reached for requests. Please try again in 20s.", "requests")
        case 503: return ("The engine is currently overloaded, please try again later.", "server_error")
        default: return ("The server had an error while processing your request. Sorry about that!", "server_error")
        }
    }

    private func error(_ writer: HTTPResponseWriter, _ status: Int, _ message: String, type: String, code: String?) {
        self.respond(writer, status, .object([("error", .object([
            ("message", .string(message)), ("type", .string(type)), ("param", .null),
            ("code", code.map { .string($0) } ?? .null),
        ]))]))
    }

    private func respond(_ writer: HTTPResponseWriter, _ status: Int, _ json: EmulatorJSON) {
        writer.respond(status: status, headers: [APIEmulatorCore.jsonType], body: json.plainBytes)
    }
}
