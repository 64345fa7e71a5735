import HomebaseCore

/// One event of a streamed chat completion from an HTTP backend (OpenAI Chat Completions, Ollama's `/v1`,
/// Anthropic Messages), normalised.
public enum ChatEngineEvent: Sendable, Equatable {
    /// A piece of the answer's text.
    case text(String)
    /// A whole tool call (fragments already joined).
    case toolCall(ToolCall)
    /// The answer ended; usage when the backend reported it.
    case finished(FinishReason, Usage?)
}

/// Why a backend request failed. Mapped to `infer.error` codes by the Homebase and to fallback reasons by
/// providers.
public enum ChatEngineError: Error, Equatable, Sendable {
    /// The backend could not be reached (refused, DNS, TLS): the runtime is unavailable.
    case connectFailed(String)
    /// An HTTP error status before streaming began, with the backend's error message.
    case http(status: Int, message: String)
    /// An error reported after a 200, mid-stream (Ollama's in-band error, Anthropic's `error` event), or the
    /// stream ended without its terminator.
    case midStream(String)
    /// No bytes for longer than the idle timeout.
    case timedOut
    /// The caller cancelled.
    case cancelled
    /// The backend answered something that is not its documented shape.
    case malformed(String)
}

/// A chat backend that streams. `OpenAIChatEngine` implements it for OpenAI and Ollama's `/v1`;
/// `AnthropicChatEngine` for the Messages API. The Homebase's inference server uses it too.
public protocol ChatEngine: Sendable {
    /// Streams one completion. Cancelling the consuming task, or abandoning the stream, aborts the HTTP request
    /// at once. Errors are `ChatEngineError`.
    func stream(model: String, request: ChatRequest) -> AsyncThrowingStream<ChatEngineEvent, any Error>
    /// The same stream with the events of one network read together, so a consumer that hops onto an actor
    /// per element pays once per read rather than once per token. Never yields an empty batch.
    func batches(model: String, request: ChatRequest) -> AsyncThrowingStream<[ChatEngineEvent], any Error>
}

extension ChatEngine {
    /// One event per batch, for engines without reads to group.
    public func batches(model: String, request: ChatRequest) -> AsyncThrowingStream<[ChatEngineEvent], any Error> {
        let events = self.stream(model: model, request: request)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await event in events { continuation.yield([event]) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
