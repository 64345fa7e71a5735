import Foundation
import HomebaseCore
#if canImport(Glibc)
internal import CLinux
#endif

/// A blocking RFC 6455 client over a `ByteStream`: `ws://` on a plain socket, `wss://` over libcurl's TLS.
///
/// Thread safety: one thread at a time (like `ByteStream`). `RelayLink` serves it from an I/O thread and lets
/// other threads write through it under a lock. Pings from the server are answered inside `receive`, as far as
/// the socket takes the pong at once (`trySend`); the rest goes out with the next write.
public final class WebSocketClient {
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case badURL(String)
        case transport(TransportError)
        case handshake(String)
        /// The server answered the upgrade with this HTTP status (and reason phrase) instead of 101.
        case httpStatus(Int, String)
        case protocolError(WebSocketProtocolError)
        /// The server closed the connection with this code (nil: no close frame, just EOF).
        case closed(code: UInt16?, reason: String)

        public var description: String {
            switch self {
            case .badURL(let u): "not a ws:// or wss:// URL: \(u)"
            case .transport(let e): "\(e)"
            case .handshake(let s): "WebSocket handshake failed: \(s)"
            case .httpStatus(let status, let reason): "WebSocket handshake failed: HTTP \(status) \(reason)"
            case .protocolError(let e): "WebSocket protocol error: \(e)"
            case .closed(let code, let reason): "closed by peer (\(code.map(String.init) ?? "no code"))\(reason.isEmpty ? "" : ": \(reason)")"
            }
        }
    }

    /// What a failed connection attempt met, for the owner (`RelayConnectProblem`).
    public static func problemCause(_ error: Error) -> RelayConnectProblem.Cause {
        switch error {
        case .httpStatus(let status, let reason): .httpStatus(status, reason)
        case .transport(.connectFailed(let detail)): .unreachable(detail)
        case .transport(.timedOut): .timedOut
        case .transport(.tls(let detail)): .tls(detail)
        case .transport(.closed): .closedBeforeAnswer
        case .transport(.io(let code)): code == ECONNRESET ? .closedBeforeAnswer : .other("\(error)")
        case .closed(let code, let reason): .loginRefused(code: code, reason: reason)
        case .handshake(let detail): .loginRefused(code: nil, reason: detail)
        case .badURL, .protocolError: .other("\(error)")
        }
    }

    public struct Options: Sendable {
        public var subprotocol: String?
        public var headers: [(String, String)] = []
        public var caFile: String?
        public var insecureSkipVerify = false
        public var connectTimeout: Duration = .seconds(10)
        public var maxMessageBytes = 1 << 20
        public init(subprotocol: String? = nil) { self.subprotocol = subprotocol }
    }

    public let url: RelayURL
    /// The subprotocol the server selected.
    public let selectedSubprotocol: String?
    /// The header fields of the server's `101` response (a relay announces its limits there).
    public let responseHeaders: [HTTPHeaderField]
    private let stream: ByteStream
    private var parser: WebSocketParser
    private var closed = false
    private var rng = SystemRandomNumberGenerator()
    /// Masking keys drawn ahead, used from the end.
    private var maskKeys: [UInt32] = []
    /// Encoded frames the socket has not taken yet, oldest first; the first is written from `outputOffset`.
    /// An element is never changed once queued, so a retried write presents the same bytes at the same address
    /// (`ByteStream.trySend`).
    private var output: [[UInt8]] = []
    private var outputOffset = 0
    /// Bytes in `output` the socket has not taken.
    public private(set) var pendingOutputBytes = 0
    /// When the socket last took bytes, or output began to wait (`Posix.monotonicMs`).
    private var outputProgressMs: UInt64 = 0

    /// Connects and completes the opening handshake.
    public static func connect(_ urlString: String, options: Options = Options()) throws(Error) -> WebSocketClient {
        guard let url = RelayURL(urlString) else { throw .badURL(urlString) }
        let timeout = options.connectTimeout
        let stream: ByteStream
        do {
            if url.secure {
                stream = try CurlTLSStream.connect(url: url.httpURL, caFile: options.caFile,
                                                   insecure: options.insecureSkipVerify, timeout: timeout)
            } else {
                stream = try TCPClientStream.connect(host: url.host, port: url.port, timeout: timeout)
            }
        } catch {
            throw .transport(error)
        }
        var rng = SystemRandomNumberGenerator()
        let key = Base64.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let request = WebSocketHandshake.clientRequestBytes(host: url.hostHeader, path: url.target, key: key,
                                                            subprotocol: options.subprotocol,
                                                            extraHeaders: options.headers)
        let deadline = ContinuousClock.now + timeout
        var head: HTTPResponseHead?
        var headParser = HTTPResponseHeadParser()
        do {
            try stream.send(request, deadline: deadline)
            while head == nil {
                let remaining = deadline - .now
                guard remaining > .zero else { throw TransportError.timedOut }
                let bytes = try stream.receive(maxBytes: 16 * 1024, timeout: remaining)
                guard !bytes.isEmpty else { throw TransportError.closed }
                headParser.append(bytes)
                head = try? headParser.next()
                if head == nil, headParser.bufferedCount > 16 * 1024 { throw Error.handshake("response head too large") }
            }
        } catch let e as TransportError {
            stream.close()
            throw .transport(e)
        } catch let e as Error {
            stream.close()
            throw e
        } catch {
            stream.close()
            throw .handshake("\(error)")
        }
        let h = head!
        let result = WebSocketHandshake.validateServerResponse(
            status: h.status, headers: h.headers.map { ($0.name, $0.value) }, sentKey: key,
            subprotocol: options.subprotocol ?? "")
        switch result {
        case .failure(let e):
            stream.close()
            throw h.status == 101 ? .handshake("\(e)") : .httpStatus(h.status, h.reason)
        case .success(let selected):
            let client = WebSocketClient(url: url, stream: stream, selected: selected, responseHeaders: h.headers,
                                         maxMessageBytes: options.maxMessageBytes)
            let leftover = headParser.takeBuffered()
            if !leftover.isEmpty { client.parser.append(leftover) }
            return client
        }
    }

    init(url: RelayURL, stream: ByteStream, selected: String?, responseHeaders: [HTTPHeaderField] = [],
         maxMessageBytes: Int) {
        self.url = url
        self.stream = stream
        self.selectedSubprotocol = selected
        self.responseHeaders = responseHeaders
        self.parser = WebSocketParser(role: .client, maxMessageBytes: maxMessageBytes)
    }

    deinit { self.stream.close() }

    /// The socket, for polling several clients; see `ByteStream.pollDescriptor`.
    public var pollDescriptor: Int32 { self.stream.pollDescriptor }

    /// Whether frames wait for room in the socket (`trySend`): an event loop then polls for POLLOUT and calls
    /// `flushAvailable`. Every send writes them first.
    public var hasPendingOutput: Bool { !self.output.isEmpty }

    /// How long pending output has waited without the socket taking a byte (0 when none waits).
    public func outputStalledMs(now: UInt64) -> UInt64 {
        self.output.isEmpty ? 0 : now &- min(now, self.outputProgressMs)
    }

    /// Encodes the messages as one write behind any pending output and writes what the socket takes now,
    /// without waiting: for a thread that must not block (the rest waits for `flushAvailable`). Returns whether
    /// everything is written.
    /// - Throws: `.transport` when the write failed; the connection is then unusable.
    public func trySend(binaryMessages: [[UInt8]]) throws(Error) -> Bool {
        if !binaryMessages.isEmpty { self.queue(self.encode(binaryMessages)) }
        return try self.flushAvailable()
    }

    /// Queues a ping (as `trySend`) and writes what the socket takes now.
    public func tryPing() throws(Error) -> Bool {
        self.queue(WebSocketFrameEncoder.encode(opcode: .ping, payload: [UInt8](), maskingKey: self.maskingKey()))
        return try self.flushAvailable()
    }

    /// Writes pending output while the socket takes it, without waiting. Returns whether none is left.
    public func flushAvailable() throws(Error) -> Bool {
        do { return try self.drain() } catch { throw .transport(error) }
    }

    private func drain() throws(TransportError) -> Bool {
        while let first = self.output.first {
            let offset = self.outputOffset
            let result = first.withUnsafeBytes { raw in
                Result { () throws(TransportError) -> Int in try self.stream.trySend(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }
            let written = try result.get()
            if written > 0 { self.outputProgressMs = Posix.monotonicMs }
            self.outputOffset += written
            self.pendingOutputBytes -= written
            guard self.outputOffset == first.count else { return false }
            self.output.removeFirst()
            self.outputOffset = 0
        }
        return true
    }

    private func queue(_ bytes: [UInt8]) {
        if self.output.isEmpty { self.outputProgressMs = Posix.monotonicMs }
        self.output.append(bytes)
        self.pendingOutputBytes += bytes.count
    }

    /// Writes pending output and then `bytes`, waiting with poll(2) for room until `deadline`.
    private func write(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) {
        self.queue(bytes)
        let deadlineNs = ContinuousClock.Instant.deadlineNs(deadline)
        while try !self.drain() {
            try self.stream.waitForRoom(deadlineNs: deadlineNs)
        }
    }

    public func send(binary payload: some Collection<UInt8>, deadline: ContinuousClock.Instant? = nil) throws(Error) {
        try self.sendFrame(.binary, payload, deadline: deadline)
    }

    public func send(text: String, deadline: ContinuousClock.Instant? = nil) throws(Error) {
        try self.sendFrame(.text, Array(text.utf8), deadline: deadline)
    }

    public func ping(_ payload: [UInt8] = []) throws(Error) {
        try self.sendFrame(.ping, payload, deadline: nil)
    }

    /// Encodes several binary messages into one write (fewer syscalls for a burst).
    public func send(binaryMessages: [[UInt8]], deadline: ContinuousClock.Instant? = nil) throws(Error) {
        do { try self.write(self.encode(binaryMessages), deadline: deadline) } catch { throw .transport(error) }
    }

    /// The messages as binary frames, back to back.
    private func encode(_ binaryMessages: [[UInt8]]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(binaryMessages.reduce(0) { $0 + $1.count + 14 })
        for m in binaryMessages {
            WebSocketFrameEncoder.encode(opcode: .binary, payload: m, maskingKey: self.maskingKey(), into: &out)
        }
        return out
    }

    /// Sends a close frame and closes the stream (without waiting for the server's close).
    public func close(code: UInt16 = CloseCode.normal, reason: String = "") {
        guard !self.closed else { return }
        self.closed = true
        let frame = WebSocketFrameEncoder.encode(opcode: .close,
                                                 payload: WebSocketFrameEncoder.closePayload(code: code, reason: reason),
                                                 maskingKey: self.maskingKey())
        try? self.write(frame, deadline: .now + .milliseconds(200))
        self.stream.close()
    }

    /// Closes the socket without a close frame (as a crash or a lost network would).
    public func abort() {
        self.closed = true
        self.stream.close()
    }

    /// Waits for the next data message. Answers pings; returns `nil` on timeout.
    /// - Throws: `.closed` when the server closed (with its code), `.protocolError`, `.transport`.
    public func receive(timeout: Duration?) throws(Error) -> (opcode: WebSocketOpcode, payload: [UInt8])? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        var readOnce = false
        while true {
            if let m = try self.nextBuffered() { return m }
            // A zero timeout still takes what the socket (or TLS) already holds, once.
            let remaining = deadline.map { max($0 - .now, .zero) }
            if readOnce, remaining == .zero { return nil }
            readOnce = true
            guard try self.readOnce(timeout: remaining) != nil else { return nil }
        }
    }

    /// The messages already complete, plus what the socket holds when `read` is true (the caller's poll said
    /// it is readable): for an event loop that polls the socket itself and wants no read that can only answer
    /// EAGAIN. On a plain socket a read that fills the whole buffer is repeated, since more may be waiting;
    /// over TLS reads go on until one finds nothing (the TLS layer may hold decrypted bytes poll cannot see,
    /// `ByteStream.pollDescriptor`). Reads stop once `maxMessages` are in hand; what is left waits in the
    /// socket (or TLS layer) for the next call. Never blocks.
    /// - Throws: as `receive`, `closed` when the peer closed the connection. Messages that arrived before a
    ///   close or a protocol error are returned first; the next call throws.
    public func receiveAvailable(
        read: Bool, maxMessages: Int = 256
    ) throws(Error) -> [(opcode: WebSocketOpcode, payload: [UInt8])] {
        if let error = self.pendingError {
            self.pendingError = nil
            throw error
        }
        self.hasPendingInput = false
        var out: [(opcode: WebSocketOpcode, payload: [UInt8])] = []
        do throws(Error) {
            while let m = try self.nextBuffered() { out.append(m) }
            var reading = read
            while reading {
                guard let count = try self.readOnce(timeout: .zero) else { break }
                while let m = try self.nextBuffered() { out.append(m) }
                let more = self.stream.mayHoldReadBytes || count == Self.readBytes
                reading = more && out.count < maxMessages
                // Stopped at the bound with bytes perhaps still held where poll cannot see them (TLS).
                self.hasPendingInput = more && !reading && self.stream.mayHoldReadBytes
            }
        } catch {
            // The messages first; the failure is the next call's answer.
            guard !out.isEmpty else { throw error }
            self.pendingError = error
        }
        return out
    }

    /// Whether the next `receiveAvailable` may have something to return without the socket becoming readable:
    /// a failure found after the messages just returned, or a read stopped at `maxMessages` over TLS. An event
    /// loop then calls again without waiting on poll.
    public var mayHavePendingInput: Bool { self.hasPendingInput || self.pendingError != nil }
    private var hasPendingInput = false

    /// A failure found after messages that `receiveAvailable` returned first.
    private var pendingError: Error?

    /// Bytes read from the peer so far, control frames included: a sign of life even without messages.
    public private(set) var bytesReceived: UInt64 = 0

    /// One read into the parser: how many bytes came, or nil when none came in time.
    /// - Throws: `closed` at the end of the stream, `transport` for a failed read.
    private func readOnce(timeout: Duration?) throws(Error) -> Int? {
        // What a full socket left of a pong: a client that only receives writes it here.
        if !self.output.isEmpty { _ = try? self.drain() }
        let bytes: [UInt8]
        do {
            bytes = try self.stream.receive(maxBytes: Self.readBytes, timeout: timeout)
        } catch .timedOut {
            return nil
        } catch {
            throw .transport(error)
        }
        guard !bytes.isEmpty else { throw .closed(code: nil, reason: "connection closed") }
        self.bytesReceived &+= UInt64(bytes.count)
        self.parser.append(bytes)
        return bytes.count
    }

    /// Bytes asked of the socket per read.
    private static let readBytes = 64 * 1024

    private func nextBuffered() throws(Error) -> (opcode: WebSocketOpcode, payload: [UInt8])? {
        while true {
            let event: WebSocketEvent?
            do { event = try self.parser.next() } catch { throw .protocolError(error) }
            guard let event else { return nil }
            switch event {
            case .message(let opcode, let payload):
                return (opcode, Array(payload))
            case .ping(let data):
                // Written as far as the socket takes it now: a reader must not block on a full socket (an event
                // loop polls for POLLOUT while output is pending; any send writes it first). A failed pong is
                // not this call's failure: a close or EOF queued behind the ping tells more.
                self.queue(WebSocketFrameEncoder.encode(opcode: .pong, payload: data, maskingKey: self.maskingKey()))
                _ = try? self.drain()
            case .pong:
                continue
            case .close(let code, let reason):
                if !self.closed {
                    self.closed = true
                    let echo = code.map { WebSocketFrameEncoder.closePayload(code: $0, reason: "") } ?? []
                    try? self.write(WebSocketFrameEncoder.encode(opcode: .close, payload: echo,
                                                                 maskingKey: self.maskingKey()),
                                    deadline: .now + .milliseconds(200))
                    self.stream.close()
                }
                throw .closed(code: code, reason: reason)
            }
        }
    }

    private func sendFrame(_ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>,
                           deadline: ContinuousClock.Instant?) throws(Error) {
        let frame = WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskingKey: self.maskingKey())
        do { try self.write(frame, deadline: deadline) } catch { throw .transport(error) }
    }

    /// A fresh masking key per frame (RFC 6455 §5.3), from the system's CSPRNG, drawn 64 keys at a time:
    /// one getrandom(2) per 64 frames instead of one per frame.
    private func maskingKey() -> (UInt8, UInt8, UInt8, UInt8) {
        if self.maskKeys.isEmpty {
            var keys = [UInt32](repeating: 0, count: 64)
            #if canImport(Glibc)
            let filled = keys.withUnsafeMutableBytes { CLinux.getrandom($0.baseAddress, $0.count, 0) }
            #else
            let filled = -1
            #endif
            if filled == keys.count * 4 {
                self.maskKeys = keys
            } else {
                // getrandom(2) refused or was cut short: one key the stdlib's way (it retries or traps).
                self.maskKeys = [UInt32.random(in: .min ... .max, using: &self.rng)]
            }
        }
        let r = self.maskKeys.removeLast()
        return (UInt8(truncatingIfNeeded: r), UInt8(truncatingIfNeeded: r >> 8), UInt8(truncatingIfNeeded: r >> 16),
                UInt8(truncatingIfNeeded: r >> 24))
    }
}
