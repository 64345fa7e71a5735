import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HomebaseCore
import HomebaseCrypto
import Synchronization

/// Round-trip times in one window, as the hostile checks report them.
public struct LatencyStats: Equatable, Sendable, CustomStringConvertible {
    public var count: Int
    /// Probes that got no answer within the probe timeout (counted in the percentiles as the timeout).
    public var lost: Int
    public var p50: Duration
    public var p99: Duration
    public var max: Duration

    /// Stats of `samples` (nil: no samples).
    public init?(_ samples: [Duration], lost: Int = 0) {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        func rank(_ q: Double) -> Duration {
            sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)]
        }
        self.count = sorted.count
        self.lost = lost
        self.p50 = rank(0.50)
        self.p99 = rank(0.99)
        self.max = sorted.last!
    }

    public var description: String {
        "p50 \(Self.ms(self.p50)) p99 \(Self.ms(self.p99)) max \(Self.ms(self.max)) ms (n=\(self.count)"
            + (self.lost > 0 ? ", \(self.lost) lost)" : ")")
    }

    static func ms(_ d: Duration) -> String {
        let v = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        return v < 10 ? String(format: "%.2f", v) : String(format: "%.1f", v)
    }
}

/// Something timing round trips on a thread of its own while attacks run.
protocol RoundTripProbe: AnyObject, Sendable {
    /// Samples so far (nil: none) and why the probe stopped, if it did; `reset` starts a new window.
    func take(reset: Bool) -> (stats: LatencyStats?, failure: String?)
    func stop()
}

/// A well-behaved client measuring its relay round trip while an attack runs: it logs in with a fresh key and
/// sends itself a small frame every `interval` (SEND without a receipt, timed until its DELIVER). Its own thread,
/// so a blocked attack never delays it; attack threads run at a lower priority (`HostileMonitor.lowerPriority`),
/// so on a small machine the figure is the relay's and not the scheduler's.
final class LatencyProbe: RoundTripProbe, @unchecked Sendable {
    static let timeout: Duration = .seconds(1)

