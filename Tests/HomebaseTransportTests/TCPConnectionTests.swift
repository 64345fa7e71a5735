import Foundation
import Glibc
import Testing

@testable import HomebaseTransport

/// What the server side of a test saw.
struct ServerLog: Sendable {
    var accepted = 0
    var closed: [UInt64: TransportError?] = [:]
    var received: [UInt64: [UInt8]] = [:]
    var queuedAfterWrite: [UInt64: Int] = [:]
    var writable: Set<UInt64> = []
    var peers: [String] = []
}

/// Echoes everything back and records events into a probe.
final class EchoDelegate: TCPConnectionDelegate {
    let log: Probe<ServerLog>
    let echo: Bool

    init(log: Probe<ServerLog>, echo: Bool = true) {
        self.log = log
        self.echo = echo
    }

    func connectionReadable(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        let copy = Array(bytes)
        self.log.update { $0.received[connection.id, default: []].append(contentsOf: copy) }
        if self.echo { connection.write(bytes) }
    }

    func connectionWritable(_ connection: TCPConnection) {
        let queued = connection.outboundBytesQueued
        self.log.update {
            $0.writable.insert(connection.id)
            $0.queuedAfterWrite[connection.id] = queued
        }
    }

    func connectionClosed(_ connection: TCPConnection, error: TransportError?) {
        self.log.update { $0.closed[connection.id] = error }
    }
}

/// Starts a loop listening on 127.0.0.1:0 whose accepted connections get `configure`.
func startServer(
    log: Probe<ServerLog>, configure: @escaping (TCPConnection) -> Void
) throws -> (LoopThread, UInt16) {
    var port: UInt16 = 0
    let thread = try LoopThread { loop in
        port = try loop.listen(host: "127.0.0.1", port: 0) { connection in
            let peer = connection.peerAddress
            log.update {
                $0.accepted += 1
                $0.peers.append(peer)
            }
            configure(connection)
        }
    }
    return (thread, port)
}

/// Reads from `stream` until `count` bytes or EOF.
func receiveAll(_ stream: ByteStream, count: Int, timeout: Duration = .seconds(10)) throws -> [UInt8] {
    var result: [UInt8] = []
    while result.count < count {
        let chunk = try stream.receive(maxBytes: 64 * 1024, timeout: timeout)
        if chunk.isEmpty { break }
        result.append(contentsOf: chunk)
    }
    return result
}

