import Testing
@testable import HomebaseCore

@Suite struct HTTPRequestHeadParserTests {
    private func parse(_ text: String, limits: HTTPHeadLimits = HTTPHeadLimits()) throws(HTTPParseError)
        -> HTTPRequestHead?
    {
        var parser = HTTPRequestHeadParser(limits: limits)
        parser.append(Array(text.utf8))
        return try parser.next()
    }

    @Test func parsesRequestLineHeadersAndQuery() throws {
        let head = try #require(
            try self.parse(
                "GET /v1/models?author=a%20b&x=1+2&flag HTTP/1.1\r\nHost: h\r\nX-Thing:  spaced value \t\r\n\r\n"))
        #expect(head.method == "GET")
        #expect(head.target == "/v1/models?author=a%20b&x=1+2&flag")
        #expect(head.path == "/v1/models")
        #expect(head.query.map(\.name) == ["author", "x", "flag"])
        #expect(head.query.map(\.value) == ["a b", "1 2", ""])
        #expect(head.version == .http1_1)
        #expect(head.headers == [
            HTTPHeaderField(name: "Host", value: "h"), HTTPHeaderField(name: "X-Thing", value: "spaced value"),
        ])
        #expect(head.header("x-thing") == "spaced value")
        #expect(head.header("missing") == nil)
        #expect(head.keepAlive)
    }

    @Test func framingHelpers() throws {
        let a = try #require(try self.parse("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 12\r\n\r\n"))
        #expect(a.contentLength == 12)
        #expect(!a.isChunked)
        let b = try #require(try self.parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"))
        #expect(b.isChunked)
        #expect(b.contentLength == nil)
        let c = try #require(try self.parse("GET / HTTP/1.0\r\n\r\n"))
        #expect(!c.keepAlive)
        let d = try #require(try self.parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n"))
        #expect(!d.keepAlive)
    }

    @Test func byteAtATimeFeedingGivesTheSameHead() throws {
        let text = Array("POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n".utf8)
        var parser = HTTPRequestHeadParser()
        var result: HTTPRequestHead?
        for (i, byte) in text.enumerated() {
            parser.append([byte])
            result = try parser.next()
            if i < text.count - 1 { #expect(result == nil) }
        }
        #expect(result?.path == "/api/chat")
        #expect(result?.contentLength == 2)
    }

    @Test func pipelinedRequestsComeOutInOrderWithBodiesLeftBuffered() throws {
        var parser = HTTPRequestHeadParser()
        parser.append(Array("GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyzGET /c HTTP/1.1\r\nHost: h\r\n\r\n".utf8))
        #expect(try parser.next()?.path == "/a")
        let b = try #require(try parser.next())
        #expect(b.path == "/b")
        #expect(parser.takeBuffered(maxBytes: b.contentLength ?? 0) == Array("xyz".utf8))
        #expect(try parser.next()?.path == "/c")
        #expect(try parser.next() == nil)
        #expect(parser.bufferedCount == 0)
    }

    /// Decision: a bare LF ends a line (RFC 9112 §2.2 lets a recipient accept it; h11 and nginx do).
    @Test func bareLFLineEndingsAreAccepted() throws {
        let head = try #require(try self.parse("GET /lf HTTP/1.1\nHost: h\nA: b\n\n"))
        #expect(head.path == "/lf")
        #expect(head.header("a") == "b")
    }

    @Test func bareCRIsRejected() {
        #expect(throws: HTTPParseError.malformed("bare CR in head")) { try self.parse("GET / HTTP/1.1\rHost: h\r\n\r\n") }
    }

    @Test func leadingBlankLinesAreSkipped() throws {
        #expect(try self.parse("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")?.path == "/")
    }

    /// Blank lines before the start line used to be skipped without counting, so a peer sending CRLF forever
    /// was never refused and every byte stayed buffered (found by `conformance relay --hostile`).
    @Test func endlessBlankLinesAreRefusedAtTheLimit() throws {
        var parser = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: 1024))
        var thrown: HTTPParseError?
        var fed = 0
        while thrown == nil && fed < 1 << 20 {
            parser.append(Array(String(repeating: "\r\n", count: 50).utf8))
            fed += 100
            do { _ = try parser.next() } catch { thrown = error }
        }
        #expect(thrown == .headTooLarge)
        #expect(fed <= 1024 + 100)
        // A few blank lines before a request are still skipped, and counted with its head.
        var ok = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: 1024))
        ok.append(Array((String(repeating: "\r\n", count: 100) + "GET / HTTP/1.1\r\nHost: h\r\n\r\n").utf8))
        #expect(try ok.next()?.path == "/")
        var over = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: 1024))
        over.append(Array((String(repeating: "\r\n", count: 500) + "GET / HTTP/1.1\r\nHost: h\r\n\r\n").utf8))
        #expect(throws: HTTPParseError.headTooLarge) { try over.next() }
    }

    @Test func headThatNeverEndsIsRefusedAtTheLimitWith431() throws {
        var parser = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: 1024))
        parser.append(Array("GET / HTTP/1.1\r\nX: ".utf8))
        #expect(try parser.next() == nil)
        var thrown: HTTPParseError?
        var fed = 19
        while thrown == nil && fed < 4096 {
            parser.append([UInt8](repeating: UInt8(ascii: "a"), count: 100))
            fed += 100
            do { _ = try parser.next() } catch { thrown = error }
        }
        #expect(thrown == .headTooLarge)
        #expect(thrown?.status == 431)
        // Refused as soon as the limit passes, not after more input.
        #expect(fed <= 1024 + 100)
        // And it stays refused.
        #expect(throws: HTTPParseError.headTooLarge) { try parser.next() }
    }

    /// Found by fuzzing (Fixtures/fuzz/regressions/http-request-head): the verdict must not depend on where a
    /// read ends. A read ending in a CR was judged with that CR counted against the limit, before the next
    /// byte could make it the CRLF that ends the head (which never counts) or a bare CR (400, not 431).
    @Test func aReadEndingInACRIsJudgedAsOneReadWouldBe() throws {
        let head = Array("GET / HTTP/1.1\r\nHost: h\r\n".utf8)
        let limits = HTTPHeadLimits(maxHeadBytes: head.count)
        var whole = HTTPRequestHeadParser(limits: limits)
        whole.append(head + Array("\r\n".utf8))
        #expect(try whole.next()?.path == "/")
        var split = HTTPRequestHeadParser(limits: limits)
        split.append(head + [13])
        #expect(try split.next() == nil)
        split.append([10])
        #expect(try split.next()?.path == "/")

        var bare = HTTPRequestHeadParser(limits: HTTPHeadLimits(maxHeadBytes: 1))
        bare.append(Array("G\r".utf8))
        #expect(try bare.next() == nil)
        bare.append(Array("E".utf8))
        #expect(throws: HTTPParseError.malformed("bare CR in head")) { try bare.next() }
    }

    @Test func noLineEndingAtAllIsRefusedAt16KiBByDefault() {
        var parser = HTTPRequestHeadParser()
        parser.append([UInt8](repeating: UInt8(ascii: "G"), count: 16 * 1024))
        #expect(throws: Never.self) { try parser.next() }
        parser.append([UInt8(ascii: "G")])
        #expect(throws: HTTPParseError.headTooLarge) { try parser.next() }
    }

    @Test func tooManyHeadersIs431() {
        let fields = (0..<101).map { "X-\($0): v\r\n" }.joined()
        #expect(throws: HTTPParseError.tooManyHeaders) { try self.parse("GET / HTTP/1.1\r\n" + fields + "\r\n") }
        let ok = (0..<99).map { "X-\($0): v\r\n" }.joined()
        #expect(throws: Never.self) { try self.parse("GET / HTTP/1.1\r\nHost: h\r\n" + ok + "\r\n") }
        #expect(HTTPParseError.tooManyHeaders.status == 431)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: h\r\nBad\u{0}Name: v\r\n\r\n", "NUL byte in head"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\u{0}b\r\n\r\n", "NUL byte in head"),
        ("GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", "invalid character in header name"),
        ("GET / HTTP/1.1\r\nHost : h\r\n\r\n", "invalid character in header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", "header line without colon"),
        ("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", "empty header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n", "obsolete line folding"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\u{7}b\r\n\r\n", "invalid character in header value"),
        ("GET /  HTTP/1.1\r\nHost: h\r\n\r\n", "bad request line"),
        ("GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n", "bad request line"),
        ("GET /\r\n\r\n", "bad request line"),
        ("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", "bad method"),
        ("GET /\u{7F} HTTP/1.1\r\nHost: h\r\n\r\n", "bad request target"),
        ("GET / HTTP/2.0\r\nHost: h\r\n\r\n", "unsupported HTTP version"),
        ("GET / http/1.1\r\nHost: h\r\n\r\n", "unsupported HTTP version"),
        ("GET / HTTP/1.1\r\n\r\n", "missing Host header"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "conflicting Content-Length"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", "invalid Content-Length"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
         "both Content-Length and Transfer-Encoding"),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", "request transfer coding is not chunked"),
    ])
    func malformedHeadsAre400(text: String, reason: String) {
        #expect(throws: HTTPParseError.malformed(reason)) { try self.parse(text) }
        #expect(HTTPParseError.malformed(reason).status == 400)
    }

    @Test func sameContentLengthTwiceIsAccepted() throws {
        let head = try self.parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n")
        #expect(head?.contentLength == nil)  // the raw value "5, 5" is not one number
        #expect(head?.header("content-length") == "5, 5")
    }

    @Test func truncatedHeadWaitsForMore() throws {
        #expect(try self.parse("GET / HTTP/1.1\r\nHost: h\r\n") == nil)
        #expect(try self.parse("GET / HTTP/1.1\r\nHost: h\r\n\r") == nil)
    }
}
