/// Ways a peer can break RFC 6455 framing. Every case ends the connection with `closeCode`.
///
/// These are the peer's faults only; misuse of the API by our own code is a precondition failure instead.
public enum WebSocketProtocolError: Error, Equatable, Sendable {
    /// RSV1–3 set without a negotiated extension (§5.2). Close 1002.
    case reservedBitsSet
    /// Opcode 3–7 or 0xB–0xF (§5.2). Close 1002.
    case unknownOpcode(UInt8)
    /// A client sent an unmasked frame to the server (§5.1). Close 1002.
    case unmaskedFrameFromClient
    /// A server sent a masked frame to the client (§5.1). Close 1002.
    case maskedFrameFromServer
    /// A control frame longer than 125 bytes (or the parser's smaller control limit) (§5.5). Close 1002.
    case controlFrameTooLarge
    /// A control frame with FIN clear (§5.5). Close 1002.
    case fragmentedControlFrame
    /// A continuation frame with no text or binary message in progress (§5.4). Close 1002.
    case unexpectedContinuation
    /// A new text or binary frame while a fragmented message is in progress (§5.4). Close 1002.
    case expectedContinuation
    /// A 64-bit payload length with the most significant bit set (§5.2). Close 1002.
    case invalidLength
    /// A close frame with a 1-byte payload (§5.5.1). Close 1002.
    case invalidClosePayload
    /// A close frame carrying a code that may not be sent (see `WebSocketCloseCode.isValidReceived`). Close 1002.
    case invalidCloseCode(UInt16)
    /// A text message or close reason that is not valid UTF-8 (§8.1). Close 1007.
    case invalidUTF8
    /// The message (all fragments so far plus the declared length of this frame) exceeds `maxMessageBytes`.
    /// Detected from the header, before the payload is buffered. Close 1009.
    case messageTooBig

    /// The close code to send before closing the connection; the single mapping from error to wire.
    public var closeCode: UInt16 {
        switch self {
        case .reservedBitsSet, .unknownOpcode, .unmaskedFrameFromClient, .maskedFrameFromServer,
            .controlFrameTooLarge, .fragmentedControlFrame, .unexpectedContinuation, .expectedContinuation,
            .invalidLength, .invalidClosePayload, .invalidCloseCode:
            return WebSocketCloseCode.protocolError
        case .invalidUTF8:
            return WebSocketCloseCode.invalidPayloadData
        case .messageTooBig:
            return WebSocketCloseCode.messageTooBig
        }
    }
}
