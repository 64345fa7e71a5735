import Testing

@testable import HomebaseCore

@Suite struct SSEParserTests {
    /// OpenAI (and Ollama `/v1`) chat stream, trimmed from reference/model-apis.md §4: data-only events, `[DONE]`.
    static let openAI = """
        data: {"id":"chatcmpl-X","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

        data: {"id":"chatcmpl-X","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"**"},"finish_reason":null}]}

        data: {"id":"chatcmpl-X","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

        data: [DONE]


        """

    /// Anthropic Messages stream (reference/model-apis.md §5): every event named, a `ping` in the middle.
    static let anthropic = """
        event: message_start
        data: {"type":"message_start","message":{"id":"msg_01K2","type":"message","role":"assistant","content":[]}}

        event: content_block_start
        data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

        event: ping
        data: {"type":"ping"}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

        event: message_stop
        data: {"type":"message_stop"}


        """

    static func parseAll(_ text: String, maxEventBytes: Int = 1024 * 1024) throws -> [SSEEvent] {
        var parser = SSEParser(maxEventBytes: maxEventBytes)
        return try parser.append(Array(text.utf8))
    }

    @Test func openAIStreamYieldsDataOnlyEventsEndingInDone() throws {
        let events = try Self.parseAll(Self.openAI)
        #expect(events.count == 4)
        #expect(events.allSatisfy { $0.event == nil })
        #expect(events[1].data.hasPrefix("{\"id\":\"chatcmpl-X\""))
        #expect(events.last == SSEEvent(event: nil, data: "[DONE]"))
    }

