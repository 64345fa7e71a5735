import HomebaseCore

/// The inference server's limits (Protocol/messages.md §2) and admission control.
public struct InferenceLimits: Sendable, Equatable {
    /// Requests streaming from the runtime at once, all models together; per model, `runtimeParallel` bounds
    /// them too.
    public var maxConcurrent: Int
    /// Admitted requests waiting for a slot. They are accepted (accept means admitted), told where they stand
    /// (`infer.queued`) and wait within the client's first-output watchdog; beyond this, `busy`.
    public var maxQueued: Int
    /// Requests the runtime runs at once per model (Ollama's `OLLAMA_NUM_PARALLEL`, 1 by default;
    /// `homebase config --runtime-parallel`). More would wait inside the runtime, unseen, with no byte to tell
    /// the requester: the Homebase keeps them in its own queue instead, where it can.
    public var runtimeParallel = 1
    /// The requester's first-output window (Protocol/messages.md §2: 90 s). A request the queue is not expected
    /// to start within it (the recent answer time of its model times its turn) is refused at once with `busy`,
    /// so its requester falls back now rather than at its watchdog.
    public var queueWaitBudgetMs: UInt64 = 90_000
    /// A request still queued this long after its accept hears of its place (messages.md host rule 7: by 1 s at
    /// the latest); one that starts sooner is never told. A tell at once cost one more sealed message per queued
    /// request: under a steady load of short answers (100 streams, 36 of them waiting about 0.3 s) 8 % of the
    /// Homebase's CPU (tools/bench-ab), for a wait nobody sees.
    public var queueTellDelayMs: UInt64 = 500
    /// Then it hears of a better place at most this often. Telling every queued request at every advance cost one
    /// sealed message per queued request per finished one: with 36 queued behind 64 streams, 5.6 times the
    /// Homebase's CPU (tools/bench-ab). Once a second keeps the client's first-output watchdog (90 s) moving all
    /// the same.
    public var queueTellIntervalMs: UInt64 = 1_000
    /// Request limits from the protocol; over any: `bad_request`.
    public var maxMessages: Int
    public var maxContentBytes: Int
    public var maxModelBytes: Int
    /// An `id` longer than this is answered but not remembered for the at-most-once rule, so hostile ids
    /// cannot grow the memory. A UUID is 36 bytes.
    public var maxRememberedIDBytes: Int
    /// `(sender, id)` pairs remembered for the at-most-once rule. Older ones are forgotten; by then the
    /// envelope replay rule is what stops a replayed request.
    public var rememberedIDs: Int
    /// Refusals (an `infer.error` instead of an accept) one sender gets a minute, and at once. Past them its
    /// requests are dropped unanswered until the allowance refills: a peer flooding requests it knows will be
    /// refused (a pending guest's `not_granted`, a guest past its limits' `busy`) cannot make the host answer
    /// each one, which cost a frame of the host's own relay budget per request (issue 23), a registry read and
    /// a log line. A client whose request gets no answer falls back at its 10 s accept watchdog.
    public var refusalsPerMinute = 30
    /// Coalescing: at most one chunk per `coalesceDelayMs` or per `coalesceMaxBytes` of text.
    public var coalesceDelayMs: UInt64
    public var coalesceMaxBytes: Int
    /// Chunk frames a second that all running streams may cost together. Past `coalesceDelayMs`, a stream's
    /// read interval (and so its chunk interval) grows with the number of streams, so their sum stays within
    /// this: an eighth of the relay's SEND rate per connection (2,000/s, Protocol/relay.md §6), so the relay's
    /// bucket never refuses a chunk, accepts and dones never wait behind a flood of them, and the Homebase's
    /// work per second stays bounded however many streams the owner allows. Each read of a stream costs a
    /// recv(2), libcurl's pass, decoding and a sealed frame: at the admission ceiling (64 streams) the budget
    /// is what keeps the Homebase's CPU within a tenth of the runtime's, and the streams still move four times
    /// a second (`maxCoalesceDelayMs`). With 500, 64 streams read every 150 ms and cost 15 % more CPU.
    public var chunkFramesPerSecond = 250
    /// The longest interval that budget may stretch a stream's to: text still moves four times a second, far
    /// inside the client's 30 s between-chunks watchdog.
    public var maxCoalesceDelayMs: UInt64 = 250
    /// A stream's chunks ask the relay for a RECEIPT (which says whether the requester is still there) at most
    /// once per this long, counted from the stream's start (so an answer shorter than this asks never). A
    /// requester that went away is noticed within this plus one read interval of its going, where a RECEIPT
    /// per chunk cost a frame back from the relay, and a wake-up of the relay link, for every chunk.
    public var chunkReceiptIntervalMs: UInt64 = 500
    /// While the relay link paces SENDs (the relay's rate would refuse more, `PeerMessenger.isSendPaced`), a
    /// stream holds its text back and sends it merged into a later chunk, instead of queuing one frame per read
    /// behind the others: under load chunks carry more text, never fewer of the answer's bytes. Text held this
    /// long goes anyway (queued behind the rest, in order), so no stream starves while others keep the link busy.
    public var maxPacedHoldMs: UInt64 = 2_000
    /// Largest text one `infer.chunk` carries; more (one late read of a fast runtime) goes in several. With
    /// JSON escaping (at most 6 bytes per byte) the envelope stays far below the relay's payload limit.
    public var maxChunkTextBytes = 16 * 1024

