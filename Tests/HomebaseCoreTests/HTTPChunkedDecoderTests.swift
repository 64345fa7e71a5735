import Testing
@testable import HomebaseCore

@Suite struct HTTPChunkedDecoderTests {
    private func decodeAll(_ text: String, max: Int = 1024, byteAtATime: Bool = false) throws(HTTPParseError)
        -> ([UInt8], Bool)
    {
        var decoder = HTTPChunkedDecoder(maxBodyBytes: max)
        var body: [UInt8] = []
        var ended = false
        let bytes = Array(text.utf8)
        let pieces = byteAtATime ? bytes.map { [$0] } : [bytes]
        for piece in pieces {
            decoder.append(piece)
            while let event = try decoder.next() {
                switch event {
                case .data(let d): body += d
                case .end: ended = true
                }
            }
        }
        return (body, ended)
    }

    @Test func decodesChunksExtensionsAndTrailers() throws {
        let text = "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n"
        for single in [false, true] {
            let (body, ended) = try self.decodeAll(text, byteAtATime: single)
            #expect(String(decoding: body, as: UTF8.self) == "helloabcdefghijklmnopqrstuvwxyz")
            #expect(ended)
        }
    }

    @Test func truncatedBodyDoesNotEnd() throws {
        let (body, ended) = try self.decodeAll("5\r\nhel")
        #expect(body == Array("hel".utf8))
        #expect(!ended)
    }

    @Test func hostileSizesAreRefused() {
        #expect(throws: HTTPParseError.malformed("bad chunk size")) { try self.decodeAll("zz\r\n") }
        #expect(throws: HTTPParseError.malformed("bad chunk size")) { try self.decodeAll("ffffffffffffffffff\r\n") }
        #expect(throws: HTTPParseError.malformed("chunked body too large")) { try self.decodeAll("801\r\n", max: 2048) }
        #expect(throws: HTTPParseError.malformed("missing CRLF after chunk data")) { try self.decodeAll("1\r\nab\r\n") }
        #expect(throws: HTTPParseError.malformed("chunk line too long")) {
            try self.decodeAll(String(repeating: "1", count: 5000))
        }
    }

    @Test func bytesAfterTheEndStayBuffered() throws {
        var decoder = HTTPChunkedDecoder(maxBodyBytes: 100)
        decoder.append(Array("0\r\n\r\nGET".utf8))
        #expect(try decoder.next() == .end)
        #expect(try decoder.next() == nil)
        #expect(decoder.takeBuffered() == Array("GET".utf8))
    }
}
