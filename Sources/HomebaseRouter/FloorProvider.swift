import HomebaseCore
import HomebaseEngines

/// The permanent floor (design.md §C10, design.md §D "stand-ins"): the built-in on-device brain that always
/// answers at once, offline and deterministically. It stands in for the Apple system model.
///
/// The reply is derived from the last user message with fixed rules and an FNV-1a hash (never the
/// process-seeded `Hasher`), so the same prompt always gets the same words. Results say what they are:
/// `providerKind` `.onDevice`, `model` `floor`.
///
/// Tools: the floor accepts tool definitions and answers without calling them. FoundationModels' native
/// tools have no stand-in here (out of scope, design.md §D).
public struct FloorProvider: LLMProvider {
    /// The model name the floor reports.
    public static let modelName = "floor"

    public init() {}

    public var kind: ProviderKind { .onDevice }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        self.answer(request)
    }

    /// The floor's answer; it cannot fail.
    public func answer(_ request: ChatRequest) -> ChatResult {
        let text = Self.reply(to: request.messages)
        let promptWords = request.messages.reduce(0) { $0 + Self.words($1.content).count }
        return ChatResult(
            text: text, finishReason: .stop,
            usage: Usage(promptTokens: promptWords, completionTokens: Self.words(text).count),
            providerKind: .onDevice, model: Self.modelName)
    }

    /// Streams the answer a word at a time, so a streaming caller sees it arrive incrementally.
    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let result = self.answer(request)
        return AsyncStream { continuation in
            var chunk = ""
            for character in result.text {
                chunk.append(character)
                if character == " " {
                    continuation.yield(.text(chunk))
                    chunk = ""
                }
            }
            if !chunk.isEmpty { continuation.yield(.text(chunk)) }
            continuation.yield(.done(result))
            continuation.finish()
        }
    }

    // MARK: The reply

    static let maxTopicCharacters = 80

    static let questionAnswers = [
        "The short answer depends on the details, so start with the simplest option and check it against what you need.",
        "A good first step is to write down what you already know and what would change your mind.",
        "I would begin with the most common case and only then look at the exceptions.",
    ]
    static let statementAnswers = [
        "Noted. I can help break this into one small first step.",
        "Understood. Let's keep it simple and take it one step at a time.",
        "Got it. The clearest next move is usually the smallest one.",
    ]
    static let signature = "(Answered on-device by the floor model; a larger model can go deeper when one is reachable.)"

    static func reply(to messages: [ChatMessage]) -> String {
        let prompt = messages.last { $0.role == "user" }?.content ?? ""
        let words = Self.words(prompt)
        guard !words.isEmpty else {
            return "Hello. I'm the on-device floor model: ask me anything and I'll keep it short. " + Self.signature
        }
        var topic = words.joined(separator: " ")
        if topic.count > Self.maxTopicCharacters {
            topic = String(topic.prefix(Self.maxTopicCharacters)).trimmed + "…"
        }
        let isQuestion = prompt.trimmed.hasSuffix("?")
        let choices = isQuestion ? Self.questionAnswers : Self.statementAnswers
        let pick = choices[Int(Self.fnv1a(prompt) % UInt64(choices.count))]
        return "About \"\(topic)\": \(pick) \(Self.signature)"
    }

    package static func words(_ text: String) -> [Substring] {
        text.split(whereSeparator: { $0.isWhitespace })
    }

    /// 64-bit FNV-1a: stable across runs and platforms.
    package static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
