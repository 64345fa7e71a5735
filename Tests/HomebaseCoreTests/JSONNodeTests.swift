import FoundationEssentials
import Testing
@testable import HomebaseCore

@Suite struct JSONNodeTests {
    @Test func parsesAStreamedChunk() throws {
        let text = #"{"id":"chatcmpl-42","object":"chat.completion.chunk","created":1722000000,"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}"#
        let node = try JSONNode.parse(text)
        #expect(node["created"]?.intValue == 1_722_000_000)
        let choice = try #require(node["choices"]?.arrayValue?.first)
        #expect(choice["index"]?.intValue == 0)
        #expect(choice["delta"]?["content"]?.stringValue == "Hel")
        #expect(choice["finish_reason"]?.isNull == true)
        #expect(node["missing"] == nil)
    }

    @Test func scalarsAndWhitespace() throws {
        #expect(try JSONNode.parse(" \t\r\n true ") == .bool(true))
        #expect(try JSONNode.parse("false") == .bool(false))
        #expect(try JSONNode.parse("null") == .null)
        #expect(try JSONNode.parse("[]") == .array([]))
        #expect(try JSONNode.parse("{ }") == .object([]))
        #expect(try JSONNode.parse("-0.5e+10") == .number("-0.5e+10"))
        #expect(try JSONNode.parse("[1, 2 ,3]") == .array([.number("1"), .number("2"), .number("3")]))
    }

    @Test func integersAreReadExactlyOrNotAtAll() throws {
        #expect(try JSONNode.parse("9223372036854775807").intValue == Int.max)
        #expect(try JSONNode.parse("9223372036854775808").intValue == nil)
        #expect(try JSONNode.parse("1.0").intValue == nil)
        #expect(try JSONNode.parse("1e3").intValue == nil)
        #expect(try JSONNode.parse("-7").intValue == -7)
        #expect(try JSONNode.parse(#""7""#).intValue == nil)
    }

    @Test func stringEscapes() throws {
        #expect(try JSONNode.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{08}\u{0C}\n\r\t"))
        #expect(try JSONNode.parse(#""\u00e9\u4e2d""#) == .string("é中"))
        #expect(try JSONNode.parse(#""\ud83d\ude00 ok""#) == .string("😀 ok"))
        #expect(try JSONNode.parse(#""\u0000""#) == .string("\u{0}"))
        #expect(try JSONNode.parse("\"h\u{e9}llo 中 😀\"") == .string("héllo 中 😀"))
    }

    @Test func duplicateKeysAnswerTheLast() throws {
        #expect(try JSONNode.parse(#"{"a":1,"a":2}"#)["a"]?.intValue == 2)
    }

