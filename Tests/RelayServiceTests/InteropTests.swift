import Foundation
import HomebaseCore
import HomebaseTransport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Our WebSocket code against a real third-party RFC 6455 implementation, Python `websockets`:
/// as a client of our relay (tools/interop/relay_client.py) and as a server for our `WebSocketClient`
/// over ws:// and wss:// (tools/interop/echo_server.py). Needs tools/bootstrap's .venv; fails (never skips)
/// without it.
@Suite(.timeLimit(.minutes(1)), .serialized) struct InteropTests {
    // MARK: Python websockets as a client of our relay

    @Test func pythonClientNegotiatesTheSubprotocolAndLogsInWithPyNaCl() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("login", url: relay.url)
        #expect(o["subprotocol"] as? String == "homebase-relay.v1")
        // websockets offers permessage-deflate by default; the relay must not accept an extension it lacks.
        #expect((o["extensions"] as? [Any])?.isEmpty == true)
        #expect(o["challenge_type"] as? Int == 1 && o["challenge_len"] as? Int == 42)
        #expect(o["challenge_version"] as? Int == 1)
        #expect((o["relay_time_skew_ms"] as? Int ?? .max) < 5_000)
        #expect(o["ready_type"] as? Int == 3 && o["ready_len"] as? Int == 9)
        #expect(o["stored"] as? Int == 0 && o["max_payload"] as? Int == 262_144)
    }

    @Test func pythonClientsForwardAndGetEveryReceiptStatus() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("forward", url: relay.url)
        let deliver = try #require(o["deliver"] as? [String: Any])
        #expect(deliver["type"] as? Int == 0x11)
        #expect(deliver["sender"] as? String == o["expected_sender"] as? String)
        #expect(deliver["delivery_id"] as? Int == 0)
        #expect(deliver["payload_len"] as? Int == 300 && deliver["payload_sha"] as? String == o["expected_sha"] as? String)
        func receipt(_ key: String) -> [Int]? {
            guard let r = o[key] as? [String: Any], let id = r["send_id"] as? Int, let s = r["status"] as? Int else {
                return nil
            }
            return [id, s]
        }
        #expect(receipt("receipt_live") == [7, 0])
        #expect(receipt("receipt_offline") == [8, 2])
        #expect(receipt("receipt_stored") == [9, 1])
        #expect(receipt("receipt_bad_flags") == [10, 6])
        #expect(receipt("receipt_too_large") == [11, 4])
        // With send_id 0 no RECEIPT comes: A's next frame is B's echo.
        let after = try #require(o["after_send_id_0"] as? [String: Any])
        #expect(after["type"] as? Int == 0x11 && after["payload"] as? String == "quiet")
    }

    @Test func fragmentedMessageFromPythonIsReassembled() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("fragmented", url: relay.url)
        let deliver = try #require(o["deliver"] as? [String: Any])
        #expect(deliver["payload_len"] as? Int == 10_000)
        #expect(deliver["payload_sha"] as? String == o["expected_sha"] as? String)
        let receipt = try #require(o["receipt"] as? [String: Any])
        #expect(receipt["send_id"] as? Int == 21 && receipt["status"] as? Int == 0)
    }

    @Test func pingFromPythonIsAnsweredWithPong() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("ping", url: relay.url)
        #expect(o["pong"] as? Bool == true)
    }

    @Test func textMessageFromPythonIsClosedWith1003() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("text", url: relay.url)
        #expect(o["close_code"] as? Int == 1003)
    }

    @Test func oversizeMessageFromPythonIsClosedWith1009() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("oversize", url: relay.url)
        #expect(o["close_code"] as? Int == 1009)
    }

    @Test func payloadOf200KiBCrossesBetweenPythonClients() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("large", url: relay.url)
        let deliver = try #require(o["deliver"] as? [String: Any])
        #expect(deliver["payload_len"] as? Int == 200 * 1024)
        #expect(deliver["payload_sha"] as? String == o["expected_sha"] as? String)
        let receipt = try #require(o["receipt"] as? [String: Any])
        #expect(receipt["send_id"] as? Int == 31 && receipt["status"] as? Int == 0)
    }

    @Test func closeFromPythonIsEchoedByTheRelay() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let o = try PythonPeer.relayScenario("client_close", url: relay.url)
        #expect(o["rcvd_code"] as? Int == 1000)
        #expect(o["state"] as? String == "CLOSED")
    }

    // MARK: Python websockets as a server for our WebSocketClient

    @Test func clientEchoesEverySizeThroughAPythonServerOverWS() throws {
        let server = try PythonPeer.start("echo_server.py", [])
        defer { server.stop() }
        let port = try server.listeningPort()
        try Self.exerciseEchoServer(server, url: "ws://127.0.0.1:\(port)/echo", options: WebSocketClient.Options())
    }

    @Test func clientEchoesEverySizeThroughAPythonServerOverWSS() throws {
        let cert = try TestCertificate()
        let server = try PythonPeer.start("echo_server.py", ["--cert", cert.certFile, "--key", cert.keyFile])
        defer { server.stop() }
        let port = try server.listeningPort()
        var options = WebSocketClient.Options()
        options.caFile = cert.certFile
        try Self.exerciseEchoServer(server, url: "wss://127.0.0.1:\(port)/echo", options: options)
    }

    @Test func wssWithoutTheTestCAFailsWithATLSError() throws {
        let cert = try TestCertificate()
        let server = try PythonPeer.start("echo_server.py", ["--cert", cert.certFile, "--key", cert.keyFile])
        defer { server.stop() }
        let port = try server.listeningPort()
        var options = WebSocketClient.Options()
        options.connectTimeout = .seconds(10)
        #expect {
            _ = try WebSocketClient.connect("wss://127.0.0.1:\(port)/echo", options: options)
        } throws: { error in
            guard case .transport(.tls(let message)) = error as? WebSocketClient.Error else { return false }
            // The message must say it is the certificate, not just "TLS failed".
            return message.lowercased().contains("certificate")
        }
    }

    /// Binary round trips of the sizes around each length encoding, a server ping, a client close and a server
    /// close, against `server` at `url`.
    static func exerciseEchoServer(_ server: PythonPeer, url: String, options: WebSocketClient.Options) throws {
        let client = try WebSocketClient.connect(url, options: options)
        // 0, the 7-bit edge, the 16-bit range and edge, the 64-bit range, and 200 KiB.
        for size in [0, 1, 125, 126, 127, 65_535, 65_536, 65_537, 200 * 1024] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            try client.send(binary: payload, deadline: .now + .seconds(10))
            let echo = try #require(try client.receive(timeout: .seconds(10)), "no echo of \(size) bytes")
            #expect(echo.opcode == .binary)
            #expect(echo.payload == payload, "echo of \(size) bytes differs")
        }
        // A burst written in one go comes back in order.
        let burst = (0..<200).map { i in [UInt8(i), UInt8(i >> 8)] + Array(repeating: UInt8(i & 0xFF), count: 256) }
        try client.send(binaryMessages: burst, deadline: .now + .seconds(10))
        for expected in burst {
            #expect(try client.receive(timeout: .seconds(10))?.payload == expected)
        }
        // The same burst through receiveAvailable: nothing without a read, then all of it in order, a batch
        // per call, each call bounded (reads stop once 16 messages are in hand).
        try client.send(binaryMessages: burst, deadline: .now + .seconds(10))
        #expect(try client.receiveAvailable(read: false).isEmpty)
        var got: [[UInt8]] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while got.count < burst.count, ContinuousClock.now < deadline {
            let batch = try client.receiveAvailable(read: true, maxMessages: 16)
            got += batch.map(\.payload)
            if batch.isEmpty { Thread.sleep(forTimeInterval: 0.005) }
        }
        #expect(got == burst)
        try client.send(text: "héllo")
        #expect(try client.receive(timeout: .seconds(10))?.payload == Array("héllo".utf8))

        // The server pings and reports whether our pong (sent from inside receive) arrived.
        try client.send(text: "ping")
        let pong = try #require(try client.receive(timeout: .seconds(10)))
        #expect(pong.opcode == .text && pong.payload == Array("pong-ok".utf8))

        // The server closes with a code and reason; receive reports both, and the server sees its code echoed.
        try client.send(text: "close 4005 going away")
        #expect {
            _ = try client.receive(timeout: .seconds(10))
        } throws: { error in
            (error as? WebSocketClient.Error) == .closed(code: 4005, reason: "going away")
        }
        #expect(try server.waitForLine(prefix: "closed ") == "closed 4005")

        // A close from our side reaches the server with our code.
        let second = try WebSocketClient.connect(url, options: options)
        try second.send(binary: [1, 2, 3])
        #expect(try second.receive(timeout: .seconds(10))?.payload == [1, 2, 3])
        second.close(code: 1001, reason: "leaving")
        #expect(try server.waitForLine(prefix: "closed ") == "closed 1001")
    }
}

/// A self-signed certificate for 127.0.0.1 (SAN IP), made with the openssl CLI in a temporary directory.
final class TestCertificate {
    let directory: URL
    let certFile: String
    let keyFile: String

    init() throws {
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("interop-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        self.certFile = self.directory.appendingPathComponent("cert.pem").path
        self.keyFile = self.directory.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
            "-keyout", self.keyFile, "-out", self.certFile,
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        openssl.terminationHandler = { _ in done.signal() }
        try openssl.run()
        let timedOut = done.wait(timeout: .now() + 30) == .timedOut
        if timedOut { kill(openssl.processIdentifier, SIGKILL) }
        openssl.waitUntilExit()  // Foundation releases a Process only once waitUntilExit saw it end
        if timedOut { throw TestFailure("openssl req did not finish in 30 s") }
        guard openssl.terminationStatus == 0 else { throw TestFailure("openssl req failed (is openssl installed?)") }
    }

    deinit { try? FileManager.default.removeItem(at: self.directory) }
}
