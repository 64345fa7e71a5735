import Testing

@testable import HomebaseCore

/// xorshift64*: a tiny deterministic generator so every run sees the same "random" streams.
fileprivate struct XorShift64 {
    private var state: UInt64

    init(seed: UInt64) { self.state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    mutating func next() -> UInt64 {
        self.state ^= self.state >> 12
        self.state ^= self.state << 25
        self.state ^= self.state >> 27
        return self.state &* 0x2545_F491_4F6C_DD1D
    }

    /// Uniform enough in 0..<bound for tests.
    mutating func below(_ bound: Int) -> Int { Int(self.next() % UInt64(bound)) }

    mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: self.next()) }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in self.byte() } }
}

@Suite struct WebSocketParserRandomizedTests {
    static let interestingSizes = [0, 1, 7, 8, 9, 124, 125, 126, 127, 128, 1000, 65535, 65536, 65537, 70_000]

    /// Valid UTF-8 of about `count` bytes mixing 1- to 4-byte scalars.
    fileprivate static func text(_ count: Int, _ rng: inout XorShift64) -> [UInt8] {
        let scalars: [String] = ["a", "Z", "0", " ", "é", "ß", "€", "中", "😀", "\u{10FFFF}"]
        var out: [UInt8] = []
        while out.count < count {
            out += Array(scalars[rng.below(scalars.count)].utf8)
        }
        return out
    }

    /// Encoder → random split into fragments with pings between them → random chunking of the byte stream →
    /// parser. The parser must return exactly the messages and pings, in order, for both roles and every size.
    @Test(arguments: [WebSocketParser.Role.server, .client], [1, 2, 3, 4])
    func encoderToParserRoundTrip(role: WebSocketParser.Role, seed: UInt64) throws {
        var rng = XorShift64(seed: seed &* 0x1234_5678_9ABC_DEF1)
        var stream: [UInt8] = []
        var expected: [WebSocketEvent] = []
        func key() -> (UInt8, UInt8, UInt8, UInt8)? {
            // Clients mask (the server parser reads them); servers never do.
            role == .server ? (rng.byte(), rng.byte(), rng.byte(), rng.byte()) : nil
        }
        var sizes = Self.interestingSizes
        for _ in 0..<40 { sizes.append(rng.below(3000)) }
        for size in sizes {
            let isText = rng.below(2) == 0
            let payload = isText ? Self.text(size, &rng) : rng.bytes(size)
            let opcode: WebSocketOpcode = isText ? .text : .binary
            // Cut points inside the payload (multi-byte characters may be split: UTF-8 is checked per message).
            let fragmentCount = 1 + rng.below(4)
            var cuts = (1..<fragmentCount).map { _ in payload.isEmpty ? 0 : rng.below(payload.count + 1) }.sorted()
            cuts.insert(0, at: 0)
            cuts.append(payload.count)
            for i in 0..<(cuts.count - 1) {
                let piece = payload[cuts[i]..<cuts[i + 1]]
                WebSocketFrameEncoder.encode(
                    opcode: i == 0 ? opcode : .continuation,
                    payload: piece,
                    fin: i == cuts.count - 2,
                    maskingKey: key(),
                    into: &stream
                )
                if i < cuts.count - 2, rng.below(2) == 0 {
                    let ping = rng.bytes(rng.below(126))
                    WebSocketFrameEncoder.encode(opcode: .ping, payload: ping, maskingKey: key(), into: &stream)
                    expected.append(.ping(ping))
                }
            }
            expected.append(.message(opcode: opcode, payload: payload[...]))
        }
        let close = WebSocketFrameEncoder.closePayload(code: 1000, reason: "done")
        WebSocketFrameEncoder.encode(opcode: .close, payload: close, maskingKey: key(), into: &stream)
        expected.append(.close(code: 1000, reason: "done"))

        var parser = WebSocketParser(role: role, maxMessageBytes: 70_000 + 4)
        var events: [WebSocketEvent] = []
        var offset = 0
        while offset < stream.count {
            // Mostly small reads, sometimes large ones, sometimes single bytes.
            let chunk = [1, 1 + rng.below(16), 1 + rng.below(4096), 1 + rng.below(100_000)][rng.below(4)]
            let end = min(offset + chunk, stream.count)
            parser.append(stream[offset..<end])
            offset = end
            events += try drainWebSocketEvents(&parser)
        }
        #expect(events.count == expected.count)
        #expect(events == expected)
        #expect(parser.bufferedByteCount == 0)
    }

    /// Feeds one stream in random chunks and returns how it ended. Only events or a WebSocketProtocolError are
    /// possible outcomes; a trap would end the test process.
    fileprivate static func consume(
        _ stream: [UInt8],
        role: WebSocketParser.Role,
        maxMessageBytes: Int,
        _ rng: inout XorShift64
    )
        -> (events: Int, error: WebSocketProtocolError?)
    {
        var parser = WebSocketParser(role: role, maxMessageBytes: maxMessageBytes, maxControlPayload: rng.below(126))
        var events = 0
        var offset = 0
        while offset < stream.count {
            let end = min(offset + 1 + rng.below(64), stream.count)
            parser.append(stream[offset..<end])
            offset = end
            do {
                events += try drainWebSocketEvents(&parser).count
            } catch {
                #expect(parser.bufferedByteCount == 0)
                return (events, error)
            }
            #expect(parser.bufferedByteCount <= stream.count)
        }
        return (events, nil)
    }

    /// Random bytes, both roles, small and large limits: the parser returns events, nil or an error. Never traps.
    @Test func garbageInputNeverTraps() {
        var rng = XorShift64(seed: 0xDEAD_BEEF)
        var errors = 0
        for _ in 0..<3000 {
            let stream = rng.bytes(rng.below(400))
            let role: WebSocketParser.Role = rng.below(2) == 0 ? .server : .client
            if Self.consume(stream, role: role, maxMessageBytes: rng.below(300), &rng).error != nil {
                errors += 1
            }
        }
        #expect(errors > 1000)  // random headers are mostly invalid; a parser accepting everything would fail here
    }

    /// Valid streams with a few bytes flipped reach deeper states (lengths, fragments, close codes, UTF-8) than
    /// pure noise; the same guarantee holds.
    @Test func mutatedValidStreamsNeverTrap() {
        var rng = XorShift64(seed: 42)
        for _ in 0..<2000 {
            let role: WebSocketParser.Role = rng.below(2) == 0 ? .server : .client
            var stream: [UInt8] = []
            for _ in 0..<(1 + rng.below(6)) {
                let opcodes: [WebSocketOpcode] = [.text, .binary, .continuation, .ping, .pong, .close]
                let opcode = opcodes[rng.below(opcodes.count)]
                let payload =
                    opcode == .text
                    ? Self.text(rng.below(120), &rng) : rng.bytes(rng.below(opcode.isControl ? 126 : 300))
                let key: (UInt8, UInt8, UInt8, UInt8)? =
                    role == .server ? (rng.byte(), rng.byte(), rng.byte(), rng.byte()) : nil
                WebSocketFrameEncoder.encode(
                    opcode: opcode,
                    payload: payload,
                    fin: opcode.isControl || rng.below(2) == 0,
                    maskingKey: key,
                    into: &stream
                )
            }
            for _ in 0..<(1 + rng.below(3)) where !stream.isEmpty {
                stream[rng.below(stream.count)] ^= UInt8(1 + rng.below(255))
            }
            _ = Self.consume(stream, role: role, maxMessageBytes: rng.below(2) == 0 ? 200 : 1 << 20, &rng)
        }
    }
}
