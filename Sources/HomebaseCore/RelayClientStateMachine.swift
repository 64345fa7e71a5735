/// A client's side of one relay connection after the WebSocket handshake (Protocol/relay.md §3-5).
///
/// Pure: the caller signs the CHALLENGE nonce when asked (`.signChallenge`) and carries out the actions.
public struct RelayClientStateMachine: Sendable {
    public enum State: Equatable, Sendable {
        case awaitingChallenge
        case awaitingReady
        /// Logged in; `maxPayload` is the relay's announced limit.
        case ready(maxPayload: Int)
        case closed
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Sign `"homebase-relay-auth-v1" || nonce` and call `challengeSigned`.
        case signChallenge(nonce: [UInt8], relayTimeMs: UInt64)
        case send(RelayFrame)
        /// Logged in; `stored` frames follow.
        case ready(stored: Int, maxPayload: Int)
        /// A frame from `sender`; if `deliveryID != 0` it is stored, and must be ACKed once handled.
        case deliver(sender: PublicKey, deliveryID: UInt64, payload: ArraySlice<UInt8>)
        case receipt(sendID: UInt32, status: ReceiptStatus)
        /// The relay told us why it is closing.
        case relayError(code: UInt16, message: String)
        /// Close the connection: the relay broke the protocol.
        case close(code: UInt16, reason: String)
    }

    public private(set) var state: State = .awaitingChallenge
    private let publicKey: PublicKey

    public init(publicKey: PublicKey) {
        self.publicKey = publicKey
    }

    public mutating func messageReceived(_ bytes: ArraySlice<UInt8>) -> Action {
        guard let frame = try? RelayFrame(decoding: bytes) else {
            return self.close("undecodable frame from relay")
        }
        switch (self.state, frame) {
        case (.awaitingChallenge, .challenge(let version, let nonce, let time)):
            guard version == RelayAuth.protocolVersion else {
                return self.close("relay speaks protocol version \(version), not 1")
            }
            self.state = .awaitingReady
            return .signChallenge(nonce: nonce, relayTimeMs: time)
        case (.awaitingReady, .ready(let stored, let max)):
            self.state = .ready(maxPayload: Int(max))
            return .ready(stored: Int(stored), maxPayload: Int(max))
        case (.ready, .deliver(let sender, let id, let payload)):
            return .deliver(sender: sender, deliveryID: id, payload: payload)
        case (.ready, .receipt(let sendID, let status)):
            return .receipt(sendID: sendID, status: status)
        case (_, .error(let code, let message)):
            return .relayError(code: code, message: message)
        case (.closed, _):
            return .none
        default:
            return self.close("unexpected \(frame.type) frame from relay")
        }
    }

    /// The caller's signature over the challenge.
    public mutating func challengeSigned(signature: [UInt8]) -> Action {
        guard case .awaitingReady = self.state else { return .none }
        return .send(.auth(publicKey: self.publicKey, signature: signature))
    }

    public mutating func connectionClosed() { self.state = .closed }

    private mutating func close(_ reason: String) -> Action {
        if case .closed = self.state { return .none }
        self.state = .closed
        return .close(code: CloseCode.protocolError, reason: reason)
    }
}

/// Reconnection delays: exponential backoff with full jitter, capped; 1012 (relay restarting) reconnects at once
/// with a small jitter. The caller passes a random number in [0, 1) so this stays deterministic under test.
public struct ReconnectBackoff: Sendable, Equatable {
    public var baseMs: UInt64 = 250
    public var capMs: UInt64 = 30_000
    /// Jitter window after a 1012 close, so a restarted relay is not hit by every client at once.
    public var restartJitterMs: UInt64 = 1_000
    public private(set) var attempt: Int = 0

    public init() {}

    /// The delay before the next attempt after a connection ended with `closeCode` (nil: never connected or
    /// the socket failed).
    public mutating func nextDelayMs(closeCode: UInt16?, random: Double) -> UInt64 {
        let r = min(max(random, 0), 0.999_999)
        if closeCode == CloseCode.restarting {
            self.attempt = 0
            return UInt64(Double(self.restartJitterMs) * r)
        }
        let exp = min(self.capMs, self.baseMs << UInt64(min(self.attempt, 20)))
        self.attempt += 1
        // Full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): uniform in [exp/2, exp).
        return exp / 2 + UInt64(Double(exp / 2) * r)
    }

    /// A connection reached READY: start again from the base delay next time.
    public mutating func connected() { self.attempt = 0 }
}
