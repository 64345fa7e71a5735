/// Everything the relay enforces, in one place (Protocol/relay.md §6). Breaching a limit has the effect stated.
public struct RelayLimits: Sendable, Equatable {
    // MARK: Specification defaults (part of the interoperability contract)

    /// Largest SEND payload. Over it: RECEIPT status 4 and the frame is dropped. Announced in READY.
    public var maxPayloadBytes = 256 * 1024
    /// A client must answer CHALLENGE with AUTH within this, else close 1008.
    public var authDeadlineMs: UInt64 = 10_000
    /// Interval between WebSocket pings the relay sends to an idle client.
    public var pingIntervalMs: UInt64 = 30_000
    /// Silence (no inbound bytes at all) after which the relay closes the connection (1001): three missed pings.
    public var idleTimeoutMs: UInt64 = 90_000
    /// Frames a mailbox holds. Over it: RECEIPT status 3.
    public var mailboxMaxFrames = 1_000
    /// Payload bytes a mailbox holds. Over it: RECEIPT status 3.
    public var mailboxMaxBytes = 16 * 1024 * 1024
    /// How long a stored frame is kept before it expires unacknowledged.
    public var storedFrameLifetimeMs: UInt64 = 7 * 24 * 3600 * 1000

    // MARK: Implementation choices

    /// Largest WebSocket message accepted at all. Above it the connection is closed 1009 without buffering
    /// the message. Kept larger than a maximal SEND so that a SEND slightly over `maxPayloadBytes` gets the
    /// gentler RECEIPT status 4 instead of losing the connection.
    public var maxMessageBytes: Int { self.maxPayloadBytes + 38 + 64 * 1024 }
    /// SEND frames per second per connection (token bucket refill) and the bucket's size (burst).
    public var sendFramesPerSecond: Double = 2_000
    public var sendFramesBurst: Double = 4_000
    /// SEND payload bytes per second per connection and the burst. Over either bucket: RECEIPT status 5.
    public var sendBytesPerSecond: Double = 16 * 1024 * 1024
    public var sendBytesBurst: Double = 32 * 1024 * 1024
    /// A connection is read at most this many times as fast as its SEND limits allow (frames and bytes, rate and
    /// burst); beyond, the relay stops reading it for a while (`InboundPacer`).
    public static let inboundPaceFactor = 2.0
    /// Bytes queued for a connection that the kernel has not taken. Past it, live frames for the connection are
    /// dropped (the sender gets RECEIPT 2) and stored ones wait in the mailbox until it drains, so it is never
    /// buffered without bound. Two maximal frames fit, so one big DELIVER never trips it.
    public var outboundQueueMaxBytes = 1024 * 1024
    /// A connection with output queued that the kernel has taken none of for this long has stopped reading: it is
    /// closed 4002. A slow reader (one that takes bytes, however few) is not: closing a reader whose queue a burst
    /// had filled let any sender knock any device off the relay with a few megabytes (issue 23).
    public var outboundStallMs: UInt64 = 10_000
    /// How long a connection being closed (4002, 1008, an idle timeout, an HTTP answer) may take to send what
    /// is queued, its close frame last. A peer that does not read by then is dropped without it: otherwise a
    /// reader closed for being too slow that never reads again would hold its socket and queue forever.
    public var closeFlushTimeoutMs: UInt64 = 5_000
    /// Stored frames fetched from the mailbox per page while draining a backlog on (re)connection.
    public var mailboxPageFrames = 64
    /// Connections that have not authenticated yet, in all. Over it new connections are refused (503), so an
    /// auth flood cannot exhaust memory or CPU.
    public var maxPendingAuth = 4_096
    /// Connections in all (authenticated or not). Over it new connections are refused (503).
    public var maxConnections = 50_000

    public init() {}
}
