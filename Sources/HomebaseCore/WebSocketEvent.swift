/// What `WebSocketParser.next()` produces: a whole message or a control frame.
public enum WebSocketEvent: Equatable, Sendable {
    /// A complete text or binary message, fragments already joined. `opcode` is `.text` or `.binary`; a text
    /// payload has been checked to be valid UTF-8. The payload is a slice of the parser's storage, not a copy:
    /// handle it (or copy it out) before the next `next()`, or that call's unmasking copies the storage once.
    case message(opcode: WebSocketOpcode, payload: ArraySlice<UInt8>)
    /// A ping; the connection answers with a pong carrying the same payload.
    case ping([UInt8])
    /// A pong.
    case pong([UInt8])
    /// The peer started (or answered) the close handshake. `code` is `nil` when the frame had no payload
    /// (which the receiver reports as 1005, "no status received"); `reason` is valid UTF-8, possibly empty.
    case close(code: UInt16?, reason: String)
}
