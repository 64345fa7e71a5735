import HomebaseCore
import HomebaseNode

/// What the inference server is doing and what went wrong lately (`InferenceServer.activity`), for the status
/// page. Never content: who, which model, how many tokens.
public struct InferenceActivity: Sendable, Equatable {
    /// Recent events kept: enough for a glance at the last few minutes of a busy Homebase, small enough to send
    /// every second.
    public static let maxEvents = 50

    /// Requests admitted and not ended: streaming, or queued for a slot; oldest first.
    public var streams: [LiveStream]
    /// Oldest first, at most `maxEvents`.
    public var events: [InferenceEvent]
    /// Requests admitted since the daemon started.
    public var requestsTotal: Int
    /// Text pieces (a token each, from Ollama) streamed since the daemon started, live streams included.
    public var tokensTotal: Int

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
    /// `syncDelta` for a sibling, `contact` for a guest.
    public var channel: Channel
    public var model: String
    /// Streaming (false: queued for a slot).
    public var running: Bool
    public var admittedAtMs: UInt64
    /// Text pieces streamed so far.
    public var tokens: Int
    /// Pieces per second since it got its slot (0 while queued).
    public var tokensPerSecond: Double

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
