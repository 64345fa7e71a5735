import Foundation
import Testing

/// Runs the built `handset` and `guest` binaries (next to the test bundle) through the contract's offline commands.
@Suite(.timeLimit(.minutes(1))) struct DeviceCLISmokeTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(self.stdout.utf8))) as? [String: Any]
        }
    }

    /// The products directory of the build running this test, so a sanitized build (its own scratch path) runs
    /// its own sanitized binaries.
    static let binaries = Bundle.main.bundleURL

    func run(_ tool: String, _ args: [String], state: String) throws -> Run {
        let process = Process()
        process.executableURL = Self.binaries.appendingPathComponent(tool)
        process.arguments = ["--state", state] + args
        // A clean environment, but for the sanitizers' options (tools/test --sanitize).
        let inherited = ProcessInfo.processInfo.environment
        process.environment = ["HOME": state]
            .merging(inherited.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].contains($0.key) }) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                   stderr: String(decoding: e, as: UTF8.self))
    }

    @Test func handsetOfflineCommands() throws {
        let dir = try DeviceTempDirectory()
        let state = dir.path + "/h"
        let missing = try self.run("handset", ["route"], state: state)
        #expect(missing.status == 1)
        #expect(missing.stderr.hasPrefix("handset: no state in"))

        let initialized = try self.run("handset", ["init", "--relay", "ws://127.0.0.1:9/"], state: state)
        #expect(initialized.status == 0)
        let pk = initialized.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(pk.count == 64)

        let route = try self.run("handset", ["route", "--json"], state: state).json
        #expect(route?["route"] as? String == "onDevice")
        #expect(route?["needs_configuration"] as? Bool == false)

        #expect(try self.run("handset", ["key", "add", "openai", "sk-proj-secret123"], state: state).status == 0)
        let list = try self.run("handset", ["key", "list"], state: state)
        #expect(list.stdout.contains("sk-proj-•••••") && !list.stdout.contains("secret123"))
        // A pasted key never flips the radio of a fresh device.
        #expect(try self.run("handset", ["route", "--json"], state: state).json?["route"] as? String == "onDevice")

        let status = try self.run("handset", ["status", "--json", "--offline"], state: state).json
        #expect(status?["device"] as? String == pk)

        let chat = try self.run("handset", ["chat", "--json", "hello"], state: state)
        #expect(chat.json?["provider"] as? String == "on-device")
        #expect(chat.json?["fallback"] is NSNull)

        let usage = try self.run("handset", ["config", "source", "mars"], state: state)
        #expect(usage.status == 64)
        #expect(usage.stderr.split(separator: "\n").first == "handset: unknown source 'mars'; use apple, community or external")
    }

    @Test func guestOfflineCommands() throws {
        let dir = try DeviceTempDirectory()
        let state = dir.path + "/g"
        let initialized = try self.run("guest", ["init", "--relay", "ws://127.0.0.1:9/"], state: state)
        #expect(initialized.status == 0)
        let status = try self.run("guest", ["status", "--json", "--offline"], state: state)
        #expect(status.json?["device"] as? String == initialized.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect((status.json?["hosts"] as? [Any])?.isEmpty == true)
        let bad = try self.run("guest", ["join", "nothex"], state: state)
        #expect(bad.status == 64)
        #expect(try self.run("guest", ["--help"], state: state).stdout.contains("guest join HOST_PK"))
    }
}