    private let ws: RawWebSocket
    private let interval: Duration
    private let samples = Mutex<(rtts: [Duration], lost: Int, failure: String?)>(([], 0, nil))
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(url: RelayURL, token: String?, interval: Duration) throws {
        self.ws = try RawWebSocket.loggedIn(url, token: token)
        self.interval = interval
        let thread = Thread { [self] in
            self.loop()
            self.done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Samples so far; `reset` starts a new window.
    func take(reset: Bool) -> (stats: LatencyStats?, failure: String?) {
        self.samples.withLock { s in
            defer { if reset { s = ([], 0, s.failure) } }
            return (LatencyStats(s.rtts, lost: s.lost), s.failure)
        }
    }

    func stop() {
        self.stopping.store(true, ordering: .relaxed)
        self.done.wait()
        self.ws.close()
    }

    private func loop() {
        guard let me = self.ws.publicKey else { return }
        var seq: UInt64 = 0
        var next = ContinuousClock.now
        while !self.stopping.load(ordering: .relaxed) {
            seq &+= 1
            var payload = [UInt8](repeating: 0, count: 16)
            for i in 0..<8 { payload[i] = UInt8(truncatingIfNeeded: seq >> (UInt64(i) * 8)) }
            let started = ContinuousClock.now
            do {
                try self.ws.send(.send(sendID: 0, recipient: me, flags: 0, payload: payload[...]))
                if let rtt = try self.awaitEcho(payload, since: started) {
                    self.samples.withLock { $0.rtts.append(rtt) }
                } else {
                    self.samples.withLock { s in
                        s.rtts.append(Self.timeout)
                        s.lost += 1
                    }
                }
            } catch {
                self.samples.withLock { $0.failure = "the probe's connection failed: \(error)" }
                return
            }
            next = max(next + self.interval, .now)
            Thread.sleep(until: next)
        }
    }

    /// Waits for the DELIVER of `payload`; nil after `timeout`. Older echoes (of a lost probe) are skipped.
    private func awaitEcho(_ payload: [UInt8], since started: ContinuousClock.Instant) throws -> Duration? {
        let deadline = started + Self.timeout
        while true {
            let left = deadline - .now
            guard left > .zero else { return nil }
            switch try self.ws.next(timeout: left) {
            case .none: return nil
            case .frame(.deliver(_, _, let got)) where Array(got) == payload: return .now - started
            case .frame: continue
            case .some(let other): throw CheckFailure("\(other)")
            }
        }
    }
}

/// A well-behaved client timing the relay's durable store: a STORE frame to a key nobody is connected as, timed
/// until its RECEIPT 1 (written durably first, relay.md §5), every 100 ms. An attack that keeps the relay's
/// mailbox busy shows here and not in the live round trip.
final class StoreProbe: RoundTripProbe, @unchecked Sendable {
    static let timeout: Duration = .seconds(5)

    private let ws: RawWebSocket
    private let samples = Mutex<(rtts: [Duration], lost: Int, failure: String?)>(([], 0, nil))
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(url: RelayURL, token: String?) throws {
        self.ws = try RawWebSocket.loggedIn(url, token: token)
        let thread = Thread { [self] in
            self.loop()
            self.done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    func take(reset: Bool) -> (stats: LatencyStats?, failure: String?) {
        self.samples.withLock { s in
            defer { if reset { s = ([], 0, s.failure) } }
            return (LatencyStats(s.rtts, lost: s.lost), s.failure)
        }
    }

    func stop() {
        self.stopping.store(true, ordering: .relaxed)
        self.done.wait()
        self.ws.close()
    }

    private func loop() {
        // One mailbox, never read: a frame every 100 ms stays far inside its 1,000 frames for a run's minutes,
        // and expires with the relay's lifetime.
        let nobody = SigningSecretKey.generate().publicKey
        var id: UInt32 = 0
        var next = ContinuousClock.now
        while !self.stopping.load(ordering: .relaxed) {
            id &+= 1
            let started = ContinuousClock.now
            do {
                try self.ws.send(.send(sendID: id, recipient: nobody, flags: SendFlags.store, payload: [1]))
                var answered = false
                while !answered, ContinuousClock.now - started < Self.timeout {
                    guard case .frame(.receipt(let got, _)) = try self.ws.next(timeout: Self.timeout - (.now - started))
                    else { continue }
                    answered = got == id
                }
                self.samples.withLock { s in
                    s.rtts.append(answered ? .now - started : Self.timeout)
                    if !answered { s.lost += 1 }
                }
            } catch {
                self.samples.withLock { $0.failure = "the store probe's connection failed: \(error)" }
                return
            }
            next = max(next + .milliseconds(100), .now)
            Thread.sleep(until: next)
        }
    }
}

/// The machine's own scheduling delay, for reading the probes' figures on a shared machine: a thread of this
/// process sleeping 1 ms at a time, timed by how late it wakes. If it wakes as late as the probes' round trips
/// take, the time went to other work on the machine (the attack's threads, other processes), not to the relay.
final class SchedulerProbe: RoundTripProbe, @unchecked Sendable {
    private let samples = Mutex<[Duration]>([])
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in
            while !self.stopping.load(ordering: .relaxed) {
                let asked = ContinuousClock.now + .milliseconds(1)
                Thread.sleep(until: asked)
                let late = ContinuousClock.now - asked
                self.samples.withLock { $0.append(late) }
            }
            self.done.signal()
        }
        thread.stackSize = 1 << 18
        thread.start()
    }

    func take(reset: Bool) -> (stats: LatencyStats?, failure: String?) {
        self.samples.withLock { s in
            defer { if reset { s = [] } }
            return (LatencyStats(s), nil)
        }
    }

    func stop() {
        self.stopping.store(true, ordering: .relaxed)
        self.done.wait()
    }
}

extension Thread {
    static func sleep(until instant: ContinuousClock.Instant) {
        let left = instant - .now
        guard left > .zero else { return }
        Thread.sleep(forTimeInterval: Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
    }
}

/// The resident memory of the process under test: `/proc/PID/status` (VmRSS) when its pid is known (it runs on
/// this machine), else the `process_resident_memory_bytes` gauge of its `/metrics`, else nothing.
struct MemoryGauge: Sendable {
    var pid: Int32?
    var metrics: RelayURL?

    var isAvailable: Bool { self.pid != nil || self.metrics != nil }

    func residentBytes() -> Int? {
        if let pid { return Self.procResident(pid) }
        if let metrics { return Self.metricsResident(metrics) }
        return nil
    }

    /// CPU time the process has used (user + system), from /proc/PID/stat; nil without a pid.
    func cpuTime() -> Duration? {
        guard let pid, let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15, in clock ticks.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        return .milliseconds((user + system) * 1000 / max(1, ticks))
    }

    static func procResident(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, let kib = Int(fields[1]) else { return nil }
            return kib * 1024
        }
        return nil
    }

    /// GET /metrics over plain HTTP, the gauge's value.
    static func metricsResident(_ base: RelayURL) -> Int? {
        guard let socket = try? RawSocket.connect(host: base.host, port: base.port, timeout: .seconds(2)) else {
            return nil
        }
        defer { socket.close() }
        let request = "GET /metrics HTTP/1.1\r\nHost: \(base.hostHeader)\r\nConnection: close\r\n\r\n"
        guard (try? socket.send(Array(request.utf8), deadline: .now + .seconds(2))) == true else { return nil }
        var body: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(2)
        while case .bytes(let b) = socket.receive(timeout: deadline - .now) { body += b }
        let text = String(decoding: body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("process_resident_memory_bytes ") {
            return Double(line.split(separator: " ").last ?? "").map { Int($0) }
        }
        return nil
    }
}

/// What one attack window measured.
struct AttackWindow {
    /// Per probe (in the monitor's order): its round trips in the window, and why it stopped if it did.
    var latencies: [(stats: LatencyStats?, failure: String?)] = []
    var residentBefore: Int?
    var residentPeak: Int?
    var residentAfter: Int?
    /// CPU the process under test used in the window, and the window's length.
    var cpu: Duration?
    var elapsed: Duration = .zero

    /// Peak growth over the start of the window.
    var growth: Int? {
        guard let b = self.residentBefore, let p = self.residentPeak else { return nil }
        return p - b
    }
}

/// Runs attacks while a `LatencyProbe` measures the round trip and a sampler follows the memory of the process
/// under test, and judges each window against the limits.
final class HostileMonitor: @unchecked Sendable {
    struct Probe {
        /// How the figures name it (`relay probe`, `host probe`).
        var label: String
        var probe: any RoundTripProbe
        /// Its p99 during an attack must stay at most this; nil: a figure only (`SchedulerProbe`).
        var p99Limit: Duration?
    }

    let probes: [Probe]
    let gauge: MemoryGauge
    /// The shortest window `during` measures: long enough for every probe to sample (the store probe's every
    /// 100 ms), and what a quick attack left behind shows in the time after it too.
    let minimumWindow: Duration

    init(probes: [Probe], gauge: MemoryGauge, minimumWindow: Duration = .seconds(1)) {
        self.probes = probes
        self.gauge = gauge
        self.minimumWindow = minimumWindow
    }

    /// Lowers the calling thread's scheduling priority (nice +10; no privilege needed): attack threads yield
    /// the CPU to the relay and the probe, as an attacker on another machine would not take it from them.
    static func lowerPriority() {
        // On Linux the nice value is per thread, and `who` 0 is the calling thread.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
    }

    /// Runs `attack` on a thread of its own (lowered priority) while measuring; returns its result with the window.
    func during<T>(_ attack: @escaping () throws -> T) throws -> (T, AttackWindow) {
        for p in self.probes { _ = p.probe.take(reset: true) }
        var window = AttackWindow()
        window.residentBefore = self.gauge.residentBytes()
        let cpuBefore = self.gauge.cpuTime()
        let started = ContinuousClock.now
        let peak = Mutex<Int?>(window.residentBefore)
        let sampling = Atomic<Bool>(true)
        let sampler = DispatchSemaphore(value: 0)
        let gauge = self.gauge
        if gauge.isAvailable {
            Thread.detachNewThread {
                while sampling.load(ordering: .relaxed) {
                    if let r = gauge.residentBytes() { peak.withLock { $0 = Swift.max($0 ?? 0, r) } }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                sampler.signal()
            }
        }
        // The attack runs on its thread while this one waits for it, so handing it over (and its result back) is safe.
        let handOver = Unchecked((attack: attack, result: Result<T, any Error>?.none))
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            Self.lowerPriority()
            handOver.value.result = Result { try handOver.value.attack() }
            finished.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
        finished.wait()
        Thread.sleep(until: started + self.minimumWindow)
        sampling.store(false, ordering: .relaxed)
        if gauge.isAvailable { sampler.wait() }
        window.latencies = self.probes.map { $0.probe.take(reset: true) }
        window.residentAfter = self.gauge.residentBytes()
        window.elapsed = ContinuousClock.now - started
        if let before = cpuBefore, let after = self.gauge.cpuTime() { window.cpu = after - before }
        window.residentPeak = peak.withLock { p in [p, window.residentAfter].compactMap { $0 }.max() }
        return (try handOver.value.result!.get(), window)
    }

    /// PASS with `figures` and the window's, or FAIL naming every broken bound.
    func verdict(_ window: AttackWindow, problems: [String], figures: String, memoryBudget: Int) -> CheckOutcome {
        var problems = problems
        var parts = [figures]
        for (p, l) in zip(self.probes, window.latencies) {
            if let failure = l.failure { problems.append("\(p.label): \(failure)") }
            guard let stats = l.stats else {
                problems.append("the \(p.label) measured nothing")
                continue
            }
            parts.append("\(p.label) \(stats)")
            if let limit = p.p99Limit, stats.p99 > limit {
                problems.append("\(p.label) p99 \(LatencyStats.ms(stats.p99)) ms over \(LatencyStats.ms(limit)) ms")
            }
        }
        if let cpu = window.cpu, window.elapsed > .zero {
            parts.append(String(format: "CPU %.0f %% of a core", 100 * (cpu / window.elapsed)))
        }
        if let growth = window.growth {
            parts.append("RSS \(Self.mib(window.residentBefore!)) → peak \(Self.mib(window.residentPeak!)) MiB")
            if growth > memoryBudget {
                problems.append("memory grew \(Self.mib(growth)) MiB, over \(Self.mib(memoryBudget)) MiB")
            }
        }
        let text = parts.filter { !$0.isEmpty }.joined(separator: "; ")
        return problems.isEmpty ? .passed(text) : .fail(problems.joined(separator: "; ") + " [" + text + "]")
    }

    static func mib(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1_048_576) }
}

/// A value handed between two threads that never touch it at the same time (one waits for the other).
final class Unchecked<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
