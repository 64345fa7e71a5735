import HomebaseCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes the response to one request: whole (`respond`) or streamed (`startStream`, `writeChunk`, `finish`).
///
/// Meant to be used from the handler's thread; calls are serialised by a lock anyway, so a second thread may
/// call `abortConnection()`. Misuse (responding twice, writing a chunk before `startStream`) is a programming
/// error and traps.
public final class HTTPResponseWriter: Sendable {
    private enum Phase: Sendable {
        case idle
        case streaming
        case finished
        case aborted
    }

    private struct State: Sendable {
        var phase = Phase.idle
        var clientGone = false
        /// A stream was started; without chunked coding its end is the connection's end.
        var streamed = false
        /// A streamed response's head, held back to go out with the first chunk (or the end).
        var pendingHead: [UInt8]?
        /// The handler answered `Connection: close`: the connection ends after this response.
        var closeAfter = false
    }

    private let fd: Int32
    private let isHead: Bool
    private let keepAlive: Bool
    /// HTTP/1.0 clients cannot read chunked coding: their streams are raw bytes ended by closing.
    private let chunked: Bool
    private let state = Mutex(State())
    private let authenticate: @Sendable () -> Void

    init(fd: Int32, isHead: Bool, keepAlive: Bool, version: HTTPVersion,
         authenticate: @escaping @Sendable () -> Void = {}) {
        self.fd = fd
        self.isHead = isHead
        self.keepAlive = keepAlive
        self.chunked = version != .http1_0
        self.authenticate = authenticate
    }

    /// The request proved it may be here (the status page: it carried the access token): with
    /// `SimpleHTTPServer.Configuration.slots`, its connection is never evicted to make room for a stranger.
    public func authenticateConnection() {
        self.authenticate()
    }

