import Foundation

/// Everything `ollama-emulator` can be told on its command line.
public struct EmulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 11434
    /// Installed models (`/api/tags`), in order.
    public var models = ["qwen2.5:7b", "llama3.2:3b", "nomic-embed-text:latest"]
    /// Models loaded at start (`/api/ps`), pinned until unloaded.
    public var loaded: [String] = []
    /// Models `/api/pull` can fetch besides the installed ones; pulling one installs it.
    public var registry = [
        "llama3.2:1b", "llama3.2:3b", "llama3.2:latest", "qwen2.5:0.5b", "qwen2.5:1.5b", "qwen2.5:7b",
        "gemma3:1b", "gemma3:4b", "mistral:7b", "nomic-embed-text:latest",
    ]
    /// Generation speed. 200 tokens/s is a fast GPU; tests raise it.
    public var tokensPerSecond = 200.0
    /// How many tokens an answer has, before any `max_tokens` cut: each prompt picks its own length in this
    /// range, deterministically. The default is short (quick tests); a chat model's answer is often hundreds.
    public var answerTokens: ClosedRange<Int> = 12...48
    /// Delay before the first token of every chat answer (prompt processing).
    public var firstTokenMs = 0
    /// Faults applied to every chat request.
    public var fault = EmulatorFault()
    /// What `/api/version` reports.
    public var version = "0.32.6"
    /// Stream `/v1/chat/completions` as servers up to v0.32.5 did (role in every delta, finish_reason on the
    /// last content chunk, no empty-delta finish chunk).
    public var legacyChunks = false
    /// How long a model stays loaded after a request without `keep_alive` (Ollama's default is 5 minutes).
    public var defaultKeepAlive: Duration = .seconds(300)
    /// Pause between `/api/pull` progress lines (the real server re-emits about every 60 ms).
    public var pullProgressIntervalMs = 20
    /// What a cloud stub (`*-cloud` in `models`) does with a request it forwards to ollama.com: answers
    /// (`online`), `502 dial tcp …` (`offline`, the default: no network or no sign-in), or `403` (`disabled`,
    /// `OLLAMA_NO_CLOUD`).
    public var cloud: CloudMode = .offline
    /// Requests one loaded model serves at once (`OLLAMA_NUM_PARALLEL`, 1 on real servers); the rest wait, in
    /// order, with no byte and no header until a slot frees. `nil`: no limit (the emulator's old behaviour).
    public var parallel: Int?
    /// Tokens a thinking model reasons before its answer (scaled by the request's effort: low half, high
    /// double). They count against `max_tokens` / `num_predict` as on a real server.
    public var reasoningTokens = 24
    /// The context Ollama serves (`OLLAMA_CONTEXT_LENGTH`; real servers pick 4k-256k by memory): `/api/ps`
    /// reports the smaller of it and the model's trained length, and longer prompts are cut silently.
    public var contextLength = 4096
    /// Silence after `verifying sha256 digest` while the layers are hashed (minutes for a large model on a
    /// slow disk on a real server).
    public var pullVerifyMs = 0

    public enum CloudMode: String, Sendable, CaseIterable {
        case online, offline, disabled
    }

    /// The clock; tests can pin it.
    public var now: @Sendable () -> Date = { Date() }

    public init() {}
}
