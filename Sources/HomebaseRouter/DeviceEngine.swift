import HomebaseCore
import HomebaseEngines
import HomebaseTransport
import HomebaseNode

/// The device's own model engine (`handset config device-engine URL`, also `guest`): an OpenAI-compatible
/// server on the device's loopback with a small model — llama.cpp's `llama-server` in the tests and the demo,
/// standing in for the phone's on-device runtime. With one configured, the on-device answers (the floor's and
/// the downloaded model's) come from it; the canned floor stays the last rung: when the engine is gone it
/// answers, and the result's `fallback` says why.
public struct DeviceEngine: Sendable, Hashable, Codable {
    /// Base URL, without `/v1`, e.g. `http://127.0.0.1:8081`.
    public var url: String
    /// The model id the engine listed in `/v1/models` when it was configured (sent with each request).
    public var model: String

    public init(url: String, model: String) {
        self.url = url
        self.model = model
    }

    /// `http://h:p/v1/` → `http://h:p`.
    public static func baseURL(_ text: String) -> String {
        var url = text.trimmingCharacters(in: .whitespaces)
        while url.hasSuffix("/") { url.removeLast() }
        if url.hasSuffix("/v1") { url.removeLast(3) }
        return url
    }

    /// The first model id of a `/v1/models` body (`{"data":[{"id":…}]}`), or nil when it lists none or is not
    /// that shape.
    public static func firstModelID(_ body: [UInt8]) -> String? {
        guard let root = try? body.withUnsafeBufferPointer({ buffer throws -> JSONNode in try JSONNode.parse(buffer) }),
              let data = root["data"]?.arrayValue else { return nil }
        for entry in data {
            if let id = entry["id"]?.stringValue, !id.isEmpty, id.utf8.count <= 512 { return id }
        }
        return nil
    }

    /// Test-before-persist for the engine: it must list a model and complete one token with it. Returns the
    /// engine to store, or one line saying why not.
    public static func verify(url text: String, http: HTTPClient) async -> Result<DeviceEngine, DeviceEngineError> {
        let url = Self.baseURL(text)
        let listing: HTTPResponse
        do {
            listing = try await http.send(HTTPRequest(method: "GET", url: url + "/v1/models",
                                                      headers: [("Accept", "application/json"),
                                                                ("Authorization", "Bearer \(OpenAIChatEngine.ollamaKey)")], body: nil,
                                                      connectTimeout: .seconds(5), timeout: .seconds(10),
                                                      maxResponseBytes: 4 << 20))
        } catch {
            let why: String
            switch error as? HTTPClientError {
            case .connectFailed(let message)?, .transport(_, let message)?, .invalidRequest(let message)?:
                why = message.lowercased().contains("couldn't connect") ? "connection refused" : message
            case .timedOut?: why = "no answer in time"
            default: why = "\(error)"
            }
            return .failure(DeviceEngineError("no OpenAI-compatible server answers at \(url) (\(why)); start it,"
                + " e.g. llama-server -m MODEL.gguf --port 8081"))
        }
        guard listing.head.status == 200, let model = Self.firstModelID(listing.body) else {
            return .failure(DeviceEngineError("\(url)/v1/models answered HTTP \(listing.head.status) without a model;"
                + " is it an OpenAI-compatible server with a model loaded?"))
        }
        let engine = DeviceEngine(url: url, model: model)
        let provider = DeviceEngineProvider(http: http, engine: engine, reportAs: model)
        do {
            _ = try await provider.complete(ChatRequest(messages: [.user("Reply with OK.")],
                                                        options: ChatOptions(maxTokens: 1)))
        } catch {
            return .failure(DeviceEngineError("\(url) lists '\(model)' but a one-token completion failed (\(error.reason.rawValue))"))
        }
        return .success(engine)
    }
}

/// Why a device engine was not stored; one line.
public struct DeviceEngineError: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The engine as a provider: the OpenAI engine over its `/v1`, results labelled on-device with `reportAs` as
/// the model (the engine's own id for the floor's answers, the downloaded model's id for that rung).
public struct DeviceEngineProvider: LLMProvider {
    public let engine: DeviceEngine
    public let reportAs: String
    let chat: OpenAIChatEngine

    public init(http: HTTPClient, engine: DeviceEngine, reportAs: String,
                idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.engine = engine
        self.reportAs = reportAs
        // A local OpenAI-compatible runtime, asked the way the Homebase asks Ollama.
        self.chat = OpenAIChatEngine.ollama(http: http, url: engine.url, idleTimeout: idleTimeout)
    }

    public var kind: ProviderKind { .onDevice }

    private var runner: ChatEngineRunner {
        ChatEngineRunner(engine: self.chat, model: self.engine.model, kind: .onDevice, requireKey: nil)
    }

    /// Tool definitions are not sent: a small engine started without a tool template refuses them, and the
    /// on-device brain answers a tool request in text as the floor does (design.md §R6 keeps tools on-device).
    static func withoutTools(_ request: ChatRequest) -> ChatRequest {
        var request = request
        request.tools = []
        return request
    }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        var result = try await self.runner.complete(Self.withoutTools(request))
        result.model = self.reportAs
        return result
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let inner = self.runner.stream(Self.withoutTools(request))
        let label = self.reportAs
        return AsyncStream { continuation in
            let task = Task {
                for await event in inner {
                    if case .done(var result) = event {
                        result.model = label
                        continuation.yield(.done(result))
                    } else {
                        continuation.yield(event)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
