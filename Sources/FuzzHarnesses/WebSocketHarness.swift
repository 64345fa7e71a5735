import HomebaseCore

/// `WebSocketParser`, both roles. Input: `control || limit || stream`; control bit 0 picks the role, the
/// other bits the cuts; `limit` picks `maxMessageBytes`.
///
/// Checks: the events and the error do not depend on how the stream is cut; after each read the parser holds
/// at most one unfinished frame and one unfinished message (its bound); every event is well formed (text is
/// UTF-8, close codes are sendable); and the events, encoded again with `WebSocketFrameEncoder`, parse back to
/// the same events.
enum WebSocketHarness {
    static let target = FuzzTarget(
        "websocket-frame", "RFC 6455 frame parser: cut-independence, buffer bound, encode→parse round trip",
        seeds: Self.seeds, run: Self.run)

    struct Outcome: Equatable {
        var events: [WebSocketEvent] = []
        var error: WebSocketProtocolError?
    }

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard input.count >= 2 else { return }
        let role: WebSocketParser.Role = input[0] & 1 == 0 ? .server : .client
        let maxMessageBytes = FuzzInput.limit(input[1], small: 300, production: 256 * 1024 + 64)
        let stream = input[2...]

        let whole = try Self.parse([stream], role: role, maxMessageBytes: maxMessageBytes)
        let cut = try Self.parse(FuzzInput.pieces(stream, seed: input[0] >> 1), role: role,
                                 maxMessageBytes: maxMessageBytes)
        try checkEqual(cut, whole, "events depend on the cuts")

        for event in whole.events {
            switch event {
            case .message(let opcode, let payload):
                try check(opcode == .text || opcode == .binary, "message with opcode \(opcode)")
                try check(payload.count <= maxMessageBytes, "message of \(payload.count) over \(maxMessageBytes)")
                if opcode == .text {
                    try check(String(validating: payload, as: UTF8.self) != nil, "text message is not UTF-8")
                }
            case .ping(let payload), .pong(let payload):
                try check(payload.count <= 125, "control payload of \(payload.count) bytes")
            case .close(let code, let reason):
                if let code { try check(WebSocketCloseCode.isValidReceived(code), "close code \(code) accepted") }
                try check(reason.utf8.count <= 123, "close reason of \(reason.utf8.count) bytes")
            }
        }

        // Encode the events again (masked towards a server, as a client must) and parse them back.
        var encoded: [UInt8] = []
        for event in whole.events {
            let key: (UInt8, UInt8, UInt8, UInt8)? = role == .server ? (0x37, 0xFA, 0x21, 0x3D) : nil
            switch event {
            case .message(let opcode, let payload):
                WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskingKey: key, into: &encoded)
            case .ping(let payload):
                WebSocketFrameEncoder.encode(opcode: .ping, payload: payload, maskingKey: key, into: &encoded)
            case .pong(let payload):
                WebSocketFrameEncoder.encode(opcode: .pong, payload: payload, maskingKey: key, into: &encoded)
            case .close(let code, let reason):
                let payload = code.map { WebSocketFrameEncoder.closePayload(code: $0, reason: reason) } ?? []
                WebSocketFrameEncoder.encode(opcode: .close, payload: payload, maskingKey: key, into: &encoded)
            }
        }
        let again = try Self.parse([encoded[...]], role: role, maxMessageBytes: maxMessageBytes)
        try checkEqual(again.events, whole.events, "encoded events parse differently")
        try check(again.error == nil, "encoded events fail to parse: \(String(describing: again.error))")
    }

    /// Feeds the pieces, draining events after each as a connection does; stops at the first error.
    static func parse(
        _ pieces: [ArraySlice<UInt8>], role: WebSocketParser.Role, maxMessageBytes: Int
    ) throws(InvariantViolation) -> Outcome {
        var parser = WebSocketParser(role: role, maxMessageBytes: maxMessageBytes)
        var outcome = Outcome()
        for piece in pieces {
            parser.append(piece)
            do {
                while let event = try parser.next() { outcome.events.append(event) }
            } catch {
                outcome.error = error
                try check(parser.bufferedByteCount == 0, "a failed parser holds \(parser.bufferedByteCount) bytes")
                return outcome
            }
            // Waiting for more: at most one unfinished frame (header, and a payload within the limits) on top
            // of the fragments of one unfinished message.
            let bound = maxMessageBytes + WebSocketFrameEncoder.maxHeaderByteCount + 125
            try check(parser.bufferedByteCount <= bound,
                      "parser holds \(parser.bufferedByteCount) bytes, bound \(bound)")
        }
        return outcome
    }

    static func seeds() -> [[UInt8]] {
        let key: (UInt8, UInt8, UInt8, UInt8) = (1, 2, 3, 4)
        var masked: [UInt8] = []
        WebSocketFrameEncoder.encode(opcode: .text, payload: Array("Hel".utf8), fin: false, maskingKey: key, into: &masked)
        WebSocketFrameEncoder.encode(opcode: .ping, payload: [9], maskingKey: key, into: &masked)
        WebSocketFrameEncoder.encode(opcode: .continuation, payload: Array("lo".utf8), maskingKey: key, into: &masked)
        WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 7, count: 130), maskingKey: key,
                                     into: &masked)
        WebSocketFrameEncoder.encode(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: 1000, reason: "bye"),
                                     maskingKey: key, into: &masked)
        var plain: [UInt8] = []
        for frame in FixtureFiles.hexValues("hex", in: "relay-frames.json") {
            WebSocketFrameEncoder.encode(opcode: .binary, payload: frame, into: &plain)
        }
        WebSocketFrameEncoder.encode(opcode: .pong, payload: [], into: &plain)
        WebSocketFrameEncoder.encode(opcode: .close, payload: [], into: &plain)
        return [
            masked.prefixed(0, 255), masked.prefixed(0x0E, 40), masked.prefixed(0x22, 3),
            plain.prefixed(1, 255), plain.prefixed(0x0F, 100),
            [0, 255, 0x81, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],  // a 64-bit length with its top bit set
        ]
    }
}
