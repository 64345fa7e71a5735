import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization

/// An in-process stand-in for Ollama that speaks its real wire formats (reference/model-apis.md §1–3):
/// native `/api/*` with NDJSON streams, the OpenAI-compatible `/v1/*` with SSE, deterministic answers,
/// a tunable token rate and fault injection (`EmulatorFault`).
///
/// Runs on `SimpleHTTPServer`: one thread per connection, sleeping between tokens (no busy loops), so 100
/// concurrent streams cost the emulator almost no CPU.
public final class OllamaEmulator: Sendable {
    public let configuration: EmulatorConfiguration
    let server: Mutex<SimpleHTTPServer?> = Mutex(nil)
    let models: Mutex<ModelState>

    /// What is installed and loaded. Guarded by `models`.
    struct ModelState: Sendable {
        /// Installed models in `/api/tags` order, with the time they were installed (`modified_at`).
        var installed: [(model: EmulatedModel, modifiedAt: Date)] = []
        /// Loaded models by name: when they unload (`nil`: pinned by a negative keep_alive or `--loaded`).
        var loaded: [String: Date?] = [:]

        /// Case-insensitively, as Ollama matches names.
        func find(_ name: String) -> EmulatedModel? {
            let normalized = EmulatedModel.normalize(name).lowercased()
            return self.installed.first { $0.model.name.lowercased() == normalized }?.model
        }
    }

    /// Slots of `--parallel`: requests running per model, and the tickets waiting for one, oldest first.
    struct Slots: Sendable {
        var running: [String: Int] = [:]
        var waiting: [String: [UInt64]] = [:]
        var nextTicket: UInt64 = 0
    }

    let slots = Mutex(Slots())

    public init(configuration: EmulatorConfiguration) {
        self.configuration = configuration
        let now = configuration.now()
        var state = ModelState()
        for name in configuration.models where !name.isEmpty {
            let model = EmulatedModel(name: name)
            if !state.installed.contains(where: { $0.model.name == model.name }) {
                // Distinct, stable modification times: one day apart, newest first like Ollama lists them.
                let age = Double(state.installed.count + 1) * 86_400
                state.installed.append((model, Date(timeIntervalSince1970: (now.timeIntervalSince1970 - age).rounded())))
            }
        }
        for name in configuration.loaded where state.find(name) != nil {
            state.loaded[EmulatedModel.normalize(name)] = .some(nil)
        }
        self.models = Mutex(state)
    }

    /// Starts serving on `configuration.host` and `port` (default: the configured port; 0 picks a free one).
    /// Returns the bound port.
    @discardableResult
    public func start(port: UInt16? = nil) throws -> UInt16 {
        let server = SimpleHTTPServer { [self] request, writer in self.handle(request, writer) }
        let bound = try server.start(host: self.configuration.host, port: port ?? self.configuration.port)
        self.server.withLock { $0 = server }
        return bound
    }

    /// Stops serving and drops every connection (stalled streams end).
    public func stop() {
        let server = self.server.withLock { s -> SimpleHTTPServer? in
            defer { s = nil }
            return s
        }
        server?.stop()
    }

    /// The routes and their one method each: another method on one of them is 405.
    static let routes: [String: String] = [
        "/": "GET", "/api/version": "GET", "/api/tags": "GET", "/api/show": "POST", "/api/ps": "GET",
        "/api/pull": "POST", "/api/chat": "POST", "/v1/models": "GET", "/v1/chat/completions": "POST",
    ]

