internal import CCurl
internal import CCurlShim
import Glibc
import HomebaseCore
import Synchronization

/// One request in flight on a `CurlMultiLoop`: its easy handle, the head being parsed, and where results go.
///
/// `@unchecked Sendable` because it is built on the caller's thread, handed to the loop thread once through the
/// loop's mutex, and from then on its mutable fields are touched only by the loop thread (in libcurl callbacks,
/// which run inside `curl_multi_socket_action`/`curl_easy_pause` on that thread). What other threads touch is
/// thread-safe by itself: `cancelRequested` and `hasFinished` are atomic, and the sinks guard their state with a
/// mutex.
final class CurlTransfer: @unchecked Sendable {
    /// Where the result of the transfer goes.
    enum Delivery {
        /// `send(_:)`: the whole response, once.
        case buffered(CurlResponseSink)
        /// `stream(_:)`: the head as soon as it is complete, then the body in bounded pieces.
        case streamed(CurlBodyChannel)
        /// `stream(_:handler:)`: the head, then the bytes of each loop pass, pushed on the loop thread.
        case pushed(any HTTPStreamHandler)
        /// `download(_:into:)`: the head, then each piece lent from libcurl's buffer in its write callback.
        case written(any HTTPBodyWriter)
        /// A pushed or written transfer that has ended: the handler is let go, since it may hold the transfer's handle
        /// (a reference cycle otherwise).
        case released
    }

    let request: HTTPRequest
    private(set) var delivery: Delivery
    /// Set by any thread that wants the transfer gone; the loop checks it before starting the transfer.
    let cancelRequested = Atomic<Bool>(false)
    /// Body pieces libcurl handed over (write callbacks) (tests count them).
    let bodyPieces = Atomic<Int>(0)

    // MARK: Loop thread only
    private(set) var easy: UnsafeMutableRawPointer?
    /// Where `finish` leaves the easy handle for a later transfer (the loop's); nil: it is cleaned up.
    var handlePool: CurlHandlePool?
    /// The request's header list, set on its easy handle: kept until the handle is reset or cleaned up.
    private var headerList: CurlHeaderList?
    /// libcurl writes its detailed message here (CURLOPT_ERRORBUFFER); must outlive the easy handle.
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var status = 0
    private var headers: [(String, String)] = []
    private var headBytes = 0
    private var headComplete = false
    /// `.buffered`: the whole body so far. `.pushed`: what this loop pass read, handed over by `flushDelivery`.
    private var body: [UInt8] = []
    /// `.pushed` with a chunked body: libcurl hands over the raw body once per read (transfer decoding off), and
    /// this takes the chunk framing off, where libcurl's own decoder called the write callback once per chunk
    /// (once per token from a runtime that flushes each).
    private var chunks: HTTPChunkedStreamDecoder?
    /// A failure found by our own checks (size, idle time), which wins over the CURLcode it causes.
    private var failure: HTTPClientError?
    private var isFinished = false
    /// `isFinished`, readable from any thread: a cancel of a transfer that has ended has nothing to abort.
    let hasFinished = Atomic<Bool>(false)
    /// Last time (monotonic ns) bytes arrived, or the transfer started or resumed: the idle timeout counts
    /// from here. Bytes arriving only set `sawBytes`; the loop stamps the time once per pass.
    var lastActivityNs = Posix.monotonicNs
    /// Bytes (head or body) arrived during the current loop pass.
    var sawBytes = false
    /// `request`'s idle timeout in nanoseconds, for the loop's arithmetic.
    let idleTimeoutNs: UInt64?
    /// The read pacing's interval now (it may change while the body streams), in nanoseconds.
    var pacingIntervalNs: UInt64? { self.request.bodyPacing?.cadence.intervalNs }
    /// The write callback returned CURL_WRITEFUNC_PAUSE and `curl_easy_pause(CONT)` has not been called since.
    var isPaused = false
    /// A delivery asked for read pacing (`HTTPRequest.bodyPacing`): the loop pauses reading after this pass.
    var wantsPacingPause = false
    /// Reading is paused for pacing until this time (monotonic ns): the socket held out of the loop's set
    /// (`heldSocket`), or the transfer paused (CURLPAUSE_RECV).
    var pacedUntilNs: UInt64?
    /// The socket read pacing holds out of the loop's set, while it does. libcurl may still run the transfer
    /// during a hold (a timer of its own came due) and read what the kernel has: the loop keeps such bytes
    /// (at most one interval's worth) and hands them over after the tick, with the next read.
    var heldSocket: Int32?
    /// Within a hold's interval: bytes libcurl reads now wait for the tick.
    var isHeldUntilTick: Bool { self.heldSocket != nil && self.pacedUntilNs != nil }
    /// `mayHoldSocket`, once asked.
    private var holdable: Bool?
    /// The consumer let go of a finished paced body: bytes are read and dropped until the response ends
    /// (the connection stays reusable) or this time (monotonic ns) passes (then it is aborted).
    var drainDeadlineNs: UInt64?

