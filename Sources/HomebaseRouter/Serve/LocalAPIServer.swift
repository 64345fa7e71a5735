import Dispatch
import HomebaseCore
import HomebaseNode
import HomebaseTransport
import Synchronization

/// What `serve` needs of a device (a `DeviceSession`; tests may pass a fake).
public protocol LocalAPIBackend: Sendable {
    /// The route the next call would take (for the tools rule).
    func resolution() -> RouteResolution
    /// The models this device can reach now.
    func localAPIModels(nowMs: UInt64) -> [LocalAPIModel]
    /// One chat through the router, exactly as `chat` runs it.
    func chat(_ request: ChatRequest, model: String?,
              onEvent: (@Sendable (ChatStreamEvent) -> Void)?,
              onProvider: (@Sendable (RouteResolution, any LLMProvider) -> Void)?) async -> ChatAnswer
}

extension DeviceSession: LocalAPIBackend {
    public func resolution() -> RouteResolution { self.router.resolution() }

    /// The Homebase's (fresh) advertised models, each joined host's, the cloud models with a key, and the device
    /// model (or the floor), with whose route serves them (`owned_by`).
    public func localAPIModels(nowMs: UInt64) -> [LocalAPIModel] {
        var out: [LocalAPIModel] = []
        var seen: Set<String> = []
        func add(_ model: LocalAPIModel) {
            guard seen.insert(model.id).inserted else { return }
            out.append(model)
        }
        func local(_ m: AdvertisedModel, _ owner: String) -> LocalAPIModel {
            LocalAPIModel(id: m.tag, ownedBy: owner, family: m.family, parameterSize: m.parameterSize,
                          quantization: m.quantization,
                          capabilities: m.capabilities.isEmpty ? ["completion"] : m.capabilities,
                          contextLength: m.contextLength, loaded: m.loaded)
        }
        if let advert = self.adverts.freshAdvert(nowMs: nowMs) {
            for m in advert.models { add(local(m, "homebase")) }
        }
        for record in self.joined.all() where record.isRoutable(nowMs: nowMs) {
            for m in record.models { add(local(m, "friend:" + (record.name ?? record.host.short))) }
        }
        if self.keys.hasKey(.openai) { add(LocalAPIModel(id: self.settings.openAIModel, ownedBy: "openai")) }
        if self.keys.hasKey(.anthropic) { add(LocalAPIModel(id: self.settings.claudeModel, ownedBy: "anthropic")) }
        add(LocalAPIModel(id: self.settings.effectiveDeviceModel?.tag ?? "floor", ownedBy: "device"))
        return out
    }
}

/// `handset serve` / `guest serve` (issue 36): the OpenAI and Ollama APIs on a local port, every chat through the
/// device's router. The door's rules are `LocalAPIGate`'s, the bytes `OpenAIEncoder`'s and `OllamaEncoder`'s, the
/// order of head and chunks `LocalAPIResponder`'s; this shell only moves bytes and watches the connection.
///
/// Each request runs on its connection's thread (`SimpleHTTPServer`); a chat runs in a task whose events come
/// back through a queue. A client that goes away is seen within `disconnectCheckMs` (or at the next failed
/// write), and the task is cancelled: the relay client sends `infer.cancel`, freeing the Homebase.
public final class LocalAPIServer: Sendable {
    public struct Options: Sendable {
        public var tool = "handset"
        public var invocation: ServeInvocation
        /// Open connections at most; one more gets 503.
        public var maxConnections = 64
        /// A request's head and body must arrive within this long (slowloris), and an idle connection closes.
        public var requestTimeoutMs: Int32 = 10_000
        /// How often a waiting chat checks that its client is still there.
        public var disconnectCheckMs = 100
        /// `/api/version`'s answer: the Ollama API version these shapes follow.
        public var ollamaVersion = "0.12.0"

        public init(tool: String, invocation: ServeInvocation) {
            self.tool = tool
            self.invocation = invocation
        }
    }

