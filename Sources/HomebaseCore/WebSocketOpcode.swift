/// A frame opcode (RFC 6455 §5.2). Values 3–7 and 0xB–0xF are reserved and never appear here: the parser rejects
/// them with `WebSocketProtocolError.unknownOpcode`.
public enum WebSocketOpcode: UInt8, Sendable, Hashable {
    /// A later fragment of a text or binary message.
    case continuation = 0x0
    /// First (or only) frame of a UTF-8 text message.
    case text = 0x1
    /// First (or only) frame of a binary message.
    case binary = 0x2
    /// Close handshake (RFC 6455 §5.5.1).
    case close = 0x8
    /// Keep-alive request; the peer answers with a pong carrying the same payload (§5.5.2).
    case ping = 0x9
    /// Answer to a ping, or an unsolicited heartbeat (§5.5.3).
    case pong = 0xA

    /// Control frames (close, ping, pong) carry at most 125 bytes and are never fragmented (§5.5).
    public var isControl: Bool { self.rawValue & 0x8 != 0 }
}

/// Close status codes used by Homebase (RFC 6455 §7.4.1, the IANA registry, and Protocol/relay.md §7).
public enum WebSocketCloseCode {
    /// The purpose of the connection has been fulfilled.
    public static let normalClosure: UInt16 = 1000
    /// The endpoint is going away (server shutdown, page navigation).
    public static let goingAway: UInt16 = 1001
    /// The peer broke RFC 6455 framing.
    public static let protocolError: UInt16 = 1002
    /// A data type the endpoint does not accept (protocol-v1: any text message).
    public static let unsupportedData: UInt16 = 1003
    /// A message's data is inconsistent with its type (invalid UTF-8 in text or a close reason).
    public static let invalidPayloadData: UInt16 = 1007
    /// A policy was violated (protocol-v1: authentication).
    public static let policyViolation: UInt16 = 1008
    /// A message exceeded the configured size limit.
    public static let messageTooBig: UInt16 = 1009
    /// The server hit an unexpected condition.
    public static let internalError: UInt16 = 1011
    /// The server is restarting; clients reconnect (protocol-v1: with jitter).
    public static let serviceRestart: UInt16 = 1012

    /// Whether `code` may appear in a received close frame.
    ///
    /// Accepted: 1000–1003 and 1007–1011 (RFC 6455 §7.4.1), 1012–1014 (registered with IANA after the RFC;
    /// protocol-v1 closes with 1012 when the relay restarts, so a client must accept it), and 3000–4999
    /// (registered and private use). Rejected: below 1000, 1004 (reserved), 1005/1006/1015 (must never be sent
    /// on the wire), and the unassigned 1016–2999.
    public static func isValidReceived(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }
}
