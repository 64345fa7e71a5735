import HomebaseCore
import HomebaseCuration
import HomebaseEngines
import HomebaseRouter

/// The stand-in for the MLX runtime (design.md §D, "stand-ins"): it answers as the downloaded model only when the
/// floor rules say that model is ready and its weights load from the Hub cache; otherwise it fails, and the
/// on-device provider's floor answers the same request (select-before-download, an unknown id, a deleted model,
/// an incapable device all land there).
///
/// The answer is deterministic (FNV-1a of the prompt), names the model and what was loaded; there is no real
/// inference here, only the contract around it.
public struct HubModelProvider: LLMProvider {
    public let id: String
    public let store: OnDeviceModelStore
    /// The device engine (`config device-engine`): once the floor rules say the model is ready and its weights
    /// load, the engine writes the answer (the stand-in runtime has no inference of its own). `nil`: the
    /// deterministic stand-in text.
    public let engine: DeviceEngineProvider?

    public init(id: String, store: OnDeviceModelStore, engine: DeviceEngineProvider? = nil) {
        self.id = id
        self.store = store
        self.engine = engine
    }

    /// The floor rules first; then the engine streams the answer, when there is one.
    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        guard let engine = self.engine else {
            // The stand-in text in one piece, as the protocol's default streaming does.
            let provider = self
            return AsyncStream { continuation in
                let task = Task {
                    do throws(ProviderError) {
                        let result = try await provider.complete(request)
                        continuation.yield(.text(result.text))
                        continuation.yield(.done(result))
                    } catch {
                        continuation.yield(.failed(error))
                    }
                    continuation.finish()
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }
        if case .floor(let reason) = self.store.resolve(choice: self.id) {
            return Self.failing(ProviderError(.error(reason.rawValue), detail: "\(self.id): \(reason.rawValue)"))
        }
        guard self.store.loadedModel(self.id) != nil else {
            return Self.failing(ProviderError(.error("weights_missing"), detail: "\(self.id): the weights do not load"))
        }
        return engine.stream(request)
    }

    static func failing(_ error: ProviderError) -> AsyncStream<ChatStreamEvent> {
        AsyncStream { continuation in
            continuation.yield(.failed(error))
            continuation.finish()
        }
    }

    public var kind: ProviderKind { .onDevice }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        switch self.store.resolve(choice: self.id) {
        case .floor(let reason):
            throw ProviderError(.error(reason.rawValue), detail: "\(self.id): \(reason.rawValue)")
        case .model:
            guard let loaded = self.store.loadedModel(self.id) else {
                throw ProviderError(.error("weights_missing"), detail: "\(self.id): the weights do not load")
            }
            if let engine = self.engine { return try await engine.complete(request) }
            let text = Self.reply(to: request.messages, model: loaded)
            let promptWords = request.messages.reduce(0) { $0 + FloorProvider.words($1.content).count }
            return ChatResult(text: text, finishReason: .stop,
                              usage: Usage(promptTokens: promptWords, completionTokens: FloorProvider.words(text).count),
                              providerKind: .onDevice, model: self.id)
        }
    }

    static let openings = [
        "Here is a concise take.", "Short version first, details after.", "Let me work through it step by step.",
    ]

    static func reply(to messages: [ChatMessage], model: LoadedModel) -> String {
        let prompt = messages.last { $0.role == "user" }?.content ?? ""
        let words = FloorProvider.words(prompt)
        let topic = words.prefix(12).joined(separator: " ")
        let opening = Self.openings[Int(FloorProvider.fnv1a(model.id + "\u{0}" + prompt) % UInt64(Self.openings.count))]
        let name = RepoNameParser.name(of: model.id)
        return "\(opening) On \"\(topic)\": start with what you know and check it against what you need. "
            + "(Answered on-device by \(name): \(model.weightFiles) weight file\(model.weightFiles == 1 ? "" : "s"), "
            + "\(ModelSize.format(model.weightBytes)) at \(model.commit.prefix(7)).)"
    }
}
