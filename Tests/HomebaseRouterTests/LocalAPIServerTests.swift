import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseRouter

#if canImport(Glibc)
import Glibc
#endif

// `serve` (issue 36) with a fake device behind it: the router's real providers (FallbackProvider, the relay
// client on a loopback hub), the real HTTP server, and raw sockets as the apps.

/// A device for the server: one provider, one route, every chat run as `DeviceSession.chat` runs it.
final class FakeServeBackend: LocalAPIBackend {
    let provider: any LLMProvider
    let route: RouteResolution

    init(_ provider: any LLMProvider, route: RouteResolution = RouteResolution(route: .external, model: "qwen2.5:7b")) {
        self.provider = provider
        self.route = route
    }

    func resolution() -> RouteResolution { self.route }

    func localAPIModels(nowMs: UInt64) -> [LocalAPIModel] {
        [LocalAPIModel(id: "qwen2.5:7b", ownedBy: "homebase", loaded: true), LocalAPIModel(id: "floor", ownedBy: "device")]
    }

    func chat(_ request: ChatRequest, model: String?, onEvent: (@Sendable (ChatStreamEvent) -> Void)?,
              onProvider: (@Sendable (RouteResolution, any LLMProvider) -> Void)?) async -> ChatAnswer {
        onProvider?(self.route, self.provider)
        var final: ChatResult?
        for await event in self.provider.stream(request) {
            onEvent?(event)
            if case .done(let result) = event { final = result }
        }
        return ChatAnswer(resolution: self.route, result: final ?? FloorProvider().answer(request))
    }
}

/// Streams `count` texts `everyMs` apart; records when its consumer went away.
struct DrippingProvider: LLMProvider {
    let kind = ProviderKind.remote
    var count = 1_000
    var everyMs = 20
    let cancelled = Box<ContinuousClock.Instant?>(nil)

    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        throw ProviderError(.offline)
    }

    func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let (count, everyMs, cancelled) = (self.count, self.everyMs, self.cancelled)
        return AsyncStream { continuation in
            let task = Task {
                for i in 0..<count {
                    continuation.yield(.text("t\(i) "))
                    do { try await Task.sleep(for: .milliseconds(everyMs)) } catch { return }
                }
                continuation.yield(.done(ChatResult(text: "dripped", providerKind: .remote, model: "qwen2.5:7b")))
                continuation.finish()
            }
            continuation.onTermination = { reason in
                if case .cancelled = reason { cancelled.set(.now) }
                task.cancel()
            }
        }
    }
}

/// Holds each stream until `expected` streams run at once (or 10 s pass), then answers; records how many met.
struct GatheringProvider: LLMProvider {
    let kind = ProviderKind.remote
    let expected: Int
    let running = Box(0)
    let gathered = Box(0)

    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult { throw ProviderError(.offline) }

    func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let (expected, running, gathered) = (self.expected, self.running, self.gathered)
        return AsyncStream { continuation in
            Task {
                running.update { $0 += 1 }
                let deadline = ContinuousClock.now + .seconds(10)
                while running.get < expected && ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(5))
                }
                gathered.set(running.get)
                continuation.yield(.text("all \(running.get) here"))
                continuation.yield(.done(ChatResult(text: "all here", providerKind: .remote, model: "qwen2.5:7b")))
                continuation.finish()
            }
        }
    }
}

final class Box<T: Sendable>: Sendable {
    private let value: Mutex<T>
    init(_ value: T) { self.value = Mutex(value) }
    func set(_ v: T) { self.value.withLock { $0 = v } }
    func update(_ body: (inout T) -> Void) { self.value.withLock { body(&$0) } }
    var get: T { self.value.withLock { $0 } }
}

/// A raw HTTP/1.1 client on one socket: what an app (or an attacker) sends, byte for byte.
final class RawHTTP: @unchecked Sendable {
    let fd: Int32

