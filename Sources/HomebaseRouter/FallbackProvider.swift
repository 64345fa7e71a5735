/// Runs a request on `primary`, and on any failure runs the same request on `fallback`; if even the
/// fallback fails, the floor answers. What it returns never throws and its stream never emits `.failed`.
///
/// The fallback's result carries `fallback` {from: primary's kind, reason: the primary's error}. Streaming
/// follows the rule in `LLMProvider`'s docs: `.restart(reason)` when output had already been emitted, then
/// the fallback's whole answer; `.done` is always whole and from one provider.
public struct FallbackProvider: LLMProvider {
    public let primary: any LLMProvider
    public let fallback: any LLMProvider
    let floor = FloorProvider()

    public init(primary: any LLMProvider, fallback: any LLMProvider) {
        self.primary = primary
        self.fallback = fallback
    }

    public var kind: ProviderKind { self.primary.kind }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        let from = self.primary.kind
        do {
            return try await self.primary.complete(request)
        } catch {
            var result: ChatResult
            do {
                result = try await self.fallback.complete(request)
            } catch {
                result = self.floor.answer(request)
            }
            result.fallback = Fallback(from: from, reason: error.reason)
            return result
        }
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let primary = self.primary
        let fallback = self.fallback
        let floor = self.floor
        return AsyncStream { continuation in
            let task = Task {
                let from = primary.kind
                guard let failure = await StreamForwarding.forward(primary.stream(request), to: continuation) else {
                    continuation.finish()
                    return
                }
                // The consumer is gone (an app closed its connection): nobody waits for a fallback's answer.
                guard !Task.isCancelled else {
                    continuation.finish()
                    return
                }
                let annotation = Fallback(from: from, reason: failure.error.reason)
                if failure.emittedOutput { continuation.yield(.restart(failure.error.reason)) }
                continuation.yield(.fallingBack(annotation, provider: fallback.kind))
                if let second = await StreamForwarding.forward(
                    fallback.stream(request), to: continuation, annotating: annotation)
                {
                    guard !Task.isCancelled else {
                        continuation.finish()
                        return
                    }
                    if second.emittedOutput { continuation.yield(.restart(second.error.reason)) }
                    continuation.yield(.fallingBack(annotation, provider: floor.kind))
                    _ = await StreamForwarding.forward(floor.stream(request), to: continuation, annotating: annotation)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Marks every result of `base` as a routing-time fallback: the router chose on-device because the
/// arm the user selected could not carry the call (a missing key, a stale advert, …).
///
/// The routing reason wins over a reason from inside `base` (the device rung failing to the floor):
/// `chat --json` reports what the user chose and why it did not answer.
public struct RoutedFallbackProvider: LLMProvider {
    public let base: any LLMProvider
    public let annotation: Fallback

    public init(base: any LLMProvider, annotation: Fallback) {
        self.base = base
        self.annotation = annotation
    }

    public var kind: ProviderKind { self.base.kind }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        var result = try await self.base.complete(request)
        result.fallback = self.annotation
        return result
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let base = self.base
        let annotation = self.annotation
        return AsyncStream { continuation in
            let task = Task {
                if let failure = await StreamForwarding.forward(base.stream(request), to: continuation,
                                                           annotating: annotation) {
                    continuation.yield(.failed(failure.error))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

enum StreamForwarding {
    struct Failure {
        var error: ProviderError
        /// Whether text or a tool call had been forwarded before the failure.
        var emittedOutput: Bool
    }

    /// Forwards `source`'s events until its terminal one. Forwards `.done` (re-annotated when asked)
    /// and returns `nil`; on `.failed`, or a stream that ends with no terminal event, forwards nothing
    /// more and returns the failure.
    static func forward(
        _ source: AsyncStream<ChatStreamEvent>, to continuation: AsyncStream<ChatStreamEvent>.Continuation,
        annotating annotation: Fallback? = nil
    ) async -> Failure? {
        var emitted = false
        for await event in source {
            switch event {
            case .text, .toolCall, .reasoning:
                emitted = true
                continuation.yield(event)
            case .queued, .fallingBack:
                continuation.yield(event)
            case .restart:
                // An inner fallback restarted: what we forwarded is void, and so is our record of it.
                emitted = false
                continuation.yield(event)
            case .done(var result):
                if let annotation { result.fallback = annotation }
                continuation.yield(.done(result))
                return nil
            case .failed(let error):
                return Failure(error: error, emittedOutput: emitted)
            }
        }
        let reason: FallbackReason = Task.isCancelled ? .error("cancelled") : .error("stream_ended")
        return Failure(error: ProviderError(reason, detail: "the stream ended without a result"), emittedOutput: emitted)
    }
}
