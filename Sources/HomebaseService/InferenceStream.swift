import HomebaseCore
import HomebaseEngines
import HomebaseNode
import Synchronization

/// One admitted request's answer on its way from the engine to the requester: coalescing, chunk sequence
/// numbers, the kept answer, and the final `infer.chunk`s and `infer.done` (Protocol/messages.md §2).
///
/// The engine pushes each read here from its own thread (`ChatEngine.start`): a read costs a lock and the
/// sends, not a call into the server. The server hears only the end, once, through `onEnd`; it stops
/// the stream with `stop()` (cancel, requester gone, revoke), after which nothing more is sent. Sends happen
/// under the lock, so a chunk can never follow the end or overtake an earlier chunk.
final class InferenceStream: ChatEventSink {
    /// How the stream ended, for the server.
    enum End: Sendable {
        /// `infer.done` was sent. `answer` when it was kept and stayed within `maxContentBytes`.
        case done(answer: String?, usage: Usage)
        /// The token budget ran out while the model was still reasoning: no answer came. The server sends
        /// `infer.error reasoning_budget` rather than an empty success.
        case reasoningBudgetSpent(usage: Usage)
        /// The engine failed (nil: its stream ended without finishing); the server sends `infer.error`.
        case failed((any Error)?)
    }

    private struct State {
        var coalescer: ChunkCoalescer
        var nextSeq = 0
        var answer: String?
        var ended = false
        /// How the stream ended by itself, for a `stop()` that comes after.
        var end: End?
        /// Text pieces the engine delivered (one per token for Ollama), for charging a cut-short answer.
        var pieces = 0
        /// When the first text piece came (monotonic ms): the status page's time to first token.
        var firstPieceAtMs: UInt64?
        var handle: ChatStreamHandle?
        var flushTask: Task<Void, Never>?
        /// When a chunk last asked for a RECEIPT, or (before any did) when the stream started (monotonic ms).
        var lastReceiptAskedMs: UInt64
        /// The UTF-8 of one read's text pieces, joined (kept for its capacity).
        var joined: [UInt8] = []
        /// Whether what the coalescer and `held` hold now is reasoning (else answer text): one kind at a time, so
        /// a chunk carries either; a change of kind sends what is pending first.
        var pendingIsReasoning = false
        /// Reasoning and answer text sent so far (for the budget rule).
        var sentReasoning = false
        var sentText = false
        /// Text due to go that waits while the relay link paces (`InferenceLimits.maxPacedHoldMs`), and since when.
        var held = ""
        var heldSinceMs: UInt64 = 0
    }

    private let id: String
    private let peer: PublicKey
    private let channel: Channel
    private let messenger: any PeerMessenger
    private let maxContentBytes: Int
    private let maxChunkTextBytes: Int
    private let receiptIntervalMs: UInt64
    private let retryDelayMs: UInt64
    private let maxPacedHoldMs: UInt64
    private let clock: ServiceClock
    private let onEnd: @Sendable (End) -> Void
    private let onRequesterGone: @Sendable () -> Void
    private let state: Mutex<State>

    /// - Parameters:
    ///   - keepAnswer: keep the whole text for `End.done` (the conversation cache).
    ///   - onEnd: the stream ended by itself (not after `stop()`), called once, outside the lock.
    ///   - onRequesterGone: a RECEIPT said a chunk did not reach the requester; may be called on any thread,
    ///     even from inside a send, so it must not call back into this stream synchronously.
    init(id: String, peer: PublicKey, channel: Channel, messenger: any PeerMessenger, limits: InferenceLimits,
         keepAnswer: Bool, clock: ServiceClock, onEnd: @escaping @Sendable (End) -> Void,
         onRequesterGone: @escaping @Sendable () -> Void) {
        self.id = id
        self.peer = peer
        self.channel = channel
        self.messenger = messenger
        self.maxContentBytes = limits.maxContentBytes
        // Checked here, not only where a long read is cut (`ChunkCoalescer.pieces`): short texts skip the cut.
        precondition(limits.maxChunkTextBytes >= 4, "a chunk must hold any Unicode scalar")
        self.maxChunkTextBytes = limits.maxChunkTextBytes
        self.receiptIntervalMs = limits.chunkReceiptIntervalMs
        self.retryDelayMs = max(limits.coalesceDelayMs, 1)
        self.maxPacedHoldMs = limits.maxPacedHoldMs
        self.clock = clock
        self.onEnd = onEnd
        self.onRequesterGone = onRequesterGone
        self.state = Mutex(State(
            coalescer: ChunkCoalescer(maxDelayMs: limits.coalesceDelayMs, maxBytes: limits.coalesceMaxBytes,
                                      toleranceMs: limits.coalesceToleranceMs),
            answer: keepAnswer ? "" : nil, lastReceiptAskedMs: clock.monotonicMs()))
    }

