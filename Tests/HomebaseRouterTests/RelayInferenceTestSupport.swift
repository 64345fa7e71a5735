import HomebaseCore
import HomebaseEngines
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseRouter

/// Milliseconds on a monotonic clock, from an arbitrary origin: the relay tests use real short ladders.
func monotonicMs() -> UInt64 {
    let elapsed = ContinuousClock.now - RelayRig.origin
    return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
}

/// Polls `condition` every 5 ms for up to `timeoutMs`; there is no event to await for "the host got it".
func eventually(timeoutMs: Int = 2_000, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<(timeoutMs / 5) {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// One step of a scripted host's answer to an `infer.request`.
enum HostStep: Sendable {
    case send(Message)
    case sleep(ms: Int)
    /// Drops the requester's relay connection.
    case disconnectClient
}

/// A fake Homebase on a `LoopbackMessengerHub`: answers each `infer.request` with the steps its script gives
/// for (request, how many requests came before), and records every request and cancel it receives.
final class ScriptedHost: Sendable {
    typealias Script = @Sendable (InferRequest, Int) -> [HostStep]

    let messenger: LoopbackMessenger
    private let hub: LoopbackMessengerHub
    private let script: Script
    private let log = Mutex<(requests: [InferRequest], cancels: [String], finishedScripts: Int)>(([], [], 0))
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(hub: LoopbackMessengerHub, key: PublicKey, script: @escaping Script) {
        self.hub = hub
        self.script = script
        self.messenger = hub.messenger(for: key) { _ in SenderRelation(isSibling: true, isContact: true) }
        let inbound = self.messenger.inbound
        let task = Task { [self] in
            for await message in inbound { await self.handle(message) }
        }
        self.task.withLock { $0 = task }
    }

    var requests: [InferRequest] { self.log.withLock { $0.requests } }
    var cancels: [String] { self.log.withLock { $0.cancels } }
    var finishedScripts: Int { self.log.withLock { $0.finishedScripts } }

    func stop() { self.task.withLock { $0?.cancel() } }

    private func handle(_ inbound: InboundMessage) async {
        switch inbound.message {
        case .inferRequest(let request):
            let index = self.log.withLock { log -> Int in
                log.requests.append(request)
                return log.requests.count - 1
            }
            for step in self.script(request, index) {
                switch step {
                case .send(let message):
                    self.messenger.send(message, to: inbound.sender, channel: inbound.channel, store: false)
                case .sleep(let ms):
                    try? await Task.sleep(for: .milliseconds(ms))
                case .disconnectClient:
                    self.hub.disconnect(inbound.sender)
                }
            }
            self.log.withLock { $0.finishedScripts += 1 }
        case .inferCancel(let id):
            self.log.withLock { $0.cancels.append(id) }
        default:
            break
        }
    }

    // MARK: Script building blocks

    static func accept(_ r: InferRequest, model: String? = nil) -> HostStep {
        .send(.inferAccept(InferAccept(id: r.id, model: model ?? r.model)))
    }

    static func chunk(_ r: InferRequest, _ seq: Int, _ text: String) -> HostStep {
        .send(.inferChunk(InferChunk(id: r.id, seq: seq, text: text)))
    }

    static func done(_ r: InferRequest, chunks: Int) -> HostStep {
        .send(.inferDone(InferDone(id: r.id, finishReason: "stop", usage: Usage(promptTokens: 3, completionTokens: 2),
                                   chunks: chunks)))
    }

    static func error(_ r: InferRequest, _ code: InferErrorCode) -> HostStep {
        .send(.inferError(InferError(id: r.id, code: code, message: "scripted")))
    }

    /// accept, one chunk per text, done.
    static func serve(_ r: InferRequest, _ texts: [String]) -> [HostStep] {
        [accept(r)] + texts.enumerated().map { chunk(r, $0.offset, $0.element) } + [done(r, chunks: texts.count)]
    }
}

/// A client (handset or guest) and a scripted host on one in-memory hub.
struct RelayRig {
    static let origin = ContinuousClock.now
    static let clientKey = PublicKey(hex: String(repeating: "d4", count: 32))!
    static let hostKey = Fixture.ownHomebase
    /// Short real ladder: accept 150 ms, first output 150 ms, stall 150 ms.
    static let ladder = InferenceClientStateMachine.Watchdogs(acceptMs: 150, firstOutputMs: 150, stallMs: 150)
    static let fallback = FakeProvider(kind: .onDevice, model: "device", chunks: ["fallback ", "answer"])

    let hub = LoopbackMessengerHub()
    let client: LoopbackMessenger
    let responses: InferenceResponseRouter
    let host: ScriptedHost

    init(script: @escaping ScriptedHost.Script) {
        self.client = self.hub.messenger(for: Self.clientKey) { _ in SenderRelation(isSibling: true, isContact: true) }
        self.responses = InferenceResponseRouter(messenger: self.client)
        self.host = ScriptedHost(hub: self.hub, key: Self.hostKey, script: script)
    }

    /// The sibling provider as the router hands it out: inside the one `FallbackProvider`.
    func sibling(ladder: InferenceClientStateMachine.Watchdogs = RelayRig.ladder,
                host: PublicKey = RelayRig.hostKey) -> FallbackProvider {
        FallbackProvider(
            primary: SiblingInferenceProvider(messenger: self.client, responses: self.responses, host: host,
                                             model: "qwen2.5:7b", watchdogs: ladder,
                                             clock: MonotonicClock { monotonicMs() }),
            fallback: Self.fallback)
    }

    func crossAccount(conversations: ConversationTracker,
                      ladder: InferenceClientStateMachine.Watchdogs = RelayRig.ladder)
        -> FallbackProvider
    {
        FallbackProvider(
            primary: CrossAccountInferenceProvider(
                messenger: self.client, responses: self.responses, host: Self.hostKey, model: "llama3.1:70b",
                conversations: conversations, watchdogs: ladder, clock: MonotonicClock { monotonicMs() }),
            fallback: Self.fallback)
    }

    /// Infer message types the client sent, in order.
    var clientSent: [String] { self.hub.sent.filter { $0.from == Self.clientKey }.map(\.type) }

    func stop() {
        self.responses.stop()
        self.host.stop()
    }
}

/// Every event of a stream, in order.
func collect(_ stream: AsyncStream<ChatStreamEvent>) async -> [ChatStreamEvent] {
    var events: [ChatStreamEvent] = []
    for await event in stream { events.append(event) }
    return events
}

/// The whole answer, and how long it took in ms.
func timedComplete(_ provider: some LLMProvider, _ request: ChatRequest = Fixture.request) async throws
    -> (ChatResult, UInt64)
{
    let start = monotonicMs()
    let result = try await provider.complete(request)
    return (result, monotonicMs() - start)
}

extension ChatResult {
    /// The fallback reason's raw value, or nil when the remote answered.
    var fallbackReason: String? { self.fallback?.reason.rawValue }
}
