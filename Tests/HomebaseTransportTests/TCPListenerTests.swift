import Foundation
import Glibc
import Testing

@testable import HomebaseTransport

@Suite struct TCPListenerTests {
    @Test(.timeLimit(.minutes(1)))
    func portZeroBindsARealPortAndListenerReportsIt() throws {
        let loop = try EventLoop()
        let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { _ in }
        #expect(listener.port != 0)
        #expect(listener.localAddress == "127.0.0.1:\(listener.port)")
        #expect(loop.registeredCount == 1)
        listener.close()
        listener.close()
        #expect(!listener.isOpen)
        #expect(loop.registeredCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func ipv6LoopbackAcceptsConnections() throws {
        let log = Probe(ServerLog())
        var port: UInt16 = 0
        let thread = try LoopThread { loop in
            port = try loop.listen(host: "::1", port: 0) { connection in
                let peer = connection.peerAddress
                log.update {
                    $0.accepted += 1
                    $0.peers.append(peer)
                }
                connection.delegate = EchoDelegate(log: log)
            }
        }
        defer { thread.stop() }
        let client = try TCPClientStream.connect(host: "::1", port: port, timeout: .seconds(5))
        try client.send([42], deadline: nil)
        #expect(try receiveAll(client, count: 1) == [42])
        #expect(log.value.peers.first?.hasPrefix("[::1]:") == true)
    }

    @Test func portInUseThrowsAddressInUse() throws {
        let loop = try EventLoop()
        let first = try loop.listen(host: "127.0.0.1", port: 0) { _ in }
        #expect(throws: TransportError.io(EADDRINUSE)) {
            try loop.listen(host: "127.0.0.1", port: first) { _ in }
        }
    }

    @Test func unresolvableHostThrowsConnectFailed() throws {
        let loop = try EventLoop()
        #expect {
            try loop.listen(host: "no-such-host.invalid", port: 0) { _ in }
        } throws: { error in
            guard case .connectFailed = error as? TransportError else { return false }
            return true
        }
    }
}
