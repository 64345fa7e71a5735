import Foundation
import Synchronization
import Testing

@testable import HomebaseTransport

/// A pushed stream gets libcurl's raw body once per read and takes the chunk framing off itself: the handler
/// sees exactly the chunks' data, and a chunked body costs one write callback per read, not one per chunk.
@Suite(.timeLimit(.minutes(1)))
struct HTTPClientRawChunkedTests {
    final class Recorder: HTTPStreamHandler, @unchecked Sendable {
        let body = Mutex<[UInt8]>([])
        let error = Mutex<HTTPClientError?>(nil)
        let ended = AsyncStream<Void>.makeStream()
        func head(_ head: HTTPClientResponseHead) {}
        func body(_ bytes: [UInt8]) { self.body.withLock { $0 += bytes } }
        func end(_ error: HTTPClientError?) {
            self.error.withLock { $0 = error }
            self.ended.continuation.yield()
        }
    }

    func run(_ path: String, compressed: Bool = false) async throws -> (Recorder, HTTPStreamHandle) {
        let server = try await HTTPClientTestServer.start()
        let recorder = Recorder()
        let request = HTTPRequest(url: server.url(path), idleTimeout: .seconds(5), acceptCompressed: compressed)
        let handle = HTTPClient().stream(request, handler: recorder)
        for await _ in recorder.ended.stream { break }
        return (recorder, handle)
    }

    @Test func fiftyChunksInOneReadAreOneCallback() async throws {
        let (recorder, handle) = try await self.run("/chunk-burst")
        #expect(recorder.error.withLock { $0 } == nil)
        // The data of the chunks, without sizes, extensions or the trailer.
        #expect(String(decoding: recorder.body.withLock { $0 }, as: UTF8.self)
            == (0..<50).map { "w\($0) " }.joined())
        // libcurl's own decoding called back once per chunk (51 here).
        #expect(handle.bodyPieces <= 2)
    }

    @Test func onlyDataAsksForAPacingPause() {
        // A paced transfer pauses after a read that delivered text; a read of mere framing (the CRLF after a
        // chunk, the terminator) delivers nothing and must not cost an interval.
        let pacing = HTTPBodyPacing(interval: .milliseconds(30))
        pacing.start()
        var request = HTTPRequest(url: "http://127.0.0.1:1/")
        request.bodyPacing = pacing
        let transfer = CurlTransfer(request: request, delivery: .pushed(Recorder()))
        for line in ["HTTP/1.1 200 OK\r\n", "Transfer-Encoding: chunked\r\n", "\r\n"] {
            _ = Array(line.utf8).withUnsafeBytes { transfer.headerLineReceived($0) }
        }
        func read(_ text: String) -> Bool {
            transfer.wantsPacingPause = false
            _ = Array(text.utf8).withUnsafeBytes { transfer.bodyReceived($0) }
            return transfer.wantsPacingPause
        }
        #expect(read("5\r\nhello"))
        #expect(!read("\r\n"))
        #expect(!read("0\r\n\r\n"))
    }

    @Test func aCompressedBodyIsLeftToLibcurlsDecoding() async throws {
        // With a content coding libcurl must see the body unframed: the raw mode is off for such a request.
        let (recorder, _) = try await self.run("/gzip-body", compressed: true)
        #expect(recorder.error.withLock { $0 } == nil)
        #expect(String(decoding: recorder.body.withLock { $0 }, as: UTF8.self) == "hello gzip")
    }

    @Test func anotherTransferCodingFailsTheTransfer() async throws {
        let (recorder, _) = try await self.run("/gzip-chunked")
        guard case .transport(_, let message) = recorder.error.withLock({ $0 }) else {
            Issue.record("expected a transport error, got \(String(describing: recorder.error.withLock { $0 }))")
            return
        }
        #expect(message.contains("gzip, chunked"))
        #expect(recorder.body.withLock { $0 }.isEmpty)
    }

    @Test func badFramingFailsTheTransfer() async throws {
        let (recorder, _) = try await self.run("/bad-chunk")
        guard case .transport = recorder.error.withLock({ $0 }) else {
            Issue.record("expected a transport error, got \(String(describing: recorder.error.withLock { $0 }))")
            return
        }
    }
}
