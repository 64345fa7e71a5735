import Testing

@testable import HomebaseCore

/// Drains every event `parser` can produce from what it holds now.
func drainWebSocketEvents(_ parser: inout WebSocketParser) throws(WebSocketProtocolError) -> [WebSocketEvent] {
    var events: [WebSocketEvent] = []
    while let event = try parser.next() {
        events.append(event)
    }
    return events
}

/// Feeds `bytes` in one piece and drains; returns the events or the error.
func parseWebSocketFrames(
    _ bytes: [UInt8],
    role: WebSocketParser.Role = .client,
    maxMessageBytes: Int = 1 << 20
) -> Result<[WebSocketEvent], WebSocketProtocolError> {
    var parser = WebSocketParser(role: role, maxMessageBytes: maxMessageBytes)
    parser.append(bytes)
    return Result { () throws(WebSocketProtocolError) in try drainWebSocketEvents(&parser) }
}

@Suite struct WebSocketParserTests {
    static let hello = Array("Hello".utf8)

    // MARK: RFC 6455 §5.7 examples

    /// 0x81 = FIN + text, 0x05 = unmasked, 5 bytes: "Hello" as a client receives it.
    @Test func unmaskedHelloIsOneTextMessage() {
        #expect(
            parseWebSocketFrames([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
                == .success([.message(opcode: .text, payload: Self.hello[...])])
        )
    }

    /// 0x85 = masked, 5 bytes, key 37 FA 21 3D: "Hello" as a server receives it.
    @Test func maskedHelloIsUnmasked() {
        let frame: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(parseWebSocketFrames(frame, role: .server) == .success([.message(opcode: .text, payload: Self.hello[...])]))
    }

    /// 0x01 = text without FIN ("Hel"), 0x80 = continuation with FIN ("lo"): one message "Hello".
    @Test func fragmentedHelloIsReassembled() {
        let frames: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F]
        #expect(parseWebSocketFrames(frames) == .success([.message(opcode: .text, payload: Self.hello[...])]))
    }

    /// 0x89 = FIN + ping, unmasked "Hello"; 0x8A = pong, masked "Hello" (server role).
    @Test func pingAndPongCarryTheirPayloads() {
        #expect(parseWebSocketFrames([0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]) == .success([.ping(Self.hello)]))
        let pong: [UInt8] = [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(parseWebSocketFrames(pong, role: .server) == .success([.pong(Self.hello)]))
    }

    /// 0x82 0x7E 0x0100: binary with a 16-bit length of 256. 0x82 0x7F 0x…010000: 64-bit length of 65536.
    @Test func sixteenAndSixtyFourBitLengths() {
        let small = (0..<256).map { UInt8($0) }
        #expect(
            parseWebSocketFrames([0x82, 0x7E, 0x01, 0x00] + small)
                == .success([.message(opcode: .binary, payload: small[...])])
        )
        let large = (0..<65536).map { UInt8(truncatingIfNeeded: $0 * 13) }
        let header: [UInt8] = [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]
        #expect(parseWebSocketFrames(header + large) == .success([.message(opcode: .binary, payload: large[...])]))
    }

