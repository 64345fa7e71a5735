import HomebaseCore

/// Which API a chat request came in by.
public enum LocalAPIFlavor: Sendable, Equatable {
    /// `POST /v1/chat/completions`: SSE chunks or one `chat.completion`.
    case openAI
    /// `POST /api/chat`: NDJSON lines or one object.
    case ollama
}

/// Turns one chat's router events into the response of `serve` (issue 36): when the head goes out and with which
/// route headers, and the bytes of each chunk. No I/O and no clock: ids and times come in, `Output`s go out.
///
/// The rules:
/// - A streamed response's head goes out at the first output (text, reasoning, a tool call), or as soon as a
///   fallback is decided (a routed fallback at the start, `.fallingBack` during the call), so
///   `X-Homebase-Provider` names the provider that actually answers and `X-Homebase-Fallback` the reason.
/// - A fallback after output began (`.restart`) cannot change the head: the stream carries a marker line, and
///   the last chunk's `homebase` object names the provider and the fallback.
/// - A non-streamed answer goes out whole, its headers from the result.
struct LocalAPIResponder {
    enum Output: Equatable {
        /// The response head. `withFirstChunk`: hold it for the next bytes (one write); else send it now.
        case head(status: Int, headers: [HTTPHeaderField], withFirstChunk: Bool)
        /// Bytes of a streamed body.
        case chunk([UInt8])
        /// A whole response.
        case whole(status: Int, headers: [HTTPHeaderField], body: [UInt8])
    }

    let flavor: LocalAPIFlavor
    let stream: Bool
    let includeUsage: Bool
    /// `chatcmpl-…`.
    let id: String
    /// Unix seconds (OpenAI's `created`).
    let created: Int
    /// RFC 3339 (Ollama's `created_at`).
    let createdAt: String
    /// The model the app asked for (nil: the configured one).
    let requestedModel: String?

    private(set) var route: Route?
    private(set) var resolvedModel: String?
    private(set) var provider: ProviderKind?
    private(set) var fallback: Fallback?
    private(set) var headSent = false
    private(set) var finished = false
    private var roleSent = false
    private var toolIndex = 0
    private var toolCalls: [LocalAPIToolCall] = []

    init(flavor: LocalAPIFlavor, stream: Bool, includeUsage: Bool, id: String, created: Int, createdAt: String,
         requestedModel: String?) {
        self.flavor = flavor
        self.stream = stream
        self.includeUsage = includeUsage
        self.id = id
        self.created = created
        self.createdAt = createdAt
        self.requestedModel = requestedModel
    }

    /// The model named in streamed chunks: the one asked for, else the route's.
    var chunkModel: String { self.requestedModel ?? self.resolvedModel ?? "auto" }

    /// The router resolved the route and handed out `provider`. A routed fallback (the selected arm cannot carry
    /// the call) is decided now: a stream's head goes out at once.
    mutating func start(_ resolution: RouteResolution, provider: any LLMProvider) -> [Output] {
        self.route = resolution.route
        self.resolvedModel = resolution.model
        self.provider = provider.kind
        if let routed = provider as? RoutedFallbackProvider {
            self.fallback = routed.annotation
            return self.stream ? [self.head(withFirstChunk: false)] : []
        }
        return []
    }

    /// One router event.
    mutating func event(_ event: ChatStreamEvent, totalNs: Int = 0, evalNs: Int = 0) -> [Output] {
        guard !self.finished else { return [] }
        switch event {
        case .fallingBack(let fallback, let provider):
            guard !self.headSent else { return [] }
            self.provider = provider
            if self.fallback == nil { self.fallback = fallback }
            return self.stream ? [self.head(withFirstChunk: false)] : []
        case .queued, .failed:
            return []
        case .text(let text):
            guard self.stream, !text.isEmpty else { return [] }
            return self.output(self.flavor == .openAI
                ? self.openAIPiece(.content(text))
                : OllamaEncoder.chatLine(model: self.chunkModel, createdAt: self.createdAt, content: text))
        case .reasoning(let text):
            guard self.stream, !text.isEmpty else { return [] }
            return self.output(self.flavor == .openAI
                ? self.openAIPiece(.reasoning(text))
                : OllamaEncoder.chatLine(model: self.chunkModel, createdAt: self.createdAt, content: "",
                                         thinking: text))
        case .toolCall(let call):
            let local = LocalAPIToolCall(id: call.id, name: call.name, arguments: call.arguments.text)
            guard self.stream else { return [] }
            guard self.flavor == .openAI else {
                // Ollama sends tool calls in a message of their own; they go out with the last line.
                self.toolCalls.append(local)
                return self.headSent ? [] : [self.head(withFirstChunk: false)]
            }
            defer { self.toolIndex += 1 }
            return self.output(self.openAIPiece(.toolCall(index: self.toolIndex, local)))
        case .restart(let reason):
            guard self.stream, self.headSent else { return [] }
            // What went out cannot be taken back: say where the answer starts again, as `chat` does on stderr.
            let marker = "\n\n" + ChatOutput.restartMarker(reason) + "\n\n"
            return self.output(self.flavor == .openAI
                ? self.openAIPiece(.content(marker))
                : OllamaEncoder.chatLine(model: self.chunkModel, createdAt: self.createdAt, content: marker))
        case .done(let result):
            return self.finish(result, totalNs: totalNs, evalNs: evalNs)
        }
    }

