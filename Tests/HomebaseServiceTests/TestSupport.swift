import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import HomebaseNode
import HomebaseStore
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseService

/// A fresh directory under the system temp dir, removed when the value is deinitialised.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        self.path = FileManager.default.temporaryDirectory
            .appendingPathComponent("homebase-service-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: false)
    }

    func file(_ name: String) -> String { self.path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: self.path) }
}

/// A clock the test moves by hand (ms), for both the wall and the monotonic reading.
final class ManualClock: Sendable {
    private let now: Mutex<UInt64>

    init(_ start: UInt64 = 1_800_000_000_000) { self.now = Mutex(start) }

    var value: UInt64 { self.now.withLock { $0 } }
    func advance(ms: UInt64) { self.now.withLock { $0 += ms } }

    /// Real sleeping (only coalescer flush timers sleep, for a few ms), fixed time.
    var serviceClock: ServiceClock {
        ServiceClock(nowMs: { self.value }, monotonicMs: { self.value })
    }
}

/// A deterministic test key.
func testKey(_ byte: UInt8) -> PublicKey { PublicKey(bytes: [UInt8](repeating: byte, count: 32))! }

/// Polls `condition` until it holds or `timeout` passes; records an issue on timeout.
@discardableResult
func eventually(_ what: String = "condition", timeout: Duration = .seconds(5),
                sourceLocation: SourceLocation = #_sourceLocation,
                _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
    return false
}

// MARK: Fakes

/// A runtime status source the test sets by hand.
final class FakeRuntime: RuntimeStatusSource {
    private let status: Mutex<RuntimeStatus>
    private let reverifications = Atomic<Int>(0)
    let changes: AsyncStream<RuntimeStatus>
    private let continuation: AsyncStream<RuntimeStatus>.Continuation

    init(_ status: RuntimeStatus = FakeRuntime.up()) {
        self.status = Mutex(status)
        (self.changes, self.continuation) = AsyncStream.makeStream()
    }

    var current: RuntimeStatus { self.status.withLock { $0 } }
    var reverifyCount: Int { self.reverifications.load(ordering: .relaxed) }
    func reverifySoon() { self.reverifications.add(1, ordering: .relaxed) }
    private let pins = Mutex<[String]?>(nil)
    /// The last `setPinnedModels`, nil before any.
    var pinned: [String]? { self.pins.withLock { $0 } }
    func setPinnedModels(_ tags: [String]) { self.pins.withLock { $0 = tags } }

    /// Changes the status and reports the change.
    func set(_ status: RuntimeStatus) {
        self.status.withLock { $0 = status }
        self.continuation.yield(status)
    }

    static func model(_ tag: String, loaded: Bool = true, capabilities: [String] = ["completion"])
        -> RuntimeModelInfo
    {
        RuntimeModelInfo(tag: tag, family: "qwen2", parameterSize: "7.6B", quantization: "Q4_K_M",
                         capabilities: capabilities, contextLength: 32768, loaded: loaded)
    }

    static func up(_ models: [RuntimeModelInfo] = [FakeRuntime.model("qwen2.5:7b")]) -> RuntimeStatus {
        RuntimeStatus(endpoint: "http://127.0.0.1:11434", verified: true, available: true, version: "0.5.1",
                      models: models, checkedAtMs: 1)
    }

    static func down() -> RuntimeStatus {
        RuntimeStatus(endpoint: "http://127.0.0.1:11434", verified: true, available: false, version: nil,
                      models: [], checkedAtMs: 2, lastError: "connection refused")
    }
}

/// A counting semaphore for pacing the fake engine.
final class Gate: Sendable {
    private struct State {
        var permits = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func open(_ count: Int = 1) {
        let resumed = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.permits += count
            let n = min(s.permits, s.waiters.count)
            s.permits -= n
            let out = Array(s.waiters.prefix(n))
            s.waiters.removeFirst(n)
            return out
        }
        for c in resumed { c.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = self.state.withLock { s -> Bool in
                if s.permits > 0 {
                    s.permits -= 1
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if ready { c.resume() }
        }
    }
}

/// A chat engine that plays a script for every call.
final class FakeEngine: ChatEngine {
    enum Step: Sendable {
        case text(String)
        /// Several pieces from one read of the runtime: one batch from `batches`, one event each from `stream`.
        case read([String])
        case finish(FinishReason, Usage?)
        case fail(ChatEngineError)
        /// Waits for one `gate.open()`.
        case waitForGate
        /// Waits until the consumer goes away.
        case hang
    }

    let gate = Gate()
    private let script: Mutex<[Step]>
    private let callCount = Atomic<Int>(0)
    private let cancelledCount = Atomic<Int>(0)
    private let lastCall = Mutex<(model: String, request: ChatRequest)?>(nil)

    init(_ script: [Step] = FakeEngine.answer(["Hello", ", ", "world"])) {
        self.script = Mutex(script)
    }

    static func answer(_ pieces: [String], usage: Usage? = Usage(promptTokens: 7, completionTokens: 3)) -> [Step] {
        pieces.map { .text($0) } + [.finish(.stop, usage)]
    }

