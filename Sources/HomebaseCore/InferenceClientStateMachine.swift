/// The requester's side of one remote inference (Protocol/messages.md §2, watchdogs): it tracks
/// accept → chunks → done, enforces the watchdog ladder and the ordering rules, and says when to fall back.
///
/// Pure: the caller passes the time, schedules `nextDeadlineMs`, and carries out the actions. Once the machine
/// has finished or failed, later frames for the request are dropped (`.none`).
public struct InferenceClientStateMachine: Sendable {
    /// The watchdog ladder. Defaults are the specification's.
    public struct Watchdogs: Sendable, Equatable {
        /// No `infer.accept` within this of sending the request.
        public var acceptMs: UInt64 = 10_000
        /// No first `infer.chunk` (or `infer.done`) within this of the accept.
        public var firstOutputMs: UInt64 = 90_000
        /// More than this between two chunks.
        public var stallMs: UInt64 = 30_000
        /// However the queue advances (`infer.queued`), no first output within this of the accept.
        public var maxQueueWaitMs: UInt64 = 600_000
        public init() {}
        public init(acceptMs: UInt64, firstOutputMs: UInt64, stallMs: UInt64, maxQueueWaitMs: UInt64 = 600_000) {
            self.acceptMs = acceptMs
            self.firstOutputMs = firstOutputMs
            self.stallMs = stallMs
            self.maxQueueWaitMs = maxQueueWaitMs
        }
    }

    public enum State: Equatable, Sendable {
        case awaitingAccept(deadlineMs: UInt64)
        case awaitingFirstOutput(deadlineMs: UInt64)
        case streaming(deadlineMs: UInt64)
        case finished
        case failed(FailureReason)
    }

    /// Why a remote inference failed; `label` is what `chat --json` reports as the fallback reason.
    public enum FailureReason: Equatable, Sendable {
        case acceptTimeout
        case firstOutputTimeout
        case stall
        /// RECEIPT status 2: the host is not connected.
        case offline
        /// Another failing RECEIPT status (3-6 or unknown).
        case receipt(ReceiptStatus)
        case error(code: String, message: String)
        /// A chunk arrived with `seq` other than the next expected one.
        case seqGap(expected: Int, got: Int)
        /// `infer.done` reported a different number of chunks than arrived.
        case countMismatch(expected: Int, got: Int)
        /// The relay connection was lost mid-request.
        case relayGone
        /// The caller gave up (for example the user interrupted).
        case cancelled

        public var label: String {
            switch self {
            case .acceptTimeout: "accept_timeout"
            case .firstOutputTimeout: "first_output_timeout"
            case .stall: "stall"
            case .offline: "offline"
            case .receipt(let s):
                switch s {
                case .mailboxFull: "mailbox_full"
                case .payloadTooLarge: "payload_too_large"
                case .rateLimited: "rate_limited"
                default: "receipt:\(s.rawValue)"
                }
            case .error(let code, _): "error:\(code)"
            case .seqGap: "seq_gap"
            case .countMismatch: "count_mismatch"
            case .relayGone: "relay_gone"
            case .cancelled: "cancelled"
            }
        }
    }

    public enum Action: Equatable, Sendable {
        case none
        /// The host admitted the request for `model`.
        case accepted(model: String)
        /// The host queued it at `position` (1: next); the wait goes on.
        case queued(position: Int)
        /// A chunk with reasoning: pass the reasoning on (shown apart from the answer), then `text` (often empty)
        /// as `.text` would.
        case reasoning(String, text: String)
        /// Pass this text on to the caller.
        case text(String)
        /// The answer is complete.
        case finished(finishReason: String, usage: Usage)
        /// Send `infer.cancel` (when `sendCancel`) and answer the request with the fallback.
        case fail(FailureReason, sendCancel: Bool)
    }

    public private(set) var state: State
    public let watchdogs: Watchdogs
    public private(set) var chunksReceived = 0
    public private(set) var acceptedModel: String?
    /// The last queue position the host told (`infer.queued`), nil when it never queued the request.
    public private(set) var queuePosition: Int?
    /// When the accept came: the queue's advances never stretch the first-output wait past `maxQueueWaitMs`.
    private var acceptedAtMs: UInt64 = 0

    /// Positions above this are not believed: no host queues more (ours at most 1,024).
    public static let maxQueuePosition = 4096

    /// Starts the ladder when the request has been handed to the relay.
    public init(sentAtMs: UInt64, watchdogs: Watchdogs = Watchdogs()) {
        self.watchdogs = watchdogs
        self.state = .awaitingAccept(deadlineMs: sentAtMs + watchdogs.acceptMs)
    }

