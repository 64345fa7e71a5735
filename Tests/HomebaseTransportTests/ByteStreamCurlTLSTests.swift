import Foundation
import Glibc
import Testing

@testable import HomebaseTransport

/// A throwaway TLS echo server: a self-signed certificate from the openssl CLI and Python's ssl module.
final class TLSEchoServer {
    let directory: URL
    let certFile: String
    let port: UInt16
    private let process: Process

    /// Why the server cannot run here (missing tools), or nil when it can.
    static var unavailableReason: String? {
        for tool in ["openssl", "python3"] where TLSEchoServer.which(tool) == nil {
            return "\(tool) is not installed; skipping the TLS stream tests"
        }
        return nil
    }

    private static func which(_ tool: String) -> String? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static let script = """
        import socket, ssl, sys
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        print(listener.getsockname()[1], flush=True)
        while True:
            raw, _ = listener.accept()
            try:
                tls = ctx.wrap_socket(raw, server_side=True)
                while True:
                    data = tls.recv(65536)
                    if not data:
                        break
                    tls.sendall(data)
                tls.close()
            except Exception:
                pass
            finally:
                raw.close()
        """

    init() throws {
        self.directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("homebase-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        self.certFile = self.directory.appendingPathComponent("cert.pem").path
        let keyFile = self.directory.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: TLSEchoServer.which("openssl")!)
        openssl.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1", "-keyout", keyFile, "-out", self.certFile,
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw TransportError.tls("openssl req failed") }

        self.process = Process()
        self.process.executableURL = URL(fileURLWithPath: TLSEchoServer.which("python3")!)
        self.process.arguments = ["-c", TLSEchoServer.script, self.certFile, keyFile]
        let output = Pipe()
        self.process.standardOutput = output
        try self.process.run()
        // The first line is the port; reading blocks until Python has bound it.
        var line: [UInt8] = []
        while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
            line.append(byte)
        }
        guard let port = UInt16(String(decoding: line, as: UTF8.self)) else {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
            throw TransportError.connectFailed("TLS echo server printed no port")
        }
        self.port = port
    }

    deinit {
        // SIGKILL: the test runner's children may inherit a blocked SIGTERM, which would hang waitUntilExit.
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
        try? FileManager.default.removeItem(at: self.directory)
    }
}

@Suite(.serialized) struct ByteStreamCurlTLSTests {
    @Test(.timeLimit(.minutes(1)))
    func echoRoundTripsThroughTLS() throws {
        if let reason = TLSEchoServer.unavailableReason {
            print(reason)
            return
        }
        let server = try TLSEchoServer()
        let stream = try CurlTLSStream.connect(
            url: "https://127.0.0.1:\(server.port)/ws", caFile: server.certFile, insecure: false,
            timeout: .seconds(10))
        #expect(stream.pollDescriptor >= 0)
        for size in [1, 19, 300, 70_000] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            try stream.send(payload, deadline: .now + .seconds(10))
            #expect(try receiveAll(stream, count: size) == payload)
        }
        #expect(throws: TransportError.timedOut) { try stream.receive(maxBytes: 16, timeout: .milliseconds(20)) }
        stream.close()
        stream.close()
        #expect(stream.pollDescriptor == -1)
        #expect(throws: TransportError.closed) { try stream.send([1], deadline: nil) }
    }

    @Test(.timeLimit(.minutes(1)))
    func selfSignedCertificateWithoutTheCAFileFailsWithATLSError() throws {
        if let reason = TLSEchoServer.unavailableReason {
            print(reason)
            return
        }
        let server = try TLSEchoServer()
        #expect {
            try CurlTLSStream.connect(
                url: "https://127.0.0.1:\(server.port)/", caFile: nil, insecure: false, timeout: .seconds(10))
        } throws: { error in
            guard case .tls = error as? TransportError else { return false }
            return true
        }
        // Insecure mode (test peers only) accepts the same certificate.
        let stream = try CurlTLSStream.connect(
            url: "https://127.0.0.1:\(server.port)/", caFile: nil, insecure: true, timeout: .seconds(10))
        try stream.send([5, 6], deadline: nil)
        #expect(try receiveAll(stream, count: 2) == [5, 6])
    }

    @Test(.timeLimit(.minutes(1)))
    func refusedAndNonHTTPSURLsFailToConnect() throws {
        #expect(throws: TransportError.connectFailed("not an https URL: http://127.0.0.1:1/")) {
            try CurlTLSStream.connect(url: "http://127.0.0.1:1/", caFile: nil, insecure: true, timeout: .seconds(5))
        }
        let loop = try EventLoop()
        let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { _ in }
        let port = listener.port
        listener.close()
        #expect {
            try CurlTLSStream.connect(
                url: "https://127.0.0.1:\(port)/", caFile: nil, insecure: true, timeout: .seconds(5))
        } throws: { error in
            guard case .connectFailed = error as? TransportError else { return false }
            return true
        }
    }
}
