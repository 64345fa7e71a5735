import HomebaseCore
import Testing

@testable import HomebaseEngines

/// The Messages API event decoder on hand-written events (reference/model-apis.md §5).
@Suite struct AnthropicStreamDecoderTests {
    func run(_ events: [(String, String)], end: Bool = true) -> Result<[ChatEngineEvent], ChatEngineError> {
        var decoder = AnthropicStreamDecoder()
        var out: [ChatEngineEvent] = []
        do throws(ChatEngineError) {
            for (name, data) in events {
                out += try decoder.decode(SSEEvent(event: name, data: data))
                if decoder.isComplete { return .success(out) }
            }
            if end { out += try decoder.endOfStream() }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    static let start = ("message_start", #"{"type":"message_start","message":{"id":"msg_01K2","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":849,"output_tokens":1}}}"#)
    static let stop = ("message_stop", #"{"type":"message_stop"}"#)

    /// The captured stream of the reference, verbatim.
    @Test func capturedStreamWithTextAndToolUse() {
        let result = self.run([
            Self.start,
            ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("ping", #"{"type": "ping"}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#),
            ("content_block_stop", #"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", #"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01KF","name":"get_weather","input":{}}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\"}"}}"#),
            ("content_block_stop", #"{"type":"content_block_stop","index":1}"#),
            ("message_delta", #"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":47}}"#),
            Self.stop,
        ])
        #expect(result == .success([
            .text("Hello"),
            .toolCall(ToolCall(id: "toolu_01KF", name: "get_weather", arguments: RawJSON(#"{"city":"Paris"}"#))),
            .finished(.toolCalls, Usage(promptTokens: 849, completionTokens: 47)),
        ]))
    }

    @Test func toolUseWithNoInputReadsAsEmptyObject() {
        let result = self.run([
            Self.start,
            ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"now","input":{}}}"#),
            ("content_block_stop", #"{"type":"content_block_stop","index":0}"#),
            ("message_delta", #"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}"#),
            Self.stop,
        ])
        #expect(result == .success([
            .toolCall(ToolCall(id: "t", name: "now", arguments: RawJSON("{}"))),
            .finished(.toolCalls, Usage(promptTokens: 849, completionTokens: 3)),
        ]))
    }

    @Test func stopReasonsMap() {
        #expect(AnthropicStreamDecoder.reason("end_turn") == .stop)
        #expect(AnthropicStreamDecoder.reason("stop_sequence") == .stop)
        #expect(AnthropicStreamDecoder.reason("max_tokens") == .length)
        #expect(AnthropicStreamDecoder.reason("tool_use") == .toolCalls)
        #expect(AnthropicStreamDecoder.reason("refusal") == .stop)
    }

    @Test func cumulativeOutputTokensTakeTheLastValue() {
        let result = self.run([
            Self.start,
            ("message_delta", #"{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":5}}"#),
            ("message_delta", #"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9,"input_tokens":850}}"#),
            Self.stop,
        ])
        #expect(result == .success([.finished(.length, Usage(promptTokens: 850, completionTokens: 9))]))
    }

    @Test func errorEventIsMidStream() {
        let result = self.run([
            Self.start,
            ("error", #"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
        ])
        #expect(result == .failure(.midStream("Overloaded")))
    }

    @Test func endWithoutMessageStopIsMidStream() {
        #expect(self.run([Self.start]) == .failure(.midStream("stream ended early")))
    }

    @Test func unknownEventsAndDeltasAreIgnored() {
        let result = self.run([
            Self.start,
            ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#),
            ("future_event", #"{"type":"future_event","x":1}"#),
            Self.stop,
        ])
        #expect(result == .success([.finished(.stop, Usage(promptTokens: 849, completionTokens: 1))]))
    }

    @Test func hostileEventsAreMalformedNotCrashes() {
        let hostile: [[(String, String)]] = [
            [("message_start", #"{"type":"message_start","message":{"usage":{"input_tokens":"#)],
            [("message_start", "[]")],
            [("message_start", #"{"type":"message_start","message":"x"}"#)],
            [("message_start", #"{"type":"message_start","message":{"usage":{"input_tokens":"ten"}}}"#)],
            [Self.start, ("content_block_delta", #"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}"#)],
            [Self.start, ("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}"#)],
            [Self.start, ("content_block_delta", #"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}"#)],
            [Self.start, ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use"}}"#)],
            [Self.start,
             ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#),
             ("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1,"}}"#),
             ("content_block_stop", #"{"type":"content_block_stop","index":0}"#)],
            [Self.stop],
        ]
        for events in hostile {
            guard case .failure(.malformed) = self.run(events) else {
                Issue.record("not malformed: \(events.map(\.1))")
                continue
            }
        }
    }
}