    @Test func anthropicStreamKeepsEventNames() throws {
        let events = try Self.parseAll(Self.anthropic)
        #expect(events.map(\.event) == ["message_start", "content_block_start", "ping", "content_block_delta",
                                        "message_stop"])
        #expect(events[2].data == #"{"type":"ping"}"#)
    }

    @Test(arguments: ["\n", "\r\n", "\r"])
    func everySplitPointGivesTheSameEvents(terminator: String) throws {
        let expected = try Self.parseAll(Self.anthropic + Self.openAI)
        let text = (Self.anthropic + Self.openAI).split(separator: "\n", omittingEmptySubsequences: false)
            .joined(separator: terminator)
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            var parser = SSEParser()
            var events = try parser.append(bytes[..<cut])
            events += try parser.append(bytes[cut...])
            #expect(events == expected, "cut at \(cut)")
            #expect(!parser.hasPartialEvent)
        }
    }

    @Test func byteAtATimeWithMultibyteUTF8() throws {
        var parser = SSEParser()
        var events: [SSEEvent] = []
        for byte in Array("data: héllo 🦙\r\ndata:second\r\n\r\n".utf8) {
            events += try parser.append([byte])
        }
        #expect(events == [SSEEvent(event: nil, data: "héllo 🦙\nsecond")])
    }

    @Test func commentsIdRetryAndUnknownFieldsAreNotData() throws {
        var parser = SSEParser()
        let events = try parser.append(Array(": keep-alive\nretry: 10\nid: 7\nfoo: bar\ndata\n\n".utf8))
        // `data` without a colon is a data line with an empty value, so the event is dispatched with "".
        #expect(events == [SSEEvent(event: nil, data: "")])
        #expect(parser.lastEventID == "7")
    }

    @Test func onlyOneLeadingSpaceIsStripped() throws {
        #expect(try Self.parseAll("data:  two\ndata:none\n\n") == [SSEEvent(event: nil, data: " two\nnone")])
    }

    @Test func eventWithoutDataIsNotDispatchedAndItsNameDoesNotLeak() throws {
        let events = try Self.parseAll("event: lonely\n\ndata: x\n\n")
        #expect(events == [SSEEvent(event: nil, data: "x")])
    }

    @Test func leadingByteOrderMarkIsSkipped() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("data: a\n\n".utf8)
        var parser = SSEParser()
        #expect(try parser.append(bytes) == [SSEEvent(event: nil, data: "a")])
    }

    @Test func truncatedStreamLeavesAPartialEventAndDispatchesNothing() throws {
        var parser = SSEParser()
        #expect(try parser.append(Array("event: message_stop\ndata: {\"type\"".utf8)).isEmpty)
        #expect(parser.hasPartialEvent)
    }

    @Test func eventOverTheLimitThrowsAndStaysFailed() throws {
        var parser = SSEParser(maxEventBytes: 64)
        _ = try parser.append(Array("data: \(String(repeating: "a", count: 30))\n".utf8))
        // The second data line pushes the event past 64 bytes before any blank line arrives.
        #expect(throws: SSEParser.Error.eventTooLarge(limit: 64)) {
            try parser.append(Array("data: \(String(repeating: "b", count: 30))\n".utf8))
        }
        #expect(throws: SSEParser.Error.eventTooLarge(limit: 64)) { try parser.append(Array("data: c\n\n".utf8)) }
    }

    @Test func endlessLineWithoutTerminatorIsBounded() {
        var parser = SSEParser(maxEventBytes: 4096)
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1000)
        #expect(throws: SSEParser.Error.eventTooLarge(limit: 4096)) {
            for _ in 0..<100 { _ = try parser.append(chunk) }
        }
        #expect(!parser.hasPartialEvent)  // buffers released on failure
    }

    @Test func manySmallEventsAreFineBecauseTheLimitIsPerEvent() throws {
        let text = String(repeating: "data: 0123456789\n\n", count: 1000)
        #expect(try Self.parseAll(text, maxEventBytes: 32).count == 1000)
    }

    @Test func binaryGarbageNeverTrapsAndDecodesLossily() throws {
        var state: UInt32 = 12345
        var bytes = Array("data: ".utf8)
        for _ in 0..<5000 {
            state = state &* 1_103_515_245 &+ 12345
            let byte = UInt8(truncatingIfNeeded: state >> 16)
            bytes.append(byte == 10 || byte == 13 ? 0xFF : byte)
        }
        bytes += Array("\n\n".utf8)
        var parser = SSEParser()
        let events = try parser.append(bytes)
        #expect(events.count == 1)
        #expect(events[0].data.unicodeScalars.contains("\u{FFFD}"))
    }

    // MARK: The fast lane (`takeSimpleEvents`)

    /// Feeds `pieces` through the lane then `append` (as the chat assembler does), collecting what each gives.
    static func viaLane(_ pieces: [[UInt8]], maxEventBytes: Int, stopAfter: Int? = nil) -> ([SSEEvent], Bool) {
        var parser = SSEParser(maxEventBytes: maxEventBytes)
        var events: [SSEEvent] = []
        var laneCount = 0
        for piece in pieces {
            var lane: [SSEEvent] = []
            let rest = piece.withUnsafeBufferPointer { buffer -> [UInt8] in
                let used = parser.takeSimpleEvents(buffer) { data -> Bool in
                    lane.append(SSEEvent(event: nil, data: String(decoding: data, as: UTF8.self)))
                    laneCount += 1
                    return stopAfter.map { laneCount % $0 != 0 } ?? true
                }
                return Array(buffer[used...])
            }
            // `append` would have refused the whole piece before dispatching any of it: the lane's go too.
            guard let more = try? parser.append(rest) else { return (events, true) }
            events += lane + more
        }
        return (events, false)
    }

    static func viaAppend(_ pieces: [[UInt8]], maxEventBytes: Int) -> ([SSEEvent], Bool) {
        var parser = SSEParser(maxEventBytes: maxEventBytes)
        var events: [SSEEvent] = []
        for piece in pieces {
            guard let more = try? parser.append(piece) else { return (events, true) }
            events += more
        }
        return (events, false)
    }

    /// The lane takes only `data:[ ]VALUE\n\n` events at the start of a piece, so lane-then-append gives
    /// exactly what append alone gives, for every framing SSE allows and every way of cutting the stream.
    @Test func laneThenAppendEqualsAppendAlone() {
        let lines = [
            "data: {\"a\":1}\n\n", "data:{\"a\":2}\n\n", "data:  two spaces\n\n", "data:\n\n", "data: \n\n",
            "data: [DONE]\n\n", "data: one\ndata: two\n\n", "event: named\ndata: x\n\n", "data: crlf\r\n\r\n",
            "data: cr\r\r", "data: mixed\n\r\n", ": comment\n", "id: 7\n", "retry: 10\n", "data\n\n", "\n",
            "dat: typo\n\n", "data: é ünïcode\n\n", "data: \u{FEFF}bom inside\n\n",
            "data: " + String(repeating: "L", count: 40) + "\n\n",
        ]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3000 {
            var text = round % 7 == 0 ? "\u{FEFF}" : ""
            var boundaries: [Int] = []
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                text += lines.randomElement(using: &generator)!
                boundaries.append(text.utf8.count)
            }
            var bytes = Array(text.utf8)
            if round % 5 == 0, !bytes.isEmpty {  // and a damaged byte now and then
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = [10, 13, 0x3A, 0x20, 0xFF].randomElement(using: &generator)!
            }
            var pieces: [[UInt8]] = []
            var index = 0
            while index < bytes.count {
                var length = Int.random(in: 1...max(1, bytes.count - index), using: &generator)
                // Mostly whole lines, as a runtime's reads come.
                if Int.random(in: 0..<4, using: &generator) > 0,
                    let next = boundaries.filter({ $0 > index }).prefix(Int.random(in: 1...3, using: &generator)).last
                {
                    length = min(next, bytes.count) - index
                }
                pieces.append(Array(bytes[index..<index + length]))
                index += length
            }
            // A small limit now and then, so the 40-byte line is oversized.
            let limit = round % 3 == 0 ? 32 : 1024
            let expected = Self.viaAppend(pieces, maxEventBytes: limit)
            let got = Self.viaLane(pieces, maxEventBytes: limit, stopAfter: round % 2 == 0 ? 2 : nil)
            #expect(got.0 == expected.0 && got.1 == expected.1, "\(text.debugDescription) in \(pieces.count) pieces")
        }
    }

    @Test func laneTakesOnlyWhatItMayAndStopsWhenAsked() {
        func take(_ text: String, into parser: inout SSEParser, stopAfterFirst: Bool = false) -> (Int, [String]) {
            var seen: [String] = []
            let used = Array(text.utf8).withUnsafeBufferPointer { buffer in
                parser.takeSimpleEvents(buffer) { data -> Bool in
                    seen.append(String(decoding: data, as: UTF8.self))
                    return !stopAfterFirst
                }
            }
            return (used, seen)
        }
        // A stream led by a byte-order mark: its first line is `append`'s (which drops the mark), the next the lane's.
        var marked = SSEParser()
        #expect(take("\u{FEFF}data: a\n\n", into: &marked) == (0, []))
        #expect((try? marked.append(Array("\u{FEFF}data: a\n\n".utf8)))?.map(\.data) == ["a"])
        #expect(take("data: b\n\n", into: &marked) == (9, ["b"]))
        // Without a mark, the lane takes the first line too, and the stream's first line is then over: a mark
        // arriving later is an ordinary byte (here it makes the field name unknown, so no data).
        var parser = SSEParser()
        #expect(take("data: a\n\n", into: &parser) == (9, ["a"]))
        #expect((try? parser.append(Array("\u{FEFF}data: z\n\n".utf8)))?.isEmpty == true)
        #expect(take("data: b\n\ndata: c\n\nevent: x\ndata: d\n\n", into: &parser) == (18, ["b", "c"]))
        #expect(take("data: b\n\ndata: c\n\n", into: &parser, stopAfterFirst: true) == (9, ["b"]))
        // An unfinished event, a \r line end, a second data line: not the lane's.
        #expect(take("data: b\n", into: &parser) == (0, []))
        #expect(take("data: b\r\n\r\n", into: &parser) == (0, []))
        #expect(take("data: b\ndata: c\n\n", into: &parser) == (0, []))
        // While `append` holds part of a line, nothing.
        _ = try? parser.append(Array("data: par".utf8))
        #expect(take("data: b\n\n", into: &parser) == (0, []))
        // A line over the limit is left to `append`, which refuses it.
        var small = SSEParser(maxEventBytes: 8)
        _ = try? small.append(Array("data:\n\n".utf8))
        #expect(take("data: 12\n\n", into: &small) == (10, ["12"]))
        #expect(take("data: 123\n\n", into: &small) == (0, []))
    }
}