    /// Malformed, truncated and hostile texts: each is a ParseError, never a crash.
    @Test(arguments: [
        ("", JSONNode.ParseError.Reason.unexpectedEnd),
        ("{", .unexpectedEnd),
        (#"{"a""#, .unexpectedEnd),
        (#"{"a":"#, .unexpectedEnd),
        (#"{"a":1"#, .unexpectedEnd),
        (#""abc"#, .unexpectedEnd),
        (#""\u12"#, .unexpectedEnd),
        ("[1,]", .unexpectedByte(UInt8(ascii: "]"))),
        (#"{"a":1,}"#, .unexpectedByte(UInt8(ascii: "}"))),
        ("{a:1}", .unexpectedByte(UInt8(ascii: "a"))),
        ("tru", .unexpectedEnd),
        ("trux", .unexpectedByte(UInt8(ascii: "x"))),
        ("nul", .unexpectedEnd),
        ("01", .trailingBytes),
        ("1.", .invalidNumber),
        ("-", .unexpectedEnd),
        ("-a", .invalidNumber),
        ("1e", .invalidNumber),
        ("+1", .unexpectedByte(UInt8(ascii: "+"))),
        ("NaN", .unexpectedByte(UInt8(ascii: "N"))),
        ("1 2", .trailingBytes),
        ("1e400", .invalidNumber),
        ("-1e309", .invalidNumber),
        (String(repeating: "9", count: 400), .invalidNumber),
        (#""\x""#, .invalidEscape),
        (#""\u00g0""#, .invalidEscape),
        (#""\ud83d""#, .invalidUnicode),
        (#""\ud83d\u0041""#, .invalidUnicode),
        (#""\ude00""#, .invalidUnicode),
        ("\"a\nb\"", .controlCharacterInString),
        ("\"a\\n\u{01}\"", .controlCharacterInString),
    ])
    func rejects(_ text: String, _ reason: JSONNode.ParseError.Reason) {
        #expect(throws: JSONNode.ParseError.self) { try JSONNode.parse(text) }
        do {
            _ = try JSONNode.parse(text)
        } catch {
            #expect(error.reason == reason, "\(text)")
        }
    }

    @Test func invalidUTF8InAStringIsRefused() {
        let bytes: [UInt8] = [0x22, 0x61, 0xC3, 0x28, 0x22]  // "a<bad>("
        let result = bytes.withUnsafeBufferPointer { buffer in Result { () throws(JSONNode.ParseError) in try JSONNode.parse(buffer) } }
        #expect(throws: JSONNode.ParseError.self) { try result.get() }
    }

    @Test func nestingIsBounded() throws {
        let ok = String(repeating: "[", count: JSONNode.maxDepth) + String(repeating: "]", count: JSONNode.maxDepth)
        #expect(throws: Never.self) { try JSONNode.parse(ok) }
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONNode.ParseError.self) { try JSONNode.parse(deep) }
        let deepObject = String(repeating: #"{"a":"#, count: JSONNode.maxDepth + 1) + "1" + String(repeating: "}", count: JSONNode.maxDepth + 1)
        #expect(throws: JSONNode.ParseError.self) { try JSONNode.parse(deepObject) }
    }

    /// Every prefix of a valid text is refused (truncation anywhere), and none crashes.
    @Test func everyTruncationFails() {
        let text = #"{"choices":[{"index":0,"delta":{"content":"h\u00e9\"llo"},"finish_reason":null}],"usage":{"prompt_tokens":3}}"#
        let bytes = Array(text.utf8)
        for end in 0..<bytes.count {
            let prefix = String(decoding: bytes[..<end], as: UTF8.self)
            #expect(throws: JSONNode.ParseError.self) { try JSONNode.parse(prefix) }
        }
        #expect(throws: Never.self) { try JSONNode.parse(text) }
    }

    /// Agrees with Foundation's parser on what it accepts, over random byte soup built from JSON's alphabet.
    @Test func agreesWithFoundationOnRandomInput() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.-+eEtrufalsn\u"#.utf8) + [0x0A, 0xC3, 0xA9]
        for _ in 0..<3000 {
            let length = Int.random(in: 0..<24, using: &generator)
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            let ours = bytes.withUnsafeBufferPointer { (try? JSONNode.parse($0)) != nil }
            let theirs = (try? JSONDecoder().decode(Probe.self, from: Data(bytes))) != nil
            // Foundation accepts a few extensions we refuse (none expected here); we must never accept what it refuses.
            if ours { #expect(theirs, "\(String(decoding: bytes, as: UTF8.self))") }
        }
    }

    private struct Probe: Decodable {
        init(from decoder: any Decoder) throws {
            _ = try decoder.singleValueContainer()
        }
    }
}

@Suite struct JSONStringWriterTests {
    /// What the hand-written messages must equal byte for byte: JSONEncoder as `Message.jsonBytes` used it.
    let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The hand-written `infer.chunk` is byte for byte what JSONEncoder writes, for every control character,
    /// quotes, backslashes, slashes and non-ASCII text.
    @Test func chunkMatchesJSONEncoder() throws {
        var texts = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        texts += ["", " world", "a\"b\\c/d", "héllo 中文 😀", "\u{2028}\u{2029}<>&", "\u{7F}\u{80}\u{FFFF}"]
        struct Wire: Encodable {
            var type = "infer.chunk"
            var id: String
            var seq: Int
            var text: String
        }
        for (seq, text) in texts.enumerated() {
            let chunk = InferChunk(id: "r\(text)", seq: seq * 1_000_003, text: text)
            let expected = Array(try self.encoder.encode(Wire(id: chunk.id, seq: chunk.seq, text: chunk.text)))
            #expect(Message.inferChunk(chunk).jsonBytes() == expected, "\(Array(text.unicodeScalars))")
            #expect(try Message(json: Message.inferChunk(chunk).jsonBytes()) == .inferChunk(chunk))
        }
    }

    /// Runs needing no escape are copied whole: random texts mixing them with every kind of escape, at every
    /// position, still come out as JSONEncoder writes them.
    @Test func mixedTextsMatchJSONEncoder() throws {
        let alphabet: [String] = ["a", "Z", " ", "/", "\"", "\\", "\n", "\t", "\u{1}", "\u{1F}", "\u{7F}", "é", "中", "😀", "\r\n"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let text = (0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            var out: [UInt8] = []
            JSONStringWriter.append(text, to: &out)
            #expect(out == Array(try self.encoder.encode(text)), "\(text.debugDescription)")
        }
    }

    /// The same for `infer.accept` and `infer.done`, the other per-request messages written by hand.
    @Test func acceptAndDoneMatchJSONEncoder() throws {
        struct AcceptWire: Encodable {
            var type = "infer.accept"
            var id: String
            var model: String
        }
        struct DoneWire: Encodable {
            var type = "infer.done"
            var id: String
            var finishReason: String
            var usage: Usage
            var chunks: Int
            enum CodingKeys: String, CodingKey { case type, id, finishReason = "finish_reason", usage, chunks }
        }
        for text in ["", "r1", "a\"b\\/\u{1}\n", "héllo 中 😀", "\u{7F}"] {
            let accept = InferAccept(id: text, model: "qwen2.5:7b" + text)
            #expect(Message.inferAccept(accept).jsonBytes()
                == Array(try self.encoder.encode(AcceptWire(id: accept.id, model: accept.model))))
            #expect(try Message(json: Message.inferAccept(accept).jsonBytes()) == .inferAccept(accept))
            for (chunks, prompt, completion) in [(0, 0, 0), (7, 123, 456), (Int.max, -1, Int.min)] {
                let done = InferDone(id: text, finishReason: "stop" + text,
                                     usage: Usage(promptTokens: prompt, completionTokens: completion), chunks: chunks)
                #expect(Message.inferDone(done).jsonBytes() == Array(try self.encoder.encode(DoneWire(
                    id: done.id, finishReason: done.finishReason, usage: done.usage, chunks: done.chunks))))
                #expect(try Message(json: Message.inferDone(done).jsonBytes()) == .inferDone(done))
            }
        }
    }
}
