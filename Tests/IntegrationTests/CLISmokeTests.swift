import Foundation
import Synchronization
import OllamaEmulatorKit
import Testing

/// The happy path through the built binaries (next to the test bundle): relay, ollama-emulator, `homebase
/// init/run/pair/status`, `handset init/pair/config/chat --json/status --json`, then SIGTERM to the daemon and the
/// handset's offline fallback. Catches wiring in the executables' main.swift that the library tests cannot see.
@Suite("CLI smoke test of the built binaries", .serialized, .timeLimit(.minutes(1)))
struct CLISmokeTests {
    /// The products directory of the build running this test, so a sanitized build (its own scratch path) runs
    /// its own sanitized binaries.
    static let binaries = Bundle.main.bundleURL

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(self.stdout.utf8))) as? [String: Any]
        }
    }

    /// A long-running binary with stdout and stderr in files (no pipe can fill up and block it).
    final class Daemon: @unchecked Sendable {
        let process = Process()
        let stdoutPath: String
        let stderrPath: String

        init(_ tool: String, _ args: [String], directory: String, environment: [String: String]) throws {
            self.stdoutPath = directory + "/\(tool).out"
            self.stderrPath = directory + "/\(tool).err"
            FileManager.default.createFile(atPath: self.stdoutPath, contents: nil)
            FileManager.default.createFile(atPath: self.stderrPath, contents: nil)
            self.process.executableURL = CLISmokeTests.binaries.appendingPathComponent(tool)
            self.process.arguments = args
            self.process.environment = environment
            self.process.standardOutput = FileHandle(forWritingAtPath: self.stdoutPath)
            self.process.standardError = FileHandle(forWritingAtPath: self.stderrPath)
            try self.process.run()
        }

        var stdout: String { (try? String(contentsOfFile: self.stdoutPath, encoding: .utf8)) ?? "" }
        var stderr: String { (try? String(contentsOfFile: self.stderrPath, encoding: .utf8)) ?? "" }

        /// The port from a "… listening on HOST:PORT" line, waiting at most 10 s.
        func listeningPort() async -> UInt16? {
            var port: UInt16?
            _ = await eventually(.seconds(10)) {
                guard let line = self.stdout.split(separator: "\n").first(where: { $0.contains("listening on") }),
                    let colon = line.lastIndex(of: ":")
                else { return false }
                port = UInt16(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                return port != nil
            }
            return port
        }

        /// SIGTERM, then SIGKILL after `grace`; returns the exit status (nil if it had to be killed). Every path
        /// ends in waitUntilExit: Foundation on Linux keeps a Process forever unless that saw it end.
        @discardableResult
        func stop(grace: Duration = .seconds(5)) async -> Int32? {
            if self.process.isRunning {
                self.process.terminate()
                if !(await eventually(grace, { !self.process.isRunning })) {
                    kill(self.process.processIdentifier, SIGKILL)
                    self.process.waitUntilExit()
                    return nil
                }
            }
            self.process.waitUntilExit()
            return self.process.terminationStatus
        }
    }

    let directory = temporaryDirectory("cli")
    /// A clean environment, but for the sanitizers' options (tools/test --sanitize): a sanitized binary reports
    /// where the test runner does, with the same suppressions.
    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        let sanitizers = inherited.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].contains($0.key) }
        return ["HOME": self.directory, "PATH": inherited["PATH"] ?? "/usr/bin:/bin", "HOMEBASE_LOG_LEVEL": "debug"]
            .merging(sanitizers) { $1 }
    }

    func run(_ tool: String, _ args: [String]) throws -> Run {
        try Self.run(tool, args, environment: self.environment)
    }

    /// Runs a built binary to its end. Standard error is read on another thread while standard output is read
    /// here, so a tool that fills one pipe while the other is drained cannot hang the test.
    static func run(_ tool: String, _ args: [String], environment: [String: String], cwd: String? = nil) throws -> Run {
        let process = Process()
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        process.executableURL = Self.binaries.appendingPathComponent(tool)
        process.arguments = args
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let errData = Mutex(Data())
        let errDone = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let e = err.fileHandleForReading.readDataToEndOfFile()
            errData.withLock { $0 = e }
            errDone.signal()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                   stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }

    @Test("homebase config shows and changes pins and limits, refuses bad values, survives init again")
    func homebaseConfig() throws {
        let hb = self.directory + "/homebase-config"
        let initArgs = ["--state", hb, "init", "--relay", "ws://127.0.0.1:9/v1/relay", "--name", "cfg"]
        #expect(try self.run("homebase", initArgs).status == 0)
        let shown = try self.run("homebase", ["--state", hb, "config"])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("pinned          (none)") && shown.stdout.contains("max concurrent  4"))

        let set = try self.run("homebase", ["--state", hb, "config", "--pin", "qwen2.5:7b, llama3.2:3b,qwen2.5:7b",
                                            "--max-concurrent", "8", "--max-queued", "0"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("saved; 'homebase run' uses it"))
        var json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["pinned_models"] as? [String] == ["qwen2.5:7b", "llama3.2:3b"])
        #expect(json?["max_concurrent_requests"] as? Int == 8)
        #expect(json?["max_queued_requests"] as? Int == 0)

        // Bad values: exit 64 with the reason on the first line of stderr (then the pointer to --help),
        // nothing changed.
        for bad in [["--max-concurrent", "0"], ["--max-concurrent", "65"], ["--max-queued", "many"],
                    ["--max-queued", "-1"], ["--pin", "two words"]] {
            let r = try self.run("homebase", ["--state", hb, "config"] + bad)
            #expect(r.status == 64, "\(bad): \(r.status)")
            let first = r.stderr.split(separator: "\n").first ?? ""
            #expect(first.hasPrefix("homebase: ") && first.contains(bad[0] == "--pin" ? "model tag" : bad[0]),
                    "\(bad): \(r.stderr)")
        }
        json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["max_concurrent_requests"] as? Int == 8)

        // Running init again (a new relay, no --name) keeps what the owner configured; --pin '' unpins.
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:10/v1/relay"]).status == 0)
        json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["pinned_models"] as? [String] == ["qwen2.5:7b", "llama3.2:3b"])
        #expect(json?["device_name"] as? String == "cfg")
        #expect(json?["relay_url"] as? String == "ws://127.0.0.1:10/v1/relay")
        #expect(try self.run("homebase", ["--state", hb, "config", "--pin", ""]).status == 0)
        json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["pinned_models"] as? [String] == [])
    }

    @Test("run --ui serves the status page and status --json reads it; a public --ui needs a token")
    func statusPage() async throws {
        let hb = self.directory + "/homebase-ui"
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:10/v1/relay"]).status == 0)
        let exposed = try self.run("homebase", ["--state", hb, "run", "--ui", "0.0.0.0:0"])
        #expect(exposed.status == 64 && exposed.stderr.contains("--ui-token"), "\(exposed.stderr)")
        let daemon = try Daemon("homebase", ["--state", hb, "run", "--ui", "127.0.0.1:0"], directory: self.directory,
                                environment: self.environment)
        let listening = await eventually(.seconds(10)) {
            daemon.stderr.contains("Status page listening on http://127.0.0.1:")
        }
        #expect(listening, "no status page: \(daemon.stderr)")
        // The page's JSON: the state database's keys and the page's own (streams, guests, chart).
        var status: [String: Any]?
        let served = await eventually(.seconds(10)) {
            status = try? self.run("homebase", ["--state", hb, "status", "--json"]).json
            return status?["streams"] != nil
        }
        #expect(served, "status --json never read the page: \(String(describing: status))")
        #expect(status?["daemon_running"] as? Bool == true && status?["series"] != nil)
        await daemon.stop()
        let after = try self.run("homebase", ["--state", hb, "status", "--json"]).json
        #expect(after?["daemon_running"] as? Bool == false && after?["streams"] == nil)
    }

    @Test("init, run, pair, chat --json remotely, status --json, then SIGTERM and an offline fallback")
    func happyPath() async throws {
        let hb = self.directory + "/homebase"
        let hs = self.directory + "/handset"
        var daemons: [Daemon] = []
        do {
            let relay = try Daemon("relay", ["--listen", "127.0.0.1:0", "--data", self.directory + "/relay-data"],
                                   directory: self.directory, environment: self.environment)
            daemons.append(relay)
            let emulator = try Daemon("ollama-emulator", ["--listen", "127.0.0.1:0"], directory: self.directory,
                                      environment: self.environment)
            daemons.append(emulator)
            guard let relayPort = await relay.listeningPort() else {
                throw IntegrationFailure("relay did not start: \(relay.stderr)")
            }
            guard let ollamaPort = await emulator.listeningPort() else {
                throw IntegrationFailure("emulator did not start: \(emulator.stderr)")
            }
            let relayURL = "ws://127.0.0.1:\(relayPort)/v1/relay"

            let initialized = try self.run("homebase", [
                "--state", hb, "init", "--relay", relayURL, "--ollama", "http://127.0.0.1:\(ollamaPort)",
                "--name", "smoke",
            ])
            #expect(initialized.status == 0, "homebase init: \(initialized.stderr)")
            let homebasePK = initialized.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(homebasePK.count == 64)
            let daemon = try Daemon("homebase", ["--state", hb, "run"], directory: self.directory,
                                    environment: self.environment)
            daemons.append(daemon)

            // `status --json` reads what the daemon writes on change: wait for the relay and the runtime.
            var status: [String: Any]?
            let ready = await eventually(.seconds(15)) {
                status = try? self.run("homebase", ["--state", hb, "status", "--json"]).json
                let runtime = status?["runtime"] as? [String: Any]
                return status?["relay_connected"] as? Bool == true && runtime?["available"] as? Bool == true
            }
            #expect(ready, "homebase never ready: \(String(describing: status))\n\(daemon.stderr.suffix(2000))")
            #expect(status?["daemon_running"] as? Bool == true)
            #expect((status?["runtime"] as? [String: Any])?["verified"] as? Bool == true)
            let tags = (status?["models"] as? [[String: Any]])?.compactMap { $0["tag"] as? String } ?? []
            #expect(tags.contains("qwen2.5:7b"), "models \(tags)")

            // A second daemon on the same state stops at once, naming the first: it holds the state's lock.
            let secondDirectory = self.directory + "/second"
            try FileManager.default.createDirectory(atPath: secondDirectory, withIntermediateDirectories: true)
            let second = try Daemon("homebase", ["--state", hb, "run"], directory: secondDirectory,
                                    environment: self.environment)
            let exited = await eventually(.seconds(10)) { !second.process.isRunning }
            #expect(exited, "a second daemon kept running on the same state")
            if exited {
                #expect(await second.stop() != 0)
                let pid = daemon.process.processIdentifier
                #expect(second.stderr.contains("another homebase daemon is running on this state (pid \(pid))"),
                        "\(second.stderr)")
            } else {
                await second.stop()
            }

            let pair = try self.run("homebase", ["--state", hb, "pair"])
            #expect(pair.status == 0)
            guard let code = pair.stdout.split(separator: "\n").last.map(String.init), code.contains(homebasePK) else {
                throw IntegrationFailure("no pairing code in: \(pair.stdout)")
            }

            let handsetPK = try self.run("handset", ["--state", hs, "init", "--relay", relayURL, "--name", "phone"])
            #expect(handsetPK.status == 0)
            let paired = try self.run("handset", ["--state", hs, "pair", code])
            #expect(paired.status == 0, "handset pair: \(paired.stderr)")
            #expect(paired.stdout.contains("paired with Homebase"))
            #expect(try self.run("handset", ["--state", hs, "config", "source", "external"]).status == 0)
            #expect(try self.run("handset", ["--state", hs, "config", "model", "qwen2.5:7b"]).status == 0)

            let prompt = "hello from the smoke test"
            let chat = try self.run("handset", ["--state", hs, "chat", "--json", prompt])
            #expect(chat.status == 0, "chat: \(chat.stderr)")
            #expect(chat.json?["provider"] as? String == "remote", "chat: \(chat.stdout) \(chat.stderr)")
            #expect(chat.json?["route"] as? String == "external")
            #expect(chat.json?["model"] as? String == "qwen2.5:7b")
            #expect(chat.json?["fallback"] is NSNull)
            #expect(chat.json?["text"] as? String == TextGenerator(prompt: prompt).tokens.joined())

            let handsetStatus = try self.run("handset", ["--state", hs, "status", "--json"])
            #expect(handsetStatus.status == 0)
            #expect(handsetStatus.json != nil, "handset status --json: \(handsetStatus.stdout)")
            let afterPair = await eventually(.seconds(5)) {
                let s = try? self.run("homebase", ["--state", hb, "status", "--json"]).json
                return (s?["siblings"] as? [[String: Any]])?.count == 1
            }
            #expect(afterPair, "homebase status never listed the handset as a sibling")

            // SIGTERM stops the daemon cleanly; the handset then answers on-device, reason offline.
            let exit = await daemon.stop()
            #expect(exit == 0, "homebase run exit \(String(describing: exit))")
            // Its lock went with it: `status` no longer reports a daemon (nor its last report).
            let stopped = try self.run("homebase", ["--state", hb, "status", "--json"]).json
            #expect(stopped?["daemon_running"] as? Bool == false)
            #expect(stopped?["relay_connected"] as? Bool == false)
            let offline = try self.run("handset", ["--state", hs, "chat", "--json", prompt])
            #expect(offline.json?["provider"] as? String == "on-device")
            #expect((offline.json?["fallback"] as? [String: Any])?["reason"] as? String == "offline",
                    "offline chat: \(offline.stdout)")
        } catch {
            Issue.record(error)
        }
        for d in daemons.reversed() { await d.stop() }
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
