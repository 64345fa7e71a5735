import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import HomebaseNode

/// The engine shared by `SiblingInferenceProvider` and `CrossAccountInferenceProvider`: it runs one chat
/// request against a host over the relay (Protocol/messages.md §2).
///
/// Per attempt it sends `infer.request` live (never stored) with a fresh UUID, and feeds an
/// `InferenceClientStateMachine` with the relay's receipt, the host's answer frames (routed by
/// `InferenceResponseRouter`), watchdog timers and relay disconnects. On `.fail` it sends `infer.cancel`
/// when the machine asks and ends its stream with `.failed`, the reason named by the machine's failure label
/// (`accept_timeout`, `offline`, `error:<code>`, …); a request with tools is never sent (`.failed` with `tools`).
/// The one cross-account retry on `cache_miss` happens here; falling back does not: the router wraps every
/// provider in the one `FallbackProvider`, which answers on-device and names the reason (issue 38, item 5).
public struct RelayInferenceClient: Sendable {
    public let messenger: any PeerMessenger
    public let responses: InferenceResponseRouter
    public let host: PublicKey
    /// `.sibling` for this account's Homebase, `.contact` for a friend's.
    public let channel: Channel
    public let model: String
    public let watchdogs: InferenceClientStateMachine.Watchdogs
    /// Times the watchdogs: monotonic, so a step of the wall clock neither fires nor stalls them. Every watchdog
    /// decision reads it; timers sleep for the time it says is left.
    public let clock: MonotonicClock
    let newRequestID: @Sendable () -> String
    let logger: Logger

    /// - Parameters:
    ///   - responses: the router that owns `messenger`'s inbound stream.
    ///   - watchdogs: the ladder; the specification's 10 s / 90 s / 30 s by default.
    ///   - newRequestID: request ids; random v4 UUIDs by default.
    public init(messenger: any PeerMessenger, responses: InferenceResponseRouter, host: PublicKey,
                channel: Channel, model: String,
                watchdogs: InferenceClientStateMachine.Watchdogs = .init(),
                clock: MonotonicClock,
                newRequestID: @escaping @Sendable () -> String = { SecureRandom.uuidString() },
                logger: Logger = .discard()) {
        self.messenger = messenger
        self.responses = responses
        self.host = host
        self.channel = channel
        self.model = model
        self.watchdogs = watchdogs
        self.clock = clock
        self.newRequestID = newRequestID
        self.logger = logger.with("host", host.short)
    }

    /// `.crossAccount` on the contact channel, `.sibling` otherwise.
    public var kind: ProviderKind { self.channel == .contact ? .crossAccount : .sibling }

    // MARK: Whole requests