    /// Sends a whole response with `Content-Length`. For HEAD requests the body is left out.
    public func respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.state.withLock { state in
            precondition(state.phase == .idle || state.phase == .aborted, "response already started")
            guard state.phase == .idle else { return }
            state.phase = .finished
            let fields = self.fields(headers)
            if fields.contains(where: { $0.name.lowercased() == "connection" && $0.value.lowercased() == "close" }) {
                state.closeAfter = true
            }
            let bytes = HTTPResponseEncoder.response(
                status: status, headers: fields, body: body, includeBody: !self.isHead)
            if !ServerSocket.sendAll(self.fd, bytes) { state.clientGone = true }
        }
    }

    /// Sends a whole response with `Content-Length`, the body in pieces of `pieceBytes` with `pause` between them
    /// (a slow link), and with `dropAfter` set, drops the connection once that many body bytes went out (a file
    /// download cut mid-way: the client sees fewer bytes than announced). For HEAD requests the body is left out.
    /// Returns false when the client went away (or the drop happened).
    @discardableResult
    public func respondPaced(status: Int, headers: [(String, String)] = [], body: ArraySlice<UInt8>,
                             pieceBytes: Int = 256 * 1024, pause: Duration? = nil, dropAfter: Int? = nil) -> Bool {
        precondition(pieceBytes > 0, "pieceBytes must be positive")
        let head: [UInt8]? = self.state.withLock { state -> [UInt8]? in
            precondition(state.phase == .idle || state.phase == .aborted, "response already started")
            guard state.phase == .idle else { return nil }
            state.phase = .finished
            var fields = self.fields(headers).filter { $0.name.lowercased() != "content-length" }
            fields.append(HTTPHeaderField(name: "Content-Length", value: String(body.count)))
            return HTTPResponseEncoder.head(status: status, headers: fields)
        }
        guard let head else { return false }
        guard ServerSocket.sendAll(self.fd, head) else {
            self.state.withLock { $0.clientGone = true }
            return false
        }
        if self.isHead { return true }
        let limit = min(body.count, dropAfter ?? body.count)
        var offset = 0
        while offset < limit {
            let end = min(limit, offset + pieceBytes)
            let ok = body[(body.startIndex + offset)..<(body.startIndex + end)].withUnsafeBytes {
                ServerSocket.sendAll(self.fd, $0)
            }
            guard ok else {
                self.state.withLock { $0.clientGone = true }
                return false
            }
            offset = end
            if let pause, offset < limit { Thread_sleep(pause) }
        }
        if dropAfter != nil && limit < body.count {
            self.abortConnection()
            return false
        }
        return true
    }

    /// Sends a whole response with a UTF-8 text body.
    public func respond(status: Int, headers: [(String, String)] = [], body: String) {
        self.respond(status: status, headers: headers, body: Array(body.utf8))
    }

    /// Starts a streamed response (chunked transfer coding) and sends its head. Returns false if the client is
    /// gone (with `headWithFirstChunk` nothing is sent yet, so true: the first write finds out).
    /// - Parameter headWithFirstChunk: hold the head back and send it in one write with the first chunk (or the
    ///   end), as Go's net/http does for a handler that writes nothing before its first flush: Ollama's
    ///   streaming endpoints send nothing at all until the first token (or progress line) is ready. A
    ///   connection aborted before that gets no response at all, as from Ollama.
    @discardableResult
    public func startStream(status: Int, headers: [(String, String)] = [], headWithFirstChunk: Bool = false) -> Bool {
        self.state.withLock { state in
            precondition(state.phase == .idle || state.phase == .aborted, "response already started")
            guard state.phase == .idle else { return false }
            state.phase = .streaming
            state.streamed = true
            var fields = self.fields(headers)
            let head: [UInt8]
            if self.chunked {
                head = HTTPResponseEncoder.chunkedHead(status: status, headers: fields)
            } else {
                fields.removeAll { $0.name.lowercased() == "connection" }
                fields.append(HTTPHeaderField(name: "Connection", value: "close"))
                head = HTTPResponseEncoder.head(status: status, headers: fields)
            }
            if headWithFirstChunk && !self.isHead {
                state.pendingHead = head
                return true
            }
            if !ServerSocket.sendAll(self.fd, head) { state.clientGone = true }
            if self.isHead { state.phase = .finished }
            return !state.clientGone
        }
    }

    /// Sends one piece of a streamed response (as one chunk). Returns false once the client has gone (EPIPE,
    /// ECONNRESET) or the connection was aborted; the handler should then stop producing.
    @discardableResult
    public func writeChunk(_ bytes: [UInt8]) -> Bool {
        self.state.withLock { state in
            if state.phase == .finished && self.isHead { return true }
            guard state.phase == .streaming else {
                precondition(state.phase == .aborted, "writeChunk before startStream or after finish")
                return false
            }
            guard !state.clientGone else { return false }
            if bytes.isEmpty { return true }
            var out = self.chunked ? HTTPResponseEncoder.chunk(bytes) : bytes
            if let head = state.pendingHead {
                state.pendingHead = nil
                out = head + out
            }
            let ok = ServerSocket.sendAll(self.fd, out)
            if !ok { state.clientGone = true }
            return ok
        }
    }

    /// Ends a streamed response with the last chunk. Harmless after an abort or on a gone client.
    public func finish() {
        self.state.withLock { state in
            guard state.phase == .streaming else { return }
            state.phase = .finished
            let head = state.pendingHead ?? []
            state.pendingHead = nil
            let tail = self.chunked ? HTTPResponseEncoder.lastChunk : []
            if !state.clientGone && !(head.isEmpty && tail.isEmpty) && !ServerSocket.sendAll(self.fd, head + tail) {
                state.clientGone = true
            }
        }
    }

    /// Drops the TCP connection now, mid-response if need be (fault injection). The peer sees the stream end
    /// without its last chunk (an orderly FIN, so it still reads every byte sent before), or no response at all
    /// if the head was still held back for the first chunk.
    public func abortConnection() {
        self.state.withLock { state in
            guard state.phase != .aborted else { return }
            state.phase = .aborted
            state.clientGone = true
            shutdown(self.fd, Int32(SHUT_RDWR))
        }
    }

    /// True once a send failed, the connection was aborted, or a wait saw the client hang up.
    public var isClientGone: Bool { self.state.withLock { $0.clientGone } }

    /// Sleeps up to `timeoutMs` without spinning, returning early with `true` if the client hangs up (or the
    /// server stops) meanwhile. Returns `false` when the full time passed with the client still there.
    public func waitForDisconnect(timeoutMs: Int) -> Bool {
        if self.isClientGone { return true }
        let deadline = ContinuousClock.now + .milliseconds(max(0, timeoutMs))
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { return false }
            let ms = Int32(clamping: max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            if ServerSocket.waitReadable(self.fd, timeoutMs: ms) {
                if ServerSocket.peerClosed(self.fd) {
                    self.state.withLock { $0.clientGone = true }
                    return true
                }
                // The client sent more (a pipelined request): poll would keep firing, so just sleep the rest.
                let rest = ContinuousClock.now.duration(to: deadline)
                if rest > .zero { Thread_sleep(rest) }
                return false
            }
        }
    }

    /// Called by the connection after the handler returned. Completes what the handler left open and says
    /// whether the connection may serve another request.
    func completeExchange() -> Bool {
        let phase = self.state.withLock { $0.phase }
        switch phase {
        case .idle:
            self.respond(status: 500, headers: [("Content-Type", "text/plain; charset=utf-8")], body: "no response\n")
        case .streaming:
            self.finish()
        case .finished, .aborted:
            break
        }
        return self.state.withLock { state in
            state.phase == .finished && !state.clientGone && self.keepAlive && !state.closeAfter
                && !(state.streamed && !self.chunked)
        }
    }

    private func fields(_ headers: [(String, String)]) -> [HTTPHeaderField] {
        var fields = headers.map { HTTPHeaderField(name: $0.0, value: $0.1) }
        if !self.keepAlive && !fields.contains(where: { $0.name.lowercased() == "connection" }) {
            fields.append(HTTPHeaderField(name: "Connection", value: "close"))
        }
        return fields
    }
}

private func Thread_sleep(_ duration: Duration) {
    let c = duration.components
    var ts = timespec(tv_sec: Int(c.seconds), tv_nsec: Int(c.attoseconds / 1_000_000_000))
    var rest = timespec()
    while nanosleep(&ts, &rest) != 0 && errno == EINTR { ts = rest }
}