    func setScript(_ script: [Step]) { self.script.withLock { $0 = script } }
    var calls: Int { self.callCount.load(ordering: .relaxed) }
    /// Streams whose consumer went away before the script ended.
    var cancellations: Int { self.cancelledCount.load(ordering: .relaxed) }
    var last: (model: String, request: ChatRequest)? { self.lastCall.withLock { $0 } }

    func stream(model: String, request: ChatRequest) -> AsyncThrowingStream<ChatEngineEvent, any Error> {
        let batches = self.batches(model: model, request: request)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await batch in batches { for event in batch { continuation.yield(event) } }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// As the Homebase's engine does: the events of each read pushed to the sink, from another task.
    func start(model: String, request: ChatRequest, sink: any ChatEventSink) -> ChatStreamHandle {
        let batches = self.batches(model: model, request: request)
        let task = Task {
            do {
                for try await batch in batches { sink.events(batch) }
                sink.ended(nil)
            } catch {
                sink.ended(error)
            }
        }
        return ChatStreamHandle { task.cancel() }
    }

    func batches(model: String, request: ChatRequest) -> AsyncThrowingStream<[ChatEngineEvent], any Error> {
        self.callCount.add(1, ordering: .relaxed)
        self.lastCall.withLock { $0 = (model, request) }
        let steps = self.script.withLock { $0 }
        let gate = self.gate
        return AsyncThrowingStream { continuation in
            let task = Task {
                for step in steps {
                    switch step {
                    case .text(let t): continuation.yield([.text(t)])
                    case .read(let pieces): continuation.yield(pieces.map { .text($0) })
                    case .finish(let reason, let usage):
                        continuation.yield([.finished(reason, usage)])
                        continuation.finish()
                        return
                    case .fail(let error):
                        continuation.finish(throwing: error)
                        return
                    case .waitForGate:
                        await gate.wait()
                    case .hang:
                        while !Task.isCancelled { try? await Task.sleep(for: .seconds(60)) }
                        return
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { reason in
                if case .cancelled = reason { self.cancelledCount.add(1, ordering: .relaxed) }
                task.cancel()
            }
        }
    }
}

/// Collects what one loopback endpoint receives.
final class Inbox: Sendable {
    private let received = Mutex<[InboundMessage]>([])

    /// Reads `messenger.inbound` until the messenger is gone (the task holds the stream, not the messenger, so
    /// the messenger's release ends it).
    init(_ messenger: LoopbackMessenger) {
        let inbound = messenger.inbound
        Task { [self] in
            for await m in inbound { self.received.withLock { $0.append(m) } }
        }
    }

    var all: [InboundMessage] { self.received.withLock { $0 } }
    var messages: [Message] { self.all.map(\.message) }

    /// Waits until a message satisfies `match`, and returns it.
    func first(_ what: String = "message", timeout: Duration = .seconds(5),
               sourceLocation: SourceLocation = #_sourceLocation,
               where match: @escaping (Message) -> Bool) async -> Message? {
        await eventually(what, timeout: timeout, sourceLocation: sourceLocation) {
            self.messages.contains(where: match)
        }
        return self.messages.first(where: match)
    }

    /// The messages for inference request `id`, in arrival order.
    func inference(_ id: String) -> [Message] {
        self.messages.filter { m in
            switch m {
            case .inferAccept(let a): a.id == id
            case .inferQueued(let q): q.id == id
            case .inferChunk(let c): c.id == id
            case .inferDone(let d): d.id == id
            case .inferError(let e): e.id == id
            default: false
            }
        }
    }

    /// Waits for the terminal message (done or error) of `id`, and returns all its messages.
    func finished(_ id: String, sourceLocation: SourceLocation = #_sourceLocation) async -> [Message] {
        await eventually("end of \(id)", sourceLocation: sourceLocation) {
            self.inference(id).contains { m in
                if case .inferDone = m { return true }
                if case .inferError = m { return true }
                return false
            }
        }
        return self.inference(id)
    }
}

extension Message {
    var errorCode: String? {
        if case .inferError(let e) = self { return e.code }
        return nil
    }
}

// MARK: Harness

/// A Homebase daemon on a loopback hub, with a fake runtime and engine, driven by the test.
final class Harness: Sendable {
    let directoryOnDisk: TemporaryDirectory
    let state: HomebaseState
    let identity: SigningSecretKey
    let hub: LoopbackMessengerHub
    let directory: PeerDirectory
    let messenger: LoopbackMessenger
    let runtime: FakeRuntime
    let engine: FakeEngine
    let clock: ManualClock
    let daemon: HomebaseDaemon
    let ticks: AsyncStream<Void>.Continuation
    /// A replay set on the state database that commits without syncing, the daemon's to sync (`unsyncedSeen`).
    let seen: SeenMessageStore?
    private let runTask = Mutex<Task<Void, Never>?>(nil)

    init(runtime: FakeRuntime = FakeRuntime(), engine: FakeEngine = FakeEngine(),
         limits: InferenceLimits = InferenceLimits(), maxConcurrent: Int = 4, maxQueued: Int = 16,
         runtimeParallel: Int? = nil, readCadence: HTTPReadCadence? = nil, unsyncedSeen: Bool = false) throws {
        self.directoryOnDisk = try TemporaryDirectory()
        self.clock = ManualClock()
        self.state = try HomebaseState(path: self.directoryOnDisk.file("state.db"))
        var settings = HomebaseSettings(relayURL: "ws://127.0.0.1:1/v1", deviceName: "desk")
        settings.maxConcurrentRequests = maxConcurrent
        settings.maxQueuedRequests = maxQueued
        // The fake engine runs any number at once: unless a test says otherwise, as many as admitted.
        settings.runtimeParallel = runtimeParallel ?? maxConcurrent
        try self.state.initialize(settings: settings, nowMs: self.clock.value)
        self.identity = try self.state.deviceKey()
        self.hub = LoopbackMessengerHub(clock: { [clock] in clock.value })
        self.directory = PeerDirectory(selfKey: self.identity.publicKey, roster: try self.state.currentRoster())
        self.messenger = self.hub.messenger(for: self.identity.publicKey, relation: self.directory.relationLookup)
        self.runtime = runtime
        self.engine = engine
        let (ticks, continuation) = AsyncStream<Void>.makeStream()
        self.ticks = continuation
        self.seen = unsyncedSeen ? try SeenMessageStore(database: self.state.database, syncsEveryCommit: false) : nil
        self.daemon = HomebaseDaemon(
            state: self.state, identity: self.identity, directory: self.directory, messenger: self.messenger,
            runtime: runtime, engine: engine, readCadence: readCadence, seen: self.seen,
            configuration: .init(heartbeat: .ticks(ticks), statePollInterval: .milliseconds(20), limits: limits),
            clock: self.clock.serviceClock)
    }

    var homebase: PublicKey { self.identity.publicKey }
    var accountKey: PublicKey { get throws { try #require(try self.state.accountKey()).publicKey } }

    /// Starts the daemon without waiting for it (the start-up race tests).
    func start() {
        let daemon = self.daemon
        self.runTask.withLock { $0 = Task { await daemon.run() } }
    }

    /// Starts the daemon and returns once it serves requests where they arrive (its inline handler is in). A
    /// request sent earlier waits on `inbound` and is served after later ones, so which request was busy or
    /// queued was a race, which a slow run (tools/test --sanitize address) lost.
    func startServing() async {
        self.start()
        await eventually("the daemon serving") { self.messenger.hasInlineHandler }
    }

    /// Stops the daemon and waits for `run()` to return.
    func stop() async {
        await self.daemon.stop()
        await self.runTask.withLock { $0 }?.value
    }

    /// A device on the hub that treats the Homebase as its sibling, with its inbox.
    func device(_ byte: UInt8) -> (key: PublicKey, messenger: LoopbackMessenger, inbox: Inbox) {
        let key = testKey(byte)
        let homebase = self.homebase
        let m = self.hub.messenger(for: key, relation: { $0 == homebase ? .sibling : .stranger })
        return (key, m, Inbox(m))
    }

    /// A device paired through the real flow (code, `pair.request`, `pair.accept`).
    func pairedHandset(_ byte: UInt8, name: String = "phone") async throws
        -> (key: PublicKey, messenger: LoopbackMessenger, inbox: Inbox)
    {
        let handset = self.device(byte)
        let code = try PairingCode.parse(
            self.daemon.pairing.createPairingCode(relayURL: "ws://127.0.0.1:1/v1", nowMs: self.clock.value))
        handset.messenger.send(.pairRequest(secret: code.secretHex, name: name), to: self.homebase,
                               channel: .sibling, store: false)
        _ = await handset.inbox.first("pair.accept") { if case .pairAccept = $0 { true } else { false } }
        return handset
    }

    /// A device added to the roster directly (no daemon needed), as pairing would.
    func enrolledHandset(_ byte: UInt8, name: String = "phone") throws
        -> (key: PublicKey, messenger: LoopbackMessenger, inbox: Inbox)
    {
        let handset = self.device(byte)
        let code = try PairingCode.parse(
            self.daemon.pairing.createPairingCode(relayURL: "ws://127.0.0.1:1/v1", nowMs: self.clock.value))
        guard case .accepted(let roster) = try self.daemon.pairing.redeem(
            sender: handset.key, secret: code.secretHex, name: name, nowMs: self.clock.value)
        else { throw HomebaseStateError.corrupt("pairing refused") }
        self.directory.update(roster: roster)
        return handset
    }

    /// Sends an inference request from `device`.
    func request(_ id: String, from device: LoopbackMessenger, model: String = "qwen2.5:7b",
                 messages: [ChatMessage] = [.user("hi")], channel: Channel = .sibling, hasTools: Bool = false) {
        device.send(.inferRequest(InferRequest(id: id, model: model, messages: messages, hasTools: hasTools)),
                    to: self.homebase, channel: channel, store: false)
    }
}