    init(request: HTTPRequest, delivery: Delivery) {
        self.request = request
        self.delivery = delivery
        // Clamped to UInt64.max / 2, so a deadline of now plus any of them cannot overflow.
        self.idleTimeoutNs = request.idleTimeout.map(Posix.nanoseconds)
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        // finish(...) normally did this already; this covers a transfer dropped before it was started.
        if let easy = self.easy {
            curl_easy_cleanup(easy)
        }
        self.headerList = nil  // after the handle that points at it
        self.errorBuffer.deallocate()
    }

    // MARK: Setup

    /// Configures an easy handle (on the loop thread), ready for `curl_multi_add_handle`: one of `pool`'s, or a
    /// new one. `finish` gives it back to `pool`.
    func makeEasyHandle(pool: CurlHandlePool? = nil) throws(HTTPClientError) -> UnsafeMutableRawPointer {
        self.handlePool = pool
        guard let easy = pool?.take() ?? curl_easy_init() else {
            throw .transport(code: Int32(bitPattern: CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")
        }
        self.easy = easy
        self.lastActivityNs = Posix.monotonicNs
        let request = self.request
        let context = Unmanaged.passUnretained(self).toOpaque()

        try self.check(ccurl_setopt_str(easy, CURLOPT_URL, request.url), "URL")
        try self.check(ccurl_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https"), "PROTOCOLS_STR")
        // No signals: libcurl otherwise uses SIGALRM for DNS timeouts, which is unsafe in a threaded process.
        try self.check(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "NOSIGNAL")
        try self.check(ccurl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1), "TCP_KEEPALIVE")
        try self.check(ccurl_setopt_ptr(easy, CURLOPT_ERRORBUFFER, self.errorBuffer), "ERRORBUFFER")
        try self.check(ccurl_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback), "WRITEFUNCTION")
        try self.check(ccurl_setopt_ptr(easy, CURLOPT_WRITEDATA, context), "WRITEDATA")
        try self.check(ccurl_setopt_data_cb(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback), "HEADERFUNCTION")
        try self.check(ccurl_setopt_ptr(easy, CURLOPT_HEADERDATA, context), "HEADERDATA")
        try self.check(
            ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(request.connectTimeout)),
            "CONNECTTIMEOUT_MS")
        if let timeout = request.timeout {
            try self.check(ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, milliseconds(timeout)), "TIMEOUT_MS")
        }
        if let bytes = request.receiveBufferBytes {
            let size = min(max(bytes, 1024), 10 << 20)  // CURL_MAX_READ_SIZE
            try self.check(ccurl_setopt_long(easy, CURLOPT_BUFFERSIZE, size), "BUFFERSIZE")
        }
        if case .buffered = self.delivery {
            // Fails early when Content-Length is already too big; the write callback catches the rest.
            try self.check(
                ccurl_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(request.maxResponseBytes)),
                "MAXFILESIZE_LARGE")
        }
        if request.followRedirects {
            try self.check(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1), "FOLLOWLOCATION")
            try self.check(ccurl_setopt_long(easy, CURLOPT_MAXREDIRS, 10), "MAXREDIRS")
            try self.check(ccurl_setopt_str(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"), "REDIR_PROTOCOLS")
        }
        if request.acceptCompressed {
            // "" means every encoding this libcurl can decode.
            try self.check(ccurl_setopt_str(easy, CURLOPT_ACCEPT_ENCODING, ""), "ACCEPT_ENCODING")
        }
        if let caFile = request.caFile {
            try self.check(ccurl_setopt_str(easy, CURLOPT_CAINFO, caFile), "CAINFO")
        }
        if request.insecureSkipVerify {
            try self.check(ccurl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0), "SSL_VERIFYPEER")
            try self.check(ccurl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0), "SSL_VERIFYHOST")
        }
        if case .pushed = self.delivery, !request.acceptCompressed {
            // The raw body, once per read; `headCompleted` sets up the chunked decoding. (Not with a content
            // coding: libcurl's decompressor would see the chunk framing.)
            try self.check(ccurl_setopt_long(easy, CURLOPT_HTTP_TRANSFER_DECODING, 0), "HTTP_TRANSFER_DECODING")
        }
        try self.configureMethodAndBody(easy)
        try self.configureHeaders(easy)
        return easy
    }

    private func configureMethodAndBody(_ easy: UnsafeMutableRawPointer) throws(HTTPClientError) {
        let method = self.request.method
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidRequest("bad method \(method.debugDescription)")
        }
        if let body = self.request.body {
            // The size first: COPYPOSTFIELDS copies that many bytes (else it would use strlen), so the Swift
            // array need not outlive this call and may contain NULs.
            try self.check(
                ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), "POSTFIELDSIZE")
            let code = body.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { chars in
                    if let base = chars.baseAddress {
                        ccurl_setopt_str(easy, CURLOPT_COPYPOSTFIELDS, base)
                    } else {
                        ccurl_setopt_str(easy, CURLOPT_COPYPOSTFIELDS, "")
                    }
                }
            }
            try self.check(code, "COPYPOSTFIELDS")
        }
        switch (method, self.request.body) {
        case ("GET", nil):
            try self.check(ccurl_setopt_long(easy, CURLOPT_HTTPGET, 1), "HTTPGET")
        case ("HEAD", nil):
            try self.check(ccurl_setopt_long(easy, CURLOPT_NOBODY, 1), "NOBODY")
        case ("POST", .some):
            break  // POSTFIELDS already made it a POST
        default:
            try self.check(ccurl_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method), "CUSTOMREQUEST")
        }
    }

    private func configureHeaders(_ easy: UnsafeMutableRawPointer) throws(HTTPClientError) {
        let withBody = self.request.body != nil
        // Most requests repeat the last one's headers (a runtime's chat requests all carry the same two): the
        // loop's pool keeps that list, so a request builds one only when its headers differ.
        let list: CurlHeaderList
        if let cached = self.handlePool?.headers, cached.matches(self.request.headers, withBody: withBody) {
            list = cached
        } else {
            list = try CurlHeaderList(self.request.headers, withBody: withBody)
            self.handlePool?.headers = list
        }
        self.headerList = list
        if let slist = list.slist {
            try self.check(ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, slist), "HTTPHEADER")
        }
    }

    private func check(_ code: CURLcode, _ option: String) throws(HTTPClientError) {
        guard code != CURLE_OK else { return }
        let message = "curl_easy_setopt(\(option)): " + String(cString: curl_easy_strerror(code))
        if code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_URL_MALFORMAT {
            throw .invalidRequest(message)
        }
        throw .transport(code: Int32(bitPattern: code.rawValue), message: message)
    }

    /// Whether read pacing may hold the connection's socket out of the loop's set instead of pausing the
    /// transfer with libcurl: plain HTTP/1 with no proxy, where the connection carries this transfer alone and
    /// libcurl holds no decrypted bytes of its own (a TLS, proxied or multiplexed connection is paused through
    /// libcurl). Asked once.
    var mayHoldSocket: Bool {
        if let known = self.holdable { return known }
        guard let easy = self.easy, !Self.proxyConfigured else { return false }
        var version = 0
        var scheme: UnsafeMutableRawPointer?
        let plain = ccurl_getinfo_ptr(easy, CURLINFO_SCHEME, &scheme) == CURLE_OK
            && scheme.map { String(cString: $0.assumingMemoryBound(to: CChar.self)).lowercased() == "http" } == true
        let http1 = ccurl_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK
            && (version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1)
        self.holdable = plain && http1
        return plain && http1
    }

    /// A proxy variable libcurl reads is set (the proxy may be reached over TLS): no holds then.
    private static let proxyConfigured = ["http_proxy", "all_proxy", "ALL_PROXY"].contains { (name: String) in
        getenv(name).map { $0.pointee != 0 } ?? false
    }

    // MARK: libcurl callbacks (loop thread)

    /// One header line, terminator included (libcurl always passes whole lines).
    func headerLineReceived(_ bytes: UnsafeRawBufferPointer) -> Int {
        self.sawBytes = true
        let line = HeaderLine(bytes)
        if case .statusLine(let status) = line {
            // A new head: the previous one was a 1xx interim response or a redirect being followed.
            self.status = status
            self.headers = []
            self.headBytes = 0
            self.headComplete = false
            return bytes.count
        }
        if self.headComplete {
            return bytes.count  // trailers after a chunked body: not part of the head
        }
        self.headBytes += bytes.count
        guard self.headBytes <= HTTPClient.maxHeadBytes else {
            self.failure = .responseTooLarge
            return 0
        }
        switch line {
        case .end:
            let interim = (100..<200).contains(self.status)
            let redirect = self.request.followRedirects && (300..<400).contains(self.status)
                && self.headers.contains { $0.0 == "location" }
            if !interim && !redirect {
                self.headCompleted()
            }
        case .continuation(let more):
            // Obsolete line folding (RFC 9112 §5.2): continues the previous value.
            if !self.headers.isEmpty {
                self.headers[self.headers.count - 1].1 += " " + more
            }
        case .field(let name, let value):
            self.headers.append((name, value))
        case .statusLine, .other:
            break
        }
        return bytes.count
    }

    private func headCompleted() {
        self.headComplete = true
        if case .pushed = self.delivery, !self.request.acceptCompressed {
            self.chunks = nil
            // HTTP/1.1's transfer codings (HTTP/2 has none): chunked is taken off here; any other would reach
            // the consumer still encoded, so it fails the transfer instead.
            let fields = self.headers.filter { $0.0 == "transfer-encoding" }.map(\.1)
            if !fields.isEmpty {
                // `chunked` alone, as every streaming answer says it, is taken without parsing the list.
                let codings = fields.joined(separator: ", ")
                if fields == ["chunked"]
                    || codings.lowercased().filter({ $0 != " " && $0 != "\t" }).split(separator: ",") == ["chunked"]
                {
                    self.chunks = HTTPChunkedStreamDecoder()
                } else {
                    self.failure = .transport(code: Int32(CURLE_BAD_CONTENT_ENCODING.rawValue),
                                              message: "unsupported transfer coding \(codings.debugDescription)")
                }
            }
        }
        switch self.delivery {
        case .streamed(let channel):
            channel.headReceived(HTTPClientResponseHead(status: self.status, headers: self.headers))
        case .pushed(let handler):
            handler.head(HTTPClientResponseHead(status: self.status, headers: self.headers))
        case .written(let writer):
            writer.head(HTTPClientResponseHead(status: self.status, headers: self.headers))
        case .buffered, .released:
            break
        }
    }

    /// Bytes reserved for a pushed body's pass at its first piece: some twenty SSE events of a chat completion.
    static let pushedReadCapacity = 4096

    /// A piece of the body. Returns how much was taken: all, 0 to abort, or CURL_WRITEFUNC_PAUSE.
    func bodyReceived(_ bytes: UnsafeRawBufferPointer) -> Int {
        self.sawBytes = true
        self.bodyPieces.add(1, ordering: .relaxed)
        if self.drainDeadlineNs != nil {
            return bytes.count  // draining a finished body: nobody reads these
        }
        if !self.headComplete {
            self.headCompleted()  // e.g. an HTTP/1.0 server with no blank line seen: body bytes end the head
        }
        switch self.delivery {
        case .buffered:
            guard self.body.count + bytes.count <= self.request.maxResponseBytes else {
                self.failure = .responseTooLarge
                return 0
            }
            self.body.append(contentsOf: bytes)
            return bytes.count
        case .pushed, .released:  // released: ended, libcurl no longer calls
            // Each pass's bytes leave with `flushDelivery`: room for a read's worth at its first piece (a paced
            // read of a chunked body comes in one piece; other bodies may come in several), rather than growing
            // the array several times per read.
            if self.failure != nil { return 0 }
            if self.body.isEmpty { self.body.reserveCapacity(max(bytes.count, Self.pushedReadCapacity)) }
            let before = self.body.count
            if self.chunks != nil {
                do {
                    _ = try self.chunks!.decode(bytes, into: &self.body)
                } catch {
                    self.failure = .transport(code: Int32(CURLE_RECV_ERROR.rawValue), message: "chunked body: \(error)")
                    return 0
                }
            } else {
                self.body.append(contentsOf: bytes)
            }
            // Only data asks for a pause: a read of mere framing (a size line, the terminator) delivers nothing.
            if self.body.count > before, let pacing = self.request.bodyPacing, pacing.isStarted {
                self.wantsPacingPause = true
            }
            return bytes.count
        case .written(let writer):
            // 0 makes libcurl end the transfer with a write error; the writer knows why.
            return self.failure == nil && writer.write(bytes) ? bytes.count : 0
        case .streamed(let channel):
            switch channel.offer(bytes) {
            case .accepted:
                if let pacing = self.request.bodyPacing, pacing.isStarted {
                    self.wantsPacingPause = true
                }
                return bytes.count
            case .full:
                // libcurl keeps these bytes and hands them to us again after curl_easy_pause(CONT).
                self.isPaused = true
                return Int(CURL_WRITEFUNC_PAUSE)
            case .consumerGone:
                return 0
            }
        }
    }

    /// After a loop pass: hands what this pass read to the consumer (wakes a streamed body's reader, or calls
    /// a pushed body's handler). Returns whether the transfer was paused for a full buffer and must be resumed.
    func flushDelivery() -> Bool {
        switch self.delivery {
        case .streamed(let channel):
            return channel.flush()
        case .pushed(let handler):
            guard !self.body.isEmpty, !self.isFinished else { return false }
            var bytes = self.body
            self.body = []
            handler.body(bytes)
            // The buffer serves the next read, unless the handler kept these bytes (then this allocates anew):
            // one allocation per transfer rather than one per read. Bytes that arrived meanwhile stay.
            if self.body.isEmpty {
                bytes.removeAll(keepingCapacity: true)
                self.body = bytes
            }
            // The handler may have started pacing on this very read (its first text): pause from here.
            if let pacing = self.request.bodyPacing, pacing.isStarted, self.drainDeadlineNs == nil {
                self.wantsPacingPause = true
            }
            return false
        case .buffered, .written, .released:
            return false
        }
    }

    // MARK: Completion (loop thread)

    /// Ends the transfer after it left the multi handle (or never joined it) and reports `curlCode`.
    func finish(curlCode: CURLcode) {
        var error: HTTPClientError?
        if curlCode != CURLE_OK {
            let detail = String(cString: self.errorBuffer)
            let message = detail.isEmpty ? String(cString: curl_easy_strerror(curlCode)) : detail
            error = Self.error(for: curlCode, message: message)
        } else if self.status == 0 {
            error = .transport(code: 8, message: "no HTTP status line in the response")  // CURLE_WEIRD_SERVER_REPLY
        }
        self.finish(error: error)
    }

    /// Ends the transfer with `error` (nil: success). Our own findings (cancel, size, idle) win over `error`,
    /// because the CURLcode they provoke (write error, abort) says less.
    func finish(error: HTTPClientError?) {
        guard !self.isFinished else { return }
        self.isFinished = true
        self.hasFinished.store(true, ordering: .releasing)
        if let easy = self.easy {
            // Out of any multi handle by now (the loop removes a transfer before finishing it).
            if let pool = self.handlePool { pool.give(easy) } else { curl_easy_cleanup(easy) }
            self.easy = nil
            self.handlePool = nil  // the pool is the loop thread's: it must not outlive the loop in a transfer
        }
        self.headerList = nil  // the handle was reset or cleaned up above
        let outcome: HTTPClientError?
        if self.cancelRequested.load(ordering: .relaxed) {
            outcome = .cancelled
        } else {
            outcome = self.failure ?? error
        }
        let head = HTTPClientResponseHead(status: self.status, headers: self.headers)
        switch self.delivery {
        case .buffered(let sink):
            if let outcome {
                sink.complete(.failure(outcome))
            } else {
                sink.complete(.success(HTTPResponse(head: head, body: self.body)))
            }
            self.body = []
        case .streamed(let channel):
            if outcome == nil && !self.headComplete {
                channel.headReceived(head)  // HEAD requests and empty bodies may end without a body callback
            }
            channel.finish(error: outcome)
        case .pushed(let handler):
            if outcome == nil && !self.headComplete {
                self.headComplete = true
                handler.head(head)
            }
            // The last bytes (read by the pass that also ended the transfer, or during a hold) before the end.
            if !self.body.isEmpty {
                let bytes = self.body
                self.body = []
                if outcome != .cancelled { handler.body(bytes) }
            }
            self.delivery = .released
            handler.end(outcome)
        case .written(let writer):
            if outcome == nil && !self.headComplete {
                self.headComplete = true
                writer.head(head)
            }
            self.delivery = .released
            writer.end(outcome)
        case .released:
            break
        }
    }

    /// Marks the transfer as failed by our own check (idle timeout) before the loop removes it.
    func fail(_ error: HTTPClientError) {
        self.failure = self.failure ?? error
    }

    static func error(for code: CURLcode, message: String) -> HTTPClientError {
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .connectFailed(message)
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut
        case CURLE_FILESIZE_EXCEEDED:
            return .responseTooLarge
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalidRequest(message)
        default:
            return .transport(code: Int32(bitPattern: code.rawValue), message: message)
        }
    }
}

