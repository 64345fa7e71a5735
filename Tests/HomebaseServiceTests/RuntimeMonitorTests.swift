import HomebaseCore
import HomebaseTransport
import OllamaEmulatorKit
import Synchronization
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct RuntimeMonitorTests {
    /// What the monitor under test persisted.
    final class PersistLog: Sendable {
        private let statuses = Mutex<[RuntimeStatus]>([])
        var all: [RuntimeStatus] { self.statuses.withLock { $0 } }
        func record(_ status: RuntimeStatus) { self.statuses.withLock { $0.append(status) } }
    }

    struct Harness {
        let monitor: RuntimeMonitor
        let clock: SteppedClock
        let persisted: PersistLog
        let task: Task<Void, Never>

        init(endpoint: String, verified: Bool, pinned: [String] = []) {
            self.clock = SteppedClock()
            self.persisted = PersistLog()
            var configuration = RuntimeMonitor.Configuration()
            configuration.pinnedModels = pinned
            let log = self.persisted
            self.monitor = RuntimeMonitor(endpoint: endpoint, verified: verified, configuration: configuration,
                                          http: HTTPClient(), clock: self.clock.serviceClock,
                                          persistVerified: { log.record($0) })
            let monitor = self.monitor
            self.task = Task { await monitor.run() }
        }

        func stop() async {
            self.task.cancel()
            await self.task.value
        }
    }

    @Test func verifiedRuntimeReportsModelsWithCapabilitiesContextAndLoadedFlags() async throws {
        var configuration = EmulatorConfiguration()
        configuration.loaded = ["qwen2.5:7b"]
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)/", verified: true)
        var changes = h.monitor.changes.makeAsyncIterator()

        let status = try #require(await changes.next())
        #expect(status.endpoint == "http://127.0.0.1:\(port)")
        #expect(status.verified && status.available)
        #expect(status.version == "0.32.6")
        #expect(status.models.map(\.tag) == ["qwen2.5:7b", "llama3.2:3b", "nomic-embed-text:latest"])
        let qwen = try #require(status.models.first)
        // Loaded: the context /api/ps says it serves (4096), beside what it was trained for.
        var expected = RuntimeModelInfo(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B",
                                        quantization: "Q4_K_M", capabilities: ["completion", "tools"],
                                        contextLength: 4096, loaded: true)
        expected.trainedContextLength = 32768
        expected.contextServed = true
        #expect(qwen.withoutLoadDetails == expected)
        // Issue 37: memory per loaded model and when its keep-alive unloads it (`/api/ps`; loaded at the
        // emulator's start, so pinned: Go's largest duration lands in 2318).
        #expect((qwen.memoryBytes ?? 0) > 1_000_000_000 && qwen.vramBytes == qwen.memoryBytes)
        #expect(qwen.unloadsAtMs.map { $0 > 10_000_000_000_000 } == true)
        let embed = try #require(status.models.last)
        #expect(embed.capabilities == ["embedding"] && !embed.canComplete)
        #expect(embed.contextLength == 2048 && !embed.loaded)
        #expect(embed.memoryBytes == nil && embed.unloadsAtMs == nil)
        #expect(h.monitor.current == status)
        #expect(h.persisted.all.isEmpty, "an endpoint verified before is not stored again")
        await h.stop()
    }

    @Test func unverifiedEndpointIsVerifiedWithATrialThenPersistedOnce() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: false)
        #expect(h.monitor.current.endpoint == nil && !h.monitor.current.verified)
        var changes = h.monitor.changes.makeAsyncIterator()

        let status = try #require(await changes.next())
        #expect(status.verified && status.available && status.endpoint == "http://127.0.0.1:\(port)")
        #expect(h.persisted.all == [status])
        // The trial ran on the smallest completion-capable model, which is now loaded.
        #expect(status.models.filter(\.loaded).map(\.tag) == ["llama3.2:3b"])

        // Later probes are plain probes: no second store.
        try await h.clock.advanceWhenSleeping(ms: 30_000)
        await eventually("second probe") { h.clock.sleepCount >= 2 }
        #expect(h.persisted.all.count == 1)
        await h.stop()
    }

    @Test func runtimeDownAtStartIsNeitherVerifiedNorPersisted() async throws {
        let port = try closedPort()
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: false)
        await eventually("first probe") { h.clock.pendingSleeps == 1 }
        let status = h.monitor.current
        #expect(status.endpoint == nil && !status.verified && !status.available && status.advertisedModels.isEmpty)
        #expect(status.lastError == "Ollama is not running at http://127.0.0.1:\(port) (connection refused) — "
            + "start it with `ollama serve`")
        #expect(h.persisted.all.isEmpty)
        // Retried with backoff, and still never stored.
        try await h.clock.advanceWhenSleeping(ms: 1_000)
        try await h.clock.advanceWhenSleeping(ms: 2_000)
        await eventually("third probe done") { h.clock.requestedSleeps == [1_000, 2_000, 4_000] }
        #expect(h.persisted.all.isEmpty && !h.monitor.current.verified)
        await h.stop()
    }

    @Test func stoppedRuntimeIsUnavailableKeepsItsEndpointAndComesBack() async throws {
        let first = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try first.start(port: 0)
        let endpoint = "http://127.0.0.1:\(port)"
        let h = Harness(endpoint: endpoint, verified: true)
        var changes = h.monitor.changes.makeAsyncIterator()
        let up = try #require(await changes.next())
        #expect(up.available && up.models.count == 3)

        first.stop()
        h.monitor.reverifySoon()
        try await h.clock.advanceWhenSleeping(ms: 500)
        let down = try #require(await changes.next())
        #expect(!down.available && down.verified && down.endpoint == endpoint)
        #expect(down.models.isEmpty && down.advertisedModels.isEmpty && down.version == nil)
        #expect(down.lastError?.contains("connection refused") == true)

        // Ollama restarts on the same port: found at the first retry.
        let second = OllamaEmulator(configuration: EmulatorConfiguration())
        _ = try second.start(port: port)
        defer { second.stop() }
        try await h.clock.advanceWhenSleeping(ms: 1_000)
        let back = try #require(await changes.next())
        #expect(back.available && back.verified && back.endpoint == endpoint)
        #expect(back.models.map(\.tag) == up.models.map(\.tag))
        #expect(h.persisted.all.isEmpty)
        await h.stop()
    }

    @Test func reverifyAfterFailureWaitsForTheBackoff() async throws {
        let port = try closedPort()
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true)
        await eventually("first probe") { h.clock.pendingSleeps == 1 }
        #expect(h.clock.pendingRemainingMs == 1_000)
        #expect(!h.monitor.current.available && h.monitor.current.endpoint != nil)

        // Requests failed: the loop wakes, but the backoff deadline stands (not the 500 ms reverify delay).
        h.monitor.reverifySoon()
        h.monitor.reverifySoon()
        await eventually("re-sleep") { h.clock.sleepCount >= 2 && h.clock.pendingSleeps == 1 }
        #expect(h.clock.pendingRemainingMs == 1_000)

        try await h.clock.advanceWhenSleeping(ms: 1_000)
        await eventually("second probe") { h.clock.pendingRemainingMs == 2_000 }
        h.monitor.reverifySoon()
        await eventually("re-sleep") { h.clock.sleepCount >= 4 && h.clock.pendingSleeps == 1 }
        #expect(h.clock.pendingRemainingMs == 2_000)
        try await h.clock.advanceWhenSleeping(ms: 2_000)
        try await h.clock.advanceWhenSleeping(ms: 4_000)
        try await h.clock.advanceWhenSleeping(ms: 8_000)
        await eventually("fifth probe") { h.clock.pendingRemainingMs == 16_000 }
        await h.stop()
    }

    @Test func theObserverHearsEveryProbeChangedOrNot() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true)
        let heard = Mutex(0)
        h.monitor.observe { heard.withLock { $0 += 1 } }
        var changes = h.monitor.changes.makeAsyncIterator()
        _ = try #require(await changes.next())
        let first = heard.withLock { $0 }
        // A probe that finds the same runtime: not a change, but the report's watcher still hears of it (the
        // probe time it shows moved), where it used to poll every 250 ms.
        h.monitor.reverifySoon()
        try await h.clock.advanceWhenSleeping(ms: 500)
        let deadline = ContinuousClock.now + .seconds(5)
        while heard.withLock({ $0 }) == first, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(heard.withLock { $0 } > first)
        #expect(h.monitor.current.checkedAtMs > 0)
        await h.stop()
    }

    @Test func loadingAModelIsReportedAsAChange() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true)
        var changes = h.monitor.changes.makeAsyncIterator()
        let before = try #require(await changes.next())
        #expect(before.models.allSatisfy { !$0.loaded })

        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        try await client.trialCompletion("qwen2.5:7b")
        h.monitor.reverifySoon()
        try await h.clock.advanceWhenSleeping(ms: 500)
        let after = try #require(await changes.next())
        #expect(after.models.filter(\.loaded).map(\.tag) == ["qwen2.5:7b"])
        await h.stop()
    }

    @Test func pinnedModelIsKeptWarm() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        // The embedding model cannot be loaded for chat, and an uninstalled one is not pulled: both are skipped.
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true,
                        pinned: ["llama3.2:3b", "nomic-embed-text", "gemma3:1b"])
        var changes = h.monitor.changes.makeAsyncIterator()
        let first = try #require(await changes.next())
        #expect(first.models.allSatisfy { !$0.loaded })

        // The warm-up finishes and asks for a probe, which sees the model loaded.
        try await h.clock.advanceWhenSleeping(ms: 500)
        let warmed = try #require(await changes.next())
        #expect(warmed.models.filter(\.loaded).map(\.tag) == ["llama3.2:3b"])
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        #expect(try await client.ps().map(\.name) == ["llama3.2:3b"])
        await h.stop()
    }

    /// Issue 34: Ollama matches names case-insensitively, so does a pin; a cloud stub is never warmed (it is not
    /// loaded here, and a keep-alive would send a request to the cloud).
    @Test func aPinMatchesCaseInsensitivelyAndNeverWarmsACloudStub() async throws {
        var configuration = EmulatorConfiguration()
        configuration.models = ["qwen2.5:7b", "gpt-oss:120b-cloud"]
        configuration.cloud = .online
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true, pinned: ["Qwen2.5:7B", "gpt-oss:120b-cloud"])
        var changes = h.monitor.changes.makeAsyncIterator()
        let first = try #require(await changes.next())
        #expect(first.models.allSatisfy { !$0.loaded })
        try await h.clock.advanceWhenSleeping(ms: 500)
        let warmed = try #require(await changes.next())
        #expect(warmed.models.filter(\.loaded).map(\.tag) == ["qwen2.5:7b"])
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        #expect(try await client.ps().map(\.name) == ["qwen2.5:7b"])
        await h.stop()
    }

    @Test func pinsSetWhileRunningLoadTheModel() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let h = Harness(endpoint: "http://127.0.0.1:\(port)", verified: true)
        var changes = h.monitor.changes.makeAsyncIterator()
        let first = try #require(await changes.next())
        #expect(first.models.allSatisfy { !$0.loaded })

        // `homebase config --pin` while the daemon runs: a probe soon, which warms the model.
        h.monitor.setPinnedModels(["qwen2.5:7b"])
        #expect(h.monitor.pinnedModels == ["qwen2.5:7b"])
        var loaded: [String] = []
        for _ in 0..<300 where loaded.isEmpty {
            // Whatever the monitor sleeps for (a re-verify delay), let it pass.
            if h.clock.pendingSleeps > 0 { h.clock.advance(ms: 500) }
            try await Task.sleep(for: .milliseconds(10))
            loaded = h.monitor.current.models.filter(\.loaded).map(\.tag)
        }
        #expect(loaded == ["qwen2.5:7b"])
        await h.stop()
    }

    @Test func failedStoreLeavesTheEndpointUnverified() async throws {
        struct DiskFull: Error {}
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let clock = SteppedClock()
        let monitor = RuntimeMonitor(endpoint: "http://127.0.0.1:\(port)", verified: false, http: HTTPClient(),
                                     clock: clock.serviceClock, persistVerified: { _ in throw DiskFull() })
        let task = Task { await monitor.run() }
        await eventually("first probe") { clock.pendingSleeps == 1 }
        #expect(!monitor.current.verified && !monitor.current.available && monitor.current.endpoint == nil)
        #expect(monitor.current.lastError?.hasPrefix("could not store the verified endpoint") == true)
        #expect(clock.requestedSleeps == [1_000])
        task.cancel()
        await task.value
    }
}

