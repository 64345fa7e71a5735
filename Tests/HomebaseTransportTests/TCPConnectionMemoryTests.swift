import Foundation
import Glibc
import Testing

@testable import HomebaseTransport

/// One stateless delegate for every connection, so the measurement is the connection's own cost.
private final class IdleDelegate: TCPConnectionDelegate {
    let log: Probe<ServerLog>
    init(log: Probe<ServerLog>) { self.log = log }
    func connectionReadable(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {}
    func connectionClosed(_ connection: TCPConnection, error: TransportError?) {
        self.log.update { $0.closed[connection.id] = error }
    }
}

/// Resident set size of this process in KiB (VmRSS in /proc/self/status).
private func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return -1 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

/// Opt-in benchmark (HOMEBASE_BENCH=1): RSS per idle connection with 10,000 connections held open by a
/// Python client in another process (so this process needs only one descriptor per connection).
@Suite struct TCPConnectionMemoryTests {
    static let enabled = ProcessInfo.processInfo.environment["HOMEBASE_BENCH"] == "1"

    @Test(.enabled(if: TCPConnectionMemoryTests.enabled), .timeLimit(.minutes(2)))
    func tenThousandIdleConnectionsStayUnderFourKiBEach() throws {
        let count = Int(ProcessInfo.processInfo.environment["HOMEBASE_BENCH_CONNECTIONS"] ?? "") ?? 10_000
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        #expect(Int(limit.rlim_cur) > count + 100)

        let log = Probe(ServerLog())
        let delegate = IdleDelegate(log: log)
        let holder = UncheckedBox(value: delegate)
        let (thread, port) = try startServer(log: log) { $0.delegate = holder.value }
        defer { thread.stop() }
        usleep(100_000)
        let before = residentKiB()

        let script = """
            import socket, sys, resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
            held = []
            for _ in range(int(sys.argv[2])):
                held.append(socket.create_connection(("127.0.0.1", int(sys.argv[1]))))
            print("ready", flush=True)
            sys.stdin.read()
            """
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        client.arguments = ["python3", "-c", script, String(port), String(count)]
        let input = Pipe()
        client.standardInput = input
        client.standardOutput = FileHandle.nullDevice
        try client.run()
        #expect(log.wait(timeout: .seconds(60)) { $0.accepted == count })
        usleep(200_000)
        let after = residentKiB()
        let perConnection = Double(after - before) * 1024 / Double(count)
        print("idle connections: \(count), VmRSS before \(before) KiB, after \(after) KiB, "
            + "\(String(format: "%.0f", perConnection)) bytes per connection")
        #expect(perConnection < 4096)

        try input.fileHandleForWriting.close()
        client.waitUntilExit()
        #expect(log.wait(timeout: .seconds(30)) { $0.closed.count == count })
    }
}
