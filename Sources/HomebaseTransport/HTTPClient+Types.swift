import Synchronization

/// One HTTP request for `HTTPClient`: what to send, and the limits that end it.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `HEAD`, `PUT`, `DELETE`, … (sent as given).
    public var method: String
    /// Absolute `http://` or `https://` URL; other schemes are refused.
    public var url: String
    /// Request headers in order, sent as given. A header with an empty value is sent empty (not dropped).
    /// Names and values must not contain CR, LF or NUL, else the request fails with `invalidRequest`.
    public var headers: [(String, String)]
    /// Body, copied into libcurl when the transfer starts; `nil` sends none.
    public var body: [UInt8]?
    /// Longest wait for the TCP (and TLS) connection. Over it: `timedOut`.
    public var connectTimeout: Duration
    /// Longest the whole exchange may take, body included; `nil` for none (long streams). Over it: `timedOut`.
    public var timeout: Duration?
    /// Longest silence (no header or body bytes) once the request is sent; `nil` for none. Over it: `timedOut`.
    /// Time the client spends paused because the stream's consumer is slow does not count.
    public var idleTimeout: Duration?
    /// Largest body `send(_:)` buffers; a bigger one fails with `responseTooLarge`. `stream(_:)` ignores it:
    /// a stream holds at most `HTTPClient.streamBufferBytes` plus one libcurl chunk.
    public var maxResponseBytes: Int
    /// PEM file of CA certificates to trust instead of the system store (a self-signed server in tests).
    public var caFile: String?
    /// Skips TLS certificate and host name checks. Only for tests against a throwaway server.
    public var insecureSkipVerify: Bool
    /// Follows 3xx redirects (at most 10, http and https only). Off by default: a model API never redirects,
    /// and following one would re-send the Authorization header to wherever it points.
    public var followRedirects: Bool
    /// Asks for gzip/deflate/br and decompresses. Off by default: compression delays small streamed chunks.
    public var acceptCompressed: Bool
    /// Read pacing for `stream(_:)`: once started, the socket is read at most once per interval, so a server
    /// that writes one small piece per token costs one wake-up per interval, not one per token. `nil`: none.
    public var bodyPacing: HTTPBodyPacing?
    /// Bytes libcurl reads from the socket at a time (CURLOPT_BUFFERSIZE, clamped to 1 KiB…10 MiB); `nil` keeps
    /// its 16 KiB. A bulk download asks for more: fewer reads and write callbacks per megabyte, and larger writes
    /// for an `HTTPBodyWriter`.
    public var receiveBufferBytes: Int?

    public init(
        method: String = "GET",
        url: String,
        headers: [(String, String)] = [],
        body: [UInt8]? = nil,
        connectTimeout: Duration = .seconds(5),
        timeout: Duration? = nil,
        idleTimeout: Duration? = nil,
        maxResponseBytes: Int = 16 * 1024 * 1024,
        caFile: String? = nil,
        insecureSkipVerify: Bool = false,
        followRedirects: Bool = false,
        acceptCompressed: Bool = false
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.idleTimeout = idleTimeout
        self.maxResponseBytes = maxResponseBytes
        self.caFile = caFile
        self.insecureSkipVerify = insecureSkipVerify
        self.followRedirects = followRedirects
        self.acceptCompressed = acceptCompressed
    }
}

