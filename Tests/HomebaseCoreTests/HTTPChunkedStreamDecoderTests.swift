import Testing

@testable import HomebaseCore

/// The streaming chunked decoder: any split of the input gives the same data, its rules are
/// `HTTPChunkedDecoder`'s, and bad, truncated or oversized input is a defined error.
@Suite struct HTTPChunkedStreamDecoderTests {
    /// Decodes `pieces` in turn; the data and whether the body ended.
    func decode(_ pieces: [[UInt8]], maxLineBytes: Int = 4096) throws -> (data: [UInt8], ended: Bool) {
        var decoder = HTTPChunkedStreamDecoder(maxLineBytes: maxLineBytes)
        var out: [UInt8] = []
        var ended = false
        for piece in pieces {
            ended = try piece.withUnsafeBytes { raw in try decoder.decode(raw, into: &out) }
        }
        #expect(decoder.isFinished == ended)
        return (out, ended)
    }

    /// What the buffering decoder makes of the same body.
    func reference(_ body: [UInt8]) throws -> (data: [UInt8], ended: Bool) {
        var decoder = HTTPChunkedDecoder(maxBodyBytes: 1 << 20)
        decoder.append(body)
        var out: [UInt8] = []
        while let event = try decoder.next() {
            switch event {
            case .data(let d): out += d
            case .end: return (out, true)
            }
        }
        return (out, false)
    }

    static let body = Array("5\r\nhello\r\n1;ext=1\r\n \r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\n".utf8)

    @Test func everySplitGivesTheSameData() throws {
        let whole = try self.decode([Self.body])
        #expect(whole.ended)
        #expect(whole.data == Array("hello abcdefghijklmnopqrstuvwxyz".utf8))
        #expect(try self.reference(Self.body) == whole)
        for cut in 0...Self.body.count {
            #expect(try self.decode([Array(Self.body[..<cut]), Array(Self.body[cut...])]) == whole, "cut at \(cut)")
        }
        #expect(try self.decode(Self.body.map { [$0] }) == whole)  // a byte at a time
    }

    @Test func bareLineFeedsAndBytesAfterTheEnd() throws {
        let body = Array("3\nabc\n0\n\nHTTP/1.1 200 OK\r\n".utf8)
        #expect(try self.decode([body]) == (Array("abc".utf8), true))
        #expect(try self.reference(body).data == Array("abc".utf8))
    }

    @Test func aTruncatedBodyHasNotEnded() throws {
        for cut in 0..<Self.body.count {
            #expect(try self.decode([Array(Self.body[..<cut])]).ended == false, "cut at \(cut)")
        }
    }

    @Test(arguments: [
        "g\r\nx\r\n0\r\n\r\n",  // not hex
        "\r\n",  // no size
        "1234567890abcdef0\r\n",  // more than 15 digits
        "3\r\nabcX\r\n",  // data not followed by CRLF
        "-1\r\n",
    ])
    func badInputIsMalformed(_ text: String) {
        #expect(throws: HTTPParseError.self) { try self.decode([Array(text.utf8)]) }
        #expect(throws: HTTPParseError.self) { try self.decode(Array(text.utf8).map { [$0] }) }
    }

    @Test func longLinesAreRefusedEvenInPieces() throws {
        let long = Array(repeating: UInt8(ascii: "a"), count: 100)
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode([Array("1;".utf8) + long], maxLineBytes: 64)
        }
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode(([UInt8]("0\r\n".utf8) + long + [13, 10]).map { [$0] }, maxLineBytes: 64)
        }
        // Whole lines read in place (their terminator in the same piece): the same limit, for sizes and trailers.
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode([Array("1;".utf8) + long + Array("\r\nx\r\n0\r\n\r\n".utf8)], maxLineBytes: 64)
        }
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode([Array("0\r\n".utf8) + long + Array("\r\n\r\n".utf8)], maxLineBytes: 64)
        }
        // At the limit, with its CR in another piece, or all in one: accepted.
        let edge = [UInt8]("1;".utf8) + Array(repeating: UInt8(ascii: "e"), count: 62)
        #expect(throws: Never.self) { try self.decode([edge, [13], [10], Array("x\r\n0\r\n\r\n".utf8)], maxLineBytes: 64) }
        #expect(try self.decode([edge + Array("\r\nx\r\n0\r\n\r\n".utf8)], maxLineBytes: 64) == (Array("x".utf8), true))
    }

    /// Found by fuzzing (Fixtures/fuzz/regressions/http-chunked-stream): a partial line one byte over the limit
    /// was held whatever that byte was, where `HTTPChunkedDecoder` refuses it unless it is a CR (which the next
    /// read's LF may make the line's CRLF); now both refuse it at once.
    @Test func aPartialLineOnePastTheLimitIsACROrRefused() throws {
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode([Array("1;xy".utf8)], maxLineBytes: 3)
        }
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decode([Array("1;".utf8), Array("xy".utf8)], maxLineBytes: 3)
        }
        #expect(try self.decode([Array("1;x\r".utf8), Array("\nA\r\n0\r\n\r\n".utf8)], maxLineBytes: 3)
                == (Array("A".utf8), true))
    }

    @Test func aHugeChunkSizeStreamsWithoutBuffering() throws {
        // A size near the limit is data to pass on, not memory to reserve.
        var decoder = HTTPChunkedStreamDecoder()
        var out: [UInt8] = []
        let head = Array("fffffffffffffff\r\n".utf8) + Array(repeating: UInt8(7), count: 1000)
        #expect(try head.withUnsafeBytes { try decoder.decode($0, into: &out) } == false)
        #expect(out.count == 1000)
    }
}