// MARK: Support shared by the runtime tests

/// A clock the test steps by hand. `sleep` suspends until `advance` passes its deadline (or the task is
/// cancelled), and records each requested duration, so tests see the schedule without waiting for it.
final class SteppedClock: Sendable {
    private struct Sleeper {
        let id: Int
        let deadline: UInt64
        let continuation: CheckedContinuation<Void, Error>
    }

    private struct State {
        var now: UInt64
        var sleepers: [Sleeper] = []
        var nextID = 0
        var requested: [UInt64] = []
    }

    private let state: Mutex<State>

    init(startMs: UInt64 = 1_700_000_000_000) {
        self.state = Mutex(State(now: startMs))
    }

    var nowMs: UInt64 { self.state.withLock { $0.now } }
    /// Every sleep asked for, in ms, in order.
    var requestedSleeps: [UInt64] { self.state.withLock { $0.requested } }
    var sleepCount: Int { self.state.withLock { $0.requested.count } }
    /// Sleeps waiting now.
    var pendingSleeps: Int { self.state.withLock { $0.sleepers.count } }
    /// Time left on the one pending sleep; `nil` unless exactly one is pending.
    var pendingRemainingMs: UInt64? {
        self.state.withLock { s in s.sleepers.count == 1 ? s.sleepers[0].deadline - s.now : nil }
    }