/// One line of a response head as libcurl hands it to the header callback (with its CRLF), read as bytes: a
/// head costs a handful of these per request, and Character-by-Character string work was most of their cost.
enum HeaderLine: Equatable {
    /// `HTTP/x status reason`: a head starts (0 when the status is not a number).
    case statusLine(Int)
    /// The empty line that ends a head.
    case end
    /// A line starting with a space or tab: more of the previous field's value (obsolete folding), trimmed.
    case continuation(String)
    /// `name: value`, the name in ASCII lowercase, both without surrounding spaces and tabs.
    case field(name: String, value: String)
    /// Anything else (no colon).
    case other

    init(_ raw: UnsafeRawBufferPointer) {
        let bytes = raw.bindMemory(to: UInt8.self)
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        let line = UnsafeBufferPointer(rebasing: bytes[0..<end])
        if line.starts(with: Self.httpPrefix) {
            // The second space-separated part; a status must be all digits.
            let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: true)
            if parts.count >= 2, !parts[1].isEmpty, parts[1].count <= 9, parts[1].allSatisfy({ (0x30...0x39).contains($0) }) {
                self = .statusLine(parts[1].reduce(0) { $0 * 10 + Int($1 - 0x30) })
            } else {
                self = .statusLine(0)
            }
        } else if line.isEmpty {
            self = .end
        } else if line[0] == 0x20 || line[0] == 0x09 {
            self = .continuation(Self.trimmed(line[...]))
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            let name = Self.trimmed(line[..<colon]).utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            self = .field(name: String(decoding: name, as: UTF8.self), value: Self.trimmed(line[(colon + 1)...]))
        } else {
            self = .other
        }
    }

    private static let httpPrefix = Array("HTTP/".utf8)

    /// The bytes without leading and trailing spaces and tabs, as text (invalid UTF-8 replaced).
    private static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        let blank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !blank($0) }), let last = bytes.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}

