import FoundationEssentials
import HomebaseCore
import HomebaseTransport

/// What kind of server the Homebase's runtime is. Inference goes through the OpenAI-compatible `/v1` surface
/// either way (design.md §R4); the kind decides how the runtime is verified, probed and described.
public enum RuntimeKind: String, Codable, Sendable, CaseIterable {
    /// Ollama: management through `/api/*` (version, tags, show, ps, pull).
    case ollama
    /// Any OpenAI-compatible local server: llama.cpp's `llama-server`, LM Studio, vLLM, LocalAI, Jan. Models
    /// from `/v1/models`; llama-server's `/props` and `/slots` and LM Studio's `/api/v0/models` where they answer.
    case openAICompatible = "openai-compatible"

    /// The value of `--runtime`, or nil for anything else.
    public init?(argument: String) {
        self.init(rawValue: argument.lowercased())
    }
}

/// Why a call to an OpenAI-compatible server failed; one line a person can act on.
public enum OpenAICompatibleError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreachable(String)
    case timedOut(String)
    case http(status: Int, path: String, message: String)
    case malformed(String)
    /// `/v1/models` lists nothing: there is no model to route to or to test.
    case noModels(String)
    /// The listed model did not complete one token.
    case trialCompletion(model: String, String)

    public var description: String {
        switch self {
        case .unreachable(let what):
            return "no OpenAI-compatible server answers at \(what) — start it (e.g. llama-server -m MODEL.gguf --port 8080)"
        case .timedOut(let what):
            return "the OpenAI-compatible server at \(what) — it may be loading a model or overloaded; try again"
        case .http(let status, let path, let message):
            return "the OpenAI-compatible server answered \(path) with HTTP \(status): \(message)"
        case .malformed(let what):
            return "unexpected answer from the OpenAI-compatible server: \(what) — is this endpoint really one?"
        case .noModels(let endpoint):
            return "the OpenAI-compatible server at \(endpoint) lists no models in /v1/models; load a model in it first"
        case .trialCompletion(let model, let why):
            return "the server lists '\(model)' but a one-token trial completion with it failed: \(why)"
        }
    }
}

// MARK: What each endpoint says (pure: bytes in, facts out)

/// The facts an OpenAI-compatible server can tell, decoded from its answers. Every decoder takes the raw body
/// and either returns what it found or throws `OpenAICompatibleError.malformed`; a field that is absent or of
/// the wrong type in an optional extension (llama-server's `meta`, LM Studio's fields) is treated as unknown,
/// never guessed.
public enum OpenAICompatibleWire {
    /// One entry of `/v1/models`' `data`.
    public struct ListedModel: Equatable, Sendable {
        public var id: String
        /// llama-server's `meta.n_params`; nil elsewhere.
        public var parameterCount: Int64?
        /// llama-server's `meta.n_ctx_train` (what the model was trained for, not what the server runs).
        public var trainedContext: Int?
        /// llama-server's `meta.n_ctx`: the context each slot runs with.
        public var contextLength: Int? = nil
        /// llama-server's `meta.ftype`, e.g. `Q4_1` (the GGUF's file type, as llama.cpp names it).
        public var quantization: String? = nil
        /// llama-server's Ollama-like `models[].capabilities` for the same id, when present (`multimodal` read
        /// as `vision`).
        public var capabilities: [String]?
    }

