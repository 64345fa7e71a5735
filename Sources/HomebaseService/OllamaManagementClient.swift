import FoundationEssentials
import HomebaseCore
import HomebaseTransport
import Synchronization

/// Ollama's native management API (`/api/*`, reference/model-apis.md §1) plus the one-token trial completion
/// that test-before-persist needs (§2). Inference itself goes through the OpenAI-compatible provider, not here.
///
/// Every failure is an `OllamaError`; a cancelled task gets `CancellationError`. Bodies are decoded strictly by
/// type and leniently by presence: an absent optional field takes a default, a field of the wrong type is
/// `malformed`. Nothing a server sends can trap.
public struct OllamaManagementClient: Sendable {
    /// Limits for each kind of call.
    public struct Configuration: Sendable {
        /// Longest wait for the TCP connection. Loopback answers at once; a LAN host may take a moment.
        public var connectTimeout: Duration = .seconds(5)
        /// Whole-exchange limit for version, tags, show and ps: each is a small local lookup.
        public var requestTimeout: Duration = .seconds(10)
        /// Whole-exchange limit for `keepAlive` and `trialCompletion`, which may wait for a cold model load
        /// (tens of seconds for a large model from a slow disk).
        public var loadTimeout: Duration = .seconds(300)
        /// Longest silence in a pull while it downloads (progress lines come every ~60 ms then).
        public var pullIdleTimeout: Duration = .seconds(120)
        /// Longest silence once every layer is downloaded: Ollama then hashes each new layer (`verifying sha256
        /// digest`) with no line at all, minutes for a large model on a slow disk.
        public var pullVerifyIdleTimeout: Duration = .seconds(30 * 60)
        /// Largest buffered body. A `/api/show` with a long license is tens of KiB; this leaves a wide margin.
        public var maxResponseBytes = 8 * 1024 * 1024
        /// Longest NDJSON line in a pull; real lines are under 300 bytes.
        public var maxPullLineBytes = 64 * 1024

        public init() {}
    }

    /// The base URL, without a trailing `/` (e.g. `http://127.0.0.1:11434`).
    public let endpoint: String
    public let configuration: Configuration
    private let http: HTTPClient

    public init(endpoint: String, http: HTTPClient, configuration: Configuration = Configuration()) {
        var base = endpoint.trimmingCharacters(in: .whitespaces)
        while base.hasSuffix("/") { base.removeLast() }
        self.endpoint = base
        self.http = http
        self.configuration = configuration
    }

    // MARK: Management calls

    /// `GET /api/version`: the server's version string, e.g. `0.5.1`.
    public func version() async throws -> String {
        let body: OllamaWire.Version = try await self.call("GET", "/api/version")
        return body.version
    }

    /// `GET /api/tags`: installed models in the server's order.
    public func tags() async throws -> [OllamaInstalledModel] {
        let body: OllamaWire.Tags = try await self.call("GET", "/api/tags")
        return try (body.models ?? []).map { entry in
            guard let name = entry.name ?? entry.model, !name.isEmpty else {
                throw OllamaError.malformed("/api/tags listed a model without a name")
            }
            return OllamaInstalledModel(
                name: name, size: max(0, entry.size ?? 0), digest: entry.digest ?? "",
                family: entry.details?.family ?? "", parameterSize: entry.details?.parameter_size ?? "",
                quantization: entry.details?.quantization_level ?? "", remoteHost: entry.remote_host,
                capabilities: entry.capabilities)
        }
    }

    /// `POST /api/show`: capabilities and context length of `model`.
    /// - Throws: `OllamaError.http(404, …)` when the model is not installed.
    public func show(_ model: String) async throws -> OllamaModelInfo {
        let body: OllamaWire.Show = try await self.call("POST", "/api/show", json: ["model": model])
        let architecture = body.model_info?.architecture
        let capabilities = body.capabilities
            ?? OllamaWire.inferredCapabilities(name: model, family: body.details?.family, architecture: architecture)
        let context = body.model_info?.contextLength.flatMap { $0 > 0 ? $0 : nil }
        return OllamaModelInfo(capabilities: capabilities, contextLength: context, architecture: architecture)
    }

