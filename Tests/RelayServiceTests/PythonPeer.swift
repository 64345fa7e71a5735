import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A Python process running one of tools/interop/*.py (Python `websockets` as a third-party peer).
///
/// Every wait is bounded. The process is killed with SIGKILL (the test runner's children may inherit a
/// blocked SIGTERM and keep running) by `stop()` or deinit.
final class PythonPeer: @unchecked Sendable {
    /// The repository root, from this file's path (Tests/RelayServiceTests/PythonPeer.swift).
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The interpreter: $HOMEBASE_PYTHON, else <repo>/.venv/bin/python, whichever imports websockets and nacl.
    /// - Throws: a TestFailure telling to run tools/bootstrap when neither does. Interop is not optional: CI runs
    ///   tools/test, which bootstraps, so a missing interpreter is a broken setup, not a reason to skip.
    static func interpreter() throws -> String {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["HOMEBASE_PYTHON"], !env.isEmpty { candidates.append(env) }
        candidates.append(Self.repositoryRoot.appendingPathComponent(".venv/bin/python").path)
        var tried: [String] = []
        for path in candidates {
            guard FileManager.default.isExecutableFile(atPath: path) else {
                tried.append("\(path) (missing)")
                continue
            }
            let check = try PythonPeer(executable: path, arguments: ["-c", "import websockets, nacl"])
            let status = check.waitForExit(timeout: .seconds(30))
            if status == 0 { return path }
            tried.append("\(path) (cannot import websockets and nacl: \(check.stderrText.suffix(200)))")
        }
        throw TestFailure("""
            No Python with `websockets` and `pynacl` for the interop tests; tried: \(tried.joined(separator: "; ")). \
            Run tools/bootstrap (it creates .venv), or set HOMEBASE_PYTHON. tools/test does both.
            """)
    }

    /// Starts tools/interop/`script` with `arguments` under the interpreter.
    static func start(_ script: String, _ arguments: [String]) throws -> PythonPeer {
        let python = try Self.interpreter()
        let path = Self.repositoryRoot.appendingPathComponent("tools/interop/\(script)").path
        return try PythonPeer(executable: python, arguments: ["-u", path] + arguments)
    }

    private let process = Process()
    private let lock = NSLock()
    private let lineArrived = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)
    private var lines: [String] = []
    private var stderrBytes: [UInt8] = []
    private var readers: [Thread] = []

    private init(executable: String, arguments: [String]) throws {
        self.process.executableURL = URL(fileURLWithPath: executable)
        self.process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        // A proxy from the environment must never sit between a test and 127.0.0.1.
        for key in ["http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            environment.removeValue(forKey: key)
        }
        self.process.environment = environment
        let out = Pipe()
        let err = Pipe()
        self.process.standardOutput = out
        self.process.standardError = err
        self.process.standardInput = FileHandle.nullDevice
        let exited = self.exited
        self.process.terminationHandler = { _ in exited.signal() }
        try self.process.run()
        // The readers hold the peer weakly: it holds them, and the cycle would keep both (and the process's
        // pipes) alive after the test.
        let outReader = Thread { [weak self] in
            var pending: [UInt8] = []
            let handle = out.fileHandleForReading
            // availableData returns what one read(2) got; read(upToCount:) would wait for the whole count.
            while case let chunk = handle.availableData, !chunk.isEmpty {
                pending += chunk
                while let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<nl], as: UTF8.self)
                    pending.removeSubrange(...nl)
                    guard let self else { return }
                    self.lock.withLock { self.lines.append(line) }
                    self.lineArrived.signal()
                }
            }
        }
        let errReader = Thread { [weak self] in
            let handle = err.fileHandleForReading
            while case let chunk = handle.availableData, !chunk.isEmpty {
                guard let self else { return }
                self.lock.withLock { self.stderrBytes += chunk }
            }
        }
        self.readers = [outReader, errReader]
        outReader.start()
        errReader.start()
    }

    deinit { self.stop() }

    var stderrText: String { self.lock.withLock { String(decoding: self.stderrBytes, as: UTF8.self) } }

    /// Waits for a line of stdout starting with `prefix` (earlier lines are skipped) and returns it whole.
    func waitForLine(prefix: String, timeout: Duration = .seconds(20)) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found: String? = self.lock.withLock {
                guard let i = self.lines.firstIndex(where: { $0.hasPrefix(prefix) }) else { return nil }
                let line = self.lines[i]
                self.lines.removeSubrange(...i)
                return line
            }
            if let found { return found }
            let remaining = deadline - .now
            let ms = Int(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)
            if ms <= 0 || self.lineArrived.wait(timeout: .now() + .milliseconds(ms)) == .timedOut {
                if self.lock.withLock({ self.lines.contains(where: { $0.hasPrefix(prefix) }) }) { continue }
                throw TestFailure("Python peer printed no '\(prefix)' line within \(timeout); stderr: \(self.stderrText)")
            }
        }
    }

    /// The port from a "listening PORT" line.
    func listeningPort() throws -> UInt16 {
        let line = try self.waitForLine(prefix: "listening ")
        guard let port = UInt16(line.dropFirst("listening ".count)) else { throw TestFailure("bad line '\(line)'") }
        return port
    }

    /// Waits for the process to exit; its status, or nil (after SIGKILL) when it outlived `timeout`.
    @discardableResult
    func waitForExit(timeout: Duration) -> Int32? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        if self.exited.wait(timeout: .now() + seconds) == .timedOut {
            self.stop()
            return nil
        }
        self.exited.signal()  // later waits return at once
        // The readers reach EOF once the process is gone; the output must be complete before it is read.
        for _ in 0..<200 where self.readers.contains(where: { !$0.isFinished }) { usleep(5_000) }
        return self.process.terminationStatus
    }

    func stop() {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            _ = self.exited.wait(timeout: .now() + 10)
            self.exited.signal()
        }
        // Foundation on Linux keeps a Process (and its pipes) forever unless waitUntilExit saw it end, even after
        // the termination handler ran; the child is gone here, so this returns at once.
        self.process.waitUntilExit()
    }

    /// Runs a relay_client.py scenario against `url` and returns its JSON observations.
    static func relayScenario(_ name: String, url: String) throws -> [String: Any] {
        let peer = try PythonPeer.start("relay_client.py", [url, name])
        guard peer.waitForExit(timeout: .seconds(40)) != nil else {
            throw TestFailure("relay_client.py \(name) did not finish in 40 s; stderr: \(peer.stderrText)")
        }
        let line = try peer.waitForLine(prefix: "{", timeout: .seconds(1))
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestFailure("relay_client.py \(name) printed no JSON object: \(line)")
        }
        if let error = object["error"] { throw TestFailure("relay_client.py \(name) failed: \(error)") }
        return object
    }
}
