import Foundation
import HomebaseCore
import HomebaseTransport

/// An in-process stand-in for `api.anthropic.com/v1` (reference/model-apis.md §5), on `SimpleHTTPServer`,
/// 127.0.0.1, port 0.
///
/// - Auth: `x-api-key` must be a configured key (else 401 `authentication_error` / `invalid x-api-key`), and
///   `anthropic-version` must be present (else 400).
/// - `GET /v1/models`: the paged list shape (`data`, `has_more`, `first_id`, `last_id`).
/// - `POST /v1/messages`: 400 `invalid_request_error` when `max_tokens` is missing, when a message has the
///   `system` role, or a tool lacks `input_schema`; 404 for an unknown model. Streamed: `message_start`,
///   per block `content_block_start` / `content_block_delta` / `content_block_stop` (a `ping` after the first
///   block start), `message_delta` with the stop reason and cumulative `output_tokens`, `message_stop`; no
///   `[DONE]`. When tools are given and the last user message names one, a short text block is followed by a
///   `tool_use` block whose `partial_json` comes in pieces (the first one empty). Non-streamed requests get
///   one `message` object with `tool_use.input` as an object.
/// - Faults: `httpStatus` answers the status with Anthropic's error type for it (529 `overloaded_error`,
///   429 with `retry-after`); `midStreamError` sends `event: error` and ends the stream.
public final class AnthropicEmulator: Sendable {
    public static let defaultKey = "sk-ant-api03-emulator-valid"
    let core: APIEmulatorCore

