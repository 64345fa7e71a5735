import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseDevice
import HomebaseNode
import HomebaseRouter
import HomebaseService
import HomebaseTransport
import OllamaEmulatorKit
import RelayService
import Testing

// The in-process parts of one end-to-end system: a real relay on 127.0.0.1, the Ollama emulator, a Homebase
// daemon (`HomebaseRunner`) on a temporary state directory, and handsets (`DeviceSession`) on their own
// temporary state directories. Everything talks over real loopback sockets.

struct IntegrationFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { self.description = d }
}

/// A fresh temporary directory, removed by `remove()`.
func temporaryDirectory(_ label: String) -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("integ-\(label)-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
func eventually(_ timeout: Duration, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
}

/// A relay on its own thread. `port` 0 picks a free port; a restarted relay passes the old port.
final class IntegrationRelay: @unchecked Sendable {
    let server: RelayServer
    let dataDirectory: String
    private let finished = DispatchSemaphore(value: 0)

    init(port: UInt16 = 0, dataDirectory: String? = nil, limits: RelayLimits = RelayLimits()) throws {
        let dir = dataDirectory ?? temporaryDirectory("relay")
        self.dataDirectory = dir
        var c = RelayConfiguration()
        c.limits = limits
        c.listenHost = "127.0.0.1"
        c.listenPort = port
        c.dataDirectory = dir
        c.durability = "normal"
        let server = try RelayServer(configuration: c, admission: Admission(), logger: .discard())
        self.server = server
        let done = self.finished
        Thread {
            server.run()
            done.signal()
        }.start()
    }

    var port: UInt16 { self.server.port }
    var url: String { "ws://127.0.0.1:\(self.server.port)/v1/relay" }

    private let stopped = NSLock()
    private var isStopped = false

    /// Stops the relay and waits for its thread. Idempotent.
    func stop() {
        self.stopped.lock()
        defer { self.stopped.unlock() }
        guard !self.isStopped else { return }
        self.isStopped = true
        self.server.shutdown()
        self.finished.wait()
    }
}

/// The Ollama emulator on a free port.
final class IntegrationOllama: Sendable {
    let emulator: OllamaEmulator
    let port: UInt16

    init(tokensPerSecond: Double = 400, firstTokenMs: Int = 0, port: UInt16 = 0,
         configure: (inout EmulatorConfiguration) -> Void = { _ in }) throws {
        var c = EmulatorConfiguration()
        c.host = "127.0.0.1"
        c.tokensPerSecond = tokensPerSecond
        c.firstTokenMs = firstTokenMs
        c.models = ["qwen2.5:7b", "llama3.2:3b"]
        configure(&c)
        self.emulator = OllamaEmulator(configuration: c)
        self.port = try self.emulator.start(port: port)
    }

    var url: String { "http://127.0.0.1:\(self.port)" }

    func stop() { self.emulator.stop() }

    /// What the emulator generates for `prompt` (markers already removed): the reference answer.
    static func expectedText(_ prompt: String) -> String { TextGenerator(prompt: prompt).tokens.joined() }
}

/// A Homebase daemon on a temporary state directory, running `HomebaseRunner` in a task.
final class IntegrationHomebase: Sendable {
    let directory: String
    let state: HomebaseState
    let runner: HomebaseRunner
    let publicKey: PublicKey
    private let task: Task<Void, Never>

    init(relayURL: String, ollamaURL: String, directory: String? = nil,
         configure: (inout HomebaseRunner.Options) -> Void = { _ in }) throws {
        let dir = directory ?? temporaryDirectory("homebase")
        self.directory = dir
        self.state = try HomebaseState(path: dir + "/state.db")
        if try !self.state.isInitialized {
            _ = try self.state.initialize(
                settings: HomebaseSettings(relayURL: relayURL, ollamaURL: ollamaURL, deviceName: "integ-homebase"),
                nowMs: Posix.wallClockMs)
        }
        self.publicKey = try self.state.deviceKey().publicKey
        var options = HomebaseRunner.Options()
        // Short runtime re-verification so the fault tests see the monitor react within a second or two.
        options.monitor.reverifyDelay = .milliseconds(100)
        options.monitor.firstRetryDelay = .milliseconds(300)
        options.monitor.maxRetryDelay = .seconds(1)
        options.relayOptions.connectTimeout = .seconds(2)
        options.daemon.statePollInterval = .milliseconds(200)
        configure(&options)
        let runner = HomebaseRunner(state: self.state, options: options, logger: .discard())
        self.runner = runner
        self.task = Task {
            do { try await runner.run() } catch { Issue.record("HomebaseRunner.run threw \(error)") }
        }
    }

    /// A fresh pairing code, issued `ageMs` ago (so `PairingService.codeLifetimeMs` or more makes it expired).
    func pairingCode(ageMs: UInt64 = 0) throws -> String {
        try PairingService(state: self.state).createPairingCode(
            relayURL: try self.state.settings().relayURL, nowMs: Posix.wallClockMs - ageMs)
    }

    /// The running daemon's status (written at start and on change); nil when it does not run.
    var daemonStatus: DaemonStatus? { self.state.liveDaemonStatus() }

    /// Stops the daemon and waits until `run()` returned.
    func stop() async {
        self.runner.stop()
        await self.task.value
    }
}

/// A handset: a `DeviceSession` on its own state directory with the real relay messenger and no HTTP
/// providers (so the on-device fallback is the floor, which answers at once and deterministically).
final class IntegrationHandset: Sendable {
    let directory: StateDirectory
    let session: DeviceSession

    init(relayURL: String, watchdogs: InferenceClientStateMachine.Watchdogs? = nil, directory: String? = nil) throws {
        self.directory = StateDirectory(explicit: directory ?? temporaryDirectory("handset"), tool: "handset")
        if !self.directory.exists {
            try DeviceSession.initialize(directory: self.directory, relayURL: relayURL, name: "integ-handset")
        }
        var options = DeviceSession.Options()
        if let watchdogs { options.watchdogs = watchdogs }
        self.session = try DeviceSession(directory: self.directory, tool: "handset", http: .unavailable,
                                         options: options)
    }

    /// Connects, pairs with `code` (retrying while the Homebase is not yet on the relay), selects
    /// `model` on its own Homebase and waits until its advert makes the route `external`.
    func pairAndSelect(code text: String, model: String = "qwen2.5:7b") async throws {
        if case .failure(let failure) = try await self.pair(code: text) {
            throw IntegrationFailure("pairing failed: \(failure)")
        }
        let code = try PairingCode.parse(text)
        try self.session.settings.setModelSource(.external)
        try self.session.settings.setExternalRuntime(.ollama)
        try self.session.settings.setExternalSelection(ExternalSelection(tag: model, host: .own))
        let routed = await eventually(.seconds(10)) {
            if self.session.router.resolution().route == .external { return true }
            await self.session.refreshAdvert(from: code.homebase, channel: .sibling, timeout: .milliseconds(300))
            return self.session.router.resolution().route == .external
        }
        guard routed else {
            throw IntegrationFailure("no usable advert: \(self.session.router.resolution())")
        }
    }

    /// One chat; the events it streamed (in order) and the answer.
    func chat(_ prompt: String) async -> (events: [ChatStreamEvent], answer: ChatAnswer, times: [UInt64]) {
        let events = EventLog()
        let answer = await self.session.chat(ChatRequest(messages: [.user(prompt)])) { events.append($0) }
        return (events.all, answer, events.arrivalTimes)
    }

    /// Asks the paired Homebase for its advert (waits at most `timeout`).
    func refreshAdvert(timeout: Duration = .milliseconds(500)) async {
        guard let homebase = self.session.account.homebase else { return }
        await self.session.refreshAdvert(from: homebase, channel: .sibling, timeout: timeout)
    }

    /// Connects and sends one `pair.request` for `code`, retrying while the Homebase is not on the relay.
    func pair(code text: String) async throws -> Result<RosterPayload, PairingFailure> {
        guard await self.session.connect(timeout: .seconds(5)) else { throw IntegrationFailure("handset: no relay") }
        let code = try PairingCode.parse(text)
        for _ in 0..<50 {
            do {
                return .success(try await self.session.account.pair(
                    code: code, name: "integ-handset", messenger: self.session.messenger, timeout: .seconds(5)))
            } catch .homebaseOffline {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                return .failure(error)
            }
        }
        throw IntegrationFailure("the Homebase never came online to pair")
    }

    func stop() { self.session.stop() }
}

/// Collects stream events with their arrival times (monotonic ms).
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [ChatStreamEvent] = []
    private var times: [UInt64] = []

    func append(_ event: ChatStreamEvent) {
        self.lock.lock()
        defer { self.lock.unlock() }
        self.events.append(event)
        self.times.append(Posix.monotonicMs)
    }

    var arrivalTimes: [UInt64] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.times
    }

    var all: [ChatStreamEvent] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.events
    }
}

