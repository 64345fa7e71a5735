/// The relay's side of one client connection after the WebSocket handshake (Protocol/relay.md §4).
///
/// Pure: the caller passes the time and the CHALLENGE nonce, verifies AUTH signatures itself when asked
/// (`.verifyAuth`), and carries out the returned actions. Every (state, event) pair has a defined result;
/// peer input never traps.
public struct RelaySessionStateMachine: Sendable {
    public enum State: Equatable, Sendable {
        /// CHALLENGE sent; AUTH must arrive before the deadline.
        case awaitingAuth(deadlineMs: UInt64)
        /// AUTH received with a well-formed body; the caller is verifying it.
        case verifyingAuth(deadlineMs: UInt64)
        /// Authenticated as `publicKey`; READY has been sent.
        case ready(publicKey: PublicKey)
        case closed
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Verify `signature` over `"homebase-relay-auth-v1" || nonce` by `publicKey`, check admission, then call
        /// `authVerified`.
        case verifyAuth(publicKey: PublicKey, signature: [UInt8], nonce: [UInt8])
        /// Send these frames in order.
        case send([RelayFrame])
        /// Hand a SEND to the hub: deliver live, store, or answer offline. Reply with a RECEIPT only if sendID != 0.
        case route(sendID: UInt32, recipient: PublicKey, store: Bool, payload: ArraySlice<UInt8>)
        /// Refuse a SEND (relay.md §4's statuses 4-6): count the drop by `status`, and answer a RECEIPT with it only
        /// if sendID != 0. Every refusal comes out here, so none goes uncounted (issue 38, defect 3).
        case refuse(sendID: UInt32, status: ReceiptStatus)
        /// Delete a stored frame the client acknowledged.
        case acknowledge(deliveryID: UInt64)
        /// Close the WebSocket with this code; the counter label is `reason`.
        case close(code: UInt16, reason: CloseReason)
    }

    /// Why the relay closes a connection: the close code and the `relay_closes_total{reason=…}` label.
    public enum CloseReason: String, Equatable, Sendable {
        case authTimeout = "auth_timeout"
        case badSignature = "bad_signature"
        case notAdmitted = "not_admitted"
        case frameBeforeReady = "frame_before_ready"
        case malformedFrame = "malformed_frame"
        case unexpectedFrame = "unexpected_frame"
        case idle
        case textFrame = "text_frame"
        case tooBig = "too_big"
        case replaced
        case tooSlow = "too_slow"
        case shutdown

        /// The WebSocket close code for this reason (Protocol/relay.md §7).
        public var code: UInt16 {
            switch self {
            case .authTimeout, .badSignature, .notAdmitted, .frameBeforeReady, .malformedFrame, .unexpectedFrame:
                CloseCode.policy
            case .idle: CloseCode.goingAway
            case .textFrame: CloseCode.unsupportedData
            case .tooBig: CloseCode.tooBig
            case .replaced: CloseCode.replaced
            case .tooSlow: CloseCode.tooSlow
            case .shutdown: CloseCode.restarting
            }
        }
    }

    public private(set) var state: State
    public let nonce: [UInt8]
    private let limits: RelayLimits
    private var frameBucket: TokenBucket
    private var byteBucket: TokenBucket
    private var lastHeardMs: UInt64

    /// Starts a session; the caller sends `challenge(relayTimeMs:)` at once.
    public init(nonce: [UInt8], nowMs: UInt64, limits: RelayLimits) {
        precondition(nonce.count == 32, "the CHALLENGE nonce is 32 bytes")
        self.nonce = nonce
        self.limits = limits
        self.state = .awaitingAuth(deadlineMs: nowMs + limits.authDeadlineMs)
        self.frameBucket = TokenBucket(ratePerSecond: limits.sendFramesPerSecond, capacity: limits.sendFramesBurst,
                                       nowMs: nowMs)
        self.byteBucket = TokenBucket(ratePerSecond: limits.sendBytesPerSecond, capacity: limits.sendBytesBurst,
                                      nowMs: nowMs)
        self.lastHeardMs = nowMs
    }

    public func challenge(relayTimeMs: UInt64) -> RelayFrame {
        .challenge(version: RelayAuth.protocolVersion, nonce: self.nonce, relayTimeMs: relayTimeMs)
    }

    public var authenticatedKey: PublicKey? {
        if case .ready(let pk) = self.state { return pk }
        return nil
    }

    /// Any inbound bytes (data, ping, pong) count as the client being alive.
    public mutating func bytesReceived(nowMs: UInt64) {
        self.lastHeardMs = max(self.lastHeardMs, nowMs)
    }

