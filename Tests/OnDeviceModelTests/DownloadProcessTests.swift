import Foundation
import HomebaseCuration
import HubEmulatorKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real `handset` processes over one state directory and Hub cache (design.md §C, "cancel wins arguments"; issue 37
/// items 1 and 2): what the state machine's unit tests cannot show is that the processes agree through the state
/// database, at the same moment.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DownloadProcessTests {
    /// The products directory of the build running this test (a sanitized build runs its own binaries).
    static let binaries = Bundle.main.bundleURL

    /// One `handset` process. A gated one runs `sh`, which says `ready` and waits for a line on its stdin before it
    /// becomes `handset`: releasing several gates back to back starts them at the same moment.
    final class Child {
        let process = Process()
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        let started = ContinuousClock.now

        init(_ args: [String], environment: [String: String], gated: Bool) throws {
            let handset = DownloadProcessTests.binaries.appendingPathComponent("handset").path
            if gated {
                self.process.executableURL = URL(fileURLWithPath: "/bin/sh")
                self.process.arguments = ["-c", "echo ready; read go; exec \"$@\"", "sh", handset] + args
            } else {
                self.process.executableURL = URL(fileURLWithPath: handset)
                self.process.arguments = args
            }
            self.process.environment = environment
            self.process.standardInput = self.stdin
            self.process.standardOutput = self.stdout
            self.process.standardError = self.stderr
            try self.process.run()
        }

        /// Blocks until the gate says it is waiting.
        func awaitGate() -> Bool {
            var line: [UInt8] = []
            while line.last != 10 {
                var byte: UInt8 = 0
                guard read(self.stdout.fileHandleForReading.fileDescriptor, &byte, 1) == 1 else { return false }
                line.append(byte)
            }
            return line == Array("ready\n".utf8)
        }

        func release() {
            _ = "\n".utf8CString.withUnsafeBytes { write(self.stdin.fileHandleForWriting.fileDescriptor, $0.baseAddress, 1) }
        }

        /// Waits for the exit; the status, stdout and stderr.
        func finish() -> (status: Int32, stdout: String, stderr: String) {
            let o = self.stdout.fileHandleForReading.readDataToEndOfFile()
            let e = self.stderr.fileHandleForReading.readDataToEndOfFile()
            self.process.waitUntilExit()
            return (self.process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        }
    }

    /// A handset state directory and a Hub emulator whose weights arrive at `bytesPerSecond`.
    struct Bench {
        let hub: Hub
        let state: String
        let environment: [String: String]

        init(weightBytes: Int, bytesPerSecond: Int) throws {
            var faults = HubFaults()
            faults.slowBytesPerSecond = bytesPerSecond
            self.hub = try Hub(faults: faults, weightBytes: weightBytes)
            self.state = NSTemporaryDirectory() + "handset-\(UUID().uuidString)"
            let inherited = ProcessInfo.processInfo.environment
            self.environment = ["HOME": self.state, "HF_ENDPOINT": self.hub.endpoint, "HF_HUB_CACHE": self.hub.root]
                .merging(inherited.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].contains($0.key) }) { $1 }
            let initialized = try self.run(["init", "--relay", "ws://127.0.0.1:9/"])
            guard initialized.status == 0 else { throw Failure("handset init: \(initialized.stderr)") }
        }

        func child(_ args: [String], gated: Bool = false) throws -> Child {
            try Child(["--state", self.state] + args, environment: self.environment, gated: gated)
        }

        func run(_ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try self.child(args).finish()
        }

        /// The model's entry of `handset models state --json`.
        func state(_ id: String) throws -> [String: Any] {
            let run = try self.run(["models", "state", "--json"])
            let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            let models = json?["models"] as? [[String: Any]] ?? []
            guard let entry = models.first(where: { $0["id"] as? String == id }) else {
                throw Failure("\(id) is not in `models state`: \(run.stdout) \(run.stderr)")
            }
            return entry
        }

        func stop() {
            self.hub.stop()
            try? FileManager.default.removeItem(atPath: self.state)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test func aDeleteInAnotherProcessStopsTheDownloadPromptlyAndItEndsAbsent() async throws {
        // About 10 s of download: long enough that finishing it is not mistaken for stopping.
        let bench = try Bench(weightBytes: 4_000_000, bytesPerSecond: 400_000)
        defer { bench.stop() }
        let download = try bench.child(["models", "download", curatedVision, "--json"])
        while true {
            let entry = try bench.state(curatedVision)
            if entry["state"] as? String == "downloading", (entry["progress"] as? Double ?? 0) > 0.02 { break }
            #expect(download.process.isRunning, "the download ended before the delete: \(entry)")
            guard download.process.isRunning else { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        let deleted = try bench.run(["models", "delete", curatedVision])
        let asked = ContinuousClock.now
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(try bench.state(curatedVision)["state"] as? String == "absent")
        let ended = download.finish()
        let took = ContinuousClock.now - asked
        // It polls its record every 100 ms; 2 s leaves room for a loaded machine, and is far from the 8 s left.
        #expect(took < .seconds(2), "the download went on for \(took) after the delete")
        #expect(ended.status == 1)
        #expect(ended.stderr.contains("download cancelled"), "\(ended.stderr)")
        let entry = try bench.state(curatedVision)
        #expect(entry["state"] as? String == "absent", "\(entry)")
        #expect(entry["error"] == nil)
        #expect(bench.hub.files(curatedVision, endingWith: ".incomplete").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: bench.hub.layout.ref(curatedVision)))
    }

    /// Rounds of five processes released at the same moment; `HOMEBASE_RACE_ROUNDS` sets how many.
    static let rounds = ProcessInfo.processInfo.environment["HOMEBASE_RACE_ROUNDS"].flatMap(Int.init) ?? 12

    @Test func fiveProcessesStartingTheSameDownloadAtOnceLetExactlyOnePass() async throws {
        // About 1.5 s of download: every start lands while the winner is downloading.
        let bench = try Bench(weightBytes: 1_500_000, bytesPerSecond: 1_000_000)
        defer { bench.stop() }
        for round in 1...Self.rounds {
            let children = try (0..<5).map { _ in try bench.child(["models", "download", curatedVision, "--json"], gated: true) }
            for child in children { #expect(child.awaitGate(), "round \(round): a gate did not open") }
            for child in children { child.release() }
            // The refused ones exit at once; while the winner still downloads, the state is its, not a loser's.
            var ends: [(status: Int32, stdout: String, stderr: String)?] = Array(repeating: nil, count: 5)
            let deadline = ContinuousClock.now + .seconds(60)
            while ends.compactMap({ $0 }).count < 4, ContinuousClock.now < deadline {
                for (i, child) in children.enumerated() where ends[i] == nil && !child.process.isRunning {
                    ends[i] = child.finish()
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            if let running = children.indices.first(where: { ends[$0] == nil && children[$0].process.isRunning }) {
                let entry = try bench.state(curatedVision)
                if children[running].process.isRunning {
                    #expect(entry["state"] as? String == "downloading", "round \(round): while the winner runs: \(entry)")
                }
            }
            for (i, child) in children.enumerated() where ends[i] == nil { ends[i] = child.finish() }
            let all = ends.compactMap { $0 }
            let winners = all.filter { $0.status == 0 && $0.stdout.contains("\"state\":\"ready\"") }
            let refused = all.filter {
                ($0.status == 1 && $0.stderr.contains("already downloading"))
                    || ($0.status == 0 && $0.stdout.contains("is already downloaded"))
            }
            #expect(winners.count == 1 && refused.count == 4,
                    "round \(round): \(all.map { "[\($0.status)] \($0.stdout) \($0.stderr)" })")
            let entry = try bench.state(curatedVision)
            #expect(entry["state"] as? String == "ready", "round \(round): \(entry)")
            let deleted = try bench.run(["models", "delete", curatedVision])
            #expect(deleted.status == 0, "round \(round): \(deleted.stderr)")
            if winners.count != 1 || refused.count != 4 { break }
        }
    }
}