    public init(configuration: APIEmulatorConfiguration = APIEmulatorConfiguration(
        validKeys: [AnthropicEmulator.defaultKey], models: ["claude-sonnet-4-5", "claude-haiku-4-5"]))
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
    /// Sets (or clears) the fault for the following message requests.
    public func setFault(_ fault: APIEmulatorFault?) { self.core.setFault(fault) }

    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        switch (request.method, request.path) {
        case ("GET", "/v1/models"):
            guard self.authorized(request, writer) else { return }
            self.core.countModelListing()
            let ids = self.core.configuration.models
            let data = ids.map { id -> EmulatorJSON in
                .object([("type", .string("model")), ("id", .string(id)), ("display_name", .string(id)),
                         ("created_at", .string("2025-09-29T00:00:00Z"))])
            }
            self.respond(writer, 200, .object([
                ("data", .array(data)), ("has_more", .bool(false)),
                ("first_id", ids.first.map { .string($0) } ?? .null), ("last_id", ids.last.map { .string($0) } ?? .null),
            ]))
        case ("POST", "/v1/messages"):
            guard self.authorized(request, writer) else { return }
            self.messages(request, writer)
        default:
            self.error(writer, 404, "not_found_error", "Not found")
        }
    }

    private func authorized(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) -> Bool {
        guard let key = request.header("x-api-key"), self.core.configuration.validKeys.contains(key) else {
            self.error(writer, 401, "authentication_error", "invalid x-api-key")
            return false
        }
        guard request.header("anthropic-version") != nil else {
            self.error(writer, 400, "invalid_request_error", "anthropic-version: header is required")
            return false
        }
        return true
    }

    private func messages(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        guard let body = EmulatorJSON.decodeObject(request.body) else {
            return self.error(writer, 400, "invalid_request_error", "There was an error parsing the body.")
        }
        guard let model = body["model"] as? String, !model.isEmpty else {
            return self.error(writer, 400, "invalid_request_error", "model: Field required")
        }
        guard let maxTokens = body["max_tokens"] as? Int else {
            return self.error(writer, 400, "invalid_request_error", "max_tokens: Field required")
        }
        guard let messages = body["messages"] as? [[String: Any]], !messages.isEmpty else {
            return self.error(writer, 400, "invalid_request_error", "messages: Field required")
        }
        for message in messages where message["role"] as? String != "user" && message["role"] as? String != "assistant" {
            let role = message["role"] as? String ?? "?"
            return self.error(writer, 400, "invalid_request_error",
                              "messages: Unexpected role \"\(role)\". The Messages API accepts a top-level `system` "
                                + "parameter, not \"system\" as an input message role.")
        }
        let tools = (body["tools"] as? [[String: Any]]) ?? []
        for (i, tool) in tools.enumerated() where tool["input_schema"] == nil || tool["type"] as? String == "function" {
            return self.error(writer, 400, "invalid_request_error", "tools.\(i).input_schema: Field required")
        }
        guard self.core.configuration.models.contains(model) else {
            return self.error(writer, 404, "not_found_error", "model: \(model)")
        }
        let fault = self.core.fault
        switch fault {
        case .httpStatus(let status)?:
            return self.error(writer, status, Self.errorType(status), Self.errorMessage(status),
                              extra: status == 429 ? [("retry-after", "20")] : [])
        case .rawStream(let text)?:
            self.core.countCompletion()
            return self.core.sendRaw(text, writer: writer)
        default:
            break
        }
        self.core.countCompletion()

        let prompt = EmulatorText.text(of: messages.last { $0["role"] as? String == "user" }?["content"])
        var tokens = EmulatorText.tokens(for: prompt)
        var stopReason = "end_turn"
        if maxTokens < tokens.count {
            tokens = Array(tokens.prefix(max(0, maxTokens)))
            stopReason = "max_tokens"
        }
        var toolUse: (id: String, name: String, input: EmulatorJSON)?
        if messages.last?["role"] as? String == "user",
            let name = EmulatorText.namedTool(in: prompt, names: tools.compactMap { $0["name"] as? String })
        {
            let schema = tools.first { $0["name"] as? String == name }?["input_schema"] as? [String: Any]
            let id = "toolu_01" + String(String(EmulatorText.hash(prompt + name), radix: 36).prefix(22))
            toolUse = (id, name, EmulatorText.arguments(prompt: prompt, schema: schema))
            tokens = [Self.toolPreamble]
            stopReason = "tool_use"
        }
        let inputTokens = messages.reduce(EmulatorText.estimateTokens(body["system"] as? String ?? "")) {
            $0 + EmulatorText.estimateTokens(EmulatorText.text(of: $1["content"])) + 3
        }
        let outputTokens = tokens.count + (toolUse == nil ? 0 : 20)
        let id = "msg_01" + String(String(EmulatorText.hash(prompt), radix: 36).prefix(22))

        guard (body["stream"] as? Bool) == true else {
            var content: [EmulatorJSON] = [.object([("type", .string("text")), ("text", .string(tokens.joined()))])]
            if let tool = toolUse {
                content.append(.object([("type", .string("tool_use")), ("id", .string(tool.id)),
                                        ("name", .string(tool.name)), ("input", tool.input)]))
            }
            return self.respond(writer, 200, .object([
                ("id", .string(id)), ("type", .string("message")), ("role", .string("assistant")),
                ("model", .string(model)), ("content", .array(content)), ("stop_reason", .string(stopReason)),
                ("stop_sequence", .null), ("usage", Self.usage(inputTokens, outputTokens)),
            ]))
        }

        func event(_ name: String, _ fields: [(String, EmulatorJSON)]) -> [UInt8] {
            let data = EmulatorJSON.object([("type", .string(name))] + fields)
            return Array("event: \(name)\ndata: ".utf8) + data.plainBytes + Array("\n\n".utf8)
        }
        guard writer.startStream(status: 200, headers: APIEmulatorCore.sseHeaders + [("request-id", "req_emulator")])
        else { return }
        let start = event("message_start", [("message", .object([
            ("id", .string(id)), ("type", .string("message")), ("role", .string("assistant")),
            ("content", .array([])), ("model", .string(model)), ("stop_reason", .null), ("stop_sequence", .null),
            ("usage", Self.usage(inputTokens, 1)),
        ]))])
        let blockStart = event("content_block_start", [
            ("index", .int(0)), ("content_block", .object([("type", .string("text")), ("text", .string(""))])),
        ])
        guard writer.writeChunk(start + blockStart + event("ping", [])) else { return self.core.noteGone() }
        let outcome = self.core.paced(tokens.count, fault: fault, writer: writer) { i in
            writer.writeChunk(event("content_block_delta", [
                ("index", .int(0)), ("delta", .object([("type", .string("text_delta")), ("text", .string(tokens[i]))])),
            ]))
        }
        switch outcome {
        case .cut:
            return
        case .error:
            _ = writer.writeChunk(event("error", [("error", .object([
                ("type", .string("overloaded_error")), ("message", .string("Overloaded")),
            ]))]))
            return writer.finish()
        case .completed:
            break
        }
        var tail = event("content_block_stop", [("index", .int(0))])
        if let tool = toolUse {
            tail += event("content_block_start", [("index", .int(1)), ("content_block", .object([
                ("type", .string("tool_use")), ("id", .string(tool.id)), ("name", .string(tool.name)),
                ("input", .object([])),
            ]))])
            for piece in [""] + EmulatorText.pieces(tool.input.serialized(htmlSafe: false), size: 5) {
                tail += event("content_block_delta", [("index", .int(1)), ("delta", .object([
                    ("type", .string("input_json_delta")), ("partial_json", .string(piece)),
                ]))])
            }
            tail += event("content_block_stop", [("index", .int(1))])
        }
        tail += event("message_delta", [
            ("delta", .object([("stop_reason", .string(stopReason)), ("stop_sequence", .null)])),
            ("usage", .object([("output_tokens", .int(outputTokens))])),
        ])
        tail += event("message_stop", [])
        _ = writer.writeChunk(tail)
        writer.finish()
    }

    /// The text a tool-using answer starts with.
    public static let toolPreamble = "Let me check."

    static func usage(_ input: Int, _ output: Int) -> EmulatorJSON {
        .object([("input_tokens", .int(input)), ("output_tokens", .int(output)),
                 ("cache_creation_input_tokens", .int(0)), ("cache_read_input_tokens", .int(0))])
    }

    static func errorType(_ status: Int) -> String {
        switch status {
        case 400: return "invalid_request_error"
        case 401: return "authentication_error"
        case 402: return "billing_error"
        case 403: return "permission_error"
        case 404: return "not_found_error"
        case 409: return "conflict_error"
        case 413: return "request_too_large"
        case 429: return "rate_limit_error"
        case 529: return "overloaded_error"
        default: return "api_error"
        }
    }

    static func errorMessage(_ status: Int) -> String {
        switch status {
        case 429: return "Number of request tokens has exceeded your per-minute rate limit"
        case 529: return "Overloaded"
        default: return "Internal server error"
        }
    }

    private func error(_ writer: HTTPResponseWriter, _ status: Int, _ type: String, _ message: String,
                       extra: [(String, String)] = []) {
        writer.respond(status: status, headers: [APIEmulatorCore.jsonType, ("request-id", "req_emulator")] + extra,
                       body: EmulatorJSON.object([
                           ("type", .string("error")),
                           ("error", .object([("type", .string(type)), ("message", .string(message))])),
                       ]).plainBytes)
    }

    private func respond(_ writer: HTTPResponseWriter, _ status: Int, _ json: EmulatorJSON) {
        writer.respond(status: status, headers: [APIEmulatorCore.jsonType, ("request-id", "req_emulator")],
                       body: json.plainBytes)
    }
}
