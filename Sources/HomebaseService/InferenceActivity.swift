import HomebaseCore
import HomebaseNode

/// What the inference server is doing and what went wrong lately (`InferenceServer.activity`), for the status
/// page. Never content: who, which model, how many tokens.
public struct InferenceActivity: Sendable, Equatable {
    /// Recent events kept: enough for a glance at the last few minutes of a busy Homebase, small enough to send
    /// every second.
    public static let maxEvents = 50
    /// Finished requests kept: the last few, for the page's list.
    public static let maxFinished = 20

    /// Requests admitted and not ended: streaming, or queued for a slot; oldest first.
    public var streams: [LiveStream]
    /// Oldest first, at most `maxEvents`.
    public var events: [InferenceEvent]
    /// Requests admitted since the daemon started.
    public var requestsTotal: Int
    /// Text pieces (a token each, from Ollama) streamed since the daemon started, live streams included.
    public var tokensTotal: Int
    /// Requests that ended, however they ended, oldest first, at most `maxFinished`.
    public var finished: [FinishedRequest] = []

    public init(streams: [LiveStream] = [], events: [InferenceEvent] = [], requestsTotal: Int = 0,
                tokensTotal: Int = 0) {
        self.streams = streams
        self.events = events
        self.requestsTotal = requestsTotal
        self.tokensTotal = tokensTotal
    }
}

/// One admitted request.
public struct LiveStream: Sendable, Equatable {
    public var peer: PublicKey
    /// `sibling` for a sibling, `contact` for a guest.
    public var channel: Channel
    public var model: String
    /// Streaming (false: queued for a slot).
    public var running: Bool
    public var admittedAtMs: UInt64
    /// Text pieces streamed so far.
    public var tokens: Int
    /// Pieces per second since it got its slot (0 while queued).
    public var tokensPerSecond: Double
    /// The requester's id for it (the page's "Stop" names it).
    public var id = ""
    /// From its admission to its first text piece, ms; nil before that piece.
    public var firstTokenMs: UInt64?

    public init(peer: PublicKey, channel: Channel, model: String, running: Bool, admittedAtMs: UInt64, tokens: Int,
                tokensPerSecond: Double) {
        self.peer = peer
        self.channel = channel
        self.model = model
        self.running = running
        self.admittedAtMs = admittedAtMs
        self.tokens = tokens
        self.tokensPerSecond = tokensPerSecond
    }
}

/// Something the protocol reported that makes a requester fall back, or that it did because it fell back.
public struct InferenceEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// `infer.error` sent (`code` says which: `not_granted`, `busy`, `runtime_unavailable`, …).
        case error
        /// `infer.cancel` from the requester, whose watchdog fired or whose user stopped the answer.
        case cancelled
        /// A RECEIPT said the requester is no longer there.
        case requesterGone = "requester_gone"
    }

    public var atMs: UInt64
    public var kind: Kind
    public var code: String?
    public var message: String
    public var peer: PublicKey
    public var channel: Channel
    public var model: String

    public init(atMs: UInt64, kind: Kind, code: String?, message: String, peer: PublicKey, channel: Channel,
                model: String) {
        self.atMs = atMs
        self.kind = kind
        self.code = code
        self.message = message
        self.peer = peer
        self.channel = channel
        self.model = model
    }
}

/// A request that ended: who, which model, how much and how fast, and how it ended. Never content.
public struct FinishedRequest: Sendable, Equatable {
    public var peer: PublicKey
    public var channel: Channel
    public var model: String
    public var endedAtMs: UInt64
    /// Text pieces streamed.
    public var tokens: Int
    /// From its admission to its first text piece, ms; nil when none came.
    public var firstTokenMs: UInt64?
    /// From its admission to its end, ms.
    public var durationMs: UInt64
    /// `done`, an error code (`host_error`, …), `cancelled`, `cancelled while queued`, `cut short` (the requester
    /// cancelled mid-answer) or `stopped` (by the owner, from the page).
    public var outcome: String

    public init(peer: PublicKey, channel: Channel, model: String, endedAtMs: UInt64, tokens: Int, firstTokenMs: UInt64?,
                durationMs: UInt64, outcome: String) {
        self.peer = peer
        self.channel = channel
        self.model = model
        self.endedAtMs = endedAtMs
        self.tokens = tokens
        self.firstTokenMs = firstTokenMs
        self.durationMs = durationMs
        self.outcome = outcome
    }
}