    /// One binary WebSocket message arrived.
    public mutating func messageReceived(_ bytes: ArraySlice<UInt8>, nowMs: UInt64) -> Action {
        self.bytesReceived(nowMs: nowMs)
        let frame: RelayFrame
        do {
            frame = try RelayFrame(decoding: bytes)
        } catch {
            return self.close(self.isReady ? .malformedFrame : .frameBeforeReady)
        }
        switch self.state {
        case .awaitingAuth(let deadline):
            guard case .auth(let pk, let sig) = frame else { return self.close(.frameBeforeReady) }
            self.state = .verifyingAuth(deadlineMs: deadline)
            return .verifyAuth(publicKey: pk, signature: sig, nonce: self.nonce)
        case .verifyingAuth:
            // A second frame before the verdict: the client did not wait for READY.
            return self.close(.frameBeforeReady)
        case .ready:
            return self.readyFrameReceived(frame, nowMs: nowMs)
        case .closed:
            return .none
        }
    }

    /// The caller's verdict on the AUTH it was asked to verify.
    public mutating func authVerified(publicKey: PublicKey, signatureValid: Bool, admitted: Bool) -> Action {
        guard case .verifyingAuth = self.state else { return .none }
        guard signatureValid else { return self.close(.badSignature) }
        guard admitted else { return self.close(.notAdmitted) }
        self.state = .ready(publicKey: publicKey)
        // READY is sent by the caller once it knows how many stored frames follow (`readyFrame(stored:)`).
        return .none
    }

    public func readyFrame(stored: Int) -> RelayFrame {
        .ready(stored: UInt32(clamping: stored), maxPayload: UInt32(clamping: self.limits.maxPayloadBytes))
    }

    /// A text WebSocket message arrived: close 1003.
    public mutating func textMessageReceived() -> Action { self.close(.textFrame) }

    /// The WebSocket layer saw a message over `maxMessageBytes`: close 1009.
    public mutating func messageTooBig() -> Action { self.close(.tooBig) }

    /// A newer connection authenticated with the same key: close 4001.
    public mutating func replaced() -> Action { self.close(.replaced) }

    /// The outbound queue passed its bound: close 4002.
    public mutating func outboundQueueOverflowed() -> Action { self.close(.tooSlow) }

    /// The relay is shutting down: close 1012 so clients reconnect at once.
    public mutating func shutdown() -> Action { self.close(.shutdown) }

    /// Periodic check: the auth deadline and the idle timeout.
    public mutating func timerFired(nowMs: UInt64) -> Action {
        switch self.state {
        case .awaitingAuth(let deadline), .verifyingAuth(let deadline):
            return nowMs >= deadline ? self.close(.authTimeout) : .none
        case .ready:
            return nowMs >= self.lastHeardMs + self.limits.idleTimeoutMs ? self.close(.idle) : .none
        case .closed:
            return .none
        }
    }

    /// When the caller should call `timerFired` next.
    public var nextDeadlineMs: UInt64? {
        switch self.state {
        case .awaitingAuth(let deadline), .verifyingAuth(let deadline): deadline
        case .ready: self.lastHeardMs + self.limits.idleTimeoutMs
        case .closed: nil
        }
    }

    /// The WebSocket connection ended for any reason.
    public mutating func connectionClosed() { self.state = .closed }

    private var isReady: Bool {
        if case .ready = self.state { return true }
        return false
    }

    private mutating func readyFrameReceived(_ frame: RelayFrame, nowMs: UInt64) -> Action {
        switch frame {
        case .send(let sendID, let recipient, let flags, let payload):
            if flags & SendFlags.reservedMask != 0 { return .refuse(sendID: sendID, status: .badFlags) }
            if payload.count > self.limits.maxPayloadBytes { return .refuse(sendID: sendID, status: .payloadTooLarge) }
            guard self.frameBucket.take(1, nowMs: nowMs), self.byteBucket.take(Double(payload.count), nowMs: nowMs)
            else { return .refuse(sendID: sendID, status: .rateLimited) }
            return .route(sendID: sendID, recipient: recipient, store: flags & SendFlags.store != 0, payload: payload)
        case .ack(let id):
            // delivery_id 0 marks a live frame, which has nothing to acknowledge.
            return id == 0 ? .none : .acknowledge(deliveryID: id)
        case .auth, .challenge, .ready, .deliver, .receipt, .error:
            return self.close(.unexpectedFrame)
        }
    }

    private mutating func close(_ reason: CloseReason) -> Action {
        if case .closed = self.state { return .none }
        self.state = .closed
        return .close(code: reason.code, reason: reason)
    }
}

/// WebSocket close codes used by protocol v1 (RFC 6455 §7.4 and Protocol/relay.md §7).
public enum CloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    public static let invalidData: UInt16 = 1007
    public static let policy: UInt16 = 1008
    public static let tooBig: UInt16 = 1009
    public static let restarting: UInt16 = 1012
    public static let replaced: UInt16 = 4001
    public static let tooSlow: UInt16 = 4002
}