/// Whole milliseconds in `duration`, rounded up so that a tiny timeout never becomes 0 ("no timeout").
func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int(max(1, min(ms, Int64(Int32.max))))
}

// Capture-free, so they convert to C function pointers; the transfer comes back through the user pointer,
// kept alive by the loop's table of active transfers for as long as libcurl may call these.
private let curlWriteCallback: ccurl_data_cb = { pointer, size, count, userdata in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.bodyReceived(UnsafeRawBufferPointer(start: pointer, count: size * count))
}

private let curlHeaderCallback: ccurl_data_cb = { pointer, size, count, userdata in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.headerLineReceived(UnsafeRawBufferPointer(start: pointer, count: size * count))
}

/// Easy handles of ended transfers, reset, for the next transfers: a transfer then costs no curl_easy_init and
/// curl_easy_cleanup, whose allocations (the handle, its 16 KiB read buffer) were 5 % of the loop thread's CPU
/// at 100 streams. libcurl keeps connections in the multi handle, so a reused handle starts from nothing of its
/// last transfer: curl_easy_reset sets every option back to its default. Loop thread only.
final class CurlHandlePool {
    private var idle: [UnsafeMutableRawPointer] = []
    /// The last transfer's header list, for the next transfer with the same headers.
    var headers: CurlHeaderList?
    /// Idle handles kept at most; more are cleaned up. The pool never holds more than were running at once.
    let capacity: Int
    /// Handles taken from the pool rather than made (tests count them).
    private(set) var reused = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    deinit {
        for easy in self.idle { curl_easy_cleanup(easy) }
    }

