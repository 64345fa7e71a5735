import HomebaseCore
import Testing

@testable import HomebaseTransport

/// `WebSocketClient.trySend` and the output it keeps when the socket is full: nothing blocks, nothing is lost or
/// reordered, and a retried write presents the same bytes at the same address (as a TLS layer requires).
@Suite struct WebSocketPendingOutputTests {
    /// A socket that takes at most `room` bytes until given more; records every write attempt.
    final class ThrottledStream: ByteStream {
        var room: Int
        var written: [UInt8] = []
        var attempts: [(address: UnsafeRawPointer?, count: Int)] = []
        var reads: [[UInt8]] = []
        var fail = false

        init(room: Int) { self.room = room }

        func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) {
            // A blocking send only ever finds room here (the tests give it).
            guard !self.fail else { throw .closed }
            self.written += bytes
        }
        func trySend(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
            guard !self.fail else { throw .closed }
            self.attempts.append((bytes.baseAddress.map(UnsafeRawPointer.init), bytes.count))
            let n = min(self.room, bytes.count)
            self.room -= n
            self.written += bytes[..<n]
            return n
        }
        func receive(maxBytes: Int, timeout: Duration?) throws(TransportError) -> [UInt8] {
            guard !self.reads.isEmpty else { throw .timedOut }
            return self.reads.removeFirst()
        }
        func close() {}
        var pollDescriptor: Int32 { -1 }
    }

    func client(_ stream: ThrottledStream) -> WebSocketClient {
        WebSocketClient(url: RelayURL("ws://127.0.0.1:1/v1/relay")!, stream: stream, selected: nil, maxMessageBytes: 1 << 20)
    }

    /// The messages a server would read from `bytes` (client frames are masked).
    func messages(_ bytes: [UInt8]) throws -> [[UInt8]] {
        var parser = WebSocketParser(role: .server, maxMessageBytes: 1 << 20)
        parser.append(bytes)
        var out: [[UInt8]] = []
        while let event = try parser.next() {
            if case .message(_, let payload) = event { out.append(Array(payload)) }
        }
        return out
    }

    @Test func aFullSocketKeepsTheRestAndLaterWritesItInOrder() throws {
        let stream = ThrottledStream(room: 10)
        let ws = self.client(stream)
        let first = [[UInt8]](repeating: [1, 2, 3, 4, 5, 6, 7, 8], count: 3)
        #expect(try ws.trySend(binaryMessages: first) == false)
        #expect(ws.hasPendingOutput)
        // More messages queue behind the rest; nothing is written while there is no room.
        #expect(try ws.trySend(binaryMessages: [[9, 9]]) == false)
        #expect(stream.written.count == 10)
        stream.room = 1_000
        #expect(try ws.flushAvailable())
        #expect(!ws.hasPendingOutput)
        #expect(try self.messages(stream.written) == first + [[9, 9]])
    }

    @Test func aRetryPresentsTheSameBytesAtTheSameAddress() throws {
        let stream = ThrottledStream(room: 5)
        let ws = self.client(stream)
        #expect(try ws.trySend(binaryMessages: [[UInt8](repeating: 7, count: 40)]) == false)
        _ = try ws.trySend(binaryMessages: [[1]])  // no room: a second attempt at the same rest
        stream.room = 3
        _ = try ws.flushAvailable()
        let attempts = stream.attempts
        #expect(attempts.count == 3)
        // Each attempt at the first write starts where the socket stopped taking bytes, in the same buffer.
        #expect(attempts[1].address == attempts[0].address.map { $0 + 5 })
        #expect(attempts[1].count == attempts[0].count - 5)
        #expect(attempts[2].address == attempts[1].address && attempts[2].count == attempts[1].count)
    }

    @Test func aBlockingSendWritesThePendingOutputFirst() throws {
        let stream = ThrottledStream(room: 4)
        let ws = self.client(stream)
        _ = try ws.trySend(binaryMessages: [[1, 1, 1, 1, 1, 1]])
        stream.room = 1_000
        try ws.send(binary: [2, 2])
        #expect(!ws.hasPendingOutput)
        #expect(try self.messages(stream.written) == [[1, 1, 1, 1, 1, 1], [2, 2]])
    }

    @Test func aPingIsAnsweredWithoutBlockingOnAFullSocket() throws {
        let stream = ThrottledStream(room: 0)
        stream.reads = [[0x89, 0x02, 0xAA, 0xBB, 0x82, 0x01, 0x05]]  // ping "AABB", then a message
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[5]])
        #expect(ws.hasPendingOutput)
        stream.room = 100
        #expect(try ws.flushAvailable())
        var parser = WebSocketParser(role: .server, maxMessageBytes: 1 << 10)
        parser.append(stream.written)
        #expect(try parser.next() == .pong([0xAA, 0xBB]))
    }

    @Test func stalledOutputIsTimedAndAFailedWriteThrows() throws {
        let stream = ThrottledStream(room: 0)
        let ws = self.client(stream)
        #expect(ws.outputStalledMs(now: Posix.monotonicMs) == 0)
        _ = try ws.trySend(binaryMessages: [[1]])
        let later = Posix.monotonicMs + 5_000
        #expect(ws.outputStalledMs(now: later) >= 4_999)
        stream.fail = true
        #expect(throws: WebSocketClient.Error.transport(.closed)) { try ws.flushAvailable() }
    }
}
