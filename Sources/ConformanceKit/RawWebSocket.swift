import Foundation
import HomebaseCore
import HomebaseCrypto

/// A relay connection spoken by hand over a `RawSocket`: the upgrade, masked frames and relay frames are built
/// here, so a hostile check can stop at any point (an upgrade and no AUTH), send bytes no client would (garbage
/// after AUTH, a frame header announcing a gigabyte) and see exactly how the relay ends the connection.
///
/// Reading and writing are independent: one thread may read (`next`) while another writes (`send…`), which
/// the Homebase checks use to probe and attack over one guest connection (hence `@unchecked Sendable`: the
/// parser is only touched by the reader, the socket's descriptor by both, which the kernel allows).
final class RawWebSocket: @unchecked Sendable {
    /// What arrived.
    enum Event: Equatable {
        case frame(RelayFrame)
        /// A message that is not a relay frame (text, or undecodable binary).
        case other(String)
        /// A close frame with its code (nil: no code).
        case closed(UInt16?)
        /// The connection ended without a close frame (EOF or reset).
        case ended(String)
    }

    let socket: RawSocket
    private var parser: WebSocketParser
    private(set) var key: SigningSecretKey?
    private(set) var maxPayload: UInt32 = 0

    private init(socket: RawSocket, leftover: [UInt8]) {
        self.socket = socket
        self.parser = WebSocketParser(role: .client, maxMessageBytes: 64 << 20)
        if !leftover.isEmpty { self.parser.append(leftover) }
    }

    /// The host and port of a `ws://` URL; hostile checks need plain TCP to the relay.
    static func endpoint(_ url: String) throws -> RelayURL {
        guard let u = RelayURL(url) else { throw CheckFailure("not a relay URL: \(url)") }
        guard !u.secure else {
            throw CheckFailure("hostile checks speak plain TCP: give the relay's ws:// listener, not wss://")
        }
        return u
    }

    /// The upgrade request for `url` (with `Authorization: Bearer token` when given).
    static func upgradeRequest(_ url: RelayURL, token: String?) -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        let key = Base64.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) })
        return WebSocketHandshake.clientRequestBytes(
            host: url.hostHeader, path: url.target, key: key, subprotocol: "homebase-relay.v1",
            extraHeaders: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
    }

    /// Reads an HTTP response head from `socket`: its status and the bytes after it.
    static func readResponseHead(_ socket: RawSocket, timeout: Duration) throws -> (status: Int, leftover: [UInt8]) {
        var parser = HTTPResponseHeadParser()
        let deadline = ContinuousClock.now + timeout
        while true {
            switch socket.receive(timeout: deadline - .now) {
            case .bytes(let b):
                parser.append(b)
                do {
                    if let head = try parser.next() { return (head.status, parser.takeBuffered()) }
                } catch {
                    throw CheckFailure("the relay's response head does not parse: \(error)")
                }
            case .timedOut: throw CheckFailure("no response head within \(timeout)")
            case .closed: throw CheckFailure("the relay closed without a response")
            case .failed(let code): throw CheckFailure("connection failed: \(RawSocket.describe(code))")
            }
        }
    }

    /// Connects and upgrades; throws (naming the status) unless the relay answers 101.
    static func open(_ url: RelayURL, token: String?, timeout: Duration = .seconds(5)) throws -> RawWebSocket {
        let socket = try RawSocket.connect(host: url.host, port: url.port, timeout: timeout)
        guard try socket.send(Self.upgradeRequest(url, token: token), deadline: .now + timeout) else {
            throw CheckFailure("the relay closed during the upgrade request")
        }
        let (status, leftover) = try Self.readResponseHead(socket, timeout: timeout)
        guard status == 101 else { throw CheckFailure("upgrade answered HTTP \(status)") }
        return RawWebSocket(socket: socket, leftover: leftover)
    }

    /// Connects, upgrades and logs in as `key`.
    static func loggedIn(_ url: RelayURL, token: String?, key: SigningSecretKey = .generate()) throws -> RawWebSocket {
        let ws = try Self.open(url, token: token)
        try ws.login(key)
        return ws
    }

    func login(_ key: SigningSecretKey) throws {
        guard case .frame(.challenge(_, let nonce, _)) = try self.next(timeout: .seconds(5)) else {
            throw CheckFailure("no CHALLENGE after the upgrade")
        }
        try self.send(.auth(publicKey: key.publicKey, signature: key.sign(nonce, context: SignatureContext.relayAuth)))
        guard case .frame(.ready(_, let max)) = try self.next(timeout: .seconds(5)) else {
            throw CheckFailure("no READY after AUTH")
        }
        self.key = key
        self.maxPayload = max
    }

    var publicKey: PublicKey? { self.key?.publicKey }

    // MARK: Writing

    /// One masked frame with `opcode` and `payload`, as a client must send it.
    static func masked(_ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>, fin: Bool = true) -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        let m = random.next() as UInt32
        return WebSocketFrameEncoder.encode(
            opcode: opcode, payload: payload, fin: fin,
            maskingKey: (UInt8(truncatingIfNeeded: m), UInt8(truncatingIfNeeded: m >> 8),
                         UInt8(truncatingIfNeeded: m >> 16), UInt8(truncatingIfNeeded: m >> 24)))
    }

    func send(_ frame: RelayFrame) throws {
        try self.sendRaw(Self.masked(.binary, frame.encoded()))
    }

    /// Sends bytes exactly as given (already framed, or not framed at all).
    func sendRaw(_ bytes: [UInt8], timeout: Duration = .seconds(10)) throws {
        guard try self.socket.send(bytes, deadline: .now + timeout) else { throw CheckFailure("the relay hung up") }
    }

    // MARK: Reading

    /// The next event; nil when nothing arrived within `timeout`. Pings are answered.
    func next(timeout: Duration) throws -> Event? {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                if let e = try self.parser.next() {
                    switch e {
                    case .message(.binary, let payload):
                        guard let f = try? RelayFrame(decoding: payload) else { return .other("undecodable frame") }
                        return .frame(f)
                    case .message(let op, _): return .other("\(op) message")
                    case .ping(let data):
                        _ = try? self.socket.send(Self.masked(.pong, data))
                        continue
                    case .pong: continue
                    case .close(let code, _): return .closed(code)
                    }
                }
            } catch {
                return .ended("the relay broke RFC 6455: \(error)")
            }
            // Read even with no time left: a zero timeout still takes what has arrived.
            switch self.socket.receive(timeout: max(.zero, deadline - .now)) {
            case .bytes(let b): self.parser.append(b)
            case .timedOut: return nil
            case .closed: return .ended("EOF")
            case .failed(let code): return .ended(RawSocket.describe(code))
            }
        }
    }

    /// The next relay frame, skipping nothing: anything else (or nothing within `timeout`) throws.
    func frame(timeout: Duration = .seconds(5)) throws -> RelayFrame {
        switch try self.next(timeout: timeout) {
        case .frame(let f): return f
        case .none: throw CheckFailure("no frame within \(timeout)")
        case .some(let other): throw CheckFailure("expected a frame, got \(other)")
        }
    }

    /// How the relay ends the connection: the close code, reading (and discarding frames) until it does.
    /// nil when it is still open after `timeout`.
    func ending(timeout: Duration) throws -> Event? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - .now
            guard left > .zero else { return nil }
            switch try self.next(timeout: left) {
            case .none: return nil
            case .frame, .other: continue
            case .some(let end): return end
            }
        }
    }

    func close() { self.socket.close() }
}