    func take() -> UnsafeMutableRawPointer? {
        guard let easy = self.idle.popLast() else { return nil }
        self.reused += 1
        return easy
    }

    /// Keeps `easy`, reset at once, so no pointer into its last transfer (callback data, error buffer, header
    /// list) outlives that transfer; or cleans it up when the pool is full.
    func give(_ easy: UnsafeMutableRawPointer) {
        guard self.idle.count < self.capacity else {
            curl_easy_cleanup(easy)
            return
        }
        curl_easy_reset(easy)
        self.idle.append(easy)
    }
}

/// A request's headers as libcurl's list, freed with the last transfer that uses it. Immutable once made, so
/// transfers may share one (`CurlHandlePool.headers`).
final class CurlHeaderList: @unchecked Sendable {
    let headers: [(String, String)]
    let withBody: Bool
    let slist: UnsafeMutablePointer<curl_slist>?

    /// - Throws: `.invalidRequest` for a header libcurl would send other than as given (a name with a colon,
    ///   space or control byte, a value with CR, LF or NUL).
    init(_ headers: [(String, String)], withBody: Bool) throws(HTTPClientError) {
        var list: UnsafeMutablePointer<curl_slist>?
        var sawExpect = false
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }),
                value.utf8.allSatisfy({ $0 != 0 && $0 != 10 && $0 != 13 })
            else {
                curl_slist_free_all(list)
                throw .invalidRequest("bad header \(name.debugDescription)")
            }
            sawExpect = sawExpect || name.lowercased() == "expect"
            // libcurl drops "Name:" (empty value) and sends "Name;" as an empty header.
            let line = value.isEmpty ? "\(name);" : "\(name): \(value)"
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw .transport(code: Int32(bitPattern: CURLE_OUT_OF_MEMORY.rawValue), message: "curl_slist_append")
            }
            list = appended
        }
        if !sawExpect && withBody {
            // libcurl would send `Expect: 100-continue` for larger bodies and then stall up to a second for
            // servers that never answer it; our servers read the body anyway.
            list = curl_slist_append(list, "Expect:") ?? list
        }
        self.headers = headers
        self.withBody = withBody
        self.slist = list
    }

    deinit {
        curl_slist_free_all(self.slist)
    }

    /// Whether this list is what `headers` (and a body, or none) would make.
    func matches(_ headers: [(String, String)], withBody: Bool) -> Bool {
        withBody == self.withBody && headers.count == self.headers.count
            && zip(headers, self.headers).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