extension [ChatStreamEvent] {
    /// The text pieces streamed before the first `.restart` (or all of them when none).
    var textBeforeRestart: [String] {
        var out: [String] = []
        for event in self {
            if case .restart = event { break }
            if case .text(let t) = event { out.append(t) }
        }
        return out
    }

    /// The text pieces after the last `.restart`.
    var textAfterRestart: [String] {
        guard let i = self.lastIndex(where: { if case .restart = $0 { true } else { false } }) else { return [] }
        return self[(i + 1)...].compactMap { if case .text(let t) = $0 { t } else { nil } }
    }

    var restartReasons: [String] {
        self.compactMap { if case .restart(let r) = $0 { r.rawValue } else { nil } }
    }
}

/// The three parts every scenario needs, stopped together.
struct IntegrationSystem {
    let relay: IntegrationRelay
    let ollama: IntegrationOllama
    let homebase: IntegrationHomebase
    let handset: IntegrationHandset

    /// Starts everything and pairs the handset; `watchdogs` shortens the handset's ladder.
    static func start(watchdogs: InferenceClientStateMachine.Watchdogs? = nil, tokensPerSecond: Double = 400,
                      relayLimits: RelayLimits = RelayLimits(),
                      ollama configureOllama: (inout EmulatorConfiguration) -> Void = { _ in },
                      homebase configureHomebase: (inout HomebaseRunner.Options) -> Void = { _ in },
                      model: String = "qwen2.5:7b") async throws -> IntegrationSystem {
        let relay = try IntegrationRelay(limits: relayLimits)
        let ollama = try IntegrationOllama(tokensPerSecond: tokensPerSecond, configure: configureOllama)
        let homebase = try IntegrationHomebase(relayURL: relay.url, ollamaURL: ollama.url,
                                               configure: configureHomebase)
        let handset = try IntegrationHandset(relayURL: relay.url, watchdogs: watchdogs)
        let system = IntegrationSystem(relay: relay, ollama: ollama, homebase: homebase, handset: handset)
        do {
            try await handset.pairAndSelect(code: try homebase.pairingCode(), model: model)
        } catch {
            await system.stop()
            throw error
        }
        return system
    }

    func stop() async {
        self.handset.stop()
        await self.homebase.stop()
        self.ollama.stop()
        self.relay.stop()
    }
}

extension IntegrationSystem {
    /// Starts a paired system, runs `body`, and stops everything whether `body` returned or threw.
    static func with<T>(watchdogs: InferenceClientStateMachine.Watchdogs? = nil, tokensPerSecond: Double = 400,
                        relayLimits: RelayLimits = RelayLimits(),
                        ollama configureOllama: (inout EmulatorConfiguration) -> Void = { _ in },
                        homebase configureHomebase: (inout HomebaseRunner.Options) -> Void = { _ in },
                        model: String = "qwen2.5:7b",
                        _ body: (IntegrationSystem) async throws -> T) async throws -> T {
        let system = try await Self.start(watchdogs: watchdogs, tokensPerSecond: tokensPerSecond,
                                          relayLimits: relayLimits, ollama: configureOllama,
                                          homebase: configureHomebase, model: model)
        do {
            let value = try await body(system)
            await system.stop()
            return value
        } catch {
            await system.stop()
            throw error
        }
    }
}