    public init(maxConcurrent: Int = 4, maxQueued: Int = 16, maxMessages: Int = 512, maxContentBytes: Int = 1 << 20,
                maxModelBytes: Int = 200, maxRememberedIDBytes: Int = 128, rememberedIDs: Int = 4096,
                coalesceDelayMs: UInt64 = 30, coalesceMaxBytes: Int = 1024) {
        precondition(maxConcurrent >= 1 && maxQueued >= 0 && rememberedIDs >= 1, "inference limits out of range")
        self.maxConcurrent = maxConcurrent
        self.maxQueued = maxQueued
        self.maxMessages = maxMessages
        self.maxContentBytes = maxContentBytes
        self.maxModelBytes = maxModelBytes
        self.maxRememberedIDBytes = maxRememberedIDBytes
        self.rememberedIDs = rememberedIDs
        self.coalesceDelayMs = coalesceDelayMs
        self.coalesceMaxBytes = coalesceMaxBytes
    }

    /// Text due within this long is sent at once (`ChunkCoalescer.toleranceMs`). Paced reads come once per
    /// `runtimeReadPacing` tick, but a tick's reads of many streams are handled one after another, so one
    /// stream's turn drifts by milliseconds from tick to tick; each drift would otherwise cost a hold timer.
    public var coalesceToleranceMs: UInt64 { self.coalesceDelayMs / 2 }

    /// How often the runtime's stream is read once text flows (`HTTPBodyPacing`) while one request streams:
    /// the coalescing delay, so each read finds the coalescer due and goes out as one chunk, and a token costs
    /// no wake-up of its own. `nil` (no pacing) when there is no coalescing delay.
    public var runtimeReadPacing: Duration? { self.runtimeReadPacing(running: 1) }

    /// The read interval while `running` requests stream at once: the coalescing delay, or a whole number of
    /// delays (up to `maxCoalesceDelayMs`) so that together they read, and send chunks, at most
    /// `chunkFramesPerSecond` times a second — past 62 streams with the defaults (at the admission ceiling of
    /// 64, 256 a second), held at the 250 ms ceiling, they may read more. `nil` when there is no coalescing delay.
    public func runtimeReadPacing(running: Int) -> Duration? {
        guard self.coalesceDelayMs > 0 else { return nil }
        let budget = UInt64(max(self.chunkFramesPerSecond, 1))
        let sharedMs = (UInt64(max(running, 1)) * 1000 + budget - 1) / budget  // rounded up
        // In whole steps of the coalescing delay (rounded up, so within the budget): the interval changes
        // only every few streams started or ended, and paused streams keep resuming on one grid of ticks
        // (`CurlMultiLoop.resumeTick`), one pass of the HTTP loop for all of them.
        let ceiling = max(self.coalesceDelayMs, self.maxCoalesceDelayMs)
        let wanted = min(max(self.coalesceDelayMs, sharedMs), ceiling)
        let steps = (wanted - 1) / self.coalesceDelayMs + 1  // rounded up, without overflow
        let ms = steps > ceiling / self.coalesceDelayMs ? ceiling : steps * self.coalesceDelayMs
        return .milliseconds(Int64(min(ms, UInt64(Int64.max / 1000))))
    }

    /// A low estimate of the tokens `messages` take: a token per 4 bytes of UTF-8 (English runs 4 to 5
    /// characters a token), plus 4 per message for the chat template. Low on purpose: a request is refused for
    /// its length only when it surely does not fit.
    public static func estimatedPromptTokens(_ messages: [ChatMessage]) -> Int {
        messages.reduce(0) { $0 + $1.content.utf8.count / 4 + 4 }
    }

    /// Why `request` breaks a protocol limit, or nil if it does not.
    public func violation(of request: InferRequest) -> String? {
        if request.hasTools { return "tools never cross the wire" }
        if request.messages.isEmpty { return "no messages" }
        if request.messages.count > self.maxMessages { return "more than \(self.maxMessages) messages" }
        if request.model.isEmpty { return "no model" }
        if request.model.utf8.count > self.maxModelBytes { return "model name longer than \(self.maxModelBytes) bytes" }
        var content = 0
        for message in request.messages {
            content += message.content.utf8.count
            if content > self.maxContentBytes { return "more than \(self.maxContentBytes) bytes of content" }
        }
        return nil
    }
}