    /// Control frames may sit between fragments (§5.4): ping between "Hel" and "lo" comes out first.
    @Test func controlFrameInterleavedWithFragments() {
        let frames: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6C, 0x89, 0x00, 0x80, 0x02, 0x6C, 0x6F]
        #expect(parseWebSocketFrames(frames) == .success([.ping([]), .message(opcode: .text, payload: Self.hello[...])]))
    }

    /// A text message whose multi-byte character is split across fragments is valid: UTF-8 is checked on the
    /// whole message. "é" = C3 A9, split between the two fragments.
    @Test func utf8CheckedOnWholeMessageNotPerFragment() {
        let frames: [UInt8] = [0x01, 0x01, 0xC3, 0x80, 0x01, 0xA9]
        #expect(parseWebSocketFrames(frames) == .success([.message(opcode: .text, payload: [0xC3, 0xA9])]))
    }

    // MARK: Incremental input

    /// A mixed stream (fragments, control frames, 16-bit length) gives the same events fed one byte at a time
    /// as fed at once, and byte-wise feeding never reports an event early.
    @Test func byteAtATimeEqualsOneShot() throws {
        var stream: [UInt8] = []
        let key: (UInt8, UInt8, UInt8, UInt8) = (9, 8, 7, 6)
        WebSocketFrameEncoder.encode(
            opcode: .text,
            payload: Array("Hé".utf8),
            fin: false,
            maskingKey: key,
            into: &stream
        )
        WebSocketFrameEncoder.encode(opcode: .ping, payload: [1, 2, 3], maskingKey: key, into: &stream)
        WebSocketFrameEncoder.encode(opcode: .continuation, payload: Array("llo".utf8), maskingKey: key, into: &stream)
        WebSocketFrameEncoder.encode(
            opcode: .binary,
            payload: [UInt8](repeating: 0xAB, count: 300),
            maskingKey: key,
            into: &stream
        )
        WebSocketFrameEncoder.encode(
            opcode: .close,
            payload: WebSocketFrameEncoder.closePayload(code: 1000, reason: "bye"),
            maskingKey: key,
            into: &stream
        )

        let oneShot = try parseWebSocketFrames(stream, role: .server).get()
        #expect(
            oneShot == [
                .ping([1, 2, 3]), .message(opcode: .text, payload: Array("Héllo".utf8)[...]),
                .message(opcode: .binary, payload: [UInt8](repeating: 0xAB, count: 300)[...]),
                .close(code: 1000, reason: "bye"),
            ]
        )
        var parser = WebSocketParser(role: .server, maxMessageBytes: 1 << 20)
        var byteWise: [WebSocketEvent] = []
        for byte in stream {
            parser.append(CollectionOfOne(byte))
            byteWise += try drainWebSocketEvents(&parser)
        }
        #expect(byteWise == oneShot)
    }

    /// Every proper prefix of a valid stream needs more data: `next()` returns nil (after the complete
    /// frames), never an error.
    @Test func truncatedInputNeedsMoreDataNeverErrors() throws {
        var stream: [UInt8] = []
        WebSocketFrameEncoder.encode(
            opcode: .binary,
            payload: [UInt8](repeating: 1, count: 70_000),
            maskingKey: (1, 2, 3, 4),
            into: &stream
        )
        WebSocketFrameEncoder.encode(
            opcode: .text,
            payload: Self.hello,
            fin: false,
            maskingKey: (1, 2, 3, 4),
            into: &stream
        )
        WebSocketFrameEncoder.encode(
            opcode: .continuation,
            payload: [UInt8](repeating: 0x41, count: 200),
            maskingKey: (5, 6, 7, 8),
            into: &stream
        )
        let cuts = Array(0..<40) + Array(70_000..<70_040) + Array(stream.count - 220..<stream.count)
        for cut in cuts {
            let result = parseWebSocketFrames(Array(stream[0..<cut]), role: .server)
            let events = try result.get()
            #expect(events.count == (cut >= 70_014 ? 1 : 0), "cut at \(cut)")
        }
    }

    // MARK: Limits

    /// A header claiming 256 bytes (0x7E 0x0100) against a 255-byte limit is refused from the 4 header bytes
    /// alone, before any payload arrives; the error maps to close 1009.
    @Test func oversizeDeclaredLengthRejectedBeforePayload() {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 255)
        parser.append([0x82, 0x7E, 0x01, 0x00] as [UInt8])
        #expect(throws: WebSocketProtocolError.messageTooBig) { try parser.next() }
        #expect(WebSocketProtocolError.messageTooBig.closeCode == 1009)
        // Exactly at the limit is fine.
        #expect(
            parseWebSocketFrames([0x82, 0x7E, 0x00, 0xFF] + [UInt8](repeating: 0, count: 255), maxMessageBytes: 255)
                .map(\.count)
                == .success(1)
        )
    }

    /// A masked header claiming 2^40 bytes (64-bit form) is refused before the masking key is even complete.
    @Test func hugeDeclaredLengthRejectedBeforeMaskingKey() {
        var parser = WebSocketParser(role: .server, maxMessageBytes: 1 << 20)
        parser.append([0x82, 0xFF, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x37] as [UInt8])
        #expect(throws: WebSocketProtocolError.messageTooBig) { try parser.next() }
    }

    /// Fragments already held count against the limit: 100 held + 60 declared > 150.
    @Test func fragmentsCountAgainstTheLimit() throws {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 150)
        parser.append([0x02, 100] + [UInt8](repeating: 0, count: 100))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 100)
        parser.append([0x80, 60] as [UInt8])  // continuation + FIN declaring 60 bytes, no payload yet
        #expect(throws: WebSocketProtocolError.messageTooBig) { try parser.next() }
        // 100 + 50 = 150 is exactly the limit and passes.
        let exact: [UInt8] =
            [0x02, 100] + [UInt8](repeating: 0, count: 100) + [0x80, 50] + [UInt8](repeating: 0, count: 50)
        #expect(parseWebSocketFrames(exact, maxMessageBytes: 150).map(\.count) == .success(1))
    }

    /// Control frames are limited by maxControlPayload, not by maxMessageBytes.
    @Test func controlPayloadLimitIsSeparate() throws {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 0, maxControlPayload: 4)
        parser.append([0x89, 0x04, 1, 2, 3, 4] as [UInt8])
        #expect(try parser.next() == .ping([1, 2, 3, 4]))
        parser.append([0x89, 0x05] as [UInt8])  // ping claiming 5 bytes
        #expect(throws: WebSocketProtocolError.controlFrameTooLarge) { try parser.next() }
    }

    // MARK: Framing violations (close 1002)

    /// 0xC1 / 0xA1 / 0x91: text + FIN with RSV1, RSV2 or RSV3 set, no extension negotiated.
    @Test(arguments: [0xC1, 0xA1, 0x91] as [UInt8])
    func reservedBitsAreRejected(first: UInt8) {
        #expect(parseWebSocketFrames([first, 0x00]) == .failure(.reservedBitsSet))
    }

    /// Opcodes 3–7 (reserved data) and 0xB–0xF (reserved control).
    @Test(arguments: [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] as [UInt8])
    func unknownOpcodesAreRejected(opcode: UInt8) {
        #expect(parseWebSocketFrames([0x80 | opcode, 0x00]) == .failure(.unknownOpcode(opcode)))
    }

    /// 0x81 0x00 unmasked to a server; 0x81 0x80 + key masked to a client.
    @Test func maskingMustMatchRole() {
        #expect(parseWebSocketFrames([0x81, 0x00], role: .server) == .failure(.unmaskedFrameFromClient))
        #expect(parseWebSocketFrames([0x81, 0x80, 1, 2, 3, 4], role: .client) == .failure(.maskedFrameFromServer))
    }

    /// 0x89 0x7E 0x007E: a ping claiming 126 bytes through the 16-bit form; 0x88 0x7F: close in 64-bit form.
    @Test func oversizedControlFramesAreRejected() {
        #expect(parseWebSocketFrames([0x89, 0x7E, 0x00, 0x7E]) == .failure(.controlFrameTooLarge))
        #expect(parseWebSocketFrames([0x88, 0x7F]) == .failure(.controlFrameTooLarge))
    }

    /// 0x09 / 0x08 / 0x0A: ping, close, pong with FIN clear.
    @Test(arguments: [0x08, 0x09, 0x0A] as [UInt8])
    func fragmentedControlFramesAreRejected(first: UInt8) {
        #expect(parseWebSocketFrames([first, 0x00]) == .failure(.fragmentedControlFrame))
    }

    /// 0x80 0x00: a continuation frame with no message in progress (also after a completed message).
    @Test func continuationWithoutStartIsRejected() {
        #expect(parseWebSocketFrames([0x80, 0x00]) == .failure(.unexpectedContinuation))
        #expect(parseWebSocketFrames([0x81, 0x00, 0x00, 0x00]) == .failure(.unexpectedContinuation))
    }

    /// 0x01 'a' starts a fragmented text message; 0x81 'b' (a new text frame) arrives before it ends.
    @Test func newDataFrameDuringFragmentedMessageIsRejected() {
        #expect(parseWebSocketFrames([0x01, 0x01, 0x61, 0x81, 0x01, 0x62]) == .failure(.expectedContinuation))
        #expect(parseWebSocketFrames([0x01, 0x01, 0x61, 0x02, 0x00]) == .failure(.expectedContinuation))
    }

    /// 0x82 0x7F 0x80…: a 64-bit length with the most significant bit set.
    @Test func sixtyFourBitLengthWithTopBitIsRejected() {
        let frame: [UInt8] = [0x82, 0x7F, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]
        #expect(parseWebSocketFrames(frame, maxMessageBytes: Int.max) == .failure(.invalidLength))
    }

    // MARK: UTF-8 (close 1007)

    /// Text frames carrying malformed UTF-8: lone continuation, overlong "/" (C0 AF), overlong 3-byte (E0 80 AF),
    /// surrogate U+D800 (ED A0 80), above U+10FFFF (F4 90 80 80), F5 lead, truncated 3-byte (E2 82).
    @Test(
        arguments: [
            [0x80], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF5, 0x80, 0x80, 0x80], [0xE2, 0x82], [0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0xFF],
        ] as [[UInt8]]
    )
    func invalidUTF8TextIsRejected(payload: [UInt8]) {
        let result = parseWebSocketFrames([0x81, UInt8(payload.count)] + payload)
        #expect(result == .failure(.invalidUTF8))
        #expect(WebSocketProtocolError.invalidUTF8.closeCode == 1007)
    }

    /// Boundary scalars that are valid: U+007F, U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF.
    @Test func validUTF8BoundariesAreAccepted() {
        let text = "\u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFF}\u{10000}\u{10FFFF}"
        let bytes = Array(text.utf8)
        #expect(
            parseWebSocketFrames([0x81, UInt8(bytes.count)] + bytes)
                == .success([.message(opcode: .text, payload: bytes[...])])
        )
        // Binary messages are not checked.
        #expect(parseWebSocketFrames([0x82, 0x01, 0xFF]) == .success([.message(opcode: .binary, payload: [0xFF])]))
    }

    // MARK: Close frames

    /// 0x88 0x00: close without a payload reports no code.
    @Test func emptyCloseHasNoCode() {
        #expect(parseWebSocketFrames([0x88, 0x00]) == .success([.close(code: nil, reason: "")]))
    }

    /// 0x88 0x01 0x03: a 1-byte close payload cannot hold a code.
    @Test func oneByteClosePayloadIsRejected() {
        #expect(parseWebSocketFrames([0x88, 0x01, 0x03]) == .failure(.invalidClosePayload))
    }

    @Test(
        arguments: [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999]
            as [UInt16]
    )
    func validCloseCodesAreAccepted(code: UInt16) {
        #expect(
            parseWebSocketFrames([0x88, 0x02, UInt8(code >> 8), UInt8(code & 0xFF)])
                == .success([.close(code: code, reason: "")])
        )
    }

    @Test(arguments: [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] as [UInt16])
    func invalidCloseCodesAreRejected(code: UInt16) {
        #expect(
            parseWebSocketFrames([0x88, 0x02, UInt8(code >> 8), UInt8(code & 0xFF)])
                == .failure(.invalidCloseCode(code))
        )
    }

    /// 0x88 0x04 03E8 C3 28: code 1000 with a reason that is not UTF-8.
    @Test func closeReasonMustBeUTF8() {
        #expect(parseWebSocketFrames([0x88, 0x04, 0x03, 0xE8, 0xC3, 0x28]) == .failure(.invalidUTF8))
        #expect(
            parseWebSocketFrames([0x88, 0x05, 0x03, 0xE8, 0xC3, 0xA9, 0x21])
                == .success([.close(code: 1000, reason: "é!")])
        )
    }

    // MARK: Lifecycle and memory

    /// After a close nothing more is parsed, even a valid frame in the same read.
    @Test func nothingAfterClose() throws {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 100)
        parser.append([0x88, 0x00, 0x81, 0x01, 0x61] as [UInt8])
        #expect(try parser.next() == .close(code: nil, reason: ""))
        #expect(try parser.next() == nil)
        parser.append([0x81, 0x01, 0x61] as [UInt8])
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 0)
    }

    /// After an error the parser stays failed and drops what it held.
    @Test func errorIsSticky() {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 100)
        parser.append([0x01, 0x01, 0x61, 0xC1, 0x00] as [UInt8])
        #expect(throws: WebSocketProtocolError.reservedBitsSet) { try parser.next() }
        parser.append([0x81, 0x01, 0x61] as [UInt8])
        #expect(throws: WebSocketProtocolError.reservedBitsSet) { try parser.next() }
        #expect(parser.bufferedByteCount == 0)
    }

    /// bufferedByteCount counts unparsed bytes and held fragments; takeIdleStorage frees only when idle.
    @Test func bufferedByteCountAndRelease() throws {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 1000)
        parser.append([0x01, 0x03, 0x48, 0x65, 0x6C, 0x80] as [UInt8])
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 3 + 1)  // "Hel" held + the lone continuation header byte
        _ = parser.takeIdleStorage()  // not idle: must keep everything
        parser.append([0x02, 0x6C, 0x6F] as [UInt8])
        #expect(try parser.next() == .message(opcode: .text, payload: Self.hello[...]))
        #expect(parser.bufferedByteCount == 0)
        _ = parser.takeIdleStorage()
        parser.append([0x81, 0x01, 0x61] as [UInt8])
        #expect(try parser.next() == .message(opcode: .text, payload: [0x61]))
    }

    /// 100,000 tiny frames fed in reads that end on a frame boundary only every third read: all arrive, and the
    /// parser never holds more than a read's worth (consumed bytes are dropped, not accumulated).
    @Test func manySmallFramesKeepTheBufferSmall() throws {
        let frame: [UInt8] = [0x82, 0x01, 0x00]
        let stream = Array([[UInt8]](repeating: frame, count: 100_000).joined())
        var parser = WebSocketParser(role: .client, maxMessageBytes: 10)
        var count = 0
        var offset = 0
        var maxBuffered = 0
        while offset < stream.count {
            let end = min(offset + 1000, stream.count)  // 1000 is not a multiple of 3
            parser.append(stream[offset..<end])
            offset = end
            maxBuffered = max(maxBuffered, parser.bufferedByteCount)
            count += try drainWebSocketEvents(&parser).count
        }
        #expect(count == 100_000)
        #expect(maxBuffered <= 1002)
    }

    /// 2,000 frames of 1,001 bytes read 1,000 bytes at a time: the input never ends on a frame boundary, so the
    /// storage only stays small if consumed bytes are compacted away (without it, it would reach 2 MB).
    @Test func storageIsCompactedWhenNeverEmpty() throws {
        let payload = [UInt8](repeating: 0x5A, count: 997)
        let frame: [UInt8] = [0x82, 0x7E, 0x03, 0xE5] + payload  // binary, 16-bit length 997
        let stream = Array([[UInt8]](repeating: frame, count: 2000).joined())
        var parser = WebSocketParser(role: .client, maxMessageBytes: 1000)
        var count = 0
        var maxStorage = 0
        var offset = 0
        while offset < stream.count {
            let end = min(offset + 1000, stream.count)
            parser.append(stream[offset..<end])
            offset = end
            maxStorage = max(maxStorage, parser.storageByteCount)
            for event in try drainWebSocketEvents(&parser) {
                #expect(event == .message(opcode: .binary, payload: payload[...]))
                count += 1
            }
        }
        #expect(count == 2000)
        #expect(maxStorage <= 2 * 4096 + 2 * 1001)
    }

    /// An idle parser (nothing buffered) gives its storage back; a busy one keeps it.
    @Test func takeIdleStorageFreesStorage() throws {
        var parser = WebSocketParser(role: .client, maxMessageBytes: 1 << 20)
        parser.append([0x82, 0x7E, 0x10, 0x00] + [UInt8](repeating: 1, count: 4096))
        #expect(try parser.next() != nil)
        parser.append([0x02, 0x01, 0x00] as [UInt8])  // first fragment of an unfinished message
        #expect(try parser.next() == nil)
        _ = parser.takeIdleStorage()
        #expect(parser.storageCapacity > 0)
        parser.append([0x80, 0x00] as [UInt8])
        #expect(try parser.next() == .message(opcode: .binary, payload: [0x00]))
        _ = parser.takeIdleStorage()
        #expect(parser.storageCapacity == 0)
    }

    /// A server lends one idle parser's storage to the next connection that reads: taken only when nothing is
    /// held, adopted only by a parser without storage, and parsing is the same with lent storage.
    @Test func idleStorageIsHandedOnAndAdopted() throws {
        var a = WebSocketParser(role: .server, maxMessageBytes: 1000)
        let frame = WebSocketFrameEncoder.encode(opcode: .binary, payload: [1, 2, 3], maskingKey: (9, 8, 7, 6))
        a.append(frame.prefix(4))
        #expect(try a.next() == nil)
        #expect(a.takeIdleStorage() == nil, "bytes are held")
        a.append(frame.dropFirst(4))
        #expect(try a.next() == .message(opcode: .binary, payload: [1, 2, 3]))
        guard var storage = a.takeIdleStorage() else { Issue.record("no storage from an idle parser"); return }
        #expect(storage.isEmpty && storage.capacity >= frame.count && !a.holdsStorage)

        var b = WebSocketParser(role: .server, maxMessageBytes: 1000)
        b.adoptStorage(&storage)
        #expect(b.holdsStorage && storage.capacity == 0)
        b.append(frame)
        #expect(try b.next() == .message(opcode: .binary, payload: [1, 2, 3]))
        var other: [UInt8] = [0xEE]
        b.adoptStorage(&other)  // b has storage: nothing changes
        #expect(other == [0xEE])
        a.append(frame)  // a, without storage, allocates its own
        #expect(try a.next() == .message(opcode: .binary, payload: [1, 2, 3]))
    }

    /// A message's payload is a slice of the parser's storage. One kept past the next `next()` (which unmasks
    /// the next frame in that storage) keeps its bytes.
    @Test func aPayloadKeptPastTheNextFrameKeepsItsBytes() throws {
        var parser = WebSocketParser(role: .server, maxMessageBytes: 1000)
        let first = WebSocketFrameEncoder.encode(opcode: .binary, payload: [1, 2, 3, 4], maskingKey: (0xFF, 0, 0xFF, 0))
        let second = WebSocketFrameEncoder.encode(opcode: .binary, payload: [5, 6, 7, 8], maskingKey: (1, 2, 3, 4))
        parser.append(first + second)
        guard case .message(_, let kept)? = try parser.next() else { Issue.record("no first message"); return }
        #expect(try parser.next() == .message(opcode: .binary, payload: [5, 6, 7, 8]))
        parser.append(first)
        _ = try parser.next()
        #expect(Array(kept) == [1, 2, 3, 4])
    }

    /// Every error maps to the close code RFC 6455 §7.4.1 assigns it.
    @Test func closeCodeMapping() {
        let protocolErrors: [WebSocketProtocolError] = [
            .reservedBitsSet, .unknownOpcode(3), .unmaskedFrameFromClient, .maskedFrameFromServer,
            .controlFrameTooLarge, .fragmentedControlFrame, .unexpectedContinuation, .expectedContinuation,
            .invalidLength, .invalidClosePayload, .invalidCloseCode(1005),
        ]
        for error in protocolErrors {
            #expect(error.closeCode == 1002, "\(error)")
        }
        #expect(WebSocketProtocolError.invalidUTF8.closeCode == 1007)
        #expect(WebSocketProtocolError.messageTooBig.closeCode == 1009)
    }
}
