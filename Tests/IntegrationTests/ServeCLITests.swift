import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `handset serve` / `guest serve` as built binaries (issue 36's contract): the one stdout line, the one-line
/// errors with their exit codes, an answer on the port, a clean stop on SIGTERM and SIGINT.
@Suite("serve: the built binaries", .serialized, .timeLimit(.minutes(1)))
struct ServeCLITests {
    let directory = temporaryDirectory("serve-cli")

    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        let sanitizers = inherited.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].contains($0.key) }
        return ["HOME": self.directory, "PATH": inherited["PATH"] ?? "/usr/bin:/bin"].merging(sanitizers) { $1 }
    }

    /// A port free a moment ago.
    static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p -> Int32 in
                _ = bind(fd, p, length)
                return getsockname(fd, p, &length)
            }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    @Test(arguments: ["handset", "guest"])
    func servesAndStops(tool: String) async throws {
        let state = self.directory + "/" + tool
        #expect(try CLISmokeTests.run(tool, ["--state", state, "init", "--relay", "ws://127.0.0.1:9/v1/relay"],
                                      environment: self.environment).status == 0)

        let open = try CLISmokeTests.run(tool, ["--state", state, "serve", "--listen", "0.0.0.0:11999"],
                                         environment: self.environment)
        #expect(open.status == 64)
        #expect(open.stderr == "\(tool) serve: a non-loopback --listen needs --token T\n")
        #expect(open.stdout.isEmpty)

        for signal in [SIGTERM, SIGINT] {
            let port = Self.freePort()
            let serve = try CLISmokeTests.Daemon(tool, ["--state", state, "serve", "--listen", "127.0.0.1:\(port)"],
                                                 directory: state, environment: self.environment)
            let line = "serving on http://127.0.0.1:\(port) (OpenAI: /v1, Ollama: /api)\n"
            #expect(await eventually(.seconds(10)) { serve.stdout == line }, "stdout: \(serve.stdout)")
            let models = try await offPool {
                try ServeClient.exchange(port, "GET /v1/models HTTP/1.1\r\nHost: localhost:\(port)\r\nConnection: close\r\n\r\n")
            }
            #expect(models.hasPrefix("HTTP/1.1 200") && models.contains(#""owned_by":"device""#))

            let busy = try CLISmokeTests.run(tool, ["--state", state, "serve", "--listen", "127.0.0.1:\(port)"],
                                             environment: self.environment)
            #expect(busy.status == 1)
            #expect(busy.stderr.hasPrefix("\(tool) serve: cannot listen on 127.0.0.1:\(port)"))
            #expect(busy.stderr.filter { $0 == "\n" }.count == 1)

            kill(serve.process.processIdentifier, signal)
            #expect(await eventually(.seconds(5)) { !serve.process.isRunning })
            #expect(await serve.stop() == 0)
            #expect(serve.stdout == line)
        }
    }
}
