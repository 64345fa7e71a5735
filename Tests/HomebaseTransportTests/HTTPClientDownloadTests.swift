import Foundation
import Synchronization
import Testing

@testable import HomebaseTransport

/// `download(_:into:)` lends each piece from libcurl's buffer to the writer: the bytes arrive whole and in order
/// with the transfer coding taken off, and a writer that refuses a piece stops the transfer.
@Suite(.timeLimit(.minutes(1)))
struct HTTPClientDownloadTests {
    final class Writer: HTTPBodyWriter, @unchecked Sendable {
        let status = Mutex(0)
        let body = Mutex<[UInt8]>([])
        let pieces = Mutex(0)
        let error = Mutex<HTTPClientError?>(nil)
        let ended = AsyncStream<Void>.makeStream()
        let accepts: Bool

        init(accepts: Bool = true) { self.accepts = accepts }

        func head(_ head: HTTPClientResponseHead) { self.status.withLock { $0 = head.status } }
        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            self.pieces.withLock { $0 += 1 }
            self.body.withLock { $0 += bytes }
            return self.accepts
        }
        func end(_ error: HTTPClientError?) {
            self.error.withLock { $0 = error }
            self.ended.continuation.yield()
        }
    }

    func run(_ path: String, writer: Writer, bufferBytes: Int? = nil) async throws -> HTTPClientTestServer {
        let server = try await HTTPClientTestServer.start()
        var request = HTTPRequest(url: server.url(path), idleTimeout: .seconds(5))
        request.receiveBufferBytes = bufferBytes
        _ = HTTPClient().download(request, into: writer)
        for await _ in writer.ended.stream { break }
        return server
    }

    @Test func aChunkedBodyArrivesWholeAndUnframed() async throws {
        let writer = Writer()
        _ = try await self.run("/huge-chunked", writer: writer, bufferBytes: 1 << 20)
        #expect(writer.error.withLock { $0 } == nil)
        #expect(writer.status.withLock { $0 } == 200)
        let body = writer.body.withLock { $0 }
        #expect(body.count == 2 * 1024 * 1024)
        #expect(body.allSatisfy { $0 == UInt8(ascii: "x") })
    }

    @Test func chunkFramingIsLibcurlsToTakeOff() async throws {
        let writer = Writer()
        _ = try await self.run("/chunk-burst", writer: writer)
        #expect(writer.error.withLock { $0 } == nil)
        #expect(String(decoding: writer.body.withLock { $0 }, as: UTF8.self) == (0..<50).map { "w\($0) " }.joined())
    }

    @Test func aRefusedPieceStopsTheTransfer() async throws {
        // An endless body: only the refusal can end it.
        let writer = Writer(accepts: false)
        _ = try await self.run("/firehose", writer: writer)
        #expect(writer.error.withLock { $0 } != nil)
        #expect(writer.pieces.withLock { $0 } == 1)
    }
}
