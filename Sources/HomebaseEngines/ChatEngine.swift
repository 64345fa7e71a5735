import HomebaseCore

/// One event of a streamed chat completion from an HTTP backend (OpenAI Chat Completions, Ollama's `/v1`,
/// Anthropic Messages), normalised.
public enum ChatEngineEvent: Sendable, Equatable {
    /// A piece of the answer's text.
    case text(String)
    /// A piece of the model's reasoning (`delta.reasoning` from Ollama, `delta.reasoning_content` from
    /// llama-server and vLLM), never part of the answer.
    case reasoning(String)
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
    /// The same completion pushed to `sink`: the events of one network read together, then the end, with no
    /// task hop per read where the engine can avoid one (OpenAIChatEngine calls the sink on its HTTP client's
    /// thread). For a server relaying many streams; `handle.cancel()` aborts the request.
    func start(model: String, request: ChatRequest, sink: any ChatEventSink) -> ChatStreamHandle
}

/// Receives a pushed completion (`ChatEngine.start`). Calls for one stream never overlap and may come from
/// any thread; they must return quickly and never block (an HTTP engine's other transfers wait meanwhile).
public protocol ChatEventSink: AnyObject, Sendable {
    /// The events of one read, in order; never empty.
    func events(_ batch: [ChatEngineEvent])
    /// The stream is over, exactly once, last: nil when it ended (normally after `.finished`; an engine's
    /// stream that stops without one is the sink's to judge), else the error, `ChatEngineError` as a rule.
    func ended(_ error: (any Error)?)
}

/// Stops a pushed completion.
public struct ChatStreamHandle: Sendable {
    private let onCancel: @Sendable () -> Void

    public init(cancel: @escaping @Sendable () -> Void) {
        self.onCancel = cancel
    }

    /// Aborts the request; the sink hears `ended` (with `cancelled`) unless it already had its end.
    public func cancel() { self.onCancel() }
}

extension ChatEngine {
    /// Over `stream`, one event per call, for engines without reads to group.
    public func start(model: String, request: ChatRequest, sink: any ChatEventSink) -> ChatStreamHandle {
        let events = self.stream(model: model, request: request)
        let task = Task {
            do {
                for try await event in events { sink.events([event]) }
                sink.ended(Task.isCancelled ? ChatEngineError.cancelled : nil)
            } catch {
                sink.ended(error)
            }
        }
        return ChatStreamHandle { task.cancel() }
    }
}