    let backend: any LocalAPIBackend
    let options: Options
    let gate: LocalAPIGate
    private let server: Mutex<SimpleHTTPServer?> = Mutex(nil)
    /// Unix milliseconds.
    let wallClock: @Sendable () -> UInt64

    public init(backend: any LocalAPIBackend, options: Options,
                wallClock: @escaping @Sendable () -> UInt64 = { Posix.wallClockMs }) {
        self.backend = backend
        self.options = options
        self.wallClock = wallClock
        self.gate = LocalAPIGate(LocalAPIGate.Configuration(
            token: options.invocation.token, listenHost: options.invocation.host,
            allowedHosts: options.invocation.allowedHosts, corsOrigin: options.invocation.corsOrigin))
    }

    /// Binds and serves; returns the bound port.
    /// - Throws: `CLIError` with one line saying what to do (the port in use, say).
    @discardableResult
    public func start() throws -> UInt16 {
        var c = SimpleHTTPServer.Configuration()
        c.maxBodyBytes = self.gate.configuration.maxBodyBytes
        c.headLimits = HTTPHeadLimits(maxHeadBytes: 16 * 1024, maxHeaderCount: 100)
        c.requestReadTimeoutMs = self.options.requestTimeoutMs
        c.idleTimeoutMs = self.options.requestTimeoutMs
        c.maxConnections = self.options.maxConnections
        c.sendTimeoutMs = 30_000
        c.refusal = { status, reason in
            let code = [408: "request_timeout", 413: "request_too_large", 431: "headers_too_large",
                        503: "too_many_connections"][status]
            return ([("Content-Type", "application/json")],
                    OpenAIEncoder.error(LocalAPIError(status: status, message: reason, code: code)))
        }
        let server = SimpleHTTPServer(configuration: c) { [self] request, writer in self.handle(request, writer) }
        let invocation = self.options.invocation
        do {
            let port = try server.start(host: invocation.host, port: invocation.port)
            self.server.withLock { $0 = server }
            return port
        } catch {
            throw CLIError("\(self.options.tool) serve: cannot listen on \(invocation.host):\(invocation.port) "
                           + "(\(error)); is another serve running? pick another with --listen HOST:PORT")
        }
    }

    /// Closes the port and every connection (their chats are cancelled).
    public func stop() {
        let server = self.server.withLock { s -> SimpleHTTPServer? in defer { s = nil }; return s }
        server?.stop()
    }

