import HomebaseCore
import HomebaseEngines
import OllamaEmulatorKit
import Synchronization
@testable import HomebaseRouter

/// A clock the test moves by hand (Unix ms).
final class ManualClock: Sendable {
    private let now: Mutex<UInt64>
    /// Added to `now` after every read, to model time passing between two reads inside one call.
    private let stepPerRead: Mutex<UInt64>

    init(_ start: UInt64 = 1_800_000_000_000) {
        self.now = Mutex(start)
        self.stepPerRead = Mutex(0)
    }

    func read() -> UInt64 {
        let step = self.stepPerRead.withLock { $0 }
        return self.now.withLock { value in
            defer { value += step }
            return value
        }
    }

    var value: UInt64 { self.now.withLock { $0 } }
    func set(_ ms: UInt64) { self.now.withLock { $0 = ms } }
    func advance(ms: UInt64) { self.now.withLock { $0 += ms } }
    func advanceOnEveryRead(ms: UInt64) { self.stepPerRead.withLock { $0 = ms } }
}

enum Fixture {
    static let ownHomebase = PublicKey(hex: String(repeating: "a1", count: 32))!
    static let friend = PublicKey(hex: String(repeating: "b2", count: 32))!
    static let otherFriend = PublicKey(hex: String(repeating: "c3", count: 32))!
    static let minute: UInt64 = 60 * 1000
    static let hour: UInt64 = 60 * minute

    static func advert(issuedAtMs: UInt64, seq: UInt64 = 1, host: PublicKey = Fixture.ownHomebase,
                       tags: [String] = ["qwen2.5:7b"]) -> VerifiedAdvert {
        VerifiedAdvert(host: host, seq: seq, issuedAtMs: issuedAtMs, runtimeVersion: "0.5.1",
                       models: tags.map { .tagOnly($0, capabilities: ["completion", "tools"], loaded: true) })
    }

    static func joined(_ host: PublicKey = Fixture.friend, name: String? = "Ana", state: JoinState = .joined,
                       tags: [String] = ["llama3.1:70b"], lastHeardMs: UInt64) -> JoinedHomebase {
        JoinedHomebase(host: host, name: name, state: state,
                       models: tags.map { .tagOnly($0) }, lastHeardMs: lastHeardMs)
    }

    static func endpoint(at ms: UInt64 = 0) -> VerifiedEndpoint {
        VerifiedEndpoint(url: "http://127.0.0.1:11434", verifiedAtMs: ms, version: "0.5.1",
                         models: [RuntimeModel(tag: "qwen2.5:7b", capabilities: ["completion"])])
    }

    static let request = ChatRequest(messages: [.user("What should I bring to Ana's birthday?")])
}

/// A provider that answers, or fails, as told.
struct FakeProvider: LLMProvider {
    var kind: ProviderKind
    var model: String
    /// Fail `complete`, and the stream after `chunks`.
    var failure: ProviderError?
    var chunks: [String] = ["partial ", "answer"]

    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        if let failure { throw failure }
        return ChatResult(text: self.chunks.joined(), providerKind: self.kind, model: self.model)
    }

    func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let fake = self
        return AsyncStream { continuation in
            for chunk in fake.chunks { continuation.yield(.text(chunk)) }
            if let failure = fake.failure {
                continuation.yield(.failed(failure))
            } else {
                continuation.yield(.done(ChatResult(text: fake.chunks.joined(), providerKind: fake.kind,
                                                    model: fake.model)))
            }
            continuation.finish()
        }
    }
}

/// Records what the router asked for; its providers are fakes that fail when told.
final class RecordingProviderFactory: ProviderFactory {
    enum Made: Sendable, Hashable {
        case ollama(url: String, model: String)
        case openai(model: String)
        case anthropic(model: String)
        case sibling(host: PublicKey, model: String)
        case crossAccount(host: PublicKey, model: String)
        case onDevice(DeviceModel?)
    }

    private let made = Mutex<[Made]>([])
    private let failing = Mutex<[ProviderKind: ProviderError]>([:])
    /// Keys the OpenAI/Anthropic fakes saw, read from their closure at call time.
    private let seenKeys = Mutex<[String?]>([])

    var calls: [Made] { self.made.withLock { $0 } }
    /// Everything but the on-device providers built as fallbacks.
    var primaries: [Made] {
        self.calls.filter { if case .onDevice = $0 { return false } else { return true } }
    }
    var keysSeen: [String?] { self.seenKeys.withLock { $0 } }

    func fail(_ kind: ProviderKind, _ reason: FallbackReason) {
        self.failing.withLock { $0[kind] = ProviderError(reason) }
    }

