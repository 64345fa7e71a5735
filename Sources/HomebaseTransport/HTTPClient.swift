/// The HTTP client for every model API (Ollama now, OpenAI and Anthropic later), over libcurl.
///
/// One client runs one `curl_multi` handle on one dedicated thread, so transfers run concurrently and share a
/// cache of kept-alive connections. Make one client and share it; it is `Sendable`. Dropping the client lets
/// transfers still running (a stream being read) finish; the thread and the idle connections go after them.
///
/// Cancelling the awaiting task, or dropping a body stream, aborts the transfer within milliseconds: the loop
/// thread is woken (its eventfd) instead of waiting for libcurl's next progress callback.
public final class HTTPClient: Sendable {
    /// Bytes a streamed body may buffer for a slow consumer before the transfer pauses (TCP then pushes
    /// back on the server). Big enough that a consumer keeping up never causes a pause.
    public static let streamBufferBytes = 256 * 1024
    /// Largest response head (status line and headers) accepted, in bytes; over it: `responseTooLarge`.
    public static let maxHeadBytes = 64 * 1024

    private let loop: CurlMultiLoop

    /// - Parameter maxIdleConnections: connections kept open for reuse after their transfer ends
    ///   (CURLMOPT_MAXCONNECTS). Does not limit concurrent transfers.
    public init(maxIdleConnections: Int = 16) {
        self.loop = CurlMultiLoop(maxConnections: maxIdleConnections)
    }

    deinit {
        self.loop.shutdown()
    }

    /// Wake-ups of the loop thread sent through its eventfd from other threads so far (tests count them).
    var loopWakeupsSent: Int { self.loop.wakeupsSent.load(ordering: .relaxed) }
    /// Passes the loop thread has made so far (tests count them).
    var loopPasses: Int { self.loop.passes.load(ordering: .relaxed) }
    /// Paced reads that held their socket out of the loop's set (tests count them).
    var pacingSocketHolds: Int { self.loop.socketHolds.load(ordering: .relaxed) }
    /// Cancels posted to the loop so far (tests count them).
    var loopCancelsPosted: Int { self.loop.cancelsPosted.load(ordering: .relaxed) }
    /// Pacing holds ended: the socket returned to the loop's set, or left with its transfer (tests count them).
    var pacingHoldReleases: Int { self.loop.holdReleases.load(ordering: .relaxed) }
    /// Transfers that reused an ended transfer's easy handle (tests count them).
    var loopHandlesReused: Int { self.loop.handlesReused.load(ordering: .relaxed) }

