import Testing
@testable import HomebaseCore

@Suite struct HTTPResponseEncoderTests {
    @Test func wholeResponseHasStatusLineFieldsAndLength() {
        let bytes = HTTPResponseEncoder.response(
            status: 404, headers: [HTTPHeaderField(name: "Content-Type", value: "application/json")],
            body: Array("{}".utf8))
        #expect(String(decoding: bytes, as: UTF8.self)
            == "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test func headResponseAnnouncesLengthWithoutBody() {
        let bytes = HTTPResponseEncoder.response(status: 200, headers: [], body: Array("hello".utf8), includeBody: false)
        #expect(String(decoding: bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    }

    @Test func chunkedFraming() {
        #expect(String(decoding: HTTPResponseEncoder.chunk(Array(repeating: UInt8(ascii: "x"), count: 26)), as: UTF8.self)
            == "1a\r\n" + String(repeating: "x", count: 26) + "\r\n")
        #expect(HTTPResponseEncoder.chunk([UInt8]()) == [])
        #expect(HTTPResponseEncoder.lastChunk == Array("0\r\n\r\n".utf8))
        let head = HTTPResponseEncoder.chunkedHead(
            status: 200, headers: [HTTPHeaderField(name: "Content-Length", value: "9")])
        #expect(String(decoding: head, as: UTF8.self) == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    }

    @Test func reasonPhrases() {
        #expect(HTTPResponseEncoder.reasonPhrase(for: 431) == "Request Header Fields Too Large")
        #expect(HTTPResponseEncoder.reasonPhrase(for: 599) == "Unknown")
    }

    @Test func encodedResponseRoundTripsThroughTheParser() throws {
        var parser = HTTPResponseHeadParser()
        parser.append(HTTPResponseEncoder.response(
            status: 500, headers: [HTTPHeaderField(name: "X-A", value: "b")], body: [1, 2, 3]))
        let head = try #require(try parser.next())
        #expect(head.status == 500)
        #expect(head.contentLength == 3)
        #expect(parser.takeBuffered() == [1, 2, 3])
    }
}