    /// The engine's handle, so `stop()` can abort the request. A stream already stopped cancels it at once
    /// (and keeps no reference: the handle may reach back here through the engine's transfer).
    func attach(_ handle: ChatStreamHandle) {
        let stopped = self.state.withLock { s -> Bool in
            if !s.ended { s.handle = handle }
            return s.ended
        }
        if stopped { handle.cancel() }
    }

    /// Stops the stream (the server ended the request): nothing more is sent after this returns, and the
    /// engine's request is aborted, or, when the answer was complete, let go.
    /// - Returns: how the stream had already ended by itself (`infer.done` sent, or the engine failed), if
    ///   it had: the server then knows whether a reply of its own may still follow.
    @discardableResult
    func stop() -> End? {
        let (handle, flush, end) = self.state.withLock { s -> (ChatStreamHandle?, Task<Void, Never>?, End?) in
            s.ended = true
            defer {
                s.flushTask = nil
                s.handle = nil
            }
            return (s.handle, s.flushTask, s.end)
        }
        flush?.cancel()
        handle?.cancel()
        return end
    }

    /// Text pieces the engine delivered so far (one per token for Ollama).
    var streamedPieces: Int { self.state.withLock { $0.pieces } }

    /// When the first text piece came from the engine (monotonic ms), nil before it.
    var firstPieceAtMs: UInt64? { self.state.withLock { $0.firstPieceAtMs } }

    // MARK: ChatEventSink

    func events(_ batch: [ChatEngineEvent]) {
        let end: End? = self.state.withLock { s in
            guard !s.ended else { return nil }
            // The text of one read goes to the coalescer as one piece: one chunk rather than a chunk and a hold.
            // Its pieces (a token each) are joined as bytes and made a String once, a read of one piece taken as
            // it is: a String append per token cost more than the rest of the token's way here. Reasoning and
            // answer text are joined apart: a change of kind within a read passes on what was joined first.
            var readPieces = 0
            var lastPiece = ""
            var readIsReasoning = false
            func readText() -> String {
                defer {
                    s.joined.removeAll(keepingCapacity: true)
                    readPieces = 0
                }
                return readPieces == 1 ? lastPiece : String(decoding: s.joined, as: UTF8.self)
            }
            func piece(_ piece: String, reasoning: Bool) {
                if readPieces > 0, readIsReasoning != reasoning {
                    let text = readText()
                    if !text.isEmpty { self.textArrived(text, reasoning: readIsReasoning, &s) }
                }
                readIsReasoning = reasoning
                s.joined.append(contentsOf: piece.utf8)
                lastPiece = piece
                readPieces += 1
                if s.pieces == 0 { s.firstPieceAtMs = self.clock.monotonicMs() }
                s.pieces += 1
            }
            for event in batch {
                switch event {
                case .text(let text):
                    piece(text, reasoning: false)
                case .reasoning(let text):
                    piece(text, reasoning: true)
                case .toolCall:
                    // We never send tools to the engine; a tool call here is the runtime's invention. Ignore it.
                    break
                case .finished(let reason, let usage):
                    let text = readText()
                    if !text.isEmpty { self.textArrived(text, reasoning: readIsReasoning, &s) }
                    // The rest goes now, paced or not: the done must follow it, and the link keeps the order.
                    self.sendPending(&s)
                    let usage = usage ?? Usage(promptTokens: 0, completionTokens: 0)
                    s.ended = true
                    s.flushTask?.cancel()
                    s.flushTask = nil
                    if reason == .length, s.sentReasoning, !s.sentText {
                        // The budget went on reasoning: an empty answer is no success (the server says so).
                        s.end = .reasoningBudgetSpent(usage: usage)
                        return s.end
                    }
                    let done = InferDone(id: self.id, finishReason: reason == .length ? "length" : "stop",
                                         usage: usage, chunks: s.nextSeq)
                    self.messenger.send(.inferDone(done), to: self.peer, channel: self.channel, store: false)
                    s.end = .done(answer: s.answer, usage: usage)
                    return s.end
                }
            }
            let text = readText()
            if !text.isEmpty { self.textArrived(text, reasoning: readIsReasoning, &s) }
            return nil
        }
        if let end { self.onEnd(end) }
    }

    /// Sends what the coalescer and the paced hold have, at once.
    private func sendPending(_ s: inout State) {
        var rest = s.held
        s.held = ""
        if case .emit(let last) = s.coalescer.finish(nowMs: self.clock.monotonicMs()) { rest += last }
        if !rest.isEmpty { self.sendText(rest, nowMs: self.clock.monotonicMs(), &s) }
    }