    /// `GET /v1/models`: `{"object":"list","data":[{"id":…},…]}`. llama-server adds an Ollama-like `models`
    /// array; only its `capabilities` are read, and only for an id `data` lists. Ids are unique, in order.
    public static func models(_ body: [UInt8]) throws -> [ListedModel] {
        guard let root = try? JSONNode.parsing(body), case .object = root else {
            throw OpenAICompatibleError.malformed("/v1/models is not a JSON object")
        }
        guard let data = root["data"]?.arrayValue else {
            throw OpenAICompatibleError.malformed("/v1/models has no `data` array")
        }
        var capabilities: [String: [String]] = [:]
        for entry in root["models"]?.arrayValue ?? [] {
            guard let name = entry["model"]?.stringValue ?? entry["name"]?.stringValue,
                  let list = entry["capabilities"]?.arrayValue else { continue }
            let strings = list.compactMap(\.stringValue).filter { !$0.isEmpty && $0.utf8.count <= 64 }
                .map { $0 == "multimodal" ? "vision" : $0 }
            if strings.count == list.count { capabilities[name] = Array(strings.prefix(16)) }
        }
        var seen: Set<String> = []
        var out: [ListedModel] = []
        for entry in data {
            guard let id = entry["id"]?.stringValue, !id.isEmpty else {
                throw OpenAICompatibleError.malformed("/v1/models lists a model without an `id`")
            }
            guard id.utf8.count <= 512 else { throw OpenAICompatibleError.malformed("/v1/models lists an id over 512 bytes") }
            guard seen.insert(id).inserted else { continue }
            let meta = entry["meta"]
            out.append(ListedModel(
                id: id, parameterCount: meta?["n_params"]?.int64Value.flatMap { $0 > 0 ? $0 : nil },
                trainedContext: meta?["n_ctx_train"]?.intValue.flatMap { $0 > 0 ? $0 : nil },
                contextLength: meta?["n_ctx"]?.intValue.flatMap { $0 > 0 ? $0 : nil },
                quantization: meta?["ftype"]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > 64 ? nil : $0 },
                capabilities: capabilities[id]))
        }
        return out
    }

    /// llama-server's `GET /props`: the context each slot runs with, the slot count, the build.
    public struct Props: Equatable, Sendable {
        public var contextLength: Int?
        public var totalSlots: Int?
        public var build: String?
        /// `model_ftype`, e.g. `Q4_1`.
        public var quantization: String? = nil
    }

    public static func props(_ body: [UInt8]) throws -> Props {
        guard let root = try? JSONNode.parsing(body), case .object = root else {
            throw OpenAICompatibleError.malformed("/props is not a JSON object")
        }
        // Some servers (LM Studio) answer any path with 200 and an error object: only llama-server's own fields
        // make this a llama-server.
        guard root["default_generation_settings"] != nil || root["total_slots"] != nil || root["build_info"] != nil else {
            throw OpenAICompatibleError.malformed("/props has none of llama-server's fields")
        }
        let context = root["default_generation_settings"]?["n_ctx"]?.intValue ?? root["n_ctx"]?.intValue
        return Props(contextLength: context.flatMap { $0 > 0 ? $0 : nil },
                     totalSlots: root["total_slots"]?.intValue.flatMap { $0 > 0 ? $0 : nil },
                     build: root["build_info"]?.stringValue.flatMap { $0.isEmpty ? nil : String($0.prefix(100)) },
                     quantization: root["model_ftype"]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > 64 ? nil : $0 })
    }

    /// llama-server's `GET /slots`: one object per parallel slot. Returns the slot count and the context of the
    /// first slot (each slot's `n_ctx`).
    public static func slots(_ body: [UInt8]) throws -> (count: Int, contextLength: Int?) {
        guard let root = try? JSONNode.parsing(body), let slots = root.arrayValue else {
            throw OpenAICompatibleError.malformed("/slots is not a JSON array")
        }
        guard !slots.isEmpty else { throw OpenAICompatibleError.malformed("/slots lists no slot") }
        return (slots.count, slots.first?["n_ctx"]?.intValue.flatMap { $0 > 0 ? $0 : nil })
    }

    /// One model of LM Studio's `GET /api/v0/models`.
    public struct LMStudioModel: Equatable, Sendable {
        public var id: String
        /// `llm`, `vlm` or `embeddings`.
        public var type: String?
        public var loaded: Bool?
        public var contextLength: Int?
        public var architecture: String?
        public var quantization: String?
    }

    public static func lmStudioModels(_ body: [UInt8]) throws -> [LMStudioModel] {
        guard let root = try? JSONNode.parsing(body), let data = root["data"]?.arrayValue else {
            throw OpenAICompatibleError.malformed("/api/v0/models has no `data` array")
        }
        return data.compactMap { entry in
            guard let id = entry["id"]?.stringValue, !id.isEmpty else { return nil }
            let state = entry["state"]?.stringValue
            let context = entry["loaded_context_length"]?.intValue ?? entry["max_context_length"]?.intValue
            return LMStudioModel(
                id: id, type: entry["type"]?.stringValue,
                loaded: state == "loaded" ? true : state == "not-loaded" ? false : nil,
                contextLength: context.flatMap { $0 > 0 ? $0 : nil },
                architecture: entry["arch"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
                quantization: entry["quantization"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
        }
    }

    /// A non-streaming chat completion's `choices[0].message.content` (possibly empty).
    public static func completionContent(_ body: [UInt8]) throws -> String {
        guard let root = try? JSONNode.parsing(body), let choice = root["choices"]?.arrayValue?.first,
              let message = choice["message"], case .object = message else {
            throw OpenAICompatibleError.malformed("/v1/chat/completions answered without choices[0].message")
        }
        return message["content"]?.stringValue ?? ""
    }
}

extension JSONNode {
    /// Parses a body's bytes; throws on anything that is not one JSON value.
    static func parsing(_ bytes: [UInt8]) throws -> JSONNode {
        try bytes.withUnsafeBufferPointer { buffer throws -> JSONNode in try JSONNode.parse(buffer) }
    }

    /// A whole number that may exceed `Int32` (parameter counts), also when written as `1.3e8`.
    var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        if let n = Int64(text) { return n }
        guard let d = Double(text), d.isFinite, d >= 0, d < 9e18 else { return nil }
        return Int64(d)
    }
}

// MARK: Putting the facts together (pure)

/// What one look at an OpenAI-compatible server found, and how it becomes the advert's models.
public struct OpenAICompatibleSnapshot: Equatable, Sendable {
    public var listed: [OpenAICompatibleWire.ListedModel]
    public var props: OpenAICompatibleWire.Props?
    public var slots: (count: Int, contextLength: Int?)?
    public var lmStudio: [OpenAICompatibleWire.LMStudioModel]?

    public init(listed: [OpenAICompatibleWire.ListedModel], props: OpenAICompatibleWire.Props? = nil,
                slots: (count: Int, contextLength: Int?)? = nil, lmStudio: [OpenAICompatibleWire.LMStudioModel]? = nil) {
        self.listed = listed
        self.props = props
        self.slots = slots
        self.lmStudio = lmStudio
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.listed == b.listed && a.props == b.props && a.slots?.count == b.slots?.count
            && a.slots?.contextLength == b.slots?.contextLength && a.lmStudio == b.lmStudio
    }

    /// A llama-server answered `/props`: it serves the one model it loaded at start.
    public var isLlamaServer: Bool { self.props != nil }

    /// The server's build (llama-server's `build_info`); nil when it does not say.
    public var version: String? { self.props?.build }

    /// Requests served at once: `/slots`' count, else `/props`' `total_slots`; nil when unknown.
    public var parallelism: Int? { self.slots?.count ?? self.props?.totalSlots }

    /// The models as the advert describes them. What no endpoint said is listed in `unknown` and left empty:
    /// never a made-up family, size, quantization, context or loaded state.
    public var models: [RuntimeModelInfo] {
        let studio = Dictionary(self.lmStudio?.map { ($0.id, $0) } ?? [], uniquingKeysWith: { a, _ in a })
        return self.listed.map { listed in
            var unknown: [String] = []
            let lm = studio[listed.id]
            let family = lm?.architecture ?? ""
            if family.isEmpty { unknown.append("family") }
            let parameterSize = listed.parameterCount.map(Self.parameterSize) ?? ""
            if parameterSize.isEmpty { unknown.append("parameter_size") }
            let quantization = lm?.quantization ?? listed.quantization ?? (self.isLlamaServer ? self.props?.quantization : nil) ?? ""
            if quantization.isEmpty { unknown.append("quantization") }
            // llama-server runs every slot with the same context; LM Studio says per model.
            let context = self.isLlamaServer
                ? (self.slots?.contextLength ?? self.props?.contextLength ?? listed.contextLength)
                : (lm?.contextLength ?? listed.contextLength)
            if context == nil { unknown.append("context_length") }
            // A llama-server that answers serves its model from memory; LM Studio says; others cannot tell.
            let loaded: Bool? = self.isLlamaServer ? true : lm?.loaded
            if loaded == nil { unknown.append("loaded") }
            var capabilities: [String]
            if let listedCapabilities = listed.capabilities, !listedCapabilities.isEmpty {
                capabilities = listedCapabilities
            } else if let type = lm?.type {
                capabilities = type == "embeddings" ? ["embedding"] : type == "vlm" ? ["completion", "vision"] : ["completion"]
            } else {
                capabilities = OllamaWire.inferredCapabilities(name: listed.id, family: nil, architecture: nil)
                unknown.append("capabilities")
            }
            return RuntimeModelInfo(tag: listed.id, family: family, parameterSize: parameterSize,
                                    quantization: quantization, capabilities: capabilities, contextLength: context,
                                    loaded: loaded ?? false, unknown: unknown.isEmpty ? nil : unknown)
        }
    }

    /// `134515008` → `135M`, `7615616512` → `7.6B` (Ollama's style).
    static func parameterSize(_ count: Int64) -> String {
        if count >= 1_000_000_000 {
            let tenths = (count + 50_000_000) / 100_000_000
            return tenths % 10 == 0 ? "\(tenths / 10)B" : "\(tenths / 10).\(tenths % 10)B"
        }
        if count >= 1_000_000 { return "\((count + 500_000) / 1_000_000)M" }
        return "\(count)"
    }

    /// The model for the trial completion: a loaded completion model, else the first that can complete.
    public var trialModel: String? {
        let models = self.models.filter(\.canComplete)
        return (models.first(where: \.loaded) ?? models.first)?.tag
    }
}

// MARK: Detection (Ollama or not)

/// Which kind a URL serves, from what `/api/version` and `/v1/models` answered (nil: no answer).
public enum RuntimeDetection {
    /// Ollama answers `/api/version` with `{"version": "…"}`. Otherwise a `/v1/models` with a `data` array is an
    /// OpenAI-compatible server — llama-server's also carries an Ollama-like `models` array, which says nothing
    /// about being Ollama. Nil: neither.
    public static func classify(version: (status: Int, body: [UInt8])?, models: (status: Int, body: [UInt8])?)
        -> RuntimeKind?
    {
        if let version, version.status == 200, let root = try? JSONNode.parsing(version.body),
           let text = root["version"]?.stringValue, !text.isEmpty {
            return .ollama
        }
        if let models, models.status == 200, (try? OpenAICompatibleWire.models(models.body)) != nil {
            return .openAICompatible
        }
        return nil
    }
}

// MARK: The client and verifier (I/O)

/// The calls the Homebase makes to an OpenAI-compatible server besides inference.
public struct OpenAICompatibleClient: Sendable {
    public let endpoint: String
    public let configuration: OllamaManagementClient.Configuration
    private let http: HTTPClient

    public init(endpoint: String, http: HTTPClient,
                configuration: OllamaManagementClient.Configuration = .init()) {
        var base = endpoint.trimmingCharacters(in: .whitespaces)
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasSuffix("/v1") { base.removeLast(3) }
        self.endpoint = base
        self.http = http
        self.configuration = configuration
    }

    /// `/v1/models`, then what llama-server (`/props`, `/slots`) and LM Studio (`/api/v0/models`) add where they
    /// answer. Only `/v1/models` must answer; the others are asked only when they can apply.
    public func snapshot() async throws -> OpenAICompatibleSnapshot {
        let listed = try OpenAICompatibleWire.models(try await self.get("/v1/models"))
        var snapshot = OpenAICompatibleSnapshot(listed: listed)
        if let body = try? await self.get("/props"), let props = try? OpenAICompatibleWire.props(body) {
            snapshot.props = props
            // /slots answers 501 when the server runs with --no-slots; then /props' total_slots stands.
            if let body = try? await self.get("/slots") { snapshot.slots = try? OpenAICompatibleWire.slots(body) }
        } else if let body = try? await self.get("/api/v0/models") {
            snapshot.lmStudio = try? OpenAICompatibleWire.lmStudioModels(body)
        }
        return snapshot
    }

    /// A one-token, non-streaming completion: proof the server can do inference with `model`.
    @discardableResult
    public func trialCompletion(_ model: String) async throws -> String {
        struct Message: Encodable { let role: String, content: String }
        struct Trial: Encodable {
            let model: String
            let messages: [Message]
            let max_tokens = 1
            let stream = false
        }
        let body = Array(try JSONEncoder().encode(Trial(model: model, messages: [.init(role: "user", content: "Reply with OK.")])))
        let response = try await self.send("POST", "/v1/chat/completions", body: body,
                                           timeout: self.configuration.loadTimeout)
        return try OpenAICompatibleWire.completionContent(response)
    }

    /// GET `path`; the body of a 200, else `.http`.
    public func get(_ path: String) async throws -> [UInt8] {
        try await self.send("GET", path, body: nil, timeout: self.configuration.requestTimeout)
    }

    /// Status and body of `GET path`, whatever the status; nil when nothing answered (for detection).
    public func probe(_ path: String) async -> (status: Int, body: [UInt8])? {
        let request = HTTPRequest(method: "GET", url: self.endpoint + path, headers: [("Accept", "application/json")],
                                  body: nil, connectTimeout: self.configuration.connectTimeout,
                                  timeout: self.configuration.requestTimeout,
                                  maxResponseBytes: self.configuration.maxResponseBytes)
        guard let response = try? await self.http.send(request) else { return nil }
        return (response.head.status, response.body)
    }

    private func send(_ method: String, _ path: String, body: [UInt8]?, timeout: Duration) async throws -> [UInt8] {
        var headers: [(String, String)] = [("Accept", "application/json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let request = HTTPRequest(method: method, url: self.endpoint + path, headers: headers, body: body,
                                  connectTimeout: self.configuration.connectTimeout, timeout: timeout,
                                  maxResponseBytes: self.configuration.maxResponseBytes)
        let response: HTTPResponse
        do {
            response = try await self.http.send(request)
        } catch let error as HTTPClientError {
            switch error {
            case .cancelled: throw CancellationError()
            case .timedOut: throw OpenAICompatibleError.timedOut("\(self.endpoint) did not answer \(path) in time")
            case .responseTooLarge:
                throw OpenAICompatibleError.malformed("\(path) answered with more than \(self.configuration.maxResponseBytes / 1024) KiB")
            case .connectFailed(let message), .transport(_, let message), .invalidRequest(let message):
                throw OpenAICompatibleError.unreachable("\(self.endpoint) (\(OllamaError.shortReason(message)))")
            }
        }
        guard response.head.status == 200 else {
            throw OpenAICompatibleError.http(status: response.head.status, path: path,
                                             message: OllamaManagementClient.errorMessage(response.body,
                                                                                          status: response.head.status))
        }
        return response.body
    }
}

/// Test-before-persist for an OpenAI-compatible server (design.md §R4, as for Ollama): it must list a model in
/// `/v1/models` and complete one token with it before anything is stored.
public struct OpenAICompatibleVerifier: Sendable {
    let client: OpenAICompatibleClient
    let clock: ServiceClock

    public init(client: OpenAICompatibleClient, clock: ServiceClock = .system) {
        self.client = client
        self.clock = clock
    }

    public func verify() async throws -> RuntimeStatus {
        guard OllamaRuntimeVerifier.isHTTPURL(self.client.endpoint) else {
            throw RuntimeVerificationError.invalidEndpoint(self.client.endpoint)
        }
        let snapshot = try await self.client.snapshot()
        guard let trial = snapshot.trialModel else { throw OpenAICompatibleError.noModels(self.client.endpoint) }
        do {
            try await self.client.trialCompletion(trial)
        } catch let error as OpenAICompatibleError {
            throw OpenAICompatibleError.trialCompletion(model: trial, error.description)
        }
        return snapshot.status(endpoint: self.client.endpoint, nowMs: self.clock.nowMs())
    }
}

extension OpenAICompatibleSnapshot {
    /// The runtime status this look amounts to (verified, available).
    public func status(endpoint: String, nowMs: UInt64) -> RuntimeStatus {
        RuntimeStatus(endpoint: endpoint, verified: true, available: true, version: self.version,
                      models: self.models, checkedAtMs: nowMs, kind: .openAICompatible,
                      knownParallelism: self.parallelism)
    }
}

extension RuntimeDetection {
    /// Asks `endpoint` the two questions `classify` judges: `/api/version` first, then `/v1/models`.
    public static func detect(endpoint: String, http: HTTPClient) async -> RuntimeKind? {
        let client = OpenAICompatibleClient(endpoint: endpoint, http: http)
        let version = await client.probe("/api/version")
        if self.classify(version: version, models: nil) == .ollama { return .ollama }
        return self.classify(version: nil, models: await client.probe("/v1/models"))
    }
}
