import Testing

@testable import HomebaseCore

@Suite struct LineSplitterTests {
    /// Ollama's native `/api/chat` stream (reference/model-apis.md §3), three NDJSON lines.
    static let ollamaChat = """
        {"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":"The"},"done":false}
        {"model":"llama3.2","created_at":"2023-08-04T08:52:19.40Z","message":{"role":"assistant","content":" sky"},"done":false}
        {"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":4883583458,"eval_count":282}

        """

    static func strings(_ lines: [[UInt8]]) -> [String] { lines.map { String(decoding: $0, as: UTF8.self) } }

    @Test func splitsOllamaNDJSONIntoItsLines() throws {
        var splitter = LineSplitter()
        let lines = try Self.strings(splitter.append(Array(Self.ollamaChat.utf8)))
        #expect(lines.count == 3)
        #expect(lines[1].contains("\" sky\""))
        #expect(try splitter.finish() == nil)
    }

    @Test func everySplitPointGivesTheSameLines() throws {
        let crlf = Self.ollamaChat.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n")
        let bytes = Array(crlf.utf8)
        let expected = Self.ollamaChat.split(separator: "\n").map(String.init)
        for cut in 0...bytes.count {
            var splitter = LineSplitter()
            var lines = try splitter.append(bytes[..<cut])
            lines += try splitter.append(bytes[cut...])
            #expect(Self.strings(lines) == expected, "cut at \(cut)")
            #expect(splitter.bufferedByteCount == 0)
        }
    }

    @Test func byteAtATimeHandlesCRLFAndEmptyLines() throws {
        var splitter = LineSplitter()
        var lines: [[UInt8]] = []
        for byte in Array("a\r\n\nb\r\r\nc".utf8) {
            lines += try splitter.append([byte])
        }
        // A lone `\r` inside a line is data: NDJSON lines end only in `\n` or `\r\n`.
        #expect(Self.strings(lines) == ["a", "", "b\r"])
        #expect(try splitter.finish().map { String(decoding: $0, as: UTF8.self) } == "c")
    }

    @Test func lineOfExactlyTheLimitIsAccepted() throws {
        var splitter = LineSplitter(maxLineBytes: 4)
        #expect(try Self.strings(splitter.append(Array("abcd\r\n".utf8))) == ["abcd"])
        #expect(try Self.strings(splitter.append(Array("wxyz\n".utf8))) == ["wxyz"])
    }

    @Test func oversizedLineThrowsBeforeItsTerminatorArrives() throws {
        var splitter = LineSplitter(maxLineBytes: 8)
        _ = try splitter.append(Array("12345678".utf8))
        #expect(throws: LineSplitter.Error.lineTooLong(limit: 8)) { try splitter.append(Array("9".utf8)) }
        // The framing is lost: the splitter stays failed, even for a short line.
        #expect(throws: LineSplitter.Error.lineTooLong(limit: 8)) { try splitter.append(Array("ok\n".utf8)) }
        #expect(splitter.bufferedByteCount == 0)
    }

    /// The contract behind Fixtures/fuzz/regressions/ollama-pull: a read that overflows fails whole, so the lines
    /// it completed before the long one are not returned (Ollama's error line among them), and the caller reports
    /// the overflow. Read one line at a time, the same bytes give those lines first.
    @Test func aReadThatOverflowsFailsWholeTheLinesBeforeItIncluded() throws {
        let bytes = Array(#"{"error":"pull model manifest: file does not exist"}"#.utf8) + [10]
            + [UInt8](repeating: UInt8(ascii: "x"), count: 80) + [10]
        var whole = LineSplitter(maxLineBytes: 64)
        #expect(throws: LineSplitter.Error.lineTooLong(limit: 64)) { try whole.append(bytes) }
        var byLine = LineSplitter(maxLineBytes: 64)
        let first = try byLine.append(bytes.prefix(through: bytes.firstIndex(of: 10)!))
        #expect(Self.strings(first) == [#"{"error":"pull model manifest: file does not exist"}"#])
        #expect(throws: LineSplitter.Error.lineTooLong(limit: 64)) {
            try byLine.append(bytes[(bytes.firstIndex(of: 10)! + 1)...])
        }
    }

    @Test func endlessGarbageWithoutNewlineIsBounded() {
        var splitter = LineSplitter(maxLineBytes: 1024)
        let garbage = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }.filter { $0 != 10 }
        #expect(throws: LineSplitter.Error.lineTooLong(limit: 1024)) {
            for _ in 0..<100 { _ = try splitter.append(garbage) }
        }
        #expect(splitter.bufferedByteCount <= 1025)
    }

    @Test func oversizedFinalLineWithoutTerminatorThrowsOnFinish() throws {
        var splitter = LineSplitter(maxLineBytes: 3)
        _ = try splitter.append(Array("abc\r".utf8))  // 4 bytes buffered, but the `\r` may still pair with `\n`
        #expect(try splitter.finish() == Array("abc".utf8))
        _ = try splitter.append(Array("ab".utf8))
        #expect(try splitter.finish() == Array("ab".utf8))
    }

    @Test func randomBinaryInChunksReassemblesExactly() throws {
        // Deterministic xorshift; no `\r`, so the only change the splitter may make is removing the `\n`s.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var input: [UInt8] = []
        for _ in 0..<20_000 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let byte = UInt8(truncatingIfNeeded: state)
            input.append(byte == 13 ? 10 : byte)
        }
        var splitter = LineSplitter(maxLineBytes: 4096)
        var lines: [[UInt8]] = []
        var offset = 0
        while offset < input.count {
            let size = Int(input[offset] % 37) + 1
            lines += try splitter.append(input[offset..<min(offset + size, input.count)])
            offset += size
        }
        var rebuilt = Array(lines.joined(separator: [10]))
        if !lines.isEmpty { rebuilt.append(10) }
        rebuilt += try splitter.finish() ?? []
        #expect(rebuilt == input)
    }
}
