import HomebaseCore
import Testing

@testable import HomebaseEngines

/// The Chat Completions chunk decoder on hand-written events (reference/model-apis.md §2, §4).
@Suite struct OpenAIStreamDecoderTests {
    /// Feeds `data` lines as SSE events; returns every event, or the error.
    func run(_ datas: [String], end: Bool = true) -> Result<[ChatEngineEvent], ChatEngineError> {
        var decoder = OpenAIStreamDecoder()
        var out: [ChatEngineEvent] = []
        do throws(ChatEngineError) {
            for data in datas {
                out += try decoder.decode(SSEEvent(event: nil, data: data))
                if decoder.isComplete { return .success(out) }
            }
            if end { out += try decoder.endOfStream() }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    static let head = #""id":"chatcmpl-42","object":"chat.completion.chunk","created":1722000000,"model":"m""#

    @Test func currentShapeWithSeparateFinishAndUsageChunk() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}],"usage":null,"obfuscation":"nqlUcq"}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
            #"{\#(Self.head),"choices":[],"usage":{"prompt_tokens":26,"completion_tokens":2,"total_tokens":28}}"#,
            "[DONE]",
        ])
        #expect(result == .success([.text("Hel"), .text("lo"),
                                    .finished(.stop, Usage(promptTokens: 26, completionTokens: 2))]))
    }

    /// Issue 34: Ollama streams reasoning as `delta.reasoning` with an empty content; llama-server and vLLM as
    /// `delta.reasoning_content`. Both are `.reasoning`, never text, on the fast and the general path alike.
    @Test(arguments: [true, false]) func reasoningOfBothShapesIsItsOwnEvent(fastPath: Bool) {
        var decoder = OpenAIStreamDecoder()
        decoder.usesFastPath = fastPath
        var out: [ChatEngineEvent] = []
        let datas = [
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Hmm"},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"","reasoning":", two"},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"reasoning_content":" steps"},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"Four","reasoning":null},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"."},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            "[DONE]",
        ]
        for data in datas {
            #expect(throws: Never.self) {
                try data.utf8CString.dropLast().map { UInt8(bitPattern: $0) }.withUnsafeBufferPointer { bytes throws(ChatEngineError) in
                    try decoder.decodeData(bytes, into: &out)
                }
            }
        }
        #expect(out == [.reasoning("Hmm"), .reasoning(", two"), .reasoning(" steps"), .text("Four"), .text("."),
                        .finished(.length, nil)])
    }

    @Test func reasoningOfTheWrongTypeIsMalformed() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"","reasoning":7},"finish_reason":null}]}"#,
        ])
        guard case .failure(.malformed) = result else {
            Issue.record("expected malformed, got \(result)")
            return
        }
    }

    @Test func legacyShapeWithRoleInEveryDeltaAndFinishOnLastContentChunk() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":" there"},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"length"}]}"#,
            "[DONE]",
        ])
        #expect(result == .success([.text("Hi"), .text(" there"), .finished(.length, nil)]))
    }

    @Test func fragmentedToolCallDeltasAreJoinedByIndex() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        #expect(result == .success([
            .toolCall(ToolCall(id: "call_abc", name: "get_weather", arguments: RawJSON(#"{"city":"Paris"}"#))),
            .toolCall(ToolCall(id: "call_def", name: "get_time", arguments: RawJSON("{}"))),
            .finished(.toolCalls, nil),
        ]))
    }

    @Test func ollamaWholeToolCallInOneChunkWithStopBecomesToolCalls() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3x9a0b2","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]},"finish_reason":null}]}"#,
            #"{\#(Self.head),"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        #expect(result == .success([
            .toolCall(ToolCall(id: "call_k3x9a0b2", name: "get_weather", arguments: RawJSON(#"{"city":"Tokyo"}"#))),
            .finished(.toolCalls, nil),
        ]))
    }

    @Test func finishReasonsMap() {
        #expect(OpenAIStreamDecoder.reason("stop") == .stop)
        #expect(OpenAIStreamDecoder.reason("length") == .length)
        #expect(OpenAIStreamDecoder.reason("tool_calls") == .toolCalls)
        #expect(OpenAIStreamDecoder.reason("function_call") == .toolCalls)
        #expect(OpenAIStreamDecoder.reason("content_filter") == .stop)
    }

    @Test func errorChunkAfterTheStatusIsMidStream() {
        let result = self.run([
            #"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#,
            #"{"error":{"message":"llama runner process has terminated","type":"api_error"}}"#,
        ])
        #expect(result == .failure(.midStream("llama runner process has terminated")))
        #expect(self.run([#"{"error":"boom"}"#]) == .failure(.midStream("boom")))
    }

    @Test func endWithoutDoneOrFinishIsMidStream() {
        let result = self.run([#"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#])
        #expect(result == .failure(.midStream("stream ended early")))
        #expect(self.run([]) == .failure(.midStream("stream ended early")))
    }

    @Test func endAfterFinishWithoutDoneIsAccepted() {
        let result = self.run([#"{\#(Self.head),"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}"#])
        #expect(result == .success([.text("a"), .finished(.stop, nil)]))
    }

    @Test func hostileChunksAreMalformedNotCrashes() {
        let hostile = [
            #"{"id":"x","choices":[{"index":0,"delta":{"content":"#,  // truncated JSON
            "not json at all",
            "[1,2,3]",
            #"{"choices":"nope"}"#,
            #"{"choices":[42]}"#,
            #"{"choices":[{"index":0,"delta":{"content":7}}]}"#,
            #"{"choices":[{"index":0,"delta":"x"}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"zero"}]}}]}"#,
            #"{"choices":[],"usage":{"prompt_tokens":"many"}}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":3}]}"#,
        ]
        for data in hostile {
            guard case .failure(.malformed) = self.run([data]) else {
                Issue.record("not malformed: \(data)")
                continue
            }
        }
    }

    @Test func toolCallWithInvalidArgumentsOrNoNameIsMalformed() {
        let badArguments = self.run([
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        #expect(badArguments == .failure(.malformed("tool call f arguments are not a JSON object")))
        let noName = self.run([
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        #expect(noName == .failure(.malformed("tool call 0 has no name")))
    }

    @Test func otherChoicesAndUnknownFieldsAreIgnored() {
        let result = self.run([
            #"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine","weird":[1]}}],"x":{}}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        #expect(result == .success([.text("mine"), .finished(.stop, nil)]))
    }

    /// The one-pass fast path never answers differently from the general path: same events, same error, same
    /// state after, for common chunks, odd but valid ones (duplicate keys, nulls, other indexes, escapes) and
    /// broken ones, each also with one byte changed.
    @Test func fastPathAgreesWithTheGeneralPath() {
        let h = Self.head
        let chunks = [
            #"{\#(h),"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}],"usage":null}"#,
            #"{\#(h),"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
            #"{\#(h),"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            #"{"choices":[{"delta":{"content":"a\n\u00e9\ud83d\ude00"}}]}"#,
            #"{"choices":[{"index":1,"delta":{"content":5}},{"index":0,"delta":{"content":"x"}}]}"#,
            #"{"choices":[{"index":0,"index":1,"delta":{"content":"x"}}]}"#,
            #"{"choices":[{"index":0,"delta":{"content":"x","content":"y"}}],"choices":null}"#,
            #"{"choices":null,"choices":[{"delta":{"content":"late"}}]}"#,
            #"{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[]},"finish_reason":"length"}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            #"{"choices":[{"index":"0","delta":{"content":"x"}}]}"#,
            #"{"choices":[{"index":0.0,"delta":{"content":"x"}}]}"#,
            #"{"choices":[{"index":0,"delta":"x"}]}"#,
            #"{"choices":[{"index":0,"delta":{"content":null},"finish_reason":7}]}"#,
            #"{"choices":{"index":0}}"#,
            #"{"choices":[1]}"#,
            #"{"usage":{"prompt_tokens":-1,"completion_tokens":2}}"#,
            #"{"usage":{"prompt_tokens":1}}"#,
            #"{"usage":[]}"#,
            #"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#,
            #"{"error":{"message":"boom"},"error":null}"#,
            #"{"error":{"message":"boom"}}"#,
            #"[1]"#, #""text""#, "{", #"{"choices":[{"delta":{"content":"x"}}]} x"#, "",
            "[DONE]", " [DONE]", "[DONE] ", "[DONE]x", "[DONE", "\u{00A0}[DONE]", #" {"choices":[]}"#,
            "\t{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\u{2003}",
            #"{"choices":[{"index":1,"delta":5},{"index":0,"delta":{"content":"é"}}]}"#,
            #"{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}"#,
            #"{"choices":[{"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"},"finish_reason":"length"}]}"#,
            #"{"choices":[{"delta":{"content":"a"}}],"error":{"message":"late"}}"#,
        ]
        var inputs = chunks
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.-enul"#.utf8)
        for chunk in chunks where !chunk.isEmpty {
            for _ in 0..<200 {
                var bytes = Array(chunk.utf8)
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
                inputs.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        for data in inputs {
            // A tool call already pending changes what a finish chunk means: check both starting states.
            for pending in [false, true] {
                var fast = OpenAIStreamDecoder()
                var general = OpenAIStreamDecoder()
                general.usesFastPath = false
                if pending {
                    let call = #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#
                    _ = try? fast.decode(SSEEvent(event: nil, data: call))
                    _ = try? general.decode(SSEEvent(event: nil, data: call))
                }
                // The per-token entry (`decodeData`, the SSE fast lane's) reads the same bytes in place.
                var inPlace = fast
                let a = Result { () throws(ChatEngineError) in try fast.decode(SSEEvent(event: nil, data: data)) }
                let b = Result { () throws(ChatEngineError) in try general.decode(SSEEvent(event: nil, data: data)) }
                let c = Result { () throws(ChatEngineError) -> [ChatEngineEvent] in
                    var events: [ChatEngineEvent] = [.text("before")]  // appended to, never replaced
                    var bytes = Array(data.utf8)
                    try bytes.withUnsafeMutableBufferPointer { buffer throws(ChatEngineError) in
                        try inPlace.decodeData(UnsafeBufferPointer(buffer), into: &events)
                    }
                    return Array(events.dropFirst())
                }
                #expect(a == b, "\(data.debugDescription)")
                #expect(c == b, "\(data.debugDescription)")
                // And the state they leave: the end of the stream reads the same.
                let endA = Result { () throws(ChatEngineError) in try fast.endOfStream() }
                let endB = Result { () throws(ChatEngineError) in try general.endOfStream() }
                let endC = Result { () throws(ChatEngineError) in try inPlace.endOfStream() }
                #expect(endA == endB, "\(data.debugDescription)")
                #expect(endC == endB, "\(data.debugDescription)")
            }
        }
    }

    /// Decodes `datas` in order on one decoder, through the per-token entry (`decodeData`) or the general path
    /// alone; the events and the end of the stream, or the first error, and the chunks read by their layout.
    static func stream(_ datas: [[UInt8]], fast: Bool) -> (Result<[ChatEngineEvent], ChatEngineError>, Int) {
        var decoder = OpenAIStreamDecoder()
        decoder.usesFastPath = fast
        var events: [ChatEngineEvent] = []
        let result = Result { () throws(ChatEngineError) -> [ChatEngineEvent] in
            for data in datas {
                if fast {
                    try data.withUnsafeBufferPointer { buffer throws(ChatEngineError) in
                        try decoder.decodeData(buffer, into: &events)
                    }
                } else {
                    events += try decoder.decode(SSEEvent(event: nil, data: String(decoding: data, as: UTF8.self)))
                }
                if decoder.isComplete { return events }
            }
            return events + (try decoder.endOfStream())
        }
        return (result, decoder.templateReads)
    }

    /// A chunk read in full teaches the decoder its layout, and the next chunks with that layout are read by
    /// comparing bytes and reading the one string: whatever stands in the text's place (escapes, an early quote,
    /// a control character, broken UTF-8) and whatever byte changes around it, the outcome is the general path's.
    @Test func chunksReadByTheirLearntLayoutDecodeAsTheGeneralPath() {
        let before = #"{"id":"chatcmpl-633","object":"chat.completion.chunk","created":1795994458,"model":"qwen2.5:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"content":""#
        let after = #""},"finish_reason":null}]}"#
        func chunk(_ text: String) -> [UInt8] { Array((before + text + after).utf8) }
        let texts = [
            "Hel", "", " lo", #"\""#, #"a\\b"#, #"\n\t\u00e9\ud83d\ude00"#, "é😀", #"\u12"#, #"\x"#, #"\"#, #"a"b"#,
            "\u{1}", #"\ud800"#, #"","x":""#, #""},"finish_reason":"stop"}]}{"a":""#,
        ]
        var candidates: [[UInt8]] = texts.map(chunk)
        candidates.append(chunk("x") + [0x20])  // a trailing space: trimmed by the general path
        candidates.append(Array(chunk("ab").dropLast()))
        candidates.append(chunk("x").map { $0 == UInt8(ascii: "x") ? 0xFF : $0 })  // broken UTF-8
        candidates.append(Array((before + "x" + #""},"finish_reason":"stop"}]}"#).utf8))
        candidates.append(Array((before + "x" + #""},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#).utf8))
        candidates.append(Array((#"{"choices":[{"index":0,"delta":{"content":"a","content":""# + "b" + after).utf8))
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.-enulx"#.utf8)
        for _ in 0..<1500 {
            var bytes = chunk(texts.randomElement(using: &generator)!)
            for _ in 0..<Int.random(in: 1...2, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            }
            candidates.append(bytes)
        }
        let leads: [[[UInt8]]] = [
            [chunk("first")],
            // The first chunk (with the role) has another layout: the second one is learnt.
            [Array(#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}"#.utf8), chunk("first")],
            // A repeated key: the learnt place is the one that counts.
            [Array((#"{"choices":[{"index":0,"delta":{"content":"a","content":""# + "b" + after).utf8)],
            [],
        ]
        var templateReads = 0
        for candidate in candidates {
            for lead in leads {
                let datas = lead + [candidate, chunk("next"), Array("[DONE]".utf8)]
                let (fast, reads) = Self.stream(datas, fast: true)
                let (general, _) = Self.stream(datas, fast: false)
                #expect(fast == general, "\(String(decoding: candidate, as: UTF8.self).debugDescription)")
                templateReads += reads
            }
        }
        #expect(templateReads > 0)
        // A clean stream: every chunk after the first is read by its layout.
        let (clean, reads) = Self.stream([chunk("a"), chunk("b"), chunk(#"\"c"#), chunk(""), chunk("d"), Array("[DONE]".utf8)], fast: true)
        #expect(clean == .success([.text("a"), .text("b"), .text("\"c"), .text("d"), .finished(.stop, nil)]))
        #expect(reads == 4)
    }

    /// Spaces, tabs and Unicode spaces around a chunk or the terminator are trimmed; other bytes are not.
    @Test func whitespaceAroundTheDataIsTrimmed() {
        let chunk = #"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}"#
        #expect(self.run([" \t" + chunk + " ", "\u{00A0}[DONE]\u{2003}"]) == .success([.text("x"), .finished(.stop, nil)]))
        #expect(self.run([chunk, " [DONE]"]) == .success([.text("x"), .finished(.stop, nil)]))
        // Not whitespace by that definition: the terminator is not recognised, and the stream is cut short.
        guard case .failure = self.run([chunk, "[DONE]x"]) else {
            Issue.record("expected a failure for a broken terminator")
            return
        }
    }

    /// Found by fuzzing (openai-stream, Fixtures/fuzz/regressions/openai-stream/): a finish chunk with no tool
    /// call pending, read by the fast path, left the calls open, where the general path had emitted them (none)
    /// and closed them. A tool-call delta after it was then dropped by one path and emitted, or refused, at the
    /// end by the other. Both refuse it now: the calls were joined at finish_reason, and a later piece of one
    /// could only be lost.
    @Test func aToolCallDeltaAfterFinishReasonIsMalformedOnBothPaths() {
        let datas = [
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ].map { Array($0.utf8) }
        let late = ChatEngineError.malformed("a tool call delta after finish_reason")
        let (fast, _) = Self.stream(datas, fast: true)
        let (general, _) = Self.stream(datas, fast: false)
        #expect(fast == .failure(late))
        #expect(general == .failure(late))
        // With a name too: the call is not dropped silently behind a finished(.toolCalls) either.
        let named = [datas[0],
                     Array(#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}"#.utf8),
                     datas[3]]
        #expect(Self.stream(named, fast: true).0 == .failure(late))
        #expect(Self.stream(named, fast: false).0 == .failure(late))
        // Before finish_reason, the same deltas are a tool call.
        let inOrder = [named[1], datas[2], datas[3]]
        let expected: [ChatEngineEvent] = [.toolCall(ToolCall(id: "c", name: "f", arguments: RawJSON("{}"))),
                                           .finished(.toolCalls, nil)]
        #expect(Self.stream(inOrder, fast: true).0 == .success(expected))
        #expect(Self.stream(inOrder, fast: false).0 == .success(expected))
    }
}