    // MARK: Requests

    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let cors = self.gate.corsHeaders(request.head)
        switch self.gate.decide(request.head, bodyBytes: request.body.count) {
        case .refuse(let error):
            self.refuse(error, ollama: false, cors: cors, writer)
        case .preflight:
            writer.respond(status: 204, headers: cors)
        case .serve(let endpoint):
            self.serve(endpoint, request, cors: cors, writer)
        }
    }

    private func serve(_ endpoint: LocalAPIGate.Endpoint, _ request: HTTPServerRequest, cors: [(String, String)],
                       _ writer: HTTPResponseWriter) {
        let nowMs = self.wallClock()
        let json = [("Content-Type", "application/json")] + cors
        switch endpoint {
        case .root:
            writer.respond(status: 200, headers: [("Content-Type", "text/plain; charset=utf-8")] + cors,
                           body: "Homebase is running (OpenAI API: /v1, Ollama API: /api)\n")
        case .models:
            writer.respond(status: 200, headers: json,
                           body: OpenAIEncoder.models(self.backend.localAPIModels(nowMs: nowMs),
                                                      created: Int(nowMs / 1000)))
        case .model(let id):
            guard let model = self.backend.localAPIModels(nowMs: nowMs).first(where: { $0.id == id }) else {
                return self.refuse(LocalAPIError(status: 404, message: "model '\(LocalAPIGate.clip(id))' is not "
                                                 + "reachable from this device (GET /v1/models lists those that are)",
                                                 code: "model_not_found"), ollama: false, cors: cors, writer)
            }
            writer.respond(status: 200, headers: json,
                           body: OpenAIEncoder.model(model, created: Int(nowMs / 1000)).serialized())
        case .ollamaVersion:
            writer.respond(status: 200, headers: json, body: OllamaEncoder.version(self.options.ollamaVersion))
        case .ollamaTags:
            writer.respond(status: 200, headers: json, body: OllamaEncoder.tags(
                self.backend.localAPIModels(nowMs: nowMs), modifiedAt: OllamaEncoder.timestamp(unixMs: nowMs)))
        case .ollamaPS:
            writer.respond(status: 200, headers: json, body: OllamaEncoder.ps(
                self.backend.localAPIModels(nowMs: nowMs), expiresAt: OllamaEncoder.timestamp(unixMs: nowMs + 300_000)))
        case .ollamaShow:
            do throws(LocalAPIError) {
                let name = try LocalAPIRequestDecoder.ollamaShow(request.body)
                guard let model = self.backend.localAPIModels(nowMs: nowMs).first(where: { $0.id == name }) else {
                    throw LocalAPIError(status: 404, message: "model '\(LocalAPIGate.clip(name))' not found",
                                        code: "model_not_found")
                }
                writer.respond(status: 200, headers: json,
                               body: OllamaEncoder.show(model, modifiedAt: OllamaEncoder.timestamp(unixMs: nowMs)))
            } catch {
                self.refuse(error, ollama: true, cors: cors, writer)
            }
        case .chatCompletions, .ollamaChat:
            let flavor: LocalAPIFlavor = endpoint == .ollamaChat ? .ollama : .openAI
            do throws(LocalAPIError) {
                let local = flavor == .openAI
                    ? try LocalAPIRequestDecoder.openAIChat(request.body)
                    : try LocalAPIRequestDecoder.ollamaChat(request.body)
                if flavor == .ollama && local.messages.isEmpty {
                    // Nothing to answer: a warm-up. The router loads nothing ahead, so it is answered at once.
                    let model = local.model ?? self.backend.resolution().model
                    return writer.respond(status: 200, headers: json, body: OllamaEncoder.loaded(
                        model: model, createdAt: OllamaEncoder.timestamp(unixMs: nowMs)))
                }
                try self.checkTools(local)
                self.chat(local, flavor: flavor, nowMs: nowMs, cors: cors, writer)
            } catch {
                self.refuse(error, ollama: flavor == .ollama, cors: cors, writer)
            }
        }
    }

    /// Tool calls never cross the wire to a Homebase, and the device model takes none: a request with tools goes
    /// to a route that can take them (a cloud), or is refused.
    private func checkTools(_ request: LocalChatRequest) throws(LocalAPIError) {
        guard !request.tools.isEmpty else { return }
        let route = self.backend.resolution().route
        guard route != .openai && route != .anthropic else { return }
        throw LocalAPIError.invalid(
            "this request has tools, and the route here (\(route.rawValue)) cannot take them: tool calls never cross "
                + "the wire to a Homebase, and the device model takes none; send it without tools, or route this "
                + "device to a cloud with your own key", param: "tools", code: "tools_not_supported")
    }

    private func refuse(_ error: LocalAPIError, ollama: Bool, cors: [(String, String)], _ writer: HTTPResponseWriter) {
        let body = ollama && error.status == 400 || ollama && error.code == "model_not_found"
            ? OllamaEncoder.error(error.message) : OpenAIEncoder.error(error)
        var headers = [("Content-Type", "application/json")] + cors
        if error.status == 401 { headers.append(("WWW-Authenticate", "Bearer")) }
        writer.respond(status: error.status, headers: headers, body: body)
    }

    // MARK: Chat

    private func chat(_ local: LocalChatRequest, flavor: LocalAPIFlavor, nowMs: UInt64, cors: [(String, String)],
                      _ writer: HTTPResponseWriter) {
        let request = ChatRequest(
            messages: local.messages, tools: local.tools.map { RawJSON($0) },
            options: ChatOptions(temperature: local.temperature, topP: local.topP, maxTokens: local.maxTokens,
                                 stop: local.stop, seed: local.seed, think: local.think))
        var responder = LocalAPIResponder(
            flavor: flavor, stream: local.stream, includeUsage: local.includeUsage,
            id: "chatcmpl-" + String(UInt64.random(in: 0...UInt64.max), radix: 16), created: Int(nowMs / 1000),
            createdAt: OllamaEncoder.timestamp(unixMs: nowMs), requestedModel: local.model)
        let queue = ServeQueue()
        let backend = self.backend
        let task = Task {
            let answer = await backend.chat(request, model: local.model, onEvent: { queue.push(.event($0)) },
                                            onProvider: { resolution, provider in
                                                queue.push(.start(resolution, provider))
                                            })
            queue.push(.end(answer))
        }
        let start = ContinuousClock.now
        var firstOutput: ContinuousClock.Instant?
        func ns(_ d: Duration) -> Int {
            Int(d.components.seconds) * 1_000_000_000 + Int(d.components.attoseconds / 1_000_000_000)
        }
        var lastCheck = ContinuousClock.now
        let checkEvery = Duration.milliseconds(self.options.disconnectCheckMs)
        while true {
            let items = queue.take(timeoutMs: self.options.disconnectCheckMs)
            for item in items ?? [] {
                var outputs: [LocalAPIResponder.Output]
                switch item {
                case .start(let resolution, let provider):
                    outputs = responder.start(resolution, provider: provider)
                case .event(let event):
                    switch event {
                    case .text, .reasoning, .toolCall: if firstOutput == nil { firstOutput = .now }
                    default: break
                    }
                    let now = ContinuousClock.now
                    outputs = responder.event(event, totalNs: ns(now - start), evalNs: ns(now - (firstOutput ?? now)))
                case .end(let answer):
                    let now = ContinuousClock.now
                    outputs = responder.finish(answer.result, totalNs: ns(now - start),
                                               evalNs: ns(now - (firstOutput ?? now)))
                    guard self.write(outputs, cors: cors, writer) else { return }
                    if local.stream { writer.finish() }
                    return
                }
                guard self.write(outputs, cors: cors, writer) else {
                    task.cancel()
                    return
                }
            }
            if items == nil || ContinuousClock.now - lastCheck >= checkEvery {
                lastCheck = .now
                if writer.waitForDisconnect(timeoutMs: 1) {
                    task.cancel()
                    return
                }
            }
        }
    }

    /// Writes the responder's outputs; false once the client is gone.
    private func write(_ outputs: [LocalAPIResponder.Output], cors: [(String, String)],
                       _ writer: HTTPResponseWriter) -> Bool {
        for output in outputs {
            switch output {
            case .head(let status, let headers, let withFirstChunk):
                let fields = headers.map { ($0.name, $0.value) } + cors
                guard writer.startStream(status: status, headers: fields, headWithFirstChunk: withFirstChunk) else {
                    return false
                }
            case .chunk(let bytes):
                guard writer.writeChunk(bytes) else { return false }
            case .whole(let status, let headers, let body):
                writer.respond(status: status, headers: headers.map { ($0.name, $0.value) } + cors, body: body)
                if writer.isClientGone { return false }
            }
        }
        return true
    }
}

/// Carries one chat's router events from its task to the connection's thread.
final class ServeQueue: Sendable {
    enum Item: Sendable {
        case start(RouteResolution, any LLMProvider)
        case event(ChatStreamEvent)
        case end(ChatAnswer)
    }

    private let items = Mutex<[Item]>([])
    private let signal = DispatchSemaphore(value: 0)

    func push(_ item: Item) {
        self.items.withLock { $0.append(item) }
        self.signal.signal()
    }

    /// Everything pushed so far (perhaps nothing), or nil when nothing came within `timeoutMs`.
    func take(timeoutMs: Int) -> [Item]? {
        guard self.signal.wait(timeout: .now() + .milliseconds(timeoutMs)) == .success else { return nil }
        return self.items.withLock { items in
            defer { items = [] }
            return items
        }
    }
}