    /// `GET /api/ps`: models loaded in memory now.
    public func ps() async throws -> [OllamaLoadedModel] {
        let body: OllamaWire.PS = try await self.call("GET", "/api/ps")
        return try (body.models ?? []).map { entry in
            guard let name = entry.name ?? entry.model, !name.isEmpty else {
                throw OllamaError.malformed("/api/ps listed a model without a name")
            }
            return OllamaLoadedModel(name: name, expiresAt: entry.expires_at,
                                     contextLength: entry.context_length.flatMap { $0 > 0 ? $0 : nil },
                                     sizeBytes: entry.size, vramBytes: entry.size_vram)
        }
    }

    /// Loads `model` (if needed) and keeps it in memory for `duration` (a Go duration with its unit, such as
    /// `30m`, or `-1m` for ever; a bare `-1` is refused by real servers, 400 `missing unit`): `POST /api/chat` with empty `messages`, which loads without generating (reference §3).
    /// May take as long as a cold load (`configuration.loadTimeout`).
    public func keepAlive(_ model: String, duration: String) async throws {
        let _: OllamaWire.ErrorBody = try await self.call(
            "POST", "/api/chat", json: KeepAliveRequest(model: model, keep_alive: duration),
            timeout: self.configuration.loadTimeout)
    }

    /// A one-token completion through `/v1/chat/completions` (non-streaming, `max_tokens: 1`, which Ollama
    /// reads; it ignores `max_completion_tokens`): proof the endpoint can do inference with `model`.
    /// - Returns: the reply's content (one token, possibly empty).
    @discardableResult
    public func trialCompletion(_ model: String) async throws -> String {
        let request = TrialRequest(model: model, messages: [.init(role: "user", content: "Reply with OK.")])
        let body: OllamaWire.ChatCompletion = try await self.call(
            "POST", "/v1/chat/completions", json: request, timeout: self.configuration.loadTimeout)
        guard let choice = body.choices?.first, let message = choice.message else {
            throw OllamaError.malformed("/v1/chat/completions answered without choices[0].message")
        }
        return message.content ?? ""
    }

    // MARK: Pull

