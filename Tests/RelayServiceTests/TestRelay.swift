import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Testing
@testable import RelayService

/// A relay on 127.0.0.1 port 0 in a temporary data directory, run on its own thread.
final class TestRelay: @unchecked Sendable {
    let server: RelayServer
    let dataDirectory: String
    private let thread: Thread
    private let finished = DispatchSemaphore(value: 0)

    init(limits: RelayLimits = RelayLimits(), admission: Admission = Admission(), dataDirectory: String? = nil,
         metricsListener: Bool = false, nats: TestNATS? = nil, edgeID: String = "edge") throws {
        let dir = dataDirectory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("relay-test-\(UUID().uuidString)").path
        self.dataDirectory = dir
        var c = RelayConfiguration()
        c.listenHost = "127.0.0.1"
        c.listenPort = 0
        c.dataDirectory = dir
        c.durability = "normal"
        c.limits = limits
        if let nats {
            c.natsServers = [nats.url]
            c.natsReplicas = 1
            c.edgeID = edgeID
        }
        if metricsListener {
            c.metricsHost = "127.0.0.1"
            c.metricsPort = 0
        }
        let server = try RelayServer(configuration: c, admission: admission, logger: .discard())
        self.server = server
        let done = self.finished
        self.thread = Thread {
            server.run()
            done.signal()
        }
        self.thread.start()
    }

    var url: String { "ws://127.0.0.1:\(self.server.port)/v1/relay" }

    func stop() {
        self.server.shutdown()
        self.finished.wait()
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.dataDirectory)
    }

    /// Plain HTTP GET on the main (or metrics) listener: (status, body).
    func httpGet(_ path: String, port: UInt16? = nil) throws -> (Int, String) {
        let stream = try TCPClientStream.connect(host: "127.0.0.1", port: port ?? self.server.port, timeout: .seconds(2))
        defer { stream.close() }
        try stream.send(Array("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n".utf8), deadline: .now + .seconds(2))
        var all = [UInt8]()
        while true {
            let b = try stream.receive(maxBytes: 65536, timeout: .seconds(2))
            if b.isEmpty { break }
            all += b
        }
        let text = String(decoding: all, as: UTF8.self)
        let status = Int(text.split(separator: " ")[1]) ?? 0
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (status, body)
    }
}

/// A relay client driven frame by frame, for tests.
final class TestClient {
    let key: SigningSecretKey
    let ws: WebSocketClient
    var ready: (stored: UInt32, maxPayload: UInt32)?

    var pk: PublicKey { self.key.publicKey }

    /// Connects to a relay at `url` (any relay, e.g. a subprocess) and logs in.
    convenience init(url: String, key: SigningSecretKey = .generate()) throws {
        try self.init(nil, key: key, url: url)
    }

    /// Connects; logs in unless `login` is false.
    init(_ relay: TestRelay?, key: SigningSecretKey = .generate(), login: Bool = true,
         headers: [(String, String)] = [], url: String? = nil) throws {
        self.key = key
        var o = WebSocketClient.Options(subprotocol: "homebase-relay.v1")
        o.headers = headers
        o.maxMessageBytes = 1 << 20
        guard let target = url ?? relay?.url else { throw TestFailure("no relay URL") }
        self.ws = try WebSocketClient.connect(target, options: o)
        if login { try self.login() }
    }

    func login() throws {
        guard case .challenge(let version, let nonce, _) = try self.next() else { throw TestFailure("no CHALLENGE") }
        #expect(version == 1)
        try self.send(.auth(publicKey: self.pk, signature: self.key.sign(nonce, context: SignatureContext.relayAuth)))
        guard case .ready(let stored, let max) = try self.next() else { throw TestFailure("no READY") }
        self.ready = (stored, max)
    }

    func send(_ frame: RelayFrame) throws {
        try self.ws.send(binary: frame.encoded())
    }

    func send(_ sendID: UInt32, to: PublicKey, store: Bool = false, payload: [UInt8] = [1, 2, 3]) throws {
        try self.send(.send(sendID: sendID, recipient: to, flags: store ? 1 : 0, payload: payload[...]))
    }

    /// The next relay frame, or a TestFailure on timeout.
    func next(timeout: Duration = .seconds(5)) throws -> RelayFrame {
        guard let m = try self.ws.receive(timeout: timeout) else { throw TestFailure("timed out waiting for a frame") }
        return try RelayFrame(decoding: m.payload)
    }

    /// Reads until the relay closes; returns the close code.
    func closeCode(timeout: Duration = .seconds(5)) -> UInt16? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            do {
                _ = try self.ws.receive(timeout: deadline - .now)
            } catch .closed(let code, _) {
                return code
            } catch {
                return nil
            }
        }
        return nil
    }

    func receipt(timeout: Duration = .seconds(5)) throws -> (UInt32, ReceiptStatus) {
        guard case .receipt(let id, let status) = try self.next(timeout: timeout) else { throw TestFailure("not a RECEIPT") }
        return (id, status)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { self.description = d }
}

/// A single nats-server with JetStream on a free loopback port, in a temporary store directory; nil where
/// nats-server is not installed (tools/bootstrap installs it).
final class TestNATS: @unchecked Sendable {
    let process: Process
    let port: Int
    let directory: String

    var url: String { "nats://127.0.0.1:\(self.port)" }

    static var available: Bool { Self.path != nil }
    static let path: String? = ["/usr/bin/nats-server", "/usr/local/bin/nats-server", "/usr/sbin/nats-server"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    init() throws {
        guard let path = Self.path else { throw TestFailure("nats-server is not installed") }
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("nats-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        // A port nobody listens on now: bind port 0, read it, let it go (nats-server takes it right after).
        let probe = try TCPListenerProbe.freePort()
        self.port = probe
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["-a", "127.0.0.1", "-p", String(probe), "-js", "-sd", self.directory]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        self.process = p
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if (try? TCPClientStream.connect(host: "127.0.0.1", port: UInt16(probe), timeout: .milliseconds(200))) != nil {
                return
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        p.terminate()
        throw TestFailure("nats-server did not start on port \(probe)")
    }

    func stop() {
        self.process.terminate()
        self.process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

enum TCPListenerProbe {
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound else { throw TestFailure("bind failed") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}