    /// Routes one request. Unknown routes answer like Go's router: 404 `404 page not found`; a known route with
    /// another method 405 `405 method not allowed`.
    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let method = request.method == "HEAD" ? "GET" : request.method
        if let allowed = Self.routes[request.path], allowed != method {
            return writer.respond(status: 405, headers: [("Content-Type", "text/plain")], body: "405 method not allowed")
        }
        switch (method, request.path) {
        case ("GET", "/"):
            writer.respond(status: 200, headers: [("Content-Type", "text/plain; charset=utf-8")], body: "Ollama is running")
        case ("GET", "/api/version"):
            self.respondJSON(writer, 200, .object([("version", .string(self.configuration.version))]))
        case ("GET", "/api/tags"):
            self.tags(writer)
        case ("POST", "/api/show"):
            self.show(request, writer)
        case ("GET", "/api/ps"):
            self.ps(writer)
        case ("POST", "/api/pull"):
            self.pull(request, writer)
        case ("POST", "/api/chat"):
            self.nativeChat(request, writer)
        case ("GET", "/v1/models"):
            self.openAIModels(writer)
        case ("POST", "/v1/chat/completions"):
            self.openAIChat(request, writer)
        case ("GET", let path) where path.hasPrefix("/v1/models/"):
            self.openAIModel(String(path.dropFirst("/v1/models/".count)).removingPercentEncoding ?? "", writer)
        default:
            writer.respond(status: 404, headers: [("Content-Type", "text/plain")], body: "404 page not found")
        }
    }

    // MARK: Shared helpers

    static let jsonType = ("Content-Type", "application/json; charset=utf-8")
    static let ndjsonType = ("Content-Type", "application/x-ndjson")
    static let sseType = ("Content-Type", "text/event-stream")

    func respondJSON(_ writer: HTTPResponseWriter, _ status: Int, _ value: JSONValue) {
        writer.respond(status: status, headers: [Self.jsonType], body: value.bytes)
    }

    /// Native error body: `{"error":"..."}`.
    func nativeError(_ writer: HTTPResponseWriter, _ status: Int, _ message: String) {
        self.respondJSON(writer, status, .object([("error", .string(message))]))
    }

    /// OpenAI-surface error body; `type` follows the status as Ollama's `NewError` does.
    func openAIError(_ writer: HTTPResponseWriter, _ status: Int, _ message: String) {
        let type = switch status {
        case 400: "invalid_request_error"
        case 404: "not_found_error"
        default: "api_error"
        }
        self.respondJSON(writer, status, .object([("error", .object([
            ("message", .string(message)), ("type", .string(type)), ("param", .null), ("code", .null),
        ]))]))
    }

    /// The request body as a JSON object, or an error message in Ollama's words.
    static func decodeBody(_ body: [UInt8]) -> Result<[String: Any], BodyError> {
        guard !body.isEmpty else { return .failure(BodyError(message: "missing request body")) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) else {
            return .failure(BodyError(message: "invalid character in request body: not JSON"))
        }
        guard let dict = object as? [String: Any] else {
            return .failure(BodyError(message: "json: cannot unmarshal into Go value of type api.Request"))
        }
        return .success(dict)
    }

    struct BodyError: Error {
        let message: String
    }

    /// Waits, with no byte sent, until `model` has a free slot (`--parallel`), in arrival order. Returns a
    /// release to call when the answer ends, or nil when the client left while waiting.
    func acquireSlot(_ model: EmulatedModel, _ writer: HTTPResponseWriter) -> (@Sendable () -> Void)? {
        guard let parallel = self.configuration.parallel else { return {} }
        let key = model.name
        let ticket = self.slots.withLock { s -> UInt64 in
            s.nextTicket += 1
            s.waiting[key, default: []].append(s.nextTicket)
            return s.nextTicket
        }
        let release: @Sendable () -> Void = { [self] in
            self.slots.withLock { $0.running[key, default: 1] -= 1 }
        }
        while true {
            let got = self.slots.withLock { s -> Bool in
                guard s.waiting[key]?.first == ticket, s.running[key, default: 0] < parallel else { return false }
                s.waiting[key]?.removeFirst()
                s.running[key, default: 0] += 1
                return true
            }
            if got { return release }
            // Polls the socket meanwhile: a client that gives up leaves the queue, as on a real server.
            if writer.waitForDisconnect(timeoutMs: 10) {
                self.slots.withLock { $0.waiting[key]?.removeAll { $0 == ticket } }
                return nil
            }
        }
    }

    /// The answer of a cloud stub's forwarded request when ollama.com cannot be reached (`--cloud`): status
    /// and message, or nil when it answers.
    func cloudRefusal(_ model: EmulatedModel) -> (status: Int, message: String)? {
        guard model.isCloud else { return nil }
        switch self.configuration.cloud {
        case .online: return nil
        case .offline: return (502, "dial tcp: lookup ollama.com: no such host")
        case .disabled: return (403, "remote model is unavailable: ollama cloud is disabled")
        }
    }

    /// `details` as `/api/tags`, `/api/ps` and `/api/show` share it.
    static func details(_ model: EmulatedModel) -> JSONValue {
        .object([
            ("parent_model", .string("")), ("format", .string("gguf")), ("family", .string(model.family)),
            ("families", .array([.string(model.family)])), ("parameter_size", .string(model.parameterSize)),
            ("quantization_level", .string(model.quantizationLevel)),
        ])
    }

    /// RFC 3339 with nanoseconds in UTC, as Go's time.Time marshals (`2025-05-04T17:37:44.706015396Z`).
    static func timestamp(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        let nanos = Int(((date.timeIntervalSince1970 - seconds) * 1_000_000_000).rounded()) % 1_000_000_000
        var text = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        if nanos > 0 {
            // Go trims trailing zeros of the fraction (RFC3339Nano).
            var fraction = String(format: "%09d", nanos)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// For tests: runs `body` against an in-process emulator on a free port, with its root URL
/// (`http://127.0.0.1:PORT`), stopping it after.
public func withOllamaEmulator(
    _ configure: (inout EmulatorConfiguration) -> Void = { _ in },
    _ body: (OllamaEmulator, String) async throws -> Void
) async throws {
    var configuration = EmulatorConfiguration()
    configuration.port = 0
    configuration.tokensPerSecond = 5_000
    configure(&configuration)
    let emulator = OllamaEmulator(configuration: configuration)
    let port = try emulator.start(port: 0)
    defer { emulator.stop() }
    try await body(emulator, "http://127.0.0.1:\(port)")
}