    /// Streams `request` under `plan` (see the type's docs for the event contract).
    func stream(_ request: ChatRequest, plan: RelayAttemptPlan) -> AsyncStream<ChatStreamEvent> {
        let client = self
        return AsyncStream { continuation in
            let task = Task {
                await client.run(request, plan: plan, continuation: continuation)
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The whole answer of `stream`: the `.done` result, or its failure thrown.
    func complete(_ request: ChatRequest, plan: RelayAttemptPlan) async throws(ProviderError) -> ChatResult {
        for await event in self.stream(request, plan: plan) {
            switch event {
            case .done(let result): return result
            case .failed(let error): throw error
            default: continue
            }
        }
        throw ProviderError(.error("cancelled"), detail: "the request was cancelled")
    }

    func run(_ request: ChatRequest, plan: RelayAttemptPlan,
             continuation: AsyncStream<ChatStreamEvent>.Continuation) async {
        if request.hasTools {
            // Tools never cross the wire (design.md §R6): the agent loop stays on the device.
            continuation.yield(.failed(ProviderError(.tools, detail: "a request with tools is answered on the device")))
            return
        }
        let options = Self.inferOptions(request.options)
        var attempt = plan.first
        var retried = false
        while true {
            let outcome = await self.attempt(attempt, options: options) { continuation.yield($0) }
            switch outcome {
            case .served(let result):
                plan.served(attempt, result)
                continuation.yield(.done(result))
                return
            case .failed(let reason, let emitted):
                plan.failed(attempt)
                if case .cancelled = reason { return }
                if case .error(let code, _) = reason, code == InferErrorCode.cacheMiss.rawValue, !retried, !emitted,
                    let retry = plan.cacheMissRetry
                {
                    self.logger.debug("cache miss, retrying with the whole conversation")
                    retried = true
                    attempt = retry
                    continue
                }
                self.logger.info("relay inference failed", metadata: ["reason": reason.label])
                continuation.yield(.failed(ProviderError(FallbackReason(rawValue: reason.label),
                                                         detail: "relay inference failed: \(reason.label)")))
                return
            }
        }
    }

    // MARK: One attempt

    enum AttemptOutcome: Sendable, Equatable {
        case served(ChatResult)
        case failed(InferenceClientStateMachine.FailureReason, emittedOutput: Bool)
    }

    /// Sends one `infer.request` and drives the watchdog machine until it finishes or fails. `emit` gets each
    /// chunk's reasoning (`.reasoning`) and text (`.text`) as it arrives, and the queue position (`.queued`).
    func attempt(_ attempt: RelayAttempt, options: InferOptions, emit: (ChatStreamEvent) -> Void) async
        -> AttemptOutcome
    {
        let id = self.newRequestID()
        let (events, sink) = AsyncStream<RelayInferenceEvent>.makeStream()
        // Registered before sending, so an answer racing the receipt is never lost.
        self.responses.register(id: id, host: self.host, channel: self.channel, sink: sink)
        defer {
            self.responses.unregister(id: id)
            sink.finish()
        }
        let request = InferRequest(id: id, model: self.model, messages: attempt.messages, options: options,
                                   conversation: attempt.conversation)
        var machine = InferenceClientStateMachine(sentAtMs: self.clock.nowMs, watchdogs: self.watchdogs)
        self.messenger.send(.inferRequest(request), to: self.host, channel: self.channel, store: false) { outcome in
            sink.yield(.receipt(outcome))
        }
        var timer = TimerSlot(clock: self.clock, sink: sink)
        defer { timer.cancel() }
        timer.arm(machine.nextDeadlineMs, force: true)

        var text = ""
        var reasoning = ""
        var emitted = false
        for await event in events {
            let action: InferenceClientStateMachine.Action
            switch event {
            case .receipt(.receipt(let status)): action = machine.receiptReceived(status)
            case .receipt(.notConnected): action = machine.receiptReceived(.recipientOffline)
            case .relayLost: action = machine.relayLost()
            case .timer: action = machine.timerFired(nowMs: self.clock.nowMs)
            case .frame(let message): action = self.feed(message, into: &machine)
            }
            switch action {
            case .none, .accepted:
                break
            case .queued(let position):
                emit(.queued(position: position))
            case .reasoning(let thought, let piece):
                reasoning += thought
                emitted = true
                emit(.reasoning(thought))
                text += piece
                if !piece.isEmpty { emit(.text(piece)) }
            case .text(let piece):
                text += piece
                if !piece.isEmpty {
                    emitted = true
                    emit(.text(piece))
                }
            case .finished(let finishReason, let usage):
                var result = ChatResult(
                    text: text, finishReason: FinishReason(rawValue: finishReason) ?? .stop, usage: usage,
                    providerKind: self.kind, model: machine.acceptedModel ?? self.model)
                result.reasoning = reasoning.isEmpty ? nil : reasoning
                return .served(result)
            case .fail(let reason, let sendCancel):
                if sendCancel { self.sendCancel(id) }
                return .failed(reason, emittedOutput: emitted)
            }
            // A timer that fired early (the clock disagrees with the sleep) re-arms; so does a new deadline.
            timer.arm(machine.nextDeadlineMs, force: event.isTimer)
        }
        // The event stream only ends early when the consuming task is cancelled: the caller gave up.
        if case .fail(let reason, let sendCancel) = machine.cancelled() {
            if sendCancel { self.sendCancel(id) }
            return .failed(reason, emittedOutput: emitted)
        }
        return .failed(.cancelled, emittedOutput: emitted)
    }

    private func feed(_ message: Message, into machine: inout InferenceClientStateMachine)
        -> InferenceClientStateMachine.Action
    {
        switch message {
        case .inferAccept(let accept): machine.acceptReceived(model: accept.model, nowMs: self.clock.nowMs)
        case .inferQueued(let queued): machine.queuedReceived(position: queued.position, nowMs: self.clock.nowMs)
        case .inferChunk(let chunk):
            machine.chunkReceived(seq: chunk.seq, text: chunk.text, reasoning: chunk.reasoning, nowMs: self.clock.nowMs)
        case .inferDone(let done):
            machine.doneReceived(finishReason: done.finishReason, usage: done.usage, chunks: done.chunks)
        case .inferError(let error): machine.errorReceived(code: error.code, message: error.message)
        default: .none
        }
    }

    private func sendCancel(_ id: String) {
        self.messenger.send(.inferCancel(id: id), to: self.host, channel: self.channel, store: false)
    }

    static func inferOptions(_ options: ChatOptions) -> InferOptions {
        InferOptions(temperature: options.temperature, topP: options.topP, maxTokens: options.maxTokens,
                     stop: options.stop.isEmpty ? nil : options.stop, seed: options.seed, think: options.think)
    }
}

/// What one `infer.request` carries.
struct RelayAttempt: Sendable, Equatable {
    var messages: [ChatMessage]
    var conversation: ConversationRef?
}

/// The attempts of one request: the first, an optional retry after `cache_miss`, and hooks that let the
/// conversation cache learn what the host now holds.
struct RelayAttemptPlan: Sendable {
    var first: RelayAttempt
    /// Sent at most once, only after an `infer.error cache_miss` that came before any output.
    var cacheMissRetry: RelayAttempt?
    var served: @Sendable (RelayAttempt, ChatResult) -> Void = { _, _ in }
    var failed: @Sendable (RelayAttempt) -> Void = { _ in }

    /// The whole conversation, no cache.
    static func whole(_ messages: [ChatMessage]) -> RelayAttemptPlan {
        RelayAttemptPlan(first: RelayAttempt(messages: messages, conversation: nil))
    }
}

extension RelayInferenceEvent {
    var isTimer: Bool {
        if case .timer = self { return true }
        return false
    }
}

/// The one armed watchdog timer of an attempt: a task that sleeps until the machine's deadline (by the
/// injected clock) and then posts `.timer`. Re-arming cancels the previous sleep.
private struct TimerSlot {
    let clock: MonotonicClock
    let sink: AsyncStream<RelayInferenceEvent>.Continuation
    var task: Task<Void, Never>?
    var deadline: UInt64?

    init(clock: MonotonicClock, sink: AsyncStream<RelayInferenceEvent>.Continuation) {
        self.clock = clock
        self.sink = sink
    }

    mutating func arm(_ deadline: UInt64?, force: Bool) {
        guard force || deadline != self.deadline else { return }
        self.cancel()
        self.deadline = deadline
        guard let deadline else { return }
        let clock = self.clock
        let sink = self.sink
        // At least 1 ms, so a clock that lags the sleep cannot make the re-arm loop spin.
        let now = clock.nowMs
        let leftMs = max(deadline > now ? deadline - now : 0, force ? 1 : 0)
        self.task = Task {
            if leftMs > 0 {
                do { try await Task.sleep(for: .milliseconds(leftMs)) } catch { return }
            }
            sink.yield(.timer)
        }
    }

    mutating func cancel() {
        self.task?.cancel()
        self.task = nil
    }
}