    /// `POST /api/pull` with `stream: true`: one `PullProgress` per NDJSON line, ending after `success`.
    ///
    /// - Throws (through the stream): `OllamaError.pull` for an in-band `{"error":...}` line (the status is
    ///   already 200) or a stream that ends without `success`; `.http` with the body's message for an error
    ///   status; `.malformed` for a line that is not a progress object; transport errors as elsewhere.
    ///   Ending the iteration (or cancelling its task) aborts the download request.
    public func pull(_ model: String) -> AsyncThrowingStream<PullProgress, Error> {
        let (stream, continuation) = AsyncThrowingStream<PullProgress, Error>.makeStream(
            bufferingPolicy: .bufferingNewest(256))
        let task = Task {
            do {
                try await self.runPull(model, into: continuation)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func runPull(_ model: String, into continuation: AsyncThrowingStream<PullProgress, Error>.Continuation)
        async throws
    {
        let path = "/api/pull"
        var request = try self.request("POST", path, json: PullRequest(model: model, stream: true), timeout: nil)
        // The transport allows the longer silence; the download phase's shorter one is watched here.
        request.idleTimeout = max(self.configuration.pullIdleTimeout, self.configuration.pullVerifyIdleTimeout)
        let head: HTTPClientResponseHead
        let body: AsyncThrowingStream<[UInt8], Error>
        do {
            (head, body) = try await self.http.stream(request)
        } catch {
            throw self.mapped(error, path: path, limit: self.configuration.connectTimeout)
        }
        guard head.status == 200 else {
            var collected: [UInt8] = []
            do {
                for try await piece in body {
                    collected += piece
                    if collected.count >= 64 * 1024 { break }
                }
            } catch {
                // The status already says what happened; a broken error body only loses its message.
            }
            throw OllamaError.http(status: head.status, message: Self.errorMessage(collected, status: head.status))
        }
        let phase = PullPhaseBox()
        let downloadIdle = self.configuration.pullIdleTimeout
        let endpoint = self.endpoint
        try await withThrowingTaskGroup(of: Void.self) { group in
            // While layers download, a silence longer than `pullIdleTimeout` fails the pull; once every layer
            // is complete (the server verifies digests, silently), only the transport's longer limit applies.
            group.addTask {
                while true {
                    try await Task.sleep(for: min(downloadIdle, .seconds(1)))
                    let stalled = phase.withLock { !$0.downloaded && ContinuousClock.now - $0.lastLine > downloadIdle }
                    if stalled {
                        throw OllamaError.timedOut("\(endpoint) did not answer \(path) within \(OllamaError.seconds(downloadIdle))")
                    }
                }
            }
            group.addTask {
                var splitter = LineSplitter(maxLineBytes: self.configuration.maxPullLineBytes)
                do {
                    for try await piece in body {
                        for line in try splitter.append(piece) {
                            if let progress = try Self.pullLine(line, model: model) {
                                phase.withLock { $0.saw(progress) }
                                continuation.yield(progress)
                                if progress.isSuccess { return }
                            }
                        }
                    }
                    if let last = try splitter.finish(), let progress = try Self.pullLine(last, model: model) {
                        continuation.yield(progress)
                        if progress.isSuccess { return }
                    }
                } catch let error as LineSplitter.Error {
                    throw OllamaError.malformed("\(path) sent a line over \(self.configuration.maxPullLineBytes) bytes"
                        + " (\(error))")
                } catch {
                    throw self.mapped(error, path: path, limit: self.configuration.pullVerifyIdleTimeout)
                }
                throw OllamaError.pull(model: model, message: "the download ended before Ollama reported success")
            }
            // The first to end decides: the body's end (or failure), or the download-phase watchdog.
            try await group.next()
            group.cancelAll()
        }
    }

    final class PullPhaseBox: Sendable {
        private let state = Mutex(PullPhase(lastLine: ContinuousClock.now))
        func withLock<T: Sendable>(_ body: (inout PullPhase) -> T) -> T { self.state.withLock { body(&$0) } }
    }

    /// Where a pull stands, for its idle watchdog: when the last line came, and whether every layer seen so far
    /// is complete (then the server verifies digests, silently). Judged from the numbers, not the status texts,
    /// which differ between server versions.
    struct PullPhase: Sendable {
        var lastLine: ContinuousClock.Instant
        var layers: [String: (total: Int64, completed: Int64)] = [:]
        var downloaded = false

        mutating func saw(_ progress: PullProgress) {
            self.lastLine = .now
            if let digest = progress.digest, progress.total > 0 {
                self.layers[digest] = (progress.total, progress.completed)
            }
            self.downloaded = !self.layers.isEmpty && self.layers.values.allSatisfy { $0.completed >= $0.total }
        }
    }

    /// Decodes one NDJSON line; `nil` for a blank line. An `error` field wins over everything else.
    package static func pullLine(_ bytes: [UInt8], model: String) throws -> PullProgress? {
        guard bytes.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return nil }
        let line: OllamaWire.PullLine
        do {
            line = try JSONDecoder().decode(OllamaWire.PullLine.self, from: Data(bytes))
        } catch {
            throw OllamaError.malformed("/api/pull sent a line that is not a progress object")
        }
        if let message = line.error {
            throw OllamaError.pull(model: model, message: message)
        }
        guard let status = line.status else {
            throw OllamaError.malformed("/api/pull sent a line without status")
        }
        return PullProgress(status: status, digest: line.digest, total: max(0, line.total ?? 0),
                            completed: max(0, line.completed ?? 0))
    }

    // MARK: Plumbing

    private struct KeepAliveRequest: Encodable {
        let model: String
        let messages: [String] = []
        let keep_alive: String
        let stream = false
    }

    private struct TrialRequest: Encodable {
        struct Message: Encodable {
            let role: String
            let content: String
        }

        let model: String
        let messages: [Message]
        let max_tokens = 1
        let stream = false
    }

    private struct PullRequest: Encodable {
        let model: String
        let stream: Bool
    }

    private func request<Body: Encodable>(_ method: String, _ path: String, json: Body?, timeout: Duration?)
        throws -> HTTPRequest
    {
        var headers: [(String, String)] = [("Accept", "application/json")]
        var bytes: [UInt8]?
        if let json {
            headers.append(("Content-Type", "application/json"))
            do {
                bytes = Array(try JSONEncoder().encode(json))
            } catch {
                // Our own request types always encode; a failure here is a bug, reported rather than trapped.
                throw OllamaError.malformed("could not encode the \(path) request: \(error)")
            }
        }
        return HTTPRequest(method: method, url: self.endpoint + path, headers: headers, body: bytes,
                           connectTimeout: self.configuration.connectTimeout, timeout: timeout,
                           maxResponseBytes: self.configuration.maxResponseBytes)
    }

    private func call<Response: Decodable>(_ method: String, _ path: String, timeout: Duration? = nil)
        async throws -> Response
    {
        try await self.call(method, path, json: nil as [String: String]?, timeout: timeout)
    }

    /// Sends one buffered request and decodes a 200 answer as `Response`; any other status is `.http`.
    private func call<Response: Decodable, Body: Encodable>(
        _ method: String, _ path: String, json: Body?, timeout: Duration? = nil
    ) async throws -> Response {
        let limit = timeout ?? self.configuration.requestTimeout
        let request = try self.request(method, path, json: json, timeout: limit)
        let response: HTTPResponse
        do {
            response = try await self.http.send(request)
        } catch {
            throw self.mapped(error, path: path, limit: limit)
        }
        guard response.head.status == 200 else {
            throw OllamaError.http(status: response.head.status,
                                   message: Self.errorMessage(response.body, status: response.head.status))
        }
        do {
            return try JSONDecoder().decode(Response.self, from: Data(response.body))
        } catch {
            throw OllamaError.malformed("\(path) answered with \(Self.decodingProblem(error))")
        }
    }

    private func mapped(_ error: any Error, path: String, limit: Duration?) -> any Error {
        guard let transport = error as? HTTPClientError else { return error }
        return OllamaError.transport(transport, endpoint: self.endpoint, path: path, limit: limit,
                                     maxBytes: self.configuration.maxResponseBytes) ?? CancellationError()
    }

    /// The error text of an error body, whichever surface sent it; else the start of the body as text.
    static func errorMessage(_ body: [UInt8], status: Int) -> String {
        if let decoded = try? JSONDecoder().decode(OllamaWire.ErrorBody.self, from: Data(body)),
            let message = decoded.message, !message.isEmpty
        {
            return Self.printable(message)
        }
        let text = Self.printable(String(decoding: body.prefix(200), as: UTF8.self))
        return text.isEmpty ? "no error message (HTTP \(status))" : text
    }

    /// One line of at most 200 characters, control characters replaced, so a hostile body cannot rewrite
    /// the terminal it is printed on.
    static func printable(_ text: String) -> String {
        let cleaned = String(text.unicodeScalars.prefix(200).map { scalar -> Character in
            scalar.properties.generalCategory == .control ? " " : Character(scalar)
        })
        return cleaned.trimmingCharacters(in: .whitespaces)
    }

    /// What was wrong with a body, briefly (DecodingError's own descriptions are long and Swift-specific).
    static func decodingProblem(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "an undecodable body" }
        func path(_ context: DecodingError.Context) -> String {
            guard !context.codingPath.isEmpty else { return "the body" }
            var text = ""
            for key in context.codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += (text.isEmpty ? "" : ".") + key.stringValue
                }
            }
            return "`" + text + "`"
        }
        switch error {
        case .typeMismatch(_, let context): return "a value of the wrong type at \(path(context))"
        case .valueNotFound(_, let context): return "null at \(path(context))"
        case .keyNotFound(let key, _): return "no `\(key.stringValue)` field"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "a body that is not valid JSON" : "an unusable value at \(path(context))"
        @unknown default: return "an undecodable body"
        }
    }
}
