import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// A relay client driven frame by frame over `WebSocketClient`, with only the codecs and crypto: what any
/// third-party client would have. Blocking; one thread at a time.
final class RawRelayClient {
    let key: SigningSecretKey
    let ws: WebSocketClient
    private(set) var stored: UInt32 = 0
    private(set) var maxPayload: UInt32 = 0

    var publicKey: PublicKey { self.key.publicKey }

    /// Connects (sending the access token unless `withToken` is false) without logging in.
    init(_ options: RelayCheckOptions, key: SigningSecretKey = .generate(), withToken: Bool = true,
         url: String? = nil) throws
    {
        self.key = key
        var o = WebSocketClient.Options(subprotocol: "homebase-relay.v1")
        if withToken, let token = options.token { o.headers = [("Authorization", "Bearer \(token)")] }
        o.maxMessageBytes = 64 << 20
        o.caFile = options.caFile
        o.insecureSkipVerify = options.insecureSkipVerify
        do {
            self.ws = try WebSocketClient.connect(url ?? options.nextURL(), options: o)
        } catch {
            throw CheckFailure("cannot connect: \(error)")
        }
    }

    /// Connects and logs in.
    static func loggedIn(_ options: RelayCheckOptions, key: SigningSecretKey = .generate(), url: String? = nil) throws
        -> RawRelayClient
    {
        let c = try RawRelayClient(options, key: key, url: url)
        try c.login()
        return c
    }

    /// Reads CHALLENGE and returns its nonce.
    func challenge() throws -> [UInt8] {
        let f = try self.next()
        guard case .challenge(let version, let nonce, _) = f else { throw CheckFailure("first frame is \(f.type), not CHALLENGE") }
        guard version == 1 else { throw CheckFailure("CHALLENGE version \(version)") }
        return nonce
    }

    func login() throws {
        let nonce = try self.challenge()
        try self.send(.auth(publicKey: self.publicKey, signature: self.key.sign(nonce, context: SignatureContext.relayAuth)))
        let f = try self.next()
        guard case .ready(let stored, let max) = f else { throw CheckFailure("answer to AUTH is \(f.type), not READY") }
        self.stored = stored
        self.maxPayload = max
    }

    func send(_ frame: RelayFrame) throws {
        do { try self.ws.send(binary: frame.encoded(), deadline: .now + .seconds(10)) } catch {
            throw CheckFailure("send failed: \(error)")
        }
    }

    func send(_ sendID: UInt32, to: PublicKey, flags: UInt8 = 0, payload: [UInt8] = [1, 2, 3]) throws {
        try self.send(.send(sendID: sendID, recipient: to, flags: flags, payload: payload[...]))
    }

    /// Sends many frames in few writes (pipelined: no waiting for receipts in between).
    func sendBurst(_ frames: [RelayFrame]) throws {
        do { try self.ws.send(binaryMessages: frames.map { $0.encoded() }, deadline: .now + .seconds(30)) } catch {
            throw CheckFailure("send failed: \(error)")
        }
    }

    /// The next frame; throws on timeout, close or an undecodable frame.
    func next(timeout: Duration = .seconds(5)) throws -> RelayFrame {
        guard let f = try self.nextOrNil(timeout: timeout) else { throw CheckFailure("timed out waiting for a frame") }
        return f
    }

    func nextOrNil(timeout: Duration) throws -> RelayFrame? {
        let m: (opcode: WebSocketOpcode, payload: [UInt8])?
        do { m = try self.ws.receive(timeout: timeout) } catch {
            throw CheckFailure("connection ended: \(error)")
        }
        guard let m else { return nil }
        guard m.opcode == .binary else { throw CheckFailure("relay sent a non-binary message") }
        do { return try RelayFrame(decoding: m.payload) } catch {
            throw CheckFailure("relay sent an undecodable frame: \(error)")
        }
    }

    func receipt(timeout: Duration = .seconds(5)) throws -> (UInt32, ReceiptStatus) {
        let f = try self.next(timeout: timeout)
        guard case .receipt(let id, let status) = f else { throw CheckFailure("expected RECEIPT, got \(f.type)") }
        return (id, status)
    }

    /// How the connection ended, read until it does.
    enum Ending: Equatable {
        case closed(UInt16?)
        case stillOpen
        case transport(String)
    }

    func ending(timeout: Duration = .seconds(5)) -> Ending {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            do {
                _ = try self.ws.receive(timeout: deadline - .now)
            } catch .closed(let code, _) {
                return .closed(code)
            } catch {
                return .transport("\(error)")
            }
        }
        return .stillOpen
    }

    /// `.pass` when the relay closed with `code`, else a failure naming what happened.
    func expectClose(_ code: UInt16, timeout: Duration = .seconds(5)) -> CheckOutcome {
        switch self.ending(timeout: timeout) {
        case .closed(code): .pass
        case .closed(let other): .fail("closed with \(other.map(String.init) ?? "no code"), expected \(code)")
        case .stillOpen: .fail("connection still open after \(timeout), expected close \(code)")
        case .transport(let e): .fail("connection failed without a close frame (\(e)), expected \(code)")
        }
    }

    func close() { self.ws.close() }
}