    /// The whole result: the last chunk(s) of a stream, or the whole body.
    mutating func finish(_ result: ChatResult, totalNs: Int, evalNs: Int) -> [Output] {
        guard !self.finished else { return [] }
        self.finished = true
        if !self.headSent {
            self.provider = result.providerKind
            self.fallback = result.fallback
        }
        let origin = LocalAPIOrigin(
            route: (self.route ?? .onDevice).rawValue, provider: result.providerKind.rawValue, model: result.model,
            fallbackFrom: result.fallback?.from.rawValue, fallbackReason: result.fallback?.reason.rawValue)
        let answer = LocalAPIAnswer(
            text: result.text, reasoning: result.reasoning,
            toolCalls: result.toolCalls.map {
                LocalAPIToolCall(id: $0.id, name: $0.name, arguments: $0.arguments.text)
            },
            finishReason: result.finishReason.rawValue, usage: result.usage, origin: origin)
        guard self.stream else {
            let body = self.flavor == .openAI
                ? OpenAIEncoder.completion(id: self.id, created: self.created, model: result.model, answer: answer)
                : OllamaEncoder.chatDone(model: self.requestedModel ?? result.model, createdAt: self.createdAt,
                                         answer: answer, includeMessage: true, totalNs: totalNs, evalNs: evalNs,
                                         newline: false)
            return [.whole(status: 200, headers: self.headers(contentType: "application/json"), body: body)]
        }
        var bytes: [UInt8]
        switch self.flavor {
        case .openAI:
            bytes = self.roleSent ? [] : OpenAIEncoder.chunk(id: self.id, created: self.created, model: self.chunkModel,
                                                            delta: .role)
            self.roleSent = true
            bytes += OpenAIEncoder.finalChunk(id: self.id, created: self.created, model: self.chunkModel,
                                              finishReason: answer.finishReason, origin: origin)
            if self.includeUsage {
                bytes += OpenAIEncoder.usageChunk(id: self.id, created: self.created, model: self.chunkModel,
                                                  usage: result.usage ?? Usage(promptTokens: 0, completionTokens: 0))
            }
            bytes += OpenAIEncoder.done
        case .ollama:
            var last = answer
            last.toolCalls = self.toolCalls.isEmpty ? answer.toolCalls : self.toolCalls
            bytes = OllamaEncoder.chatDone(model: self.chunkModel, createdAt: self.createdAt, answer: last,
                                           includeMessage: false, totalNs: totalNs, evalNs: evalNs, newline: true)
        }
        return self.output(bytes)
    }

    // MARK: Pieces

    private mutating func openAIPiece(_ delta: OpenAIEncoder.Delta) -> [UInt8] {
        var bytes: [UInt8] = []
        if !self.roleSent {
            self.roleSent = true
            bytes = OpenAIEncoder.chunk(id: self.id, created: self.created, model: self.chunkModel, delta: .role)
        }
        return bytes + OpenAIEncoder.chunk(id: self.id, created: self.created, model: self.chunkModel, delta: delta)
    }

    /// Streamed bytes, after the head if it has not gone out yet (then both in one write).
    private mutating func output(_ bytes: [UInt8]) -> [Output] {
        guard !self.headSent else { return [.chunk(bytes)] }
        return [self.head(withFirstChunk: true), .chunk(bytes)]
    }

    private mutating func head(withFirstChunk: Bool) -> Output {
        self.headSent = true
        let type = self.flavor == .openAI ? "text/event-stream" : "application/x-ndjson"
        var headers = self.headers(contentType: type)
        headers.append(HTTPHeaderField(name: "Cache-Control", value: "no-cache"))
        return .head(status: 200, headers: headers, withFirstChunk: withFirstChunk)
    }

    /// `Content-Type` and the route headers, as known now.
    func headers(contentType: String) -> [HTTPHeaderField] {
        var headers = [HTTPHeaderField(name: "Content-Type", value: contentType)]
        headers.append(HTTPHeaderField(name: "X-Homebase-Route", value: (self.route ?? .onDevice).rawValue))
        headers.append(HTTPHeaderField(name: "X-Homebase-Provider", value: (self.provider ?? .onDevice).rawValue))
        if let fallback = self.fallback {
            headers.append(HTTPHeaderField(name: "X-Homebase-Fallback", value: fallback.reason.rawValue))
        }
        return headers
    }
}
