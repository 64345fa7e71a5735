import Foundation
import Testing

@testable import HomebaseCore

/// `JSONReader` accepts exactly what `JSONNode.parse` accepts, and reads the same values.
@Suite struct JSONReaderTests {
    func skipAll(_ text: String) -> Bool {
        (try? JSONReader.read(text) { (reader: inout JSONReader) throws(JSONReader.ParseError) in try reader.skip() }) != nil
    }

    func skipAll(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            (try? JSONReader.read(buffer) { (reader: inout JSONReader) throws(JSONReader.ParseError) in try reader.skip() }) != nil
        }
    }

    static let valid = [
        #"{"choices":[{"index":0,"delta":{"content":"h\u00e9\"llo"},"finish_reason":null}],"usage":{"prompt_tokens":3}}"#,
        "[]", "{}", "0", "-0", "1.5e-3", "true", "false", "null", #""""#, "\"h\u{e9}llo 中 😀\"", #""\ud83d\ude00""#,
        " [ 1 , { \"a\" : [ ] } ] ", #"{"a":1,"a":2}"#, String(repeating: "9", count: 15),
    ]

    @Test(arguments: JSONReaderTests.valid)
    func acceptsWhatJSONNodeAccepts(_ text: String) throws {
        _ = try JSONNode.parse(text)
        #expect(self.skipAll(text))
    }

    /// Every rejection of the JSONNode tests, and every truncation of a chunk, is refused here too.
    @Test func refusesWhatJSONNodeRefuses() {
        let bad = ["", "{", #"{"a""#, #"{"a":"#, #"{"a":1"#, #""abc"#, #""\u12"#, "[1,]", #"{"a":1,}"#, "{a:1}", "tru",
                   "trux", "nul", "01", "1.", "-", "-a", "1e", "+1", "NaN", "1 2", "1e400", "-1e309",
                   String(repeating: "9", count: 400), #""\x""#, #""\u00g0""#, #""\ud83d""#, #""\ud83d\u0041""#,
                   #""\ude00""#, "\"a\nb\"", "\"a\\n\u{01}\"", String(repeating: "[", count: JSONNode.maxDepth + 1)
                       + String(repeating: "]", count: JSONNode.maxDepth + 1)]
        for text in bad {
            #expect(throws: JSONNode.ParseError.self) { try JSONNode.parse(text) }
            #expect(!self.skipAll(text), "\(text.debugDescription)")
        }
        let chunk = Array(Self.valid[0].utf8)
        for end in 0..<chunk.count { #expect(!self.skipAll(Array(chunk[..<end]))) }
        #expect(!self.skipAll([0x22, 0x61, 0xC3, 0x28, 0x22]))  // invalid UTF-8 inside a string
        #expect(!self.skipAll([0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D]))  // ... inside a key
        #expect(self.skipAll(String(repeating: "[", count: JSONNode.maxDepth) + String(repeating: "]", count: JSONNode.maxDepth)))
        #expect(!self.skipAll(String(repeating: "[", count: 100_000)))
    }

    /// Found by fuzzing (Fixtures/fuzz/regressions/json-reader): invalid UTF-8 after an escape was reported by
    /// `skip` at the string's start, by `JSONNode` at the start of its run after the escape; and in a string
    /// the text ends inside, as the end by one and the bad UTF-8 by the other. The same error, exactly.
    @Test func invalidUTF8AfterAnEscapeFailsAsInJSONNode() {
        for bytes: [UInt8] in [[0x22, 0x5C, 0x6E, 0xFF, 0x22], [0x22, 0x5C, 0x6E, 0xFF], [0x22, 0x61, 0x5C, 0x74, 0x62, 0xC3]] {
            bytes.withUnsafeBufferPointer { buffer in
                var expected: JSONNode.ParseError?
                do throws(JSONNode.ParseError) { _ = try JSONNode.parse(buffer) } catch { expected = error }
                var got: JSONNode.ParseError?
                do throws(JSONReader.ParseError) {
                    try JSONReader.read(buffer) { (reader: inout JSONReader) throws(JSONReader.ParseError) in try reader.skip() }
                } catch {
                    got = error
                }
                #expect(expected?.reason == .invalidUnicode, "\(bytes)")
                #expect(got == expected, "\(bytes)")
            }
        }
    }

    /// Random byte soup from JSON's alphabet, and valid texts with one byte changed: the two agree on each.
    @Test func agreesWithJSONNodeOnRandomAndMutatedInput() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.-+eEtrufalsn\u"#.utf8) + [0x0A, 0xC3, 0xA9, 0x01, 0xFF]
        var inputs: [[UInt8]] = []
        for _ in 0..<20_000 {
            let length = Int.random(in: 0..<24, using: &generator)
            inputs.append((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
        }
        for text in Self.valid where !text.isEmpty {
            let bytes = Array(text.utf8)
            for _ in 0..<500 {
                var mutated = bytes
                mutated[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
                inputs.append(mutated)
            }
        }
        for bytes in inputs {
            let node = bytes.withUnsafeBufferPointer { (try? JSONNode.parse($0)) != nil }
            #expect(self.skipAll(bytes) == node, "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
    }

    /// Strings are skipped eight bytes at a time: every special byte (and its neighbours in value) at every
    /// offset of strings of 0-40 bytes, in a value and in a key, is judged as `JSONNode.parse` judges it.
    @Test func longStringsAgreeWithJSONNodeAtEveryOffset() {
        let specials: [[UInt8]] = [
            [0x22], [0x5C, 0x6E], [0x5C, 0x78], [0x5C], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39], [0x01], [0x0A], [0x1F],
            [0x7F], [0x80], [0xC3, 0xA9], [0xC3], [0xE4, 0xB8, 0xAD], [0xF0, 0x9F, 0x98, 0x80], [0xFF], [0x20],
            [0x21], [0x23], [0x5B], [0x5D], [0x19], [0x00],
        ]
        var checked = 0
        for length in 0...40 {
            for offset in 0...length {
                for special in specials {
                    var body = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    body.insert(contentsOf: special, at: offset)
                    for text in [[0x22] + body + [0x22], Array(#"{""#.utf8) + body + Array(#"":1}"#.utf8)] {
                        let node = text.withUnsafeBufferPointer { (try? JSONNode.parse($0)) != nil }
                        #expect(self.skipAll(text) == node, "\(text)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == 2 * 22 * (41 * 42 / 2))
    }

    @Test func readsFieldsAndComparesKeysAsDecoded() throws {
        let text = #"{"id":"x","ch\u006fices":[{"index":0,"delta":{"content":"a\nb"}},{"index":7}],"n":-12,"big":1e3,"z":null}"#
        var contents: [String] = []
        var indexes: [Int?] = []
        var n: Int?
        var big: Int?? = .none
        var sawNull = false
        try JSONReader.read(text) { (reader: inout JSONReader) throws(JSONReader.ParseError) in
            try reader.object { (key, reader) throws(JSONReader.ParseError) in
                if key.matches("choices") {
                    try reader.array { (_, reader) throws(JSONReader.ParseError) in
                        try reader.object { (key, reader) throws(JSONReader.ParseError) in
                            if key.matches("index") {
                                indexes.append(try reader.integer())
                            } else if key.matches("delta") {
                                try reader.object { (key, reader) throws(JSONReader.ParseError) in
                                    if key.matches("content") { contents.append(try reader.string()) } else { try reader.skip() }
                                }
                            } else {
                                try reader.skip()
                            }
                        }
                    }
                } else if key.matches("n") {
                    n = try reader.integer()
                } else if key.matches("big") {
                    big = .some(try reader.integer())
                } else if key.matches("z") {
                    sawNull = try reader.null()
                } else {
                    #expect(!key.matches("choices"))
                    try reader.skip()
                }
            }
        }
        #expect(contents == ["a\nb"])
        #expect(indexes == [0, 7])
        #expect(n == -12)
        #expect(big == .some(nil))  // a number, but not an integer
        #expect(sawNull)
    }

    @Test func integersAreExactOrNil() throws {
        for (text, expected) in [("9223372036854775807", Int.max), ("-9223372036854775808", Int.min), ("0", 0)] as [(String, Int)] {
            #expect(try JSONReader.read(text) { (r: inout JSONReader) throws(JSONReader.ParseError) in try r.integer() } == expected)
        }
        for text in ["9223372036854775808", "1.0", "1e2"] {
            #expect(try JSONReader.read(text) { (r: inout JSONReader) throws(JSONReader.ParseError) in try r.integer() } == nil)
        }
        #expect(throws: JSONReader.ParseError.self) {
            try JSONReader.read(#""1""#) { (r: inout JSONReader) throws(JSONReader.ParseError) in try r.integer() }
        }
    }

    /// `object` and `array` on another value skip it, checked, and answer false.
    @Test func containersSkipOtherValues() throws {
        for text in ["[1,2]", #""s""#, "3", "null", "true"] {
            #expect(try JSONReader.read(text) { (r: inout JSONReader) throws(JSONReader.ParseError) in
                try r.object { (_, r) throws(JSONReader.ParseError) in try r.skip() }
            } == (text == "{}"))
        }
        #expect(try JSONReader.read(#"{"a":1}"#) { (r: inout JSONReader) throws(JSONReader.ParseError) in
            try r.array { (_, r) throws(JSONReader.ParseError) in try r.skip() }
        } == false)
        #expect(throws: JSONReader.ParseError.self) {
            try JSONReader.read("[1,]") { (r: inout JSONReader) throws(JSONReader.ParseError) in
                try r.object { (_, r) throws(JSONReader.ParseError) in try r.skip() }
            }
        }
    }

    /// A body that does not consume its value leaves trailing bytes: refused.
    @Test func unconsumedValueIsTrailingBytes() {
        #expect(throws: JSONReader.ParseError.self) {
            try JSONReader.read("[1]") { (_: inout JSONReader) throws(JSONReader.ParseError) in }
        }
    }
}
