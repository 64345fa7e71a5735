import Foundation
import HomebaseCore
import HomebaseTransport

/// The Anthropic Messages API, streamed (reference/model-apis.md §5).
///
/// Request translation from the router's OpenAI-shaped `ChatRequest`:
/// - headers `x-api-key` (read per request), `anthropic-version: 2023-06-01`, `content-type: application/json`;
/// - `max_tokens` is required by the API: the request's limit, else `defaultMaxTokens`;
/// - system messages are joined (blank line between) into the top-level `system` field; every other message
///   keeps its role if it is `assistant` and becomes `user` otherwise (the API has only those two);
/// - tools `{"type":"function","function":{name, description, parameters}}` become
///   `{name, description, input_schema}` (a definition already in Anthropic's flat shape passes through);
/// - `temperature`, `top_p` and `stop` (as `stop_sequences`) when set; `seed` has no Anthropic equivalent.
public struct AnthropicChatEngine: ChatEngine {
    public static let defaultBaseURL = "https://api.anthropic.com/v1"
    public static let apiVersion = "2023-06-01"
    /// Used when the request sets no limit: the API refuses a request without one.
    public static let defaultMaxTokens = 1024

    public let http: HTTPClient
    public let baseURL: String
    public let apiKey: @Sendable () -> String?
    public let defaultMaxTokens: Int
    public let connectTimeout: Duration
    public let idleTimeout: Duration

    public init(http: HTTPClient, baseURL: String = AnthropicChatEngine.defaultBaseURL,
                apiKey: @escaping @Sendable () -> String?, defaultMaxTokens: Int = AnthropicChatEngine.defaultMaxTokens,
                connectTimeout: Duration = .seconds(10), idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.http = http
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.apiKey = apiKey
        self.defaultMaxTokens = defaultMaxTokens
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
    }

    public func stream(model: String, request: ChatRequest) -> AsyncThrowingStream<ChatEngineEvent, any Error> {
        let body: [UInt8]
        do {
            body = try self.requestBody(model: model, request: request)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        var headers = Self.headers(key: nil)
        if let key = self.apiKey() { headers = Self.headers(key: key) }
        headers.append(("accept", "text/event-stream"))
        let httpRequest = HTTPRequest(
            method: "POST", url: self.baseURL + "/messages", headers: headers, body: body,
            connectTimeout: self.connectTimeout, idleTimeout: self.idleTimeout)
        return HTTPChatTransport.events(http: self.http, request: httpRequest, decoder: AnthropicStreamDecoder())
    }

    /// The API's required headers; no `x-api-key` when `key` is nil (the API then answers 401).
    package static func headers(key: String?) -> [(String, String)] {
        var headers = [("anthropic-version", Self.apiVersion), ("content-type", "application/json")]
        if let key { headers.insert(("x-api-key", key), at: 0) }
        return headers
    }

    /// The JSON body for `request`. - Throws: `malformed` when a tool definition cannot be translated.
    func requestBody(model: String, request: ChatRequest) throws(ChatEngineError) -> [UInt8] {
        let system = request.messages.filter { $0.role == "system" }.map(\.content)
        let messages = request.messages.filter { $0.role != "system" }.map { message -> [String: Any] in
            ["role": message.role == "assistant" ? "assistant" : "user", "content": message.content]
        }
        var body: [String: Any] = [
            "model": model,
            "max_tokens": request.options.maxTokens ?? self.defaultMaxTokens,
            "messages": messages,
            "stream": true,
        ]
        if !system.isEmpty { body["system"] = system.joined(separator: "\n\n") }
        if !request.tools.isEmpty {
            var tools: [Any] = []
            for (index, tool) in request.tools.enumerated() { tools.append(try Self.tool(tool, index: index)) }
            body["tools"] = tools
        }
        let options = request.options
        if let value = options.temperature { body["temperature"] = value }
        if let value = options.topP { body["top_p"] = value }
        if !options.stop.isEmpty { body["stop_sequences"] = options.stop }
        return JSONText.bytes(body)
    }

    /// OpenAI `{"type":"function","function":{…}}` → Anthropic `{name, description, input_schema}`.
    static func tool(_ raw: RawJSON, index: Int) throws(ChatEngineError) -> [String: Any] {
        guard let object = JSONText.object(raw.text) else {
            throw .malformed("tool definition \(index) is not a JSON object")
        }
        if object["input_schema"] != nil, object["name"] is String { return object }
        guard let function = object["function"] as? [String: Any], let name = function["name"] as? String,
            !name.isEmpty
        else { throw .malformed("tool definition \(index) has no function name") }
        var tool: [String: Any] = [
            "name": name,
            "input_schema": function["parameters"] as? [String: Any] ?? ["type": "object", "properties": [:]],
        ]
        if let description = function["description"] as? String { tool["description"] = description }
        return tool
    }
}