    private func fake(_ kind: ProviderKind, _ model: String) -> FakeProvider {
        FakeProvider(kind: kind, model: model, failure: self.failing.withLock { $0[kind] })
    }

    func makeOllama(endpoint: VerifiedEndpoint, model: String) -> any LLMProvider {
        self.made.withLock { $0.append(.ollama(url: endpoint.url, model: model)) }
        return self.fake(.ollama, model)
    }

    func makeOpenAI(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider {
        self.made.withLock { $0.append(.openai(model: model)) }
        return KeyedFake(base: self.fake(.openai, model), apiKey: apiKey, seen: self)
    }

    func makeAnthropic(model: String, apiKey: @escaping @Sendable () -> String?) -> any LLMProvider {
        self.made.withLock { $0.append(.anthropic(model: model)) }
        return KeyedFake(base: self.fake(.anthropic, model), apiKey: apiKey, seen: self)
    }

    func makeSibling(host: PublicKey, model: String) -> any LLMProvider {
        self.made.withLock { $0.append(.sibling(host: host, model: model)) }
        return self.fake(.sibling, model)
    }

    func makeCrossAccount(host: PublicKey, model: String) -> any LLMProvider {
        self.made.withLock { $0.append(.crossAccount(host: host, model: model)) }
        return self.fake(.crossAccount, model)
    }

    func makeOnDevice(deviceModel: DeviceModel?) -> any LLMProvider {
        self.made.withLock { $0.append(.onDevice(deviceModel)) }
        return OnDeviceProvider(deviceModel: deviceModel) { model in
            FakeProvider(kind: .ollama, model: model.tag, failure: self.failing.withLock { $0[.onDevice] })
        }
    }

    fileprivate func saw(_ key: String?) { self.seenKeys.withLock { $0.append(key) } }

    /// A cloud fake that reads its key per request, as the real providers must, and fails without one.
    struct KeyedFake: LLMProvider {
        var base: FakeProvider
        var apiKey: @Sendable () -> String?
        var seen: RecordingProviderFactory
        var kind: ProviderKind { self.base.kind }

        func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
            let key = self.apiKey()
            self.seen.saw(key)
            guard key != nil else { throw ProviderError(.noKey) }
            return try await self.base.complete(request)
        }
    }
}

/// Every store over in-memory backends, and a router over them.
struct Harness {
    let settingsBackend = InMemorySettingsBackend()
    let secretsBackend = InMemorySettingsBackend()
    let deviceBackend = InMemorySettingsBackend()
    let clock = ManualClock()
    let joined = InMemoryJoinedHomebaseStore()
    let factory = RecordingProviderFactory()
    let isHomebase: Bool

    init(isHomebase: Bool = false) {
        self.isHomebase = isHomebase
    }

    var settings: AgentSettings { AgentSettings(backend: self.settingsBackend) }
    var keys: CloudKeyStore { CloudKeyStore(backend: self.secretsBackend) }
    var runtime: ExternalRuntimeStore { ExternalRuntimeStore(backend: self.deviceBackend) }
    var adverts: ExternalModelsAdvertStore { ExternalModelsAdvertStore(backend: self.deviceBackend) }
    var now: UInt64 { self.clock.value }

    var router: LLMRouter {
        let clock = self.clock
        return LLMRouter(settings: self.settings, keys: self.keys, runtime: self.runtime, adverts: self.adverts,
                         joined: self.joined, factory: self.factory, isHomebase: self.isHomebase,
                         clock: WallClock { clock.read() })
    }

    // Shorthands for scenario set-up.
    func radio(_ source: ModelSource) throws { try self.settings.setModelSource(source) }
    func dropdown(_ runtime: ExternalRuntime) throws { try self.settings.setExternalRuntime(runtime) }
    func select(_ tag: String, host: ExternalHost = .own) throws {
        try self.settings.setExternalSelection(ExternalSelection(tag: tag, host: host))
    }
    func addKey(_ key: String, _ provider: CloudProvider) throws { try self.keys.add(key, to: provider) }
    func verifiedEndpoint() throws { try self.runtime.recordVerified(Fixture.endpoint(at: self.now)) }
    func advert(ageMs: UInt64, tags: [String] = ["qwen2.5:7b"]) throws {
        try self.adverts.accept(Fixture.advert(issuedAtMs: self.now - ageMs, tags: tags))
    }
    func joinedHomebase(state: JoinState = .joined, ageMs: UInt64 = 0, tags: [String] = ["llama3.1:70b"]) {
        self.joined.upsert(Fixture.joined(state: state, tags: tags, lastHeardMs: self.now - ageMs))
    }
}
