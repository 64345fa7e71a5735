import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization
import Testing

/// SimpleHTTPServer over real sockets (it lives in HomebaseTransport; tested here next to its main user).
@Suite(.timeLimit(.minutes(1))) struct SimpleHTTPServerTests {
    private func withServer(
        _ handler: @escaping SimpleHTTPServer.Handler, _ body: (SimpleHTTPServer, RawHTTPClient) throws -> Void
    ) throws {
        let server = SimpleHTTPServer(handler: handler)
        let port = try server.start(host: "127.0.0.1", port: 0)
        defer { server.stop() }
        try body(server, RawHTTPClient(port: port))
    }

    private static let echo: SimpleHTTPServer.Handler = { request, writer in
        writer.respond(status: 200, headers: [("X-Path", request.path)], body: request.body)
    }

    @Test func keepAliveServesPipelinedRequestsOnOneConnection() throws {
        try self.withServer(Self.echo) { _, client in
            let requests = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                + "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
            let text = String(decoding: try client.raw(Array(requests.utf8)), as: UTF8.self)
            #expect(text == "HTTP/1.1 200 OK\r\nX-Path: /a\r\nContent-Length: 3\r\n\r\nabc"
                + "HTTP/1.1 200 OK\r\nX-Path: /b\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        }
    }

    @Test func chunkedRequestBodyAndExpectContinue() throws {
        try self.withServer(Self.echo) { _, client in
            let request = "POST /c HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n"
                + "Connection: close\r\n\r\n3\r\nfoo\r\n4\r\nbar!\r\n0\r\n\r\n"
            let text = String(decoding: try client.raw(Array(request.utf8)), as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"))
            #expect(text.hasSuffix("\r\n\r\nfoobar!"))
        }
    }

    @Test func malformedAndOversizedRequestsAreRefused() throws {
        try self.withServer(Self.echo) { _, client in
            let bad = String(decoding: try client.raw(Array("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n".utf8)), as: UTF8.self)
            #expect(bad.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            let huge = [UInt8](repeating: UInt8(ascii: "a"), count: 20_000)
            let big = String(decoding: try client.raw(Array("GET /".utf8) + huge), as: UTF8.self)
            #expect(big.hasPrefix("HTTP/1.1 431 "))
            let body = String(decoding: try client.raw(Array(
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 999999999\r\n\r\n".utf8)), as: UTF8.self)
            #expect(body.hasPrefix("HTTP/1.1 413 "))
        }
    }

    @Test func connectionsBeyondTheBoundAreAnswered503() async throws {
        final class Flag: Sendable { let released = Mutex(false) }
        let flag = Flag()
        var configuration = SimpleHTTPServer.Configuration()
        configuration.maxConnections = 1
        let server = SimpleHTTPServer(configuration: configuration) { _, writer in
            while !flag.released.withLock({ $0 }) { usleep(2_000) }
            writer.respond(status: 200, body: "held")
        }
        let client = RawHTTPClient(port: try server.start(host: "127.0.0.1", port: 0))
        defer { server.stop() }
        let request = Array("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".utf8)
        let first = Task.detached { try client.raw(request) }
        while server.connectionCount < 1 { try await Task.sleep(for: .milliseconds(2)) }
        let second = String(decoding: try client.raw(request), as: UTF8.self)
        #expect(second.hasPrefix("HTTP/1.1 503 "))
        flag.released.withLock { $0 = true }
        #expect(String(decoding: try await first.value, as: UTF8.self).hasSuffix("held"))
    }

    @Test func streamedResponseIsChunkedAndWriteFailsOnceClientLeaves() throws {
        let sawGone = Mutex(false)
        try self.withServer({ _, writer in
            writer.startStream(status: 200, headers: [("Content-Type", "text/plain")])
            _ = writer.writeChunk(Array("hello".utf8))
            // The client reads for a moment then closes; keep writing until the send fails.
            for _ in 0..<2000 {
                if !writer.writeChunk(Array("x".utf8)) {
                    sawGone.withLock { $0 = true }
                    return
                }
                _ = writer.waitForDisconnect(timeoutMs: 5)
            }
        }) { server, client in
            let raw = try client.exchange("GET", "/s", body: nil, headers: [], timeoutMs: 100)
            let text = String(decoding: raw, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
            let deadline = ContinuousClock.now + .seconds(5)
            while !sawGone.withLock({ $0 }) && ContinuousClock.now < deadline { usleep(10_000) }
            #expect(sawGone.withLock { $0 })
            _ = server
        }
    }

    @Test func aHeadHeldForTheFirstChunkLeavesWithIt() throws {
        let request = Array("GET /s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".utf8)
        try self.withServer({ request, writer in
            writer.startStream(status: 200, headers: [("Content-Type", "text/plain")], headWithFirstChunk: true)
            if request.path == "/s" {
                _ = writer.waitForDisconnect(timeoutMs: 400)
                _ = writer.writeChunk(Array("hello".utf8))
            }
            writer.finish()
        }) { _, client in
            // Nothing at all before the first chunk, not even the status line.
            #expect(try client.raw(request, timeoutMs: 150).isEmpty)
            let text = String(decoding: try client.raw(request), as: UTF8.self)
            #expect(text == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            // A stream that ends without a chunk sends its head with the end.
            let empty = String(decoding: try client.raw(Array("GET /e HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".utf8)),
                               as: UTF8.self)
            #expect(empty == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        }
    }

    @Test func stopEndsHandlersBlockedWaitingOnTheClient() throws {
        let server = SimpleHTTPServer { _, writer in
            writer.startStream(status: 200)
            while !writer.waitForDisconnect(timeoutMs: 60_000) {}
        }
        let port = try server.start(host: "127.0.0.1", port: 0)
        let client = RawHTTPClient(port: port)
        let thread = Thread { _ = try? client.exchange("GET", "/", body: nil, headers: [], timeoutMs: 30_000) }
        thread.start()
        let deadline = ContinuousClock.now + .seconds(5)
        while server.connectionCount == 0 && ContinuousClock.now < deadline { usleep(5_000) }
        #expect(server.connectionCount == 1)
        let start = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(server.connectionCount == 0)
    }

    @Test func headRequestGetsLengthButNoBody() throws {
        try self.withServer({ _, writer in writer.respond(status: 200, body: "twelve bytes") }) { _, client in
            let text = String(decoding: try client.raw(Array("HEAD / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".utf8)), as: UTF8.self)
            #expect(text == "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 12\r\n\r\n")
        }
    }
}
