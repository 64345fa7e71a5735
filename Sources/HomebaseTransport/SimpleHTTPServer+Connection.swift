import HomebaseCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads requests from one socket and runs the handler for each, on the connection's own thread.
struct HTTPServerConnection {
    let fd: Int32
    let server: SimpleHTTPServer
    private var parser: HTTPRequestHeadParser
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// When the request being read must be complete (`requestReadTimeoutMs`); nil before its first byte.
    private var readDeadline: ContinuousClock.Instant?
    /// The request being read outran its deadline.
    private var timedOut = false
    /// Bytes of the request being read have arrived.
    private var started = false

    init(fd: Int32, server: SimpleHTTPServer) {
        self.fd = fd
        self.server = server
        self.parser = HTTPRequestHeadParser(limits: server.configuration.headLimits)
    }

    mutating func run() {
        while true {
            let head: HTTPRequestHead
            do {
                guard let next = try self.readHead() else { return self.refuseIfLate() }
                head = next
            } catch {
                self.refuse(status: error.status, message: "\(error)")
                return
            }
            guard let body = self.readBody(head) else { return self.refuseIfLate() }
            let fd = self.fd, server = self.server
            let writer = HTTPResponseWriter(
                fd: self.fd, isHead: head.method == "HEAD", keepAlive: head.keepAlive, version: head.version,
                authenticate: { server.authenticate(fd) })
            self.server.handler(HTTPServerRequest(head: head, body: body), writer)
            guard writer.completeExchange() else { return }
            // The next request's time runs from its first byte, already here if it was pipelined.
            self.started = self.parser.bufferedCount > 0
            self.readDeadline = self.started
                ? self.server.configuration.requestReadTimeoutMs.map { ContinuousClock.now + .milliseconds($0) } : nil
        }
    }

    /// Reads until a full head is parsed; `nil` when the peer closed, the idle timeout passed or stop() ran.
    private mutating func readHead() throws(HTTPParseError) -> HTTPRequestHead? {
        while true {
            if let head = try self.parser.next() { return head }
            guard self.receive() else { return nil }
        }
    }

    /// Receives once into the parser. False on EOF, error, idle timeout or the request's deadline.
    private mutating func receive() -> Bool {
        var timeout = self.server.configuration.idleTimeoutMs
        if let deadline = self.readDeadline {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                self.timedOut = true
                return false
            }
            let ms = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
            timeout = min(timeout, Int32(clamping: ms))
        }
        guard ServerSocket.waitReadable(self.fd, timeoutMs: timeout) else {
            if let deadline = self.readDeadline, ContinuousClock.now >= deadline { self.timedOut = true }
            return false
        }
        let fd = self.fd
        let n = self.readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        self.parser.append(self.readBuffer[0..<n])
        self.started = true
        if self.readDeadline == nil, let ms = self.server.configuration.requestReadTimeoutMs {
            self.readDeadline = ContinuousClock.now + .milliseconds(ms)
        }
        return true
    }

    /// After reading stopped: a request that outran its deadline is answered 408 (the connection then closes).
    private func refuseIfLate() {
        guard self.timedOut, self.started, let ms = self.server.configuration.requestReadTimeoutMs else { return }
        self.refuse(status: 408, message: "the request did not arrive within \(ms) ms")
    }

    /// The request body (by Content-Length or chunked), or `nil` after answering an error or losing the peer.
    private mutating func readBody(_ head: HTTPRequestHead) -> [UInt8]? {
        let maxBody = self.server.configuration.maxBodyBytes
        let length = head.contentLength ?? 0
        if length > maxBody {
            self.refuse(status: 413, message: "request body larger than \(maxBody) bytes")
            return nil
        }
        let expectsContinue = head.header("Expect")?.lowercased() == "100-continue"
        if head.isChunked {
            if expectsContinue { _ = ServerSocket.sendAll(self.fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) }
            var decoder = HTTPChunkedDecoder(maxBodyBytes: maxBody)
            decoder.append(self.parser.takeBuffered())
            var body: [UInt8] = []
            while true {
                do {
                    switch try decoder.next() {
                    case .data(let piece):
                        body += piece
                        continue
                    case .end:
                        self.parser.append(decoder.takeBuffered())
                        return body
                    case nil:
                        break
                    }
                } catch {
                    self.refuse(status: error == .malformed("chunked body too large") ? 413 : 400, message: "\(error)")
                    return nil
                }
                guard self.receive() else { return nil }
                decoder.append(self.parser.takeBuffered())
            }
        }
        guard length > 0 else { return [] }
        if expectsContinue && self.parser.bufferedCount < length {
            _ = ServerSocket.sendAll(self.fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        var body = self.parser.takeBuffered(maxBytes: length)
        body.reserveCapacity(length)
        while body.count < length {
            guard self.receive() else { return nil }
            body += self.parser.takeBuffered(maxBytes: length - body.count)
        }
        return body
    }

    /// Answers a protocol error and lets the connection close: after it the framing cannot be trusted.
    private func refuse(status: Int, message: String) {
        var headers = [HTTPHeaderField(name: "Content-Type", value: "text/plain; charset=utf-8")]
        var body = Array((message + "\n").utf8)
        if let shaped = self.server.configuration.refusal?(status, message) {
            headers = shaped.headers.map { HTTPHeaderField(name: $0.0, value: $0.1) }
            body = shaped.body
        }
        headers.append(HTTPHeaderField(name: "Connection", value: "close"))
        let bytes = HTTPResponseEncoder.response(status: status, headers: headers, body: body)
        _ = ServerSocket.sendAll(self.fd, bytes)
    }
}