/// Paces how often a streamed body is read, from the moment its consumer calls `start()`.
///
/// Before `start()` every piece is delivered as it arrives, so the first useful bytes (a model's first token)
/// are never held. After it, each delivery pauses reading for the cadence's interval; bytes the server sends
/// meanwhile wait in the kernel's socket buffer and arrive together as the next piece (if libcurl reads some
/// early, on a timer of its own, the client keeps them for that piece: at most one interval's bytes). The idle
/// timeout does not count paused time.
///
/// Pacing leaves the last bytes of a response (the chunked terminator) unread for up to an interval, and
/// libcurl closes a connection whose response was not read to its end. So a consumer that has what it needs
/// calls `finish()` before letting go of the body: the transfer then reads on, discarding, for up to
/// `drainGrace` and ends cleanly, keeping the connection for reuse; only past that is it aborted.
public final class HTTPBodyPacing: Sendable {
    /// Where the interval comes from; shared by every body a server paces alike, so one change (more streams
    /// at once, say) applies to all of them from their next pause.
    public let cadence: HTTPReadCadence
    /// The interval now.
    public var interval: Duration { self.cadence.interval }
    /// How long a finished body may be read on after its consumer let go: two intervals.
    public var drainGrace: Duration { self.interval * 2 }
    private let started = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)

    public init(cadence: HTTPReadCadence) {
        self.cadence = cadence
    }

    /// A pacing with a fixed interval of its own. - Parameter interval: more than zero.
    public convenience init(interval: Duration) {
        self.init(cadence: HTTPReadCadence(interval: interval))
    }

    /// From now on, deliveries are at least an interval apart. Any thread; idempotent.
    public func start() {
        self.started.store(true, ordering: .relaxed)
    }

    /// The consumer has the whole answer; the rest of the body is framing. Any thread; idempotent.
    public func finish() {
        self.finished.store(true, ordering: .relaxed)
    }

    public var isStarted: Bool { self.started.load(ordering: .relaxed) }
    public var isFinished: Bool { self.finished.load(ordering: .relaxed) }
}

/// The read interval of paced bodies (`HTTPBodyPacing`), changeable while they stream: the HTTP loop reads it
/// at every pause, so a new interval applies to each body from its next read on.
public final class HTTPReadCadence: Sendable {
    private let nanoseconds: Atomic<UInt64>

    /// - Parameter interval: more than zero.
    public init(interval: Duration) {
        self.nanoseconds = Atomic(Self.checked(interval))
    }

    public var interval: Duration { .nanoseconds(Int64(self.intervalNs)) }

    /// Sets the interval; any thread. - Parameter interval: more than zero.
    public func set(_ interval: Duration) {
        self.nanoseconds.store(Self.checked(interval), ordering: .relaxed)
    }

    /// The interval in nanoseconds, at least 1 and at most `Posix.nanoseconds`' clamp, so a deadline of now
    /// plus it cannot overflow.
    var intervalNs: UInt64 { self.nanoseconds.load(ordering: .relaxed) }

    private static func checked(_ interval: Duration) -> UInt64 {
        precondition(interval > .zero, "a pacing interval must be positive")
        return max(1, Posix.nanoseconds(interval))
    }
}

/// Status line and headers of the final response (interim 1xx responses and followed redirects are dropped).
public struct HTTPClientResponseHead: Sendable, Equatable {
    /// Status code, e.g. 200.
    public var status: Int
    /// Headers in arrival order, names lowercased, values trimmed.
    public var headers: [(String, String)]

    public init(status: Int, headers: [(String, String)]) {
        self.status = status
        self.headers = headers
    }

    /// The first value of header `name` (any case), or `nil`.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return self.headers.first { $0.0 == lowered }?.1
    }

    public static func == (lhs: HTTPClientResponseHead, rhs: HTTPClientResponseHead) -> Bool {
        lhs.status == rhs.status && lhs.headers.elementsEqual(rhs.headers) { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}

/// A complete, buffered response.
public struct HTTPResponse: Sendable {
    public var head: HTTPClientResponseHead
    public var body: [UInt8]

    public init(head: HTTPClientResponseHead, body: [UInt8]) {
        self.head = head
        self.body = body
    }
}

/// Why a request produced no (complete) response. An HTTP error status is not one of these: it is a response.
public enum HTTPClientError: Error, Equatable, Sendable {
    /// No connection: refused, unreachable, or the host name did not resolve. The message is libcurl's.
    case connectFailed(String)
    /// `connectTimeout`, `timeout` or `idleTimeout` ran out.
    case timedOut
    /// The caller's task was cancelled, the stream was dropped, or the client was shut down.
    case cancelled
    /// The body exceeded `maxResponseBytes` (or the head exceeded `HTTPClient.maxHeadBytes`).
    case responseTooLarge
    /// The request cannot be sent as given: a header with CR/LF/NUL, or a URL libcurl refuses.
    case invalidRequest(String)
    /// Any other libcurl failure (TLS, protocol error, connection reset, …): its `CURLcode` and message.
    case transport(code: Int32, message: String)
}
