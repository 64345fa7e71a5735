import HomebaseCore
import Testing

@testable import HomebaseTransport

/// `WebSocketClient.receiveAvailable` over a scripted stream: what it reads, when it stops, what it keeps.
@Suite struct WebSocketReceiveAvailableTests {
    /// Hands out scripted reads, then `timedOut` (EAGAIN); records sends.
    final class ScriptedStream: ByteStream {
        var reads: [[UInt8]]
        var readCount = 0
        var sent: [[UInt8]] = []
        let holdsReadBytes: Bool

        init(_ reads: [[UInt8]], holdsReadBytes: Bool = false) {
            self.reads = reads
            self.holdsReadBytes = holdsReadBytes
        }

        func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) { self.sent.append(bytes) }
        func trySend(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
            self.sent.append(Array(bytes))
            return bytes.count
        }
        func receive(maxBytes: Int, timeout: Duration?) throws(TransportError) -> [UInt8] {
            self.readCount += 1
            guard !self.reads.isEmpty else { throw .timedOut }
            return self.reads.removeFirst()
        }
        func close() {}
        var pollDescriptor: Int32 { -1 }
        var mayHoldReadBytes: Bool { self.holdsReadBytes }
    }

    /// A server frame (unmasked).
    static func frame(_ opcode: UInt8, _ payload: [UInt8]) -> [UInt8] { [0x80 | opcode, UInt8(payload.count)] + payload }

    func client(_ stream: ScriptedStream) -> WebSocketClient {
        WebSocketClient(url: RelayURL("ws://127.0.0.1:1/v1/relay")!, stream: stream, selected: nil, maxMessageBytes: 1 << 20)
    }

    @Test func withoutReadItTakesOnlyWhatIsBuffered() throws {
        let stream = ScriptedStream([Self.frame(2, [1])])
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: false).isEmpty)
        #expect(stream.readCount == 0)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[1]])
        // A short read on a plain socket: no second read that could only answer EAGAIN.
        #expect(stream.readCount == 1)
    }

    @Test func messagesBeforeACloseAreDeliveredThenTheCloseIsReported() throws {
        let stream = ScriptedStream([Self.frame(2, [1, 2, 3]) + Self.frame(2, [4]) + Self.frame(8, [0x03, 0xE9])])
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[1, 2, 3], [4]])
        #expect(throws: WebSocketClient.Error.closed(code: 1001, reason: "")) { try ws.receiveAvailable(read: false) }
    }

    @Test func messagesBeforeAProtocolErrorAreDeliveredFirst() throws {
        // A masked frame from the server is a protocol error (RFC 6455 §5.1).
        let stream = ScriptedStream([Self.frame(2, [7]) + [0x82, 0x81, 1, 2, 3, 4, 5]])
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[7]])
        #expect(throws: WebSocketClient.Error.self) { try ws.receiveAvailable(read: false) }
    }

    @Test func overTLSItReadsUntilNothingIsLeft() throws {
        // Small reads (TLS records) that poll would not announce: all are taken in one call.
        let stream = ScriptedStream([Self.frame(2, [1]), Self.frame(2, [2]), Self.frame(2, [3])], holdsReadBytes: true)
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[1], [2], [3]])
        #expect(stream.readCount == 4)  // the last one found nothing
    }

    @Test func readsStopAtMaxMessagesAndSayMoreMayBeWaiting() throws {
        let stream = ScriptedStream([Self.frame(2, [1]) + Self.frame(2, [2]), Self.frame(2, [3])], holdsReadBytes: true)
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true, maxMessages: 2).map(\.payload) == [[1], [2]])
        // Over TLS poll may not announce the rest: the caller is told to call again without waiting.
        #expect(ws.mayHavePendingInput)
        #expect(try ws.receiveAvailable(read: true, maxMessages: 2).map(\.payload) == [[3]])
        #expect(!ws.mayHavePendingInput)
    }

    @Test func aFailureAfterMessagesIsAnnouncedAsPending() throws {
        let stream = ScriptedStream([Self.frame(2, [1]) + Self.frame(8, [0x03, 0xE8])])
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[1]])
        #expect(ws.mayHavePendingInput)
        #expect(throws: WebSocketClient.Error.self) { try ws.receiveAvailable(read: false) }
        #expect(!ws.mayHavePendingInput)
    }

    @Test func endOfStreamAfterMessagesComesNext() throws {
        let stream = ScriptedStream([Self.frame(2, [5]), []], holdsReadBytes: true)
        let ws = self.client(stream)
        #expect(try ws.receiveAvailable(read: true).map(\.payload) == [[5]])
        #expect(throws: WebSocketClient.Error.closed(code: nil, reason: "connection closed")) {
            try ws.receiveAvailable(read: false)
        }
    }
}

@Suite struct LoopTimeTests {
    /// The HTTP loop adds durations to monotonic times: "forever" must stay far in the future, not wrap.
    @Test func aDeadlineForeverStaysForever() {
        let forever = Posix.nanoseconds(.seconds(Int64.max))
        #expect(forever == UInt64.max / 2)
        let (sum, overflow) = Posix.monotonicNs.addingReportingOverflow(forever)
        #expect(!overflow && sum > Posix.monotonicNs + 1_000_000_000 * 3600 * 24 * 365 * 100)
        #expect(Posix.nanoseconds(.milliseconds(-5)) == 0)
    }
}