@Suite struct TCPConnectionTests {
    @Test(.timeLimit(.minutes(1)))
    func echoServesSeveralClientsConcurrently() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log) }
        defer { thread.stop() }
        let clients = try (0..<8).map { _ in
            try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        }
        for round in 0..<3 {
            for (index, client) in clients.enumerated() {
                try client.send(Array("client \(index) round \(round)".utf8), deadline: nil)
            }
            for (index, client) in clients.enumerated() {
                let expected = Array("client \(index) round \(round)".utf8)
                #expect(try receiveAll(client, count: expected.count) == expected)
            }
        }
        #expect(log.value.accepted == 8)
        #expect(log.value.peers.allSatisfy { $0.hasPrefix("127.0.0.1:") })
        for client in clients { client.close() }
        #expect(log.wait { $0.closed.count == 8 })
        #expect(log.value.closed.values.allSatisfy { $0 == nil })
    }

    @Test(.timeLimit(.minutes(1)))
    func largeEchoSurvivesPartialWrites() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let payload = (0..<(4 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 % 251) }
        // Send from another thread: the echo comes back while we are still sending.
        // The sender only sends and this thread only receives, which a TCP socket allows.
        let box = UncheckedBox(value: client)
        let sender = Thread { try? box.value.send(payload, deadline: .now + .seconds(20)) }
        sender.start()
        let echoed = try receiveAll(client, count: payload.count)
        #expect(echoed.count == payload.count)
        #expect(echoed == payload)
    }

    @Test(.timeLimit(.minutes(1)))
    func peerResetIsReportedAsConnectionReset() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log, echo: false) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        #expect(log.wait { $0.accepted == 1 })
        // SO_LINGER with a zero timeout turns close() into a reset.
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        #expect(setsockopt(client.pollDescriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size)) == 0)
        client.close()
        #expect(log.wait { $0.closed.count == 1 })
        #expect(log.value.closed.values.first == .some(.io(ECONNRESET)))
    }

    @Test(.timeLimit(.minutes(1)))
    func peerEOFIsReportedWithoutError() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log, echo: false) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        try client.send([1, 2, 3], deadline: nil)
        client.close()
        #expect(log.wait { $0.closed.count == 1 })
        #expect(log.value.closed.values.first == .some(nil))
        #expect(log.value.received.values.first == [1, 2, 3])
    }

    @Test(.timeLimit(.minutes(1)))
    func readerThatNeverReadsMakesTheOutboundQueueGrowThenDrain() throws {
        let log = Probe(ServerLog())
        let total = 16 * 1024 * 1024
        let (thread, port) = try startServer(log: log) { connection in
            connection.delegate = EchoDelegate(log: log, echo: false)
            let chunk = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 % 251) }
            for _ in 0..<(total / chunk.count) { connection.write(chunk) }
            let queued = connection.outboundBytesQueued
            log.update { $0.queuedAfterWrite[connection.id] = queued }
        }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        #expect(log.wait { !$0.queuedAfterWrite.isEmpty })
        // Loopback socket buffers take a few MiB at most; the rest must be queued, not lost or blocking.
        let queued = log.value.queuedAfterWrite.values.first ?? 0
        #expect(queued > 0)
        #expect(queued <= total)
        // Now read everything: the queue drains, in order, and the delegate hears connectionWritable.
        let received = try receiveAll(client, count: total)
        #expect(received.count == total)
        let chunk = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 % 251) }
        var expected: [UInt8] = []
        expected.reserveCapacity(total)
        for _ in 0..<(total / chunk.count) { expected.append(contentsOf: chunk) }
        #expect(received == expected)
        #expect(log.wait { !$0.writable.isEmpty })
        #expect(log.value.queuedAfterWrite.values.first == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func closeAfterFlushSendsEverythingThenCloses() throws {
        let log = Probe(ServerLog())
        let total = 8 * 1024 * 1024
        let (thread, port) = try startServer(log: log) { connection in
            connection.delegate = EchoDelegate(log: log, echo: false)
            connection.write([UInt8](repeating: 7, count: total))
            connection.closeAfterFlush()
            connection.write([1, 2, 3])  // ignored after closeAfterFlush
        }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let received = try receiveAll(client, count: total + 3)
        #expect(received.count == total)
        #expect(try client.receive(maxBytes: 16, timeout: .seconds(5)) == [])
        #expect(log.wait { $0.closed.count == 1 })
        #expect(log.value.closed.values.first == .some(nil))
    }

    @Test(.timeLimit(.minutes(1)))
    func closeIsIdempotentAndTheDelegateHearsItOnce() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { connection in
            connection.delegate = EchoDelegate(log: log, echo: false)
            connection.close()
            connection.close()
            connection.write([1])  // ignored: closed
            // The notification is deferred, so it cannot have been delivered yet.
            log.update { $0.queuedAfterWrite[connection.id] = $0.closed.count }
        }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        #expect(try client.receive(maxBytes: 16, timeout: .seconds(5)) == [])
        #expect(log.wait { $0.closed.count == 1 })
        #expect(log.value.queuedAfterWrite.values.first == 0)
        #expect(thread.sync { $0.registeredCount } == 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func pausedReadingHoldsDataUntilResumed() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { connection in
            connection.delegate = EchoDelegate(log: log)
            connection.pauseReading()
            connection.eventLoop.scheduleTimer(after: .milliseconds(150)) { connection.resumeReading() }
        }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        try client.send([9, 8, 7], deadline: nil)
        #expect(throws: TransportError.timedOut) { try client.receive(maxBytes: 16, timeout: .milliseconds(50)) }
        #expect(log.value.received.isEmpty)
        // The data arrived while paused (its edge is spent): resuming must still deliver it.
        #expect(try receiveAll(client, count: 3) == [9, 8, 7])
    }

    @Test(.timeLimit(.minutes(1)))
    func thousandConnectionsAreAcceptedAndClosedCleanly() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log, echo: false) }
        defer { thread.stop() }
        var clients: [TCPClientStream] = []
        for _ in 0..<1000 {
            clients.append(try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5)))
        }
        #expect(log.wait { $0.accepted == 1000 })
        #expect(thread.sync { $0.registeredCount } == 1001)
        for client in clients { client.close() }
        #expect(log.wait { $0.closed.count == 1000 })
        #expect(log.value.closed.values.allSatisfy { $0 == nil })
        #expect(thread.sync { $0.registeredCount } == 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func stoppingTheLoopClosesOpenConnections() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log, echo: false) }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        #expect(log.wait { $0.accepted == 1 })
        #expect(thread.stop())
        #expect(log.value.closed.count == 1)
        #expect(try client.receive(maxBytes: 16, timeout: .seconds(5)) == [])
    }

    /// Issue 23: a connection with more waiting than `readBudgetBytes` is read in turns, and one that became
    /// ready at the same moment is served between them (the loop used to read the busy one to the end first,
    /// so a peer sending faster than it was handled held every other connection up).
    @Test(.timeLimit(.minutes(1)))
    func aBusyPeerIsReadInTurnsWithOthersServedBetween() throws {
        final class Recorder: TCPConnectionDelegate {
            let name: String
            let order: Probe<[(name: String, count: Int)]>
            init(_ name: String, _ order: Probe<[(name: String, count: Int)]>) {
                self.name = name
                self.order = order
            }
            func connectionReadable(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
                let entry = (name: self.name, count: bytes.count)
                self.order.update { $0.append(entry) }
            }
            func connectionClosed(_ connection: TCPConnection, error: TransportError?) {}
        }
        var busy: [Int32] = [0, 0]
        var quiet: [Int32] = [0, 0]
        let stream = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        #expect(socketpair(AF_UNIX, stream, 0, &busy) == 0)
        #expect(socketpair(AF_UNIX, stream, 0, &quiet) == 0)
        defer { Glibc.close(busy[1]); Glibc.close(quiet[1]) }
        // Fill the busy peer's socket with what it holds (more than one turn's budget), then one byte for the other.
        let chunk = [UInt8](repeating: 7, count: 4096)
        var queued = 0
        while chunk.withUnsafeBytes({ Glibc.write(busy[1], $0.baseAddress, $0.count) }) > 0 { queued += chunk.count }
        try #require(queued > TCPConnection.readBudgetBytes)
        #expect(Glibc.write(quiet[1], [1], 1) == 1)
        let order = Probe<[(name: String, count: Int)]>([])
        let thread = try LoopThread { loop in
            // Registered busy first: its readiness is reported first in the loop's first batch.
            for (fd, name) in [(busy[0], "busy"), (quiet[0], "quiet")] {
                let connection = TCPConnection(loop: loop, fd: fd)
                connection.delegate = Recorder(name, order)
                #expect(loop.register(fd, events: TCPConnection.registrationEvents, source: connection) == nil)
            }
        }
        defer { thread.stop() }
        #expect(order.wait { log in log.filter { $0.name == "busy" }.map(\.count).reduce(0, +) == queued })
        let log = order.value
        let quietAt = try #require(log.firstIndex { $0.name == "quiet" })
        let lastBusy = try #require(log.lastIndex { $0.name == "busy" })
        #expect(quietAt < lastBusy, "the quiet connection waited for the busy one to be read to the end: \(log)")
    }

    @Test func idleConnectionObjectIsSmall() throws {
        let loop = try EventLoop()
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { Glibc.close(fds[1]) }
        let connection = TCPConnection(loop: loop, fd: fds[0])
        let bytes = mallocUsableSize(Unmanaged.passUnretained(connection).toOpaque())
        print("TCPConnection heap bytes (malloc_usable_size): \(bytes)")
        #expect(bytes <= 128)
        connection.abandon()
    }
}

/// glibc's malloc_usable_size (<malloc.h> is not in the Glibc module).
@_silgen_name("malloc_usable_size")
func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int
