import HomebaseCore
import HomebaseEngines

/// The model stream decoders behind a chat answer, as the HTTP transport drives them (`ChatStreamAssembler`:
/// SSE parser, its fast lane, the backend's decoder). `openai-stream` is OpenAI's and Ollama's `/v1` (the
/// path every Ollama answer takes); `anthropic-stream` is Anthropic's. Input: `control || maxEvent || body`.
///
/// Reference: the body read one line at a time (a read never holds two line ends, so the fast lane never
/// runs) with the decoder's general path only. The body cut anywhere, with every fast path on (the lane, the
/// one-pass chunk reader, the learnt chunk template), gives the same events, the same failure and the same
/// completion; except that a read that overflows the SSE parser fails whole, the events before the overflow
/// in that read dropped (`SSEParser`'s contract), so a cut may fail there where the reference ended at one of
/// those events (an error, or the terminator); its events are then a prefix of the reference's. In every
/// outcome one `finished` at most comes, last, and a complete answer ends with it.
enum ChatStreamHarness {
    static let openAITarget = FuzzTarget(
        "openai-stream", "OpenAI / Ollama /v1 SSE decoder: fast paths and cuts against the general path",
        seeds: { Self.seeds(openAI: true) }, run: { input throws(InvariantViolation) in
            try Self.run(input) { fast in
                var decoder = OpenAIStreamDecoder()
                decoder.usesFastPath = fast
                return decoder
            }
        })

    static let anthropicTarget = FuzzTarget(
        "anthropic-stream", "Anthropic SSE decoder: cuts and the SSE fast lane against line-by-line reads",
        seeds: { Self.seeds(openAI: false) }, run: { input throws(InvariantViolation) in
            try Self.run(input) { _ in AnthropicStreamDecoder() }
        })

    struct Outcome: Equatable {
        var events: [ChatEngineEvent] = []
        var failure: ChatEngineError?
        var complete = false
    }

    static func run<D: ChatStreamDecoder>(_ input: [UInt8], _ make: (_ fast: Bool) -> D) throws(InvariantViolation) {
        guard input.count >= 2 else { return }
        let maxEvent = FuzzInput.limit(input[1], small: 400, production: 1024 * 1024)
        let body = input[2...]
        let reference = Self.read(FuzzInput.lines(body), make(false), maxEvent: maxEvent)
        let cut = Self.read(FuzzInput.pieces(body, seed: input[0]), make(true), maxEvent: maxEvent)
        let overflow = ChatEngineError.malformed("an event exceeded \(maxEvent) bytes")
        if cut.failure == overflow || reference.failure == overflow {
            try check(cut.failure == overflow && (reference.failure != nil || reference.complete),
                      "overflow verdicts differ: reference \(reference), cut \(cut)")
            try check(reference.events.starts(with: cut.events), "events of an overflowing body are no prefix")
        } else {
            try checkEqual(cut, reference, "the fast paths or the cuts change the answer")
        }
        for outcome in [reference, cut] {
            let finished = outcome.events.indices.filter {
                if case .finished = outcome.events[$0] { true } else { false }
            }
            try check(finished.count <= 1 && finished.allSatisfy { $0 == outcome.events.count - 1 },
                      "finished events at \(finished) of \(outcome.events.count)")
            try check(!outcome.complete || finished.count == 1, "complete without a finished event")
        }
    }

    /// Reads the pieces as the transport does: stops at a failure or at the terminator; at the end of the
    /// body, asks the decoder for its last events.
    static func read<D: ChatStreamDecoder>(_ pieces: [ArraySlice<UInt8>], _ decoder: D, maxEvent: Int) -> Outcome {
        var assembler = ChatStreamAssembler(decoder: decoder, pacing: nil, maxEventBytes: maxEvent)
        var outcome = Outcome()
        for piece in pieces {
            let read = assembler.read(Array(piece))
            outcome.events += read.events
            if let failure = read.failure {
                outcome.failure = failure
                return outcome
            }
            if read.isComplete {
                outcome.complete = true
                return outcome
            }
        }
        do {
            outcome.events += try assembler.endOfStream()
        } catch {
            outcome.failure = error
        }
        return outcome
    }

    static func seeds(openAI: Bool) -> [[UInt8]] {
        let bodies: [[UInt8]] = openAI
            ? ["ollama/v1-stream-v0.32.6.txt", "ollama/v1-stream-legacy.txt", "ollama/v1-error-not-found.txt"]
                .map(FixtureFiles.bytes) + [Array(Self.openAIToolSample.utf8)]
            : [Array(Self.anthropicSample.utf8)]
        return bodies.flatMap { body in
            [body.prefixed(0, 255), body.prefixed(0x0E, 255), body.prefixed(0x07, 255), body.prefixed(0x16, 150)]
        }
    }

    /// Tool-call deltas joined by index, an error-free finish with usage (reference/model-apis.md §2).
    static let openAIToolSample = """
        data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

        data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}

        data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}

        data: [DONE]


        """

    /// An Anthropic Messages stream with a text block and a tool_use block (reference/model-apis.md §5).
    static let anthropicSample = """
        event: message_start
        data: {"type":"message_start","message":{"id":"msg_01K2","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5-20251001","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":849,"output_tokens":1}}}

        event: content_block_start
        data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

        event: ping
        data: {"type":"ping"}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

        event: content_block_stop
        data: {"type":"content_block_stop","index":0}

        event: content_block_start
        data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01KF","name":"get_weather","input":{}}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Par"}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\\"}"}}

        event: content_block_stop
        data: {"type":"content_block_stop","index":1}

        event: message_delta
        data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":47}}

        event: message_stop
        data: {"type":"message_stop"}


        """
}
