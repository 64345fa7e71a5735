import HomebaseCore
import HomebaseTransport
import OllamaEmulatorKit
import Synchronization
import Testing

@testable import HomebaseEngines

/// Collects what `ChatEngine.start` pushes: the batches, then the end, awaitable.
final class CollectingSink: ChatEventSink {
    private struct State {
        var batches: [[ChatEngineEvent]] = []
        var times: [ContinuousClock.Instant] = []
        var ended: (any Error)??
        var endCount = 0
        var eventsAfterEnd = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func events(_ batch: [ChatEngineEvent]) {
        self.state.withLock { s in
            if s.ended != nil { s.eventsAfterEnd += 1 }
            s.batches.append(batch)
            s.times.append(.now)
        }
    }

    func ended(_ error: (any Error)?) {
        let waiter = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.endCount += 1
            if s.ended == nil { s.ended = .some(error) }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Waits for the end; returns the batches and the error (nil: ended normally).
    func result() async -> (batches: [[ChatEngineEvent]], error: (any Error)?) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = self.state.withLock { s -> Bool in
                if s.ended != nil { return true }
                s.waiter = c
                return false
            }
            if done { c.resume() }
        }
        return self.state.withLock { ($0.batches, $0.ended ?? nil) }
    }

    var endCount: Int { self.state.withLock { $0.endCount } }
    var batchCount: Int { self.state.withLock { $0.batches.count } }
    /// When each batch arrived.
    var times: [ContinuousClock.Instant] { self.state.withLock { $0.times } }
    var eventsAfterEnd: Int { self.state.withLock { $0.eventsAfterEnd } }
    var hasEnded: Bool { self.state.withLock { $0.ended != nil } }
}

