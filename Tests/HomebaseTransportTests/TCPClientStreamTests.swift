import Foundation
import Glibc
import Testing

@testable import HomebaseTransport

@Suite struct TCPClientStreamTests {
    /// A port on 127.0.0.1 that nothing listens on (bound then closed).
    private func closedPort() throws -> UInt16 {
        let loop = try EventLoop()
        let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { _ in }
        let port = listener.port
        listener.close()
        return port
    }

    @Test(.timeLimit(.minutes(1)))
    func refusedConnectionThrowsConnectFailed() throws {
        let port = try self.closedPort()
        #expect {
            try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        } throws: { error in
            guard case .connectFailed(let reason) = error as? TransportError else { return false }
            return reason.contains("refused")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func receiveTimesOutAndTheStreamStaysUsable() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let start = ContinuousClock.now
        #expect(throws: TransportError.timedOut) { try client.receive(maxBytes: 16, timeout: .milliseconds(30)) }
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        #expect(throws: TransportError.timedOut) { try client.receive(maxBytes: 16, timeout: .zero) }
        try client.send([1, 2], deadline: .now + .seconds(5))
        #expect(try receiveAll(client, count: 2) == [1, 2])
    }

    @Test(.timeLimit(.minutes(1)))
    func receiveReturnsAtMostMaxBytes() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        try client.send(Array(0..<10), deadline: nil)
        #expect(log.wait { $0.received.values.first?.count == 10 })
        var received: [UInt8] = []
        while received.count < 10 {
            let chunk = try client.receive(maxBytes: 3, timeout: .seconds(5))
            #expect(chunk.count <= 3 && !chunk.isEmpty)
            received += chunk
        }
        #expect(received == Array(0..<10))
    }

    @Test func useAfterCloseThrowsClosed() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.delegate = EchoDelegate(log: log) }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        client.close()
        client.close()
        #expect(client.pollDescriptor == -1)
        #expect(throws: TransportError.closed) { try client.send([1], deadline: nil) }
        #expect(throws: TransportError.closed) { try client.receive(maxBytes: 1, timeout: nil) }
    }

    @Test(.timeLimit(.minutes(1)))
    func sendToAPeerThatLeftThrowsInsteadOfKillingTheProcess() throws {
        let log = Probe(ServerLog())
        let (thread, port) = try startServer(log: log) { $0.close() }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        #expect(try client.receive(maxBytes: 1, timeout: .seconds(5)) == [])
        #expect(throws: TransportError.self) {
            for _ in 0..<100 { try client.send([UInt8](repeating: 0, count: 65536), deadline: .now + .seconds(5)) }
        }
    }

    @Test func unresolvableHostThrowsConnectFailed() {
        #expect {
            try TCPClientStream.connect(host: "no-such-host.invalid", port: 80, timeout: .seconds(5))
        } throws: { error in
            guard case .connectFailed = error as? TransportError else { return false }
            return true
        }
    }
}
