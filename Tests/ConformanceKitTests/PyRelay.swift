import Foundation
import HomebaseTransport

/// tools/bench/py_relay.py, the deliberately broken relay (login and live forwarding only), on a loopback port.
final class PyRelay {
    struct StartFailure: Error, CustomStringConvertible { let description: String }

    let port: Int
    private let process: Process

    var url: String { "ws://127.0.0.1:\(self.port)/v1/relay" }

    /// Starts it and waits until it accepts connections (up to `within`).
    init(python: String, within: Duration = .seconds(15)) async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        self.port = Self.portBelowEphemeralRange()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root + "/tools/bench/py_relay.py", "\(self.port)"]
        // No pipes: reading one blocked the test runner. Its tracebacks for refused frames are expected noise.
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            if let probe = try? TCPClientStream.connect(host: "127.0.0.1", port: UInt16(self.port),
                                                        timeout: .milliseconds(200)) {
                probe.close()
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        self.stop()
        throw StartFailure(description: "py_relay.py did not start on port \(self.port) within \(within)")
    }

    /// SIGKILL, not terminate(): the in-process relay's signal handling can leave SIGTERM blocked in children
    /// spawned from the test process, and then waitUntilExit never returns.
    func stop() {
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }

    /// A random port from 20,000 up to the start of the kernel's ephemeral range (32768 unless
    /// /proc/sys/net/ipv4/ip_local_port_range says otherwise). A port in that range can already be the local end
    /// of some outgoing connection, and the server would fail to bind it.
    static func portBelowEphemeralRange() -> Int {
        let range = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let low = range.flatMap { $0.split(whereSeparator: \.isWhitespace).first }.flatMap { Int($0) } ?? 32_768
        return Int.random(in: 20_000..<max(low, 20_001))
    }
}