/// `OpenAIChatEngine.start`, the pushed path the Homebase serves from: the same answers and the same errors as
/// the pulled `stream`, one batch per read, and cancellation that reaches the server.
@Suite(.timeLimit(.minutes(1))) struct ChatEnginePushTests {
    let http = HTTPClient()

    /// The emulator, with the base URL of its OpenAI surface (`…/v1`).
    func withEmulator(fault: EmulatorFault = EmulatorFault(), tokensPerSecond: Double = 5_000,
                      _ body: (OllamaEmulator, String) async throws -> Void) async throws {
        try await withOllamaEmulator({
            $0.tokensPerSecond = tokensPerSecond
            $0.fault = fault
        }) { emulator, root in try await body(emulator, root + "/v1") }
    }

    func engine(_ base: String, idle: Duration = .seconds(30), pacing: Duration? = nil) -> OpenAIChatEngine {
        OpenAIChatEngine(http: self.http, baseURL: base, apiKey: { nil }, maxTokensField: .maxTokens,
                         idleTimeout: idle, readCadence: pacing.map { HTTPReadCadence(interval: $0) })
    }

    static let request = ChatRequest(messages: [ChatMessage(role: "user", content: "why is the sky blue")])

    /// The pulled stream's events and error, for comparison.
    func pulled(_ engine: OpenAIChatEngine, model: String) async -> ([ChatEngineEvent], ChatEngineError?) {
        var events: [ChatEngineEvent] = []
        do {
            for try await event in engine.stream(model: model, request: Self.request) { events.append(event) }
            return (events, nil)
        } catch {
            return (events, error as? ChatEngineError)
        }
    }

    @Test(arguments: ["", "disconnect-after=2", "http-500", "unknown-model", "stall-after=2"])
    func pushedAndPulledAgree(_ spec: String) async throws {
        try await self.withEmulator(fault: try EmulatorFault(parsing: spec)) { _, base in
            let engine = self.engine(base, idle: .milliseconds(500))
            let (expectedEvents, expectedError) = await self.pulled(engine, model: "qwen2.5:7b")
            let sink = CollectingSink()
            _ = engine.start(model: "qwen2.5:7b", request: Self.request, sink: sink)
            let (batches, error) = await sink.result()
            #expect(batches.allSatisfy { !$0.isEmpty })
            #expect(batches.flatMap { $0 } == expectedEvents)
            #expect(error as? ChatEngineError == expectedError)
            if spec.isEmpty {
                #expect(error == nil)
                #expect(expectedEvents.last.map { if case .finished = $0 { true } else { false } } == true)
            } else {
                #expect(error != nil)
            }
            // Exactly one end, and nothing after it.
            try await Task.sleep(for: .milliseconds(50))
            #expect(sink.endCount == 1)
            #expect(sink.eventsAfterEnd == 0)
        }
    }

    @Test func refusedConnectionIsConnectFailed() async throws {
        let sink = CollectingSink()
        _ = self.engine("http://127.0.0.1:1/v1").start(model: "m", request: Self.request, sink: sink)
        let (batches, error) = await sink.result()
        #expect(batches.isEmpty)
        guard case .connectFailed? = error as? ChatEngineError else {
            Issue.record("expected connectFailed, got \(String(describing: error))")
            return
        }
    }

    @Test func errorStatusCarriesTheBackendsMessage() async throws {
        let server = SimpleHTTPServer { _, writer in
            writer.respond(status: 404, headers: [("Content-Type", "application/json")],
                           body: #"{"error":{"message":"model \"m\" not found, try pulling it first","type":"api_error"}}"#)
        }
        let port = try server.start(port: 0)
        defer { server.stop() }
        let sink = CollectingSink()
        _ = self.engine("http://127.0.0.1:\(port)/v1").start(model: "m", request: Self.request, sink: sink)
        let (_, error) = await sink.result()
        #expect(error as? ChatEngineError == .http(status: 404, message: #"model "m" not found, try pulling it first"#))
    }

    @Test func textBeforeAnErrorInTheSameReadIsDelivered() async throws {
        let (server, base) = try Self.serve(Self.chunk("a") + Self.chunk("b") + #"data: {"error":{"message":"boom"}}"# + "\n\n")
        defer { server.stop() }
        let sink = CollectingSink()
        _ = self.engine(base).start(model: "m", request: Self.request, sink: sink)
        let (batches, error) = await sink.result()
        #expect(batches == [[.text("a"), .text("b")]])
        #expect(error as? ChatEngineError == .midStream("boom"))
    }

    @Test func oneReadIsOneBatch() async throws {
        let (server, base) = try Self.serve(Self.chunk("a") + Self.chunk("b") + Self.chunk("c")
            + #"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"# + "\n\ndata: [DONE]\n\n")
        defer { server.stop() }
        let sink = CollectingSink()
        _ = self.engine(base).start(model: "m", request: Self.request, sink: sink)
        let (batches, error) = await sink.result()
        #expect(batches == [[.text("a"), .text("b"), .text("c"), .finished(.stop, nil)]])
        #expect(error == nil)
    }

    @Test func oversizedEventIsMalformed() async throws {
        let (server, base) = try Self.serve("data: " + String(repeating: "x", count: 2 * 1024 * 1024) + "\n\n")
        defer { server.stop() }
        let sink = CollectingSink()
        _ = self.engine(base).start(model: "m", request: Self.request, sink: sink)
        let (_, error) = await sink.result()
        guard case .malformed? = error as? ChatEngineError else {
            Issue.record("expected malformed, got \(String(describing: error))")
            return
        }
    }

    @Test func bodyEndingWithoutTerminatorIsMidStream() async throws {
        let (server, base) = try Self.serve(Self.chunk("a"))
        defer { server.stop() }
        let sink = CollectingSink()
        _ = self.engine(base).start(model: "m", request: Self.request, sink: sink)
        let (batches, error) = await sink.result()
        #expect(batches.flatMap { $0 } == [.text("a")])
        guard case .midStream? = error as? ChatEngineError else {
            Issue.record("expected midStream, got \(String(describing: error))")
            return
        }
    }

    /// Cancelling aborts the request at once: the server sees the client leave, the sink hears `cancelled`.
    @Test func cancelAbortsTheRequest() async throws {
        let gone = Mutex(false)
        let started = Mutex(false)
        let server = SimpleHTTPServer { _, writer in
            guard writer.startStream(status: 200, headers: [("Content-Type", "text/event-stream")]) else { return }
            _ = writer.writeChunk(Array(Self.chunk("a").utf8))
            started.withLock { $0 = true }
            gone.withLock { $0 = writer.waitForDisconnect(timeoutMs: 5_000) }
        }
        let port = try server.start(port: 0)
        defer { server.stop() }
        let sink = CollectingSink()
        let handle = self.engine("http://127.0.0.1:\(port)/v1").start(model: "m", request: Self.request, sink: sink)
        for _ in 0..<200 where !started.withLock({ $0 }) || sink.batchCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
        handle.cancel()
        let (batches, error) = await sink.result()
        #expect(batches.flatMap { $0 } == [.text("a")])
        #expect(error as? ChatEngineError == .cancelled)
        for _ in 0..<200 where !gone.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(gone.withLock { $0 })
    }

    /// Paced (as the Homebase reads): the answer is the same, in fewer reads than tokens, twice in a row; no
    /// two reads closer than half the interval, the one right after the first text included (so a coalescer
    /// with half an interval of tolerance never has to hold text on a timer).
    @Test func pacedAnswerIsWholeInFewerReadsSpacedAtLeastHalfAnInterval() async throws {
        try await self.withEmulator(tokensPerSecond: 400) { _, base in
            let engine = self.engine(base, pacing: .milliseconds(30))
            let (expected, _) = await self.pulled(self.engine(base), model: "qwen2.5:7b")
            for _ in 0..<2 {
                let sink = CollectingSink()
                _ = engine.start(model: "qwen2.5:7b", request: Self.request, sink: sink)
                let (batches, error) = await sink.result()
                #expect(error == nil)
                #expect(batches.flatMap { $0 } == expected)
                #expect(batches.count < expected.count / 2)
                let times = sink.times
                for (earlier, later) in zip(times, times.dropFirst()).dropLast() {
                    // The last batch may follow at once: the answer's end is read while draining.
                    #expect(later - earlier >= .milliseconds(15), "reads \(later - earlier) apart")
                }
            }
        }
    }

    /// Nothing of a pushed request outlives it: the handler, the transfer and the handle let go of one
    /// another, so the sink (in the Homebase, the request's whole stream state) is freed; after a complete
    /// answer, after an error, and after a cancel.
    @Test func nothingOutlivesARequest() async throws {
        try await self.withEmulator(tokensPerSecond: 2_000) { _, base in
            let engine = self.engine(base, pacing: .milliseconds(30))
            for spec in ["", "http-500", "stall-after=1"] {
                weak var weakSink: CollectingSink?
                do {
                    var request = Self.request
                    if !spec.isEmpty { request.messages = [ChatMessage(role: "user", content: "hi [[fault:\(spec)]]")] }
                    let sink = CollectingSink()
                    weakSink = sink
                    let handle = engine.start(model: "qwen2.5:7b", request: request, sink: sink)
                    if spec.hasPrefix("stall") {
                        for _ in 0..<200 where sink.batchCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
                        handle.cancel()
                    }
                    _ = await sink.result()
                }
                for _ in 0..<200 where weakSink != nil { try await Task.sleep(for: .milliseconds(5)) }
                #expect(weakSink == nil, "the sink of '\(spec)' is still referenced")
            }
        }
    }

    static func serve(_ body: String) throws -> (SimpleHTTPServer, String) {
        let server = SimpleHTTPServer { _, writer in
            writer.respond(status: 200, headers: [("Content-Type", "text/event-stream")], body: body)
        }
        let port = try server.start(port: 0)
        return (server, "http://127.0.0.1:\(port)/v1")
    }

    static func chunk(_ text: String) -> String {
        #"data: {"choices":[{"index":0,"delta":{"content":"\#(text)"},"finish_reason":null}]}"# + "\n\n"
    }
}