    func ended(_ error: (any Error)?) {
        let live = self.state.withLock { s -> Bool in
            guard !s.ended else { return false }
            s.ended = true
            s.end = .failed(error)
            s.flushTask?.cancel()
            s.flushTask = nil
            return true
        }
        if live { self.onEnd(.failed(error)) }
    }

    // MARK: Under the lock

    private func textArrived(_ text: String, reasoning: Bool, _ s: inout State) {
        if reasoning != s.pendingIsReasoning {
            // One kind per chunk: what is pending of the other kind goes first, in order.
            self.sendPending(&s)
            s.pendingIsReasoning = reasoning
        }
        if reasoning {
            self.apply(s.coalescer.textArrived(text, nowMs: self.clock.monotonicMs()), &s)
            return
        }
        if let size = s.answer?.utf8.count {
            if size + text.utf8.count <= self.maxContentBytes {
                s.answer!.append(text)  // in place: `answer + text` copied the whole answer per read
            } else {
                s.answer = nil
            }
        }
        self.apply(s.coalescer.textArrived(text, nowMs: self.clock.monotonicMs()), &s)
    }

    private func apply(_ decision: ChunkCoalescer.Decision, _ s: inout State) {
        switch decision {
        case .emit(let text):
            let now = self.clock.monotonicMs()
            if s.held.isEmpty {
                s.heldSinceMs = now
            }
            s.held += text
            guard !s.held.isEmpty else { return }
            // The relay link paces: merge into a later chunk rather than queue another frame behind the ones
            // waiting (a frame the relay's rate refused would be lost, and the requester would see a gap).
            if self.messenger.isSendPaced, now < s.heldSinceMs + self.maxPacedHoldMs {
                self.armFlush(afterMs: self.retryDelayMs, &s)
                return
            }
            let text = s.held
            s.held = ""
            self.sendText(text, nowMs: now, &s)
        case .holdUntil(let due):
            let now = self.clock.monotonicMs()
            self.armFlush(afterMs: due > now ? due - now : 0, &s)
        case .none:
            break
        }
    }

    /// Calls `flushDue` after `delay` ms, unless a call is already due.
    private func armFlush(afterMs delay: UInt64, _ s: inout State) {
        guard s.flushTask == nil else { return }
        let sleep = self.clock.sleep
        s.flushTask = Task { [weak self] in
            do { try await sleep(.milliseconds(delay)) } catch { return }
            self?.flushDue()
        }
    }

    /// Sends `text` as one chunk, or, when one read brought more than a chunk should carry, as several of at
    /// most `maxChunkTextBytes` each (cut only when over, so the usual chunk costs no array of pieces).
    private func sendText(_ text: String, nowMs now: UInt64, _ s: inout State) {
        if text.utf8.count <= self.maxChunkTextBytes {
            self.sendChunk(text, nowMs: now, &s)
        } else {
            for piece in ChunkCoalescer.pieces(of: text, maxBytes: self.maxChunkTextBytes) {
                self.sendChunk(piece, nowMs: now, &s)
            }
        }
    }

    private func sendChunk(_ text: String, nowMs now: UInt64, _ s: inout State) {
        let chunk = s.pendingIsReasoning
            ? InferChunk(id: self.id, seq: s.nextSeq, text: "", reasoning: text)
            : InferChunk(id: self.id, seq: s.nextSeq, text: text)
        if s.pendingIsReasoning { s.sentReasoning = true } else { s.sentText = true }
        s.nextSeq += 1
        // Whether the requester is still there, asked of the relay at most once per receipt interval
        // (Protocol/messages.md §2, host rule 4), counted from the stream's start: a short answer asks
        // never (a RECEIPT frame, and often a wake-up of the relay link, saved per request), a slow
        // first chunk at once. With the relay link down, every chunk asks: the send fails at once (not
        // connected), which ends the answer rather than losing chunks silently until the next ask.
        var onReceipt: (@Sendable (SendOutcome) -> Void)?
        if now >= s.lastReceiptAskedMs + self.receiptIntervalMs || !self.messenger.isConnected {
            s.lastReceiptAskedMs = now
            let gone = self.onRequesterGone
            onReceipt = { outcome in if outcome.isFailure { gone() } }
        }
        self.messenger.send(.inferChunk(chunk), to: self.peer, channel: self.channel, store: false,
                            onReceipt: onReceipt)
    }

    private func flushDue() {
        self.state.withLock { s in
            guard !s.ended else { return }
            s.flushTask = nil
            let decision = s.coalescer.flushDue(nowMs: self.clock.monotonicMs())
            // Held text is tried again (sent, or held once more) before the coalescer's next hold is armed.
            if case .emit = decision {} else if !s.held.isEmpty { self.apply(.emit(""), &s) }
            self.apply(decision, &s)
        }
    }
}