    public var isTerminal: Bool {
        switch self.state {
        case .finished, .failed: true
        default: false
        }
    }

    public var nextDeadlineMs: UInt64? {
        switch self.state {
        case .awaitingAccept(let d), .awaitingFirstOutput(let d), .streaming(let d): d
        case .finished, .failed: nil
        }
    }

    /// The relay's RECEIPT for the request.
    public mutating func receiptReceived(_ status: ReceiptStatus) -> Action {
        guard !self.isTerminal, status.isFailure else { return .none }
        return self.fail(status == .recipientOffline ? .offline : .receipt(status))
    }

    public mutating func acceptReceived(model: String, nowMs: UInt64) -> Action {
        guard case .awaitingAccept = self.state else { return .none }
        self.acceptedModel = model
        self.acceptedAtMs = nowMs
        self.state = .awaitingFirstOutput(deadlineMs: nowMs + self.watchdogs.firstOutputMs)
        return .accepted(model: model)
    }

    /// `infer.queued`: the host holds the accepted request in its queue at `position` (1: next to start). The
    /// first report and each advance (a lower position) count as progress: the first-output watchdog starts
    /// again, though never past `maxQueueWaitMs` from the accept. A position that does not advance, one out of
    /// range, or a report before the accept or after output began changes nothing (a host cannot hold a
    /// requester by repeating itself).
    public mutating func queuedReceived(position: Int, nowMs: UInt64) -> Action {
        guard case .awaitingFirstOutput = self.state, (1...Self.maxQueuePosition).contains(position) else {
            return .none
        }
        if let last = self.queuePosition, position >= last { return .none }
        self.queuePosition = position
        let deadline = min(nowMs + self.watchdogs.firstOutputMs, self.acceptedAtMs + self.watchdogs.maxQueueWaitMs)
        self.state = .awaitingFirstOutput(deadlineMs: max(deadline, self.nextDeadlineMs ?? 0))
        return .queued(position: position)
    }

    /// A chunk: answer text and, from a reasoning model, reasoning. Either counts as output for the watchdogs.
    public mutating func chunkReceived(seq: Int, text: String, reasoning: String? = nil, nowMs: UInt64) -> Action {
        switch self.state {
        case .awaitingAccept:
            // A chunk without a prior accept breaks the host's ordering rule.
            return self.fail(.seqGap(expected: -1, got: seq))
        case .awaitingFirstOutput, .streaming:
            guard seq == self.chunksReceived else { return self.fail(.seqGap(expected: self.chunksReceived, got: seq)) }
            self.chunksReceived += 1
            self.state = .streaming(deadlineMs: nowMs + self.watchdogs.stallMs)
            if let reasoning, !reasoning.isEmpty { return .reasoning(reasoning, text: text) }
            return .text(text)
        case .finished, .failed:
            return .none
        }
    }

    public mutating func doneReceived(finishReason: String, usage: Usage, chunks: Int) -> Action {
        switch self.state {
        case .awaitingAccept:
            return self.fail(.seqGap(expected: -1, got: chunks))
        case .awaitingFirstOutput, .streaming:
            guard chunks == self.chunksReceived else {
                return self.fail(.countMismatch(expected: chunks, got: self.chunksReceived))
            }
            self.state = .finished
            return .finished(finishReason: finishReason, usage: usage)
        case .finished, .failed:
            return .none
        }
    }

    public mutating func errorReceived(code: String, message: String) -> Action {
        guard !self.isTerminal else { return .none }
        // The host has already stopped; a cancel would be noise.
        self.state = .failed(.error(code: code, message: message))
        return .fail(.error(code: code, message: message), sendCancel: false)
    }

    public mutating func timerFired(nowMs: UInt64) -> Action {
        switch self.state {
        case .awaitingAccept(let d) where nowMs >= d: return self.fail(.acceptTimeout)
        case .awaitingFirstOutput(let d) where nowMs >= d: return self.fail(.firstOutputTimeout)
        case .streaming(let d) where nowMs >= d: return self.fail(.stall)
        default: return .none
        }
    }

    public mutating func relayLost() -> Action {
        guard !self.isTerminal else { return .none }
        return self.fail(.relayGone)
    }

    public mutating func cancelled() -> Action {
        guard !self.isTerminal else { return .none }
        return self.fail(.cancelled)
    }

    private mutating func fail(_ reason: FailureReason) -> Action {
        self.state = .failed(reason)
        return .fail(reason, sendCancel: true)
    }
}
