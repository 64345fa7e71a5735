import HomebaseCore
import HomebaseEngines

/// Runs a `ChatEngine` as an `LLMProvider`'s two calls, shared by the HTTP providers: `complete` assembles
/// text, tool calls, usage and the finish reason; `stream` forwards them as they come.
///
/// Failures become `ProviderError`s whose reasons are `chat --json`'s `fallback.reason` labels:
///
/// | engine error            | reason                  |
/// |-------------------------|-------------------------|
/// | `connectFailed`         | `error:unreachable`     |
/// | `http(status, _)`       | `error:http_<status>`   |
/// | `midStream`             | `error:mid_stream`      |
/// | `timedOut`              | `error:timeout`         |
/// | `cancelled`             | `error:cancelled`       |
/// | `malformed`             | `error:malformed`       |
/// | no key on the ring      | `no_key` (no request)   |
struct ChatEngineRunner: Sendable {
    let engine: any ChatEngine
    let model: String
    let kind: ProviderKind
    /// Read before each request; `nil` when the provider needs no key.
    let requireKey: (@Sendable () -> String?)?

    func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try self.checkKey()
        var text = ""
        var reasoning = ""
        var calls: [ToolCall] = []
        do {
            for try await event in self.engine.stream(model: self.model, request: request) {
                switch event {
                case .text(let piece): text += piece
                case .reasoning(let piece): reasoning += piece
                case .toolCall(let call): calls.append(call)
                case .finished(let reason, let usage):
                    var result = ChatResult(text: text, toolCalls: calls, finishReason: reason, usage: usage,
                                            providerKind: self.kind, model: self.model)
                    result.reasoning = reasoning.isEmpty ? nil : reasoning
                    return result
                }
            }
        } catch {
            throw Self.providerError(error)
        }
        throw Self.providerError(Task.isCancelled ? ChatEngineError.cancelled : .midStream("stream ended early"))
    }

    func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let runner = self
        return AsyncStream { continuation in
            let task = Task {
                continuation.yield(await runner.forward(request) { continuation.yield($0) })
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Yields text and tool calls as they arrive; returns the terminal event.
    private func forward(_ request: ChatRequest, yield: (ChatStreamEvent) -> Void) async -> ChatStreamEvent {
        do throws(ProviderError) {
            try self.checkKey()
        } catch {
            return .failed(error)
        }
        var text = ""
        var reasoning = ""
        var calls: [ToolCall] = []
        do {
            for try await event in self.engine.stream(model: self.model, request: request) {
                switch event {
                case .text(let piece):
                    text += piece
                    yield(.text(piece))
                case .reasoning(let piece):
                    reasoning += piece
                    yield(.reasoning(piece))
                case .toolCall(let call):
                    calls.append(call)
                    yield(.toolCall(call))
                case .finished(let reason, let usage):
                    var result = ChatResult(text: text, toolCalls: calls, finishReason: reason, usage: usage,
                                            providerKind: self.kind, model: self.model)
                    result.reasoning = reasoning.isEmpty ? nil : reasoning
                    return .done(result)
                }
            }
        } catch {
            return .failed(Self.providerError(error))
        }
        return .failed(Self.providerError(Task.isCancelled ? ChatEngineError.cancelled : .midStream("stream ended early")))
    }

    private func checkKey() throws(ProviderError) {
        guard let requireKey = self.requireKey else { return }
        guard let key = requireKey(), !key.isEmpty else {
            throw ProviderError(.noKey, detail: "no \(self.kind.rawValue) key on file")
        }
    }

    static func providerError(_ error: any Error) -> ProviderError {
        guard let error = error as? ChatEngineError else {
            return ProviderError(.error("malformed"), detail: "\(error)")
        }
        switch error {
        case .connectFailed(let message):
            return ProviderError(.error("unreachable"), detail: Self.line("unreachable: \(message)"))
        case .http(let status, let message):
            return ProviderError(.error("http_\(status)"), detail: Self.line("HTTP \(status): \(message)"))
        case .midStream(let message):
            return ProviderError(.error("mid_stream"), detail: Self.line("stream failed: \(message)"))
        case .timedOut:
            return ProviderError(.error("timeout"), detail: "no response within the idle timeout")
        case .cancelled:
            return ProviderError(.error("cancelled"), detail: "cancelled")
        case .malformed(let message):
            return ProviderError(.error("malformed"), detail: Self.line("malformed response: \(message)"))
        }
    }

    /// One line, bounded: details are for a person and go into logs and `chat --json`.
    private static func line(_ text: String) -> String {
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return flat.count > 240 ? String(flat.prefix(240)) + "…" : flat
    }
}