    init(port: UInt16) throws {
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else { throw IntegrationError("connect failed") }
    }

    func send(_ text: String) { self.send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until `marker` shows up, the peer closes, or `timeoutMs` passes.
    func read(until marker: String? = nil, timeoutMs: Int = 5_000) -> String {
        var data: [UInt8] = []
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while ContinuousClock.now < deadline {
            if let marker, String(decoding: data, as: UTF8.self).contains(marker) { break }
            var p = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }

    func close() { Glibc.close(self.fd) }

    /// One request, its whole response read (the connection is closed by `Connection: close`).
    static func exchange(_ port: UInt16, _ request: String, timeoutMs: Int = 5_000) throws -> String {
        let c = try RawHTTP(port: port)
        defer { c.close() }
        c.send(request)
        return c.read(timeoutMs: timeoutMs)
    }

    static func post(_ path: String, _ body: String, headers: String = "") -> String {
        "POST \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\(headers)Content-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }
}

/// Runs blocking socket work on a thread of its own: the chat tasks of the server under test need the
/// cooperative pool, which a blocked test would starve (2 cores: 2 pool threads).
func io<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }.start()
    }
}

struct IntegrationError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { self.description = d }
}

@Suite(.timeLimit(.minutes(1))) struct LocalAPIServerTests {
    /// `RawHTTP.exchange` off the cooperative pool.
    func x(_ port: UInt16, _ request: String) async throws -> String {
        try await io { try RawHTTP.exchange(port, request) }
    }

    static let hi = #"{"model":"auto","messages":[{"role":"user","content":"hi"}],"stream":true}"#

    func server(_ backend: any LocalAPIBackend, token: String? = nil,
                configure: (inout LocalAPIServer.Options) -> Void = { _ in }) throws -> (LocalAPIServer, UInt16) {
        var invocation = ServeInvocation(port: 0)
        invocation.token = token
        var options = LocalAPIServer.Options(tool: "handset", invocation: invocation)
        configure(&options)
        let server = LocalAPIServer(backend: backend, options: options)
        return (server, try server.start())
    }

    @Test func streamedAnswerWithRouteHeadersAndTheHomebaseObject() async throws {
        let (server, port) = try self.server(FakeServeBackend(FallbackProvider(
            primary: FakeProvider(kind: .remote, model: "qwen2.5:7b", chunks: ["hel", "lo"]), fallback: FloorProvider())))
        defer { server.stop() }
        let response = try await x(port, RawHTTP.post("/v1/chat/completions", Self.hi))
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(response.contains("Content-Type: text/event-stream\r\n"))
        #expect(response.contains("X-Homebase-Route: external\r\n") && response.contains("X-Homebase-Provider: remote\r\n"))
        #expect(!response.contains("X-Homebase-Fallback"))
        #expect(!response.contains("Access-Control"))
        #expect(response.contains(#""delta":{"content":"hel"}"#) && response.contains(#""delta":{"content":"lo"}"#))
        #expect(response.contains(#""homebase":{"route":"external","provider":"remote","model":"qwen2.5:7b","fallback":null}"#))
        #expect(response.contains("data: [DONE]\n\n"))
    }

    /// The primary fails before any output: the head names the fallback that answers, not the primary.
    @Test func fallbackBeforeOutputNamesTheAnsweringProviderInTheHead() async throws {
        let failing = FakeProvider(kind: .remote, model: "qwen2.5:7b", failure: ProviderError(.offline), chunks: [])
        let (server, port) = try self.server(FakeServeBackend(FallbackProvider(primary: failing, fallback: FloorProvider())))
        defer { server.stop() }
        let response = try await x(port, RawHTTP.post("/v1/chat/completions", Self.hi))
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(response.contains("X-Homebase-Provider: on-device\r\n"))
        #expect(response.contains("X-Homebase-Fallback: offline\r\n"))
        #expect(response.contains(#""fallback":{"from":"remote","reason":"offline"}"#))
        // Not streamed: one chat.completion, headers from the result.
        let whole = try await x(port, RawHTTP.post("/v1/chat/completions",
                                                             #"{"messages":[{"role":"user","content":"hi"}]}"#))
        #expect(whole.contains("Content-Type: application/json\r\n") && whole.contains("X-Homebase-Fallback: offline\r\n"))
        #expect(whole.contains(#""object":"chat.completion""#) && whole.contains(#""provider":"on-device""#))
        // Ollama's NDJSON, the same route.
        let ndjson = try await x(port, RawHTTP.post("/api/chat", #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"hi"}]}"#))
        #expect(ndjson.contains("Content-Type: application/x-ndjson\r\n") && ndjson.contains("X-Homebase-Fallback: offline\r\n"))
        #expect(ndjson.contains(#""done":false}"#) && ndjson.contains(#""done":true"#))
    }

    /// An app closing its connection mid-stream cancels the upstream request: the provider's stream is
    /// terminated within a second.
    @Test func disconnectMidStreamCancelsTheProviderWithinASecond() async throws {
        let dripping = DrippingProvider()
        let (server, port) = try self.server(FakeServeBackend(FallbackProvider(primary: dripping, fallback: FloorProvider())))
        defer { server.stop() }
        let (seen, closed) = try await io {
            let app = try RawHTTP(port: port)
            app.send(RawHTTP.post("/v1/chat/completions", Self.hi))
            let seen = app.read(until: "t3 ")
            app.close()
            return (seen, ContinuousClock.now)
        }
        #expect(seen.contains("t3 "))
        #expect(await eventually(timeoutMs: 2_000) { dripping.cancelled.get != nil })
        let at = try #require(dripping.cancelled.get)
        #expect(at - closed < .seconds(1))
    }

    /// The same through the real relay client: the Homebase gets `infer.cancel` within a second.
    @Test func disconnectSendsInferCancelToTheHomebase() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "half "), ScriptedHost.chunk(r, 1, "way ")] }
        defer { rig.stop() }
        let long = InferenceClientStateMachine.Watchdogs(acceptMs: 10_000, firstOutputMs: 10_000, stallMs: 10_000)
        let (server, port) = try self.server(FakeServeBackend(rig.remote(ladder: long)))
        defer { server.stop() }
        let app = try RawHTTP(port: port)
        app.send(RawHTTP.post("/api/chat", #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"hi"}]}"#))
        #expect(try await io { app.read(until: "way ") }.contains("way "))
        #expect(rig.host.cancels.isEmpty)
        app.close()
        #expect(await eventually(timeoutMs: 1_000) { rig.host.cancels.count == 1 })
        #expect(rig.host.cancels == rig.host.requests.map(\.id))
    }

    @Test func hostileInputIsRefusedWhileAnAnswerKeepsFlowing() async throws {
        let dripping = DrippingProvider(count: 60, everyMs: 25)
        let (server, port) = try self.server(FakeServeBackend(FallbackProvider(primary: dripping, fallback: FloorProvider())),
                                             token: "sk-test") { $0.requestTimeoutMs = 600 }
        defer { server.stop() }
        let auth = "Authorization: Bearer sk-test\r\n"
        let app = try RawHTTP(port: port)
        defer { app.close() }
        app.send(RawHTTP.post("/v1/chat/completions", Self.hi, headers: auth))
        #expect(try await io { app.read(until: "t1 ") }.contains("t1 "))

        let big = String(repeating: "x", count: (1 << 20) + 10)
        let oversized = try await x(port, RawHTTP.post("/v1/chat/completions", big, headers: auth))
        #expect(oversized.hasPrefix("HTTP/1.1 413") && oversized.contains(#""code":"request_too_large""#))
        let malformed = try await x(port, RawHTTP.post("/v1/chat/completions", "{\"messages\":[", headers: auth))
        #expect(malformed.hasPrefix("HTTP/1.1 400") && malformed.contains(#""type":"invalid_request_error""#))
        let wrongToken = try await x(port, RawHTTP.post("/v1/chat/completions", Self.hi,
                                                                 headers: "Authorization: Bearer sk-nope\r\n"))
        #expect(wrongToken.hasPrefix("HTTP/1.1 401") && wrongToken.contains(#""code":"invalid_api_key""#))
        let noToken = try await x(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        #expect(noToken.hasPrefix("HTTP/1.1 401"))
        let foreign = try await x(port, "GET /v1/models HTTP/1.1\r\nHost: evil.example\r\n\(auth)Connection: close\r\n\r\n")
        #expect(foreign.hasPrefix("HTTP/1.1 403") && foreign.contains(#""code":"host_not_allowed""#))
        let bigHead = try await x(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Junk: "
                                           + String(repeating: "j", count: 20_000) + "\r\n\r\n")
        #expect(bigHead.hasPrefix("HTTP/1.1 431"))
        let unknown = try await x(port, "GET /v1/embeddings HTTP/1.1\r\nHost: localhost\r\n\(auth)Connection: close\r\n\r\n")
        #expect(unknown.hasPrefix("HTTP/1.1 404"))
        let method = try await x(port, "GET /api/chat HTTP/1.1\r\nHost: localhost\r\n\(auth)Connection: close\r\n\r\n")
        #expect(method.hasPrefix("HTTP/1.1 405"))
        // Slowloris: a head dribbled a byte at a time is cut off at the request deadline.
        let (late, took) = try await io {
            let slow = try RawHTTP(port: port)
            defer { slow.close() }
            let started = ContinuousClock.now
            var answer = ""
            for byte in "GET /v1/models HTTP/1.1\r\nHost: loc".utf8 {
                slow.send([byte])
                answer += slow.read(timeoutMs: 40)
                if !answer.isEmpty || ContinuousClock.now - started > .seconds(3) { break }
            }
            answer += slow.read(timeoutMs: 2_000)
            return (answer, ContinuousClock.now - started)
        }
        #expect(took < .seconds(3))
        #expect(late.hasPrefix("HTTP/1.1 408") && late.contains(#""code":"request_timeout""#))
        // The first answer kept flowing through all of it, to its end.
        let rest = try await io { app.read(until: "[DONE]", timeoutMs: 10_000) }
        #expect(rest.contains("t59 ") && rest.contains("data: [DONE]"))
    }

    /// Several apps at once: each its own stream, each whole, none waiting for another. The provider holds every
    /// stream until all six are running: a server that took one chat at a time would never get there.
    @Test func severalAppsStreamAtOnce() async throws {
        let gathering = GatheringProvider(expected: 6)
        let (server, port) = try self.server(FakeServeBackend(FallbackProvider(primary: gathering, fallback: FloorProvider())))
        defer { server.stop() }
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<6 {
                group.addTask {
                    let path = i % 2 == 0 ? "/v1/chat/completions" : "/api/chat"
                    return try await self.x(port, RawHTTP.post(path, Self.hi))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 6)
        #expect(gathering.gathered.get == 6, "only \(gathering.gathered.get) streams ran at once")
        for answer in answers {
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(answer.contains("all 6 here"))
            #expect(answer.contains("data: [DONE]") || answer.contains(#""done":true"#))
        }
    }

    /// Connections are bounded: one over the limit gets a 503 in the API's shape, and the held ones still work.
    @Test func connectionsAreBounded() async throws {
        let (server, port) = try self.server(FakeServeBackend(FloorProvider())) { $0.maxConnections = 2 }
        defer { server.stop() }
        let held = try (0..<2).map { _ in try RawHTTP(port: port) }
        defer { held.forEach { $0.close() } }
        held[0].send("GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(try await io { held[0].read(until: "]}") }.hasPrefix("HTTP/1.1 200"))
        let refused = try await x(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        #expect(refused.hasPrefix("HTTP/1.1 503") && refused.contains(#""code":"too_many_connections""#))
        held[1].send("GET /api/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        #expect(try await io { held[1].read() }.contains(#""version""#))
    }

    @Test func modelsAndOllamaListings() async throws {
        let (server, port) = try self.server(FakeServeBackend(FloorProvider()))
        defer { server.stop() }
        let get = { (path: String) async throws -> String in
            try await self.x(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        }
        let models = try await get("/v1/models")
        #expect(models.contains(#""object":"list""#) && models.contains(#"{"id":"qwen2.5:7b","object":"model""#))
        #expect(models.contains(#""owned_by":"homebase""#) && models.contains(#""owned_by":"device""#))
        #expect(try await get("/v1/models/qwen2.5:7b").contains(#""id":"qwen2.5:7b""#))
        #expect(try await get("/v1/models/nope").hasPrefix("HTTP/1.1 404"))
        #expect(try await get("/api/tags").contains(#""name":"qwen2.5:7b""#))
        #expect(try await get("/api/ps").contains(#""name":"qwen2.5:7b""#))
        #expect(try await get("/api/version").contains(#""version":"#))
        let show = try await x(port, RawHTTP.post("/api/show", #"{"model":"floor"}"#))
        #expect(show.hasPrefix("HTTP/1.1 200") && show.contains(#""capabilities""#))
        let warm = try await x(port, RawHTTP.post("/api/chat", #"{"model":"qwen2.5:7b"}"#))
        #expect(warm.hasPrefix("HTTP/1.1 200") && warm.contains(#""done_reason":"load","done":true"#))
        let missing = try await x(port, RawHTTP.post("/api/show", #"{"model":"nope"}"#))
        #expect(missing.hasPrefix("HTTP/1.1 404") && missing.contains(#"{"error":"model 'nope' not found"}"#))
    }

    /// Tools never go to a Homebase: refused on an external route, passed on a cloud route.
    @Test func toolsAreRefusedUnlessTheRouteCanTakeThem() async throws {
        let body = #"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#
        let (external, port) = try self.server(FakeServeBackend(FloorProvider()))
        let refused = try await x(port, RawHTTP.post("/v1/chat/completions", body))
        external.stop()
        #expect(refused.hasPrefix("HTTP/1.1 400") && refused.contains(#""code":"tools_not_supported""#))
        #expect(refused.contains("never cross"))
        let cloud = FakeServeBackend(FakeProvider(kind: .openai, model: "gpt-4o-mini", chunks: ["ok"]),
                                     route: RouteResolution(route: .openai, model: "gpt-4o-mini"))
        let (server, port2) = try self.server(cloud)
        defer { server.stop() }
        let passed = try await x(port2, RawHTTP.post("/v1/chat/completions", body))
        #expect(passed.hasPrefix("HTTP/1.1 200") && passed.contains("X-Homebase-Provider: openai\r\n"))
    }

    @Test func corsOnlyForTheConfiguredOrigin() async throws {
        let (server, port) = try self.server(FakeServeBackend(FloorProvider())) {
            $0.invocation.corsOrigin = "http://localhost:3000"
        }
        defer { server.stop() }
        let preflight = try await x(port, "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                                             + "Origin: http://localhost:3000\r\nConnection: close\r\n\r\n")
        #expect(preflight.hasPrefix("HTTP/1.1 204") && preflight.contains("Access-Control-Allow-Origin: http://localhost:3000"))
        let other = try await x(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n"
                                         + "Connection: close\r\n\r\n")
        #expect(other.hasPrefix("HTTP/1.1 200") && !other.contains("Access-Control"))
    }
}

@Suite struct LocalAPIResponderTests {
    func responder(stream: Bool = true, flavor: LocalAPIFlavor = .openAI) -> LocalAPIResponder {
        LocalAPIResponder(flavor: flavor, stream: stream, includeUsage: true, id: "c", created: 1, createdAt: "t",
                          requestedModel: nil)
    }

    func header(_ outputs: [LocalAPIResponder.Output], _ name: String) -> String? {
        for case .head(_, let headers, _) in outputs { return headers.first { $0.name == name }?.value }
        return nil
    }

    let external = RouteResolution(route: .external, model: "qwen2.5:7b")
    let remote = FallbackProvider(primary: FakeProvider(kind: .remote, model: "m"), fallback: FloorProvider())

    @Test func headWaitsForTheFirstOutput() {
        var r = self.responder()
        #expect(r.start(self.external, provider: self.remote).isEmpty)
        #expect(r.event(.queued(position: 1)).isEmpty)
        let out = r.event(.text("a"))
        #expect(out.count == 2)
        #expect(self.header(out, "X-Homebase-Provider") == "remote" && self.header(out, "X-Homebase-Route") == "external")
        #expect(self.header(out, "X-Homebase-Fallback") == nil)
        if case .head(_, _, let withFirst) = out[0] { #expect(withFirst) }
        #expect(r.event(.text("b")).count == 1)
    }

    @Test func aRoutedFallbackSendsTheHeadAtOnce() {
        var r = self.responder()
        let routed = RoutedFallbackProvider(base: FloorProvider(), annotation: Fallback(from: .remote, reason: .staleAdvert))
        let out = r.start(self.external, provider: routed)
        #expect(self.header(out, "X-Homebase-Provider") == "on-device")
        #expect(self.header(out, "X-Homebase-Fallback") == "stale_advert")
        if case .head(_, _, let withFirst) = out[0] { #expect(!withFirst) }
    }

    @Test func aFallbackAfterOutputKeepsTheHeadAndSaysSoInTheLastChunk() {
        var r = self.responder()
        _ = r.start(self.external, provider: self.remote)
        _ = r.event(.text("half"))
        let restart = r.event(.restart(.stall))
        #expect(restart.count == 1)
        #expect(r.event(.fallingBack(Fallback(from: .remote, reason: .stall), provider: .onDevice)).isEmpty)
        var result = ChatResult(text: "whole", providerKind: .onDevice, model: "floor")
        result.fallback = Fallback(from: .remote, reason: .stall)
        let last = r.event(.done(result))
        guard case .chunk(let bytes) = last.first else { Issue.record("no last chunk"); return }
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains(#""provider":"on-device""#) && text.contains(#""reason":"stall""#))
        #expect(text.hasSuffix("data: [DONE]\n\n") && text.contains(#""usage""#))
        #expect(r.event(.text("late")).isEmpty)
    }

    @Test func reasoningMapsToEachAPIsField() {
        var o = self.responder()
        guard case .chunk(let a) = o.event(.reasoning("hmm")).last else { Issue.record("no chunk"); return }
        #expect(String(decoding: a, as: UTF8.self).contains(#""reasoning_content":"hmm""#))
        var l = self.responder(flavor: .ollama)
        guard case .chunk(let b) = l.event(.reasoning("hmm")).last else { Issue.record("no chunk"); return }
        #expect(String(decoding: b, as: UTF8.self).contains(#""thinking":"hmm""#))
    }

    @Test func aWholeAnswerTakesItsHeadersFromTheResult() {
        var r = self.responder(stream: false)
        _ = r.start(self.external, provider: self.remote)
        #expect(r.event(.text("a")).isEmpty)
        var result = ChatResult(text: "a", providerKind: .onDevice, model: "floor")
        result.fallback = Fallback(from: .remote, reason: .offline)
        guard case .whole(200, let headers, let body)? = r.event(.done(result)).first else { Issue.record("no body"); return }
        #expect(headers.contains(HTTPHeaderField(name: "X-Homebase-Fallback", value: "offline")))
        #expect(String(decoding: body, as: UTF8.self).contains(#""object":"chat.completion""#))
    }
}
