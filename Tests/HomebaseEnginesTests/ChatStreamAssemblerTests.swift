import HomebaseCore
import Testing

@testable import HomebaseEngines

/// The assembler reads most events through the SSE parser's fast lane and the decoder's in-place entry; the
/// outcome must be what the parser and `decode` alone give, read by read.
@Suite struct ChatStreamAssemblerTests {
    /// The assembler before the lane: the whole piece through the parser, then each event through `decode`.
    struct Reference {
        var parser: SSEParser
        var decoder = OpenAIStreamDecoder()

        init(maxEventBytes: Int) { self.parser = SSEParser(maxEventBytes: maxEventBytes) }

        mutating func read(_ piece: [UInt8]) -> ChatStreamAssembler<OpenAIStreamDecoder>.Read {
            var read = ChatStreamAssembler<OpenAIStreamDecoder>.Read()
            do {
                for event in try self.parser.append(piece) {
                    read.events += try self.decoder.decode(event)
                    if self.decoder.isComplete { break }
                }
            } catch let error as ChatEngineError {
                read.failure = error
                return read
            } catch {
                read.failure = .malformed("an event exceeded \(self.parser.maxEventBytes) bytes")
                return read
            }
            read.isComplete = self.decoder.isComplete
            return read
        }
    }

    static let events = [
        #"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"# + "\n\n",
        #"data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}"# + "\n\n",
        #"data:{"choices":[{"delta":{"content":"lo é"}}]}"# + "\n\n",
        #"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"# + "\n\n",
        #"data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"# + "\n\n",
        #"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}"# + "\n\n",
        #"data: {"error":{"message":"boom"}}"# + "\n\n",
        "data: [DONE]\n\n", "data:  [DONE]\n\n", "data: [DONE]\r\n\r\n", "data: not json\n\n", "data:\n\n",
        "event: other\ndata: {\"choices\":[]}\n\n", ": keep-alive\n\n", "data: {\"choices\":\ndata: []}\n\n",
        #"data: {"choices":[{"index":0,"delta":{"content":"a\u00e9\n"}}]}"# + "\r\n\r\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"" + String(repeating: "x", count: 300) + "\"}}]}\n\n",
    ]

    @Test func readsEqualTheParserAndDecodeAlone() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3000 {
            var text = ""
            var boundaries: [Int] = []  // where events end: a runtime's reads mostly end there
            for _ in 0..<Int.random(in: 1...14, using: &generator) {
                text += Self.events.randomElement(using: &generator)!
                boundaries.append(text.utf8.count)
            }
            var bytes = Array(text.utf8)
            if round % 4 == 0, !bytes.isEmpty {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] =
                    Array(#"{}[]:,"\ 0n\#n\#r"#.utf8).randomElement(using: &generator)!
            }
            // Every event at most 256 bytes in a third of the rounds: the long one is then refused.
            let limit = round % 3 == 0 ? 256 : 1024 * 1024
            var reference = Reference(maxEventBytes: limit)
            var assembler = ChatStreamAssembler(decoder: OpenAIStreamDecoder(), pacing: nil, maxEventBytes: limit)
            // Half the rounds read into one kept Read (as the pushed handler does), which must come back
            // cleared of the last read's outcome each time: it starts with a stale one.
            let keeps = round % 2 == 1
            var kept = ChatStreamAssembler<OpenAIStreamDecoder>.Read(events: [.text("stale")], failure: .cancelled,
                                                                      isComplete: true)
            var index = 0
            while index < bytes.count {
                var length = Int.random(in: 1...max(1, min(400, bytes.count - index)), using: &generator)
                if Int.random(in: 0..<4, using: &generator) > 0,
                    let next = boundaries.filter({ $0 > index }).prefix(Int.random(in: 1...3, using: &generator)).last
                {
                    length = min(next, bytes.count) - index
                }
                let piece = Array(bytes[index..<index + length])
                index += length
                let expected = reference.read(piece)
                let got: ChatStreamAssembler<OpenAIStreamDecoder>.Read
                if keeps {
                    assembler.read(piece, into: &kept)
                    got = kept
                } else {
                    got = assembler.read(piece)
                }
                #expect(got.events == expected.events && got.failure == expected.failure
                        && got.isComplete == expected.isComplete, "\(text.debugDescription)")
                if expected.failure != nil || expected.isComplete { break }
            }
        }
    }
}