    var serviceClock: ServiceClock {
        ServiceClock(nowMs: { self.nowMs }, monotonicMs: { self.nowMs }, sleep: { try await self.sleep($0) })
    }

    func sleep(_ duration: Duration) async throws {
        let ms = RuntimeProbeSchedule.ms(duration)
        let id = self.state.withLock { s -> Int in
            s.nextID += 1
            s.requested.append(ms)
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let outcome = self.state.withLock { s -> Result<Void, Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if ms == 0 { return .success(()) }
                    s.sleepers.append(Sleeper(id: id, deadline: s.now + ms, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = self.state.withLock { s -> Sleeper? in
                guard let index = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes every sleep now due.
    func advance(ms: UInt64) {
        let due = self.state.withLock { s -> [Sleeper] in
            s.now += ms
            let due = s.sleepers.filter { $0.deadline <= s.now }
            s.sleepers.removeAll { $0.deadline <= s.now }
            return due
        }
        due.forEach { $0.continuation.resume() }
    }

    /// Waits until exactly one sleep of `ms` is pending, then advances by `ms`.
    func advanceWhenSleeping(ms: UInt64, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let ready = await eventually("a pending sleep of \(ms) ms", sourceLocation: sourceLocation) {
            self.state.withLock { s in s.sleepers.count == 1 && s.sleepers[0].deadline == s.now + ms }
        }
        try #require(ready)
        self.advance(ms: ms)
    }
}

/// A port nothing listens on: bound once, then released.
func closedPort() throws -> UInt16 {
    let server = SimpleHTTPServer { _, writer in writer.respond(status: 500) }
    let port = try server.start(port: 0)
    server.stop()
    return port
}
