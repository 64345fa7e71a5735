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
    /// Once the first text has arrived, read the stream at most once per the cadence's interval
    /// (`HTTPBodyPacing`), which its owner may change while streams run; `nil` reads every piece as it comes.
    /// For a server-side consumer that batches anyway (the Homebase coalesces chunks).
    public let readCadence: HTTPReadCadence?

    public init(http: HTTPClient, baseURL: String, apiKey: @escaping @Sendable () -> String?,
                maxTokensField: MaxTokensField = .maxCompletionTokens, connectTimeout: Duration = .seconds(10),
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout, readCadence: HTTPReadCadence? = nil) {
        self.http = http
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.apiKey = apiKey
        self.maxTokensField = maxTokensField
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.readCadence = readCadence
    }

    public func stream(model: String, request: ChatRequest) -> AsyncThrowingStream<ChatEngineEvent, any Error> {
        do {
            let httpRequest = try self.httpRequest(model: model, request: request)
            return HTTPChatTransport.events(http: self.http, request: httpRequest, decoder: OpenAIStreamDecoder())
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
    }

    public func start(model: String, request: ChatRequest, sink: any ChatEventSink) -> ChatStreamHandle {
        do {
            let httpRequest = try self.httpRequest(model: model, request: request)
            return HTTPChatTransport.push(http: self.http, request: httpRequest, decoder: OpenAIStreamDecoder(),
                                          sink: sink)
        } catch {
            sink.ended(error)
            return ChatStreamHandle {}
        }
    }

    private func httpRequest(model: String, request: ChatRequest) throws(ChatEngineError) -> HTTPRequest {
        let body = try self.requestBody(model: model, request: request)
        var headers = [("Content-Type", "application/json"), ("Accept", "text/event-stream")]
        if let key = self.apiKey() { headers.append(("Authorization", "Bearer " + key)) }
        var httpRequest = HTTPRequest(
            method: "POST", url: self.baseURL + "/chat/completions", headers: headers, body: body,
            connectTimeout: self.connectTimeout, idleTimeout: self.idleTimeout)
        httpRequest.bodyPacing = self.readCadence.map { HTTPBodyPacing(cadence: $0) }
        return httpRequest
    }

    /// The JSON body for `request`, keys sorted. - Throws: `malformed` when a tool definition is not a JSON
    /// object.
    func requestBody(model: String, request: ChatRequest) throws(ChatEngineError) -> [UInt8] {
        typealias Member = JSONNode.Member
        var members: [Member] = [
            Member(key: "model", value: .string(model)),
            Member(key: "messages", value: .array(request.messages.map {
                .object([Member(key: "content", value: .string($0.content)), Member(key: "role", value: .string($0.role))])
            })),
            Member(key: "stream", value: .bool(true)),
            Member(key: "stream_options", value: .object([Member(key: "include_usage", value: .bool(true))])),
        ]
        if !request.tools.isEmpty {
            var tools: [JSONNode] = []
            for (index, tool) in request.tools.enumerated() {
                guard let object = try? JSONNode.parse(tool.text), object.isObject else {
                    throw .malformed("tool definition \(index) is not a JSON object")
                }
                tools.append(object)
            }
            members.append(Member(key: "tools", value: .array(tools)))
        }
        let options = request.options
        if let value = options.temperature.flatMap(JSONNode.number) { members.append(Member(key: "temperature", value: value)) }
        if let value = options.topP.flatMap(JSONNode.number) { members.append(Member(key: "top_p", value: value)) }
        if let value = options.maxTokens { members.append(Member(key: self.maxTokensField.rawValue, value: .number(value))) }
        if !options.stop.isEmpty { members.append(Member(key: "stop", value: .array(options.stop.map { .string($0) }))) }
        if let value = options.seed { members.append(Member(key: "seed", value: .number(value))) }
        // Ollama's /v1 maps it to think (`none`: off); llama-server and vLLM read it too.
        if let effort = options.think?.reasoningEffort { members.append(Member(key: "reasoning_effort", value: .string(effort))) }
        // Sorted by UTF-8 bytes, as JSONSerialization's .sortedKeys wrote them.
        members.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return JSONNode.object(members).serialized()
    }
}
