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
}