    /// Sends `request` and returns the whole response, body buffered (at most `request.maxResponseBytes`).
    ///
    /// Any status is a response, 4xx and 5xx included.
    /// - Throws: `HTTPClientError`: `connectFailed`, `timedOut`, `cancelled` (the task was cancelled),
    ///   `responseTooLarge`, `invalidRequest` or `transport`.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let sink = CurlResponseSink()
        let transfer = CurlTransfer(request: request, delivery: .buffered(sink))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                sink.wait(continuation)
                self.loop.start(transfer)
            }
        } onCancel: {
            self.loop.cancel(transfer)
        }
    }

    /// Sends `request` and returns the final response head as soon as it arrives, with the body as a stream
    /// of byte pieces as they arrive (feed them to `LineSplitter` or `SSEParser`).
    ///
    /// Cancelling the consuming task, or dropping the stream, aborts the transfer at once. The stream is
    /// bounded: while more than `streamBufferBytes` wait unread, the transfer pauses. Each element is
    /// everything that arrived since the previous one. `maxResponseBytes` does not apply; `idleTimeout`
    /// (not counting paused time) and `timeout` do, and end the stream with `timedOut`.
    /// - Throws: before the head, as `send(_:)`; later errors end the stream.
    public func stream(
        _ request: HTTPRequest
    ) async throws -> (HTTPClientResponseHead, AsyncThrowingStream<[UInt8], Error>) {
        let channel = CurlBodyChannel(highWaterBytes: Self.streamBufferBytes)
        let transfer = CurlTransfer(request: request, delivery: .streamed(channel))
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                channel.waitForHead(continuation)
                self.loop.start(transfer)
            }
        } onCancel: {
            self.loop.cancel(transfer)
        }
        let reader = CurlBodyReader(loop: self.loop, transfer: transfer, channel: channel)
        // Pull-based: each `next()` takes from the bounded channel. The closure owns the reader, so when the
        // stream is dropped (or its task cancelled, which releases the closure) the reader's deinit aborts.
        let body = AsyncThrowingStream<[UInt8], Error>(unfolding: { try await reader.next() })
        return (head, body)
    }

    /// Sends `request` and pushes the response to `handler` on the client's loop thread, with no task or
    /// thread hop per read: for a consumer whose work per read is short and non-blocking (the Homebase turns
    /// each read into relay frames). The handler gets the head, then everything one loop pass read as one
    /// piece, then the end, exactly once, last; see `HTTPStreamHandler`.
    ///
    /// Nothing is buffered for the handler: it takes each piece as it comes, so memory is its business.
    /// `idleTimeout` (not counting paced time) and `timeout` apply. `cancel()` on the returned handle aborts
    /// the transfer (the handler then hears `.cancelled`, unless it already heard its end); a paced body
    /// whose pacing `finish()`ed is read to its end first, so the connection can be reused.
    public func stream(_ request: HTTPRequest, handler: any HTTPStreamHandler) -> HTTPStreamHandle {
        let transfer = CurlTransfer(request: request, delivery: .pushed(handler))
        self.loop.start(transfer)
        return HTTPStreamHandle(loop: self.loop, transfer: transfer)
    }

    /// Sends `request` and lends each piece of the body to `writer` inside libcurl's write callback, straight
    /// from libcurl's buffer: no copy and no allocation per read, for a consumer that writes the bytes to a file
    /// at once (a model download). libcurl takes off any transfer coding; `receiveBufferBytes` sets how much
    /// one piece may be. Cancelling and timeouts work as for `stream(_:handler:)`.
    public func download(_ request: HTTPRequest, into writer: any HTTPBodyWriter) -> HTTPStreamHandle {
        let transfer = CurlTransfer(request: request, delivery: .written(writer))
        self.loop.start(transfer)
        return HTTPStreamHandle(loop: self.loop, transfer: transfer)
    }
}

/// The receiver of `HTTPClient.download(_:into:)`. Called on the client's loop thread like an
/// `HTTPStreamHandler`: `head` once (unless the transfer fails first), `write` for each piece libcurl read
/// (never empty), then `end` exactly once. Calls must not block for long: every transfer of the client waits.
public protocol HTTPBodyWriter: AnyObject, Sendable {
    /// The final response head (after interim 1xx responses and followed redirects).
    func head(_ head: HTTPClientResponseHead)
    /// Body bytes, in order, lent for the duration of the call only. Returning `false` aborts the transfer
    /// (`end` then reports a transport error; the writer knows its own reason).
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The transfer is over: `nil` when the body ended normally, else why it did not.
    func end(_ error: HTTPClientError?)
}

/// The receiver of `HTTPClient.stream(_:handler:)`. Called on the client's loop thread (only `end(.cancelled)`
/// of a transfer started while the client shuts down comes on the starting thread), one call at a time per
/// transfer: `head` once (unless the transfer fails first), `body` with what each loop pass read (never
/// empty), then `end` exactly once. Calls must return quickly and never block: every transfer of the client
/// waits while one runs.
public protocol HTTPStreamHandler: AnyObject, Sendable {
    /// The final response head (after interim 1xx responses and followed redirects).
    func head(_ head: HTTPClientResponseHead)
    /// Body bytes, in order.
    func body(_ bytes: [UInt8])
    /// The transfer is over: `nil` when the body ended normally, else why it did not.
    func end(_ error: HTTPClientError?)
}

/// A transfer started by `HTTPClient.stream(_:handler:)`.
public final class HTTPStreamHandle: Sendable {
    private let loop: CurlMultiLoop
    private let transfer: CurlTransfer

    init(loop: CurlMultiLoop, transfer: CurlTransfer) {
        self.loop = loop
        self.transfer = transfer
    }

    /// Body pieces libcurl handed over so far (tests count them).
    var bodyPieces: Int { self.transfer.bodyPieces.load(ordering: .relaxed) }

    /// Aborts the transfer; harmless once it has ended. Any thread, the handler's own calls included.
    public func cancel() {
        self.loop.cancel(self.transfer)
    }
}
