import Foundation
import HomebaseCore
import HomebaseTransport

/// Chat Completions over HTTP: OpenAI (`https://api.openai.com/v1`) and Ollama's OpenAI-compatible surface
/// (`http://127.0.0.1:11434/v1`), streamed (reference/model-apis.md §2, §4).
///
/// Every request is `POST {baseURL}/chat/completions` with `stream: true` and
/// `stream_options.include_usage`, the messages as given, tools spliced in as their raw JSON, and the options
/// that are set. The key is read per request, so a rotated key applies to the next call.
///
/// Timeouts: `connectTimeout` for the TCP/TLS connection, then `idleTimeout` of silence. The idle default,
/// 120 s, is long on purpose: Ollama sends nothing until a cold model has loaded, which takes tens of seconds
/// for a large model on a slow disk. Callers with their own watchdog (the Homebase) may pass less.
public struct OpenAIChatEngine: ChatEngine {
    /// The field the backend reads for the output limit.
    public enum MaxTokensField: String, Sendable {
        /// OpenAI's current field (reasoning models reject `max_tokens`).
        case maxCompletionTokens = "max_completion_tokens"
        /// Ollama's: it ignores `max_completion_tokens` silently.
        case maxTokens = "max_tokens"
    }

    public static let defaultIdleTimeout: Duration = .seconds(120)

    public let http: HTTPClient
    /// e.g. `https://api.openai.com/v1`; a trailing `/` is ignored.
    public let baseURL: String
    /// Read per request; `nil` sends no `Authorization` header (Ollama needs none; OpenAI answers 401).
    public let apiKey: @Sendable () -> String?
    public let maxTokensField: MaxTokensField
    public let connectTimeout: Duration
    public let idleTimeout: Duration

    public init(http: HTTPClient, baseURL: String, apiKey: @escaping @Sendable () -> String?,
                maxTokensField: MaxTokensField = .maxCompletionTokens, connectTimeout: Duration = .seconds(10),
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.http = http
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.apiKey = apiKey
        self.maxTokensField = maxTokensField
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
        var headers = [("Content-Type", "application/json"), ("Accept", "text/event-stream")]
        if let key = self.apiKey() { headers.append(("Authorization", "Bearer " + key)) }
        let httpRequest = HTTPRequest(
            method: "POST", url: self.baseURL + "/chat/completions", headers: headers, body: body,
            connectTimeout: self.connectTimeout, idleTimeout: self.idleTimeout)
        return HTTPChatTransport.events(http: self.http, request: httpRequest, decoder: OpenAIStreamDecoder())
    }

    /// The JSON body for `request`. - Throws: `malformed` when a tool definition is not a JSON object.
    func requestBody(model: String, request: ChatRequest) throws(ChatEngineError) -> [UInt8] {
        var body: [String: Any] = [
            "model": model,
            "messages": request.messages.map { ["role": $0.role, "content": $0.content] },
            "stream": true,
            "stream_options": ["include_usage": true],
        ]
        if !request.tools.isEmpty {
            var tools: [Any] = []
            for (index, tool) in request.tools.enumerated() {
                guard let object = JSONText.object(tool.text) else {
                    throw .malformed("tool definition \(index) is not a JSON object")
                }
                tools.append(object)
            }
            body["tools"] = tools
        }
        let options = request.options
        if let value = options.temperature { body["temperature"] = value }
        if let value = options.topP { body["top_p"] = value }
        if let value = options.maxTokens { body[self.maxTokensField.rawValue] = value }
        if !options.stop.isEmpty { body["stop"] = options.stop }
        if let value = options.seed { body["seed"] = value }
        return JSONText.bytes(body)
    }
}
