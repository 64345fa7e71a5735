import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// inference-bench: load generator for tools/bench-inference. Loopback only, bounded waits.
//
//   inference-bench --code CODE --ollama URL [--model qwen2.5:7b] [--count 50] [--concurrency 100] [--rounds 3] [--sustain 1]
//                   [--envelope 2] [--homebase-pid PID] [--ollama-pid PID] [--relay-pid PID] [--out FILE]
//   inference-bench --cost-only 1      (the envelope layer's cost only, JSON on stdout)
//
// --envelope 1 makes the device a v1-only peer; 2 (the default) speaks v2 (Protocol/envelope.md §7), so its
// requests and the Homebase's answers ride a Noise session. Either way the report also carries the envelope
// layer's own cost, measured in this process: one v2 handshake (both sides), and sealing plus opening one
// chunk-sized message in v1 and in v2.
//
// It pairs itself with the Homebase named in CODE (a fresh device key, `pair.request` over the relay), then:
//   1. `count` sequential requests, each sent both straight to the emulator's /v1/chat/completions (SSE) and
//      through relay → Homebase → emulator (infer.request on sync_delta), same prompt, order alternating:
//      time to first non-empty text and tokens/s for both, and the added time to first token per pair;
//   2. `concurrency` streams at once through the Homebase (with --sustain K, kept in flight until K times as many
//      have run), with the CPU time of the Homebase, the emulator (and the relay) read from their process
//      CPU-time clocks (nanoseconds) around the window, then the same streams straight to the emulator; `rounds`
//      times, the median round reported with every round.
// Writes one JSON object to --out (or stdout) and prints a table to stderr.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("inference-bench: \(message)\n".utf8))
    exit(1)
}

// MARK: Arguments

var options: [String: String] = [:]
do {
    let args = Array(CommandLine.arguments.dropFirst())
    var i = 0
    while i < args.count {
        guard args[i].hasPrefix("--"), i + 1 < args.count else { fail("bad argument '\(args[i])'") }
        options[String(args[i].dropFirst(2))] = args[i + 1]
        i += 2
    }
}
// `--cost-only 1`: only the envelope layer's in-process cost (no relay, no Homebase), as JSON on stdout.
if options["cost-only"] == "1" {
    let json = try JSONSerialization.data(withJSONObject: envelopeCost(), options: [.sortedKeys])
    FileHandle.standardOutput.write(json + Data("\n".utf8))
    exit(0)
}
guard let codeText = options["code"], let code = try? PairingCode.parse(codeText) else { fail("--code CODE is required") }
guard let ollamaURL = options["ollama"] else { fail("--ollama URL is required") }
let model = options["model"] ?? "qwen2.5:7b"
let count = Int(options["count"] ?? "50") ?? 50
let concurrency = Int(options["concurrency"] ?? "100") ?? 100
/// The emulator's answer length (tokens), as the script passed it: for the report only.
let answerTokens = options["answer-tokens"] ?? "12-48"
/// `--prompt TEXT`: the base of every prompt (a number is appended); a real model needs one that makes it talk.
let basePrompt = options["prompt"]
/// `--cpu-target PERCENT`: the Homebase's CPU target over the runtime's (10 against the emulator; issue 35's is 5
/// against a real engine, whose CPU per token is the real cost).
let cpuTarget = Double(options["cpu-target"] ?? "10") ?? 10
/// `--engine NAME`: what the runtime is, for the table (`emulator`, `llama-server`).
let engineName = options["engine"] ?? "emulator"

// MARK: The device

let homebase = code.homebase
let key = SigningSecretKey.generate()
var linkOptions = RelayLink.Options()
linkOptions.connectTimeout = .seconds(5)
let envelopeVersion = Int(options["envelope"] ?? "2") ?? 2
guard envelopeVersion == 1 || envelopeVersion == 2 else { fail("--envelope is 1 or 2") }
let messenger = RelayMessenger(url: code.relayURL, key: key, seen: nil,
                               relation: { $0 == homebase ? .sibling : .stranger }, options: linkOptions,
                               logger: .discard(), speaksV2: envelopeVersion == 2)

/// What one remote request saw.
enum RemoteEvent: Sendable {
    case accept
    case chunk(String)
    case done(Usage)
    case error(String)
}

/// Routes inbound answers to the request that waits for them (by id) and pairing answers to the pairer.
final class Dispatcher: Sendable {
    let waiting = Mutex<[String: AsyncStream<RemoteEvent>.Continuation]>([:])
    let pairing = Mutex<CheckedContinuation<Message, Never>?>(nil)
    /// `infer.queued` messages received, all requests together (the Homebase tells a request still queued after
    /// 500 ms): how many of the load's requests waited that long.
    let queuedTells = Atomic<Int>(0)
    /// `infer.chunk` messages received: the Homebase's frames per request follow its read pacing.
    let chunks = Atomic<Int>(0)

    func register(_ id: String) -> AsyncStream<RemoteEvent> {
        let (stream, continuation) = AsyncStream<RemoteEvent>.makeStream()
        self.waiting.withLock { $0[id] = continuation }
        return stream
    }

    /// The pairing waiter, at most once.
    func takePairing() -> CheckedContinuation<Message, Never>? {
        self.pairing.withLock { c -> CheckedContinuation<Message, Never>? in
            defer { c = nil }
            return c
        }
    }

    func finish(_ id: String) { self.waiting.withLock { $0.removeValue(forKey: id) }?.finish() }

    func run() async {
        for await inbound in messenger.inbound where inbound.sender == homebase {
            let (id, event): (String, RemoteEvent)
            switch inbound.message {
            case .inferAccept(let a): (id, event) = (a.id, .accept)
            case .inferChunk(let c):
                self.chunks.add(1, ordering: .relaxed)
                (id, event) = (c.id, .chunk(c.text))
            case .inferDone(let d): (id, event) = (d.id, .done(d.usage))
            case .inferError(let e): (id, event) = (e.id, .error(e.code))
            case .inferQueued:
                self.queuedTells.add(1, ordering: .relaxed)
                continue
            case .pairAccept, .pairReject:
                self.takePairing()?.resume(returning: inbound.message)
                continue
            default: continue
            }
            _ = self.waiting.withLock { $0[id] }?.yield(event)
        }
    }
}
let dispatcher = Dispatcher()

/// One measured request: milliseconds from sending to the first non-empty text and to the end, and tokens.
struct Sample: Sendable {
    var ttftMs: Double
    var totalMs: Double
    var tokens: Int
    var error: String?
    /// Tokens after the first, per second of streaming (nil when there is nothing to divide).
    var tokensPerSecond: Double? {
        self.tokens > 1 && self.totalMs > self.ttftMs ? Double(self.tokens - 1) / ((self.totalMs - self.ttftMs) / 1000) : nil
    }
}

func nowMs() -> Double { Double(Posix.monotonicNs) / 1e6 }

func remote(_ prompt: String) async -> Sample {
    let id = SecureRandom.uuidString()
    let events = dispatcher.register(id)
    defer { dispatcher.finish(id) }
    let start = nowMs()
    let request = InferRequest(id: id, model: model, messages: [ChatMessage(role: "user", content: prompt)])
    messenger.send(.inferRequest(request), to: homebase, channel: .sibling, store: false) { outcome in
        if outcome.isFailure { dispatcher.waiting.withLock { $0[id] }?.yield(.error("receipt \(outcome)")) }
    }
    var first: Double?
    // Bounded: the watchdog that ends a stuck request.
    let watchdog = Task {
        try? await Task.sleep(for: .seconds(60))
        dispatcher.waiting.withLock { $0[id] }?.yield(.error("bench timeout"))
    }
    defer { watchdog.cancel() }
    for await event in events {
        switch event {
        case .accept: break
        case .chunk(let text): if first == nil, !text.isEmpty { first = nowMs() }
        case .done(let usage):
            let end = nowMs()
            return Sample(ttftMs: (first ?? end) - start, totalMs: end - start, tokens: usage.completionTokens)
        case .error(let code):
            return Sample(ttftMs: 0, totalMs: nowMs() - start, tokens: 0, error: code)
        }
    }
    return Sample(ttftMs: 0, totalMs: nowMs() - start, tokens: 0, error: "stream ended")
}

let http = HTTPClient()

func direct(_ prompt: String) async -> Sample {
    let body: [String: Any] = ["model": model, "stream": true, "stream_options": ["include_usage": true],
                               "messages": [["role": "user", "content": prompt]]]
    let bytes = [UInt8](try! JSONSerialization.data(withJSONObject: body))
    let start = nowMs()
    do {
        let (head, stream) = try await http.stream(HTTPRequest(
            method: "POST", url: ollamaURL + "/v1/chat/completions", headers: [("Content-Type", "application/json")],
            body: bytes, timeout: .seconds(60)))
        guard head.status == 200 else { return Sample(ttftMs: 0, totalMs: nowMs() - start, tokens: 0, error: "http \(head.status)") }
        var parser = SSEParser()
        var first: Double?
        var last = start
        var tokens = 0
        var contentChunks = 0
        for try await piece in stream {
            for event in try parser.append(piece) {
                if event.data == "[DONE]" {
                    let end = first == nil ? nowMs() : last
                    return Sample(ttftMs: (first ?? end) - start, totalMs: end - start,
                                  tokens: tokens > 0 ? tokens : contentChunks)
                }
                guard let object = try? JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any]
                else { continue }
                if let usage = object["usage"] as? [String: Any], let n = usage["completion_tokens"] as? Int {
                    tokens = n
                }
                let choices = object["choices"] as? [[String: Any]] ?? []
                if let delta = choices.first?["delta"] as? [String: Any], let text = delta["content"] as? String,
                    !text.isEmpty
                {
                    last = nowMs()
                    if first == nil { first = last }
                    contentChunks += 1
                }
            }
        }
        return Sample(ttftMs: 0, totalMs: nowMs() - start, tokens: 0, error: "no [DONE]")
    } catch {
        return Sample(ttftMs: 0, totalMs: nowMs() - start, tokens: 0, error: "\(error)")
    }
}

// MARK: /proc

/// CPU time of `pid` (every thread, live or ended) in milliseconds: its process CPU-time clock, read to the
/// nanosecond; /proc's utime + stime (whole clock ticks, 10 ms here: too coarse for a window in which the
/// Homebase spends ~40 ms) only if that clock cannot be had.
func cpuMs(_ pid: Int32?) -> Double? {
    guard let pid else { return nil }
    var clock = clockid_t()
    var now = timespec()
    if clock_getcpuclockid(pid, &clock) == 0, clock_gettime(clock, &now) == 0 {
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec) / 1_000_000
    }
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    let fields = text[text.index(close, offsetBy: 2)...].split(separator: " ")
    guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
    return (u + s) * 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// One thread of a process: its name, time on CPU (ns, /proc/PID/task/TID/schedstat) and context switches.
struct ThreadSample {
    var name: String
    var cpuNs: UInt64
    var switches: UInt64
}

/// Every live thread of `pid`, by thread id.
func threadSamples(_ pid: Int32?) -> [Int: ThreadSample] {
    guard let pid, let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [:] }
    var out: [Int: ThreadSample] = [:]
    for tid in tids {
        let dir = "/proc/\(pid)/task/\(tid)"
        guard let id = Int(tid),
            let sched = try? String(contentsOfFile: dir + "/schedstat", encoding: .utf8),
            let ns = sched.split(separator: " ").first.flatMap({ UInt64($0) }),
            let status = try? String(contentsOfFile: dir + "/status", encoding: .utf8)
        else { continue }
        var name = "?"
        var switches: UInt64 = 0
        for line in status.split(separator: "\n") {
            if line.hasPrefix("Name:") { name = line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
            if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                switches += line.split(separator: "\t").last.flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) } ?? 0
            }
        }
        out[id] = ThreadSample(name: name, cpuNs: ns, switches: switches)
    }
    return out
}

/// Per thread: CPU ms and context switches between two samples (threads born in between count from zero),
/// busiest first. Names are the kernel's 15-character `comm`: a thread named from outside keeps its creator's.
func threadDelta(_ before: [Int: ThreadSample], _ after: [Int: ThreadSample]) -> [(name: String, cpuMs: Double, switches: UInt64)] {
    after.map { tid, a in
        let b = before[tid]
        return (name: "\(a.name)#\(tid)", cpuMs: Double(a.cpuNs - min(a.cpuNs, b?.cpuNs ?? 0)) / 1e6,
                switches: a.switches - min(a.switches, b?.switches ?? 0))
    }.sorted { $0.cpuMs > $1.cpuMs }
}

/// The process's resident set (VmRSS), in KiB; nil if it cannot be read.
func residentKB(_ pid: Int32?) -> Int? {
    guard let pid, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
    return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let rank = max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)
    return sorted[min(rank, sorted.count - 1)]
}

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }
/// Two decimals, or JSON null for NaN and infinities (JSONSerialization refuses those).
func round2(_ v: Double) -> Any { v.isFinite ? (v * 100).rounded() / 100 : NSNull() }

// MARK: Run

let dispatchTask = Task { await dispatcher.run() }
messenger.start()
let connected = await { () async -> Bool in
    for _ in 0..<500 where !messenger.isConnected { try? await Task.sleep(for: .milliseconds(20)) }
    return messenger.isConnected
}()
guard connected else { fail("cannot connect to the relay at \(code.relayURL)") }

/// One `pair.request`: the Homebase's answer, or `.unknown` when it is offline or silent for 5 s.
func pairOnce() async -> Message {
    await withCheckedContinuation { (c: CheckedContinuation<Message, Never>) in
        dispatcher.pairing.withLock { $0 = c }
        messenger.send(.pairRequest(secret: code.secretHex, name: "inference-bench"), to: homebase, channel: .sibling,
                       store: false) { outcome in
            if outcome.isFailure { dispatcher.takePairing()?.resume(returning: .unknown(type: "offline")) }
        }
        Task {
            try? await Task.sleep(for: .seconds(5))
            dispatcher.takePairing()?.resume(returning: .unknown(type: "timeout"))
        }
    }
}

// Pair: retry while the Homebase is not yet on the relay.
var paired = false
for _ in 0..<100 where !paired {
    let answer = await pairOnce()
    switch answer {
    case .pairAccept: paired = true
    case .pairReject(let reason): fail("pairing rejected: \(reason)")
    default: try? await Task.sleep(for: .milliseconds(100))
    }
}
guard paired else { fail("the Homebase never answered the pairing request") }
FileHandle.standardError.write(Data("inference-bench: paired as \(key.publicKey.short)\n".utf8))
// What the Homebase's signed advert says (it speaks v2), recorded now rather than waiting for a heartbeat; a
// v1-only messenger ignores it.
messenger.recordEnvelopeVersions(EnvelopeVersions.supported, of: homebase)

// Warm up both paths (and wait for the Homebase's runtime to be verified).
var warm = false
for _ in 0..<150 where !warm {
    let s = await remote("warm up")
    if s.error == nil { warm = true } else { try? await Task.sleep(for: .milliseconds(200)) }
}
guard warm else { fail("the Homebase never served a request") }
for i in 0..<3 {
    _ = await direct("warm up \(i)")
    _ = await remote("warm up \(i)")
}

// 1. Sequential pairs.
var directSamples: [Sample] = []
var remoteSamples: [Sample] = []
var added: [Double] = []
for i in 0..<count {
    let prompt = basePrompt.map { "\($0) (\(i))" } ?? "bench prompt number \(i)"
    let d: Sample
    let r: Sample
    if i % 2 == 0 {
        d = await direct(prompt)
        r = await remote(prompt)
    } else {
        r = await remote(prompt)
        d = await direct(prompt)
    }
    directSamples.append(d)
    remoteSamples.append(r)
    if d.error == nil, r.error == nil { added.append(r.ttftMs - d.ttftMs) }
}
let sequentialErrors = (directSamples + remoteSamples).compactMap(\.error)

// 2. Concurrent streams through the Homebase, then (3.) the same load straight to the emulator for scale, in
// `rounds` rounds. The first round is the first burst after start: it also pays one-time costs (the Homebase's
// connections to the runtime, its allocator's first growth to 100 streams; the emulator's accepts). The
// headline is the median round; every round is reported.
let homebasePID = options["homebase-pid"].flatMap { Int32($0) }
let ollamaPID = options["ollama-pid"].flatMap { Int32($0) }
let relayPID = options["relay-pid"].flatMap { Int32($0) }
let rounds = max(1, Int(options["rounds"] ?? "3") ?? 3)
let sustain = max(1, Int(options["sustain"] ?? "1") ?? 1)
/// Streams a round runs: `concurrency` at a time.
let streamsPerRound = concurrency * sustain
func delta(_ a: Double?, _ b: Double?) -> Double? { a.flatMap { a in b.map { $0 - a } } }

/// One round's window through the Homebase and its direct window.
struct Round {
    var windowMs: Double
    var samples: [Sample]
    var homebaseCPU: Double?
    var ollamaCPU: Double?
    var relayCPU: Double?
    var threads: [(name: String, cpuMs: Double, switches: UInt64)]
    var directWindowMs: Double
    var directSamples: [Sample]
    var ollamaDirectCPU: Double?
    /// Homebase CPU as a percentage of the emulator's in the same window, and in its direct window.
    var percent: Double? { Self.percent(self.homebaseCPU, of: self.ollamaCPU) }
    var percentOfDirect: Double? { Self.percent(self.homebaseCPU, of: self.ollamaDirectCPU) }
    /// Streams of this round's window that completed.
    var completed: Int { self.samples.filter { $0.error == nil }.count }

    static func percent(_ part: Double?, of whole: Double?) -> Double? {
        part.flatMap { p in whole.flatMap { $0 > 0 ? 100 * p / $0 : nil } }
    }
}

/// `concurrency` requests at once, through the Homebase or straight to the emulator, each replaced by a new one as
/// it ends until `streamsPerRound` have run; their samples once all have ended.
func burst(throughHomebase: Bool, round: Int) async -> [Sample] {
    await withTaskGroup(of: Sample.self) { group in
        var started = 0
        func startOne() {
            let prompt = basePrompt.map { "\($0) (\(round).\(started))" } ?? "concurrent prompt \(round).\(started)"
            started += 1
            group.addTask { throughHomebase ? await remote(prompt) : await direct(prompt) }
        }
        while started < concurrency { startOne() }
        var out: [Sample] = []
        for await s in group {
            out.append(s)
            if started < streamsPerRound { startOne() }
        }
        return out
    }
}

var roundResults: [Round] = []
let residentBefore = residentKB(homebasePID)
for round in 0..<rounds {
    let cpuBefore = (cpuMs(homebasePID), cpuMs(ollamaPID), cpuMs(relayPID))
    let threadsBefore = threadSamples(homebasePID)
    let windowStart = nowMs()
    let samples = await burst(throughHomebase: true, round: round)
    let windowMs = nowMs() - windowStart
    let cpuAfter = (cpuMs(homebasePID), cpuMs(ollamaPID), cpuMs(relayPID))
    let threads = threadDelta(threadsBefore, threadSamples(homebasePID))

    let directCPUBefore = cpuMs(ollamaPID)
    let directWindowStart = nowMs()
    let directSamples = await burst(throughHomebase: false, round: round)
    roundResults.append(Round(
        windowMs: windowMs, samples: samples, homebaseCPU: delta(cpuBefore.0, cpuAfter.0),
        ollamaCPU: delta(cpuBefore.1, cpuAfter.1), relayCPU: delta(cpuBefore.2, cpuAfter.2), threads: threads,
        directWindowMs: nowMs() - directWindowStart, directSamples: directSamples,
        ollamaDirectCPU: delta(directCPUBefore, cpuMs(ollamaPID))))
}
let residentAfter = residentKB(homebasePID)
/// Whether a process's cost per round grows with the requests served (a long run: `--rounds 30` or more): the median
/// CPU of the first third of the rounds against that of the last third. A cost that grew with every request (a
/// thunk chain read per batch) added half over 20,000 requests; rounds of one run otherwise agree within a few %.
struct Drift {
    let name: String
    let roundsPerThird: Int
    let first: Double
    let last: Double
    var changePercent: Double { (self.last / self.first - 1) * 100 }

    init?(_ name: String, _ cpu: [Double?]) {
        let known = cpu.compactMap { $0 }  // nil only when the process's CPU clock cannot be read
        guard known.count >= 6 else { return nil }
        self.name = name
        self.roundsPerThird = known.count / 3
        self.first = median(Array(known.prefix(self.roundsPerThird)))
        self.last = median(Array(known.suffix(self.roundsPerThird)))
    }
}
/// The Homebase's; the relay's, the other long-running server on the path; and the emulator's, which serves every
/// request afresh: its drift is the machine's, against which the other two read.
let drifts = [Drift("Homebase", roundResults.map(\.homebaseCPU)), Drift("relay", roundResults.map(\.relayCPU)),
              Drift("emulator", roundResults.map(\.ollamaCPU))].compactMap { $0 }
/// The round with the median figure against the same window (the lower middle one for an even count).
let medianIndex = roundResults.indices.sorted {
    (roundResults[$0].percent ?? .infinity) < (roundResults[$1].percent ?? .infinity)
}[(rounds - 1) / 2]
let medianRound = roundResults[medianIndex]
let completedAllRounds = roundResults.reduce(0) { $0 + $1.completed }
var concurrentErrors: [String: Int] = [:]
for s in roundResults.flatMap(\.samples) { if let e = s.error { concurrentErrors[e, default: 0] += 1 } }

messenger.stop()
dispatchTask.cancel()

// MARK: Report

func stats(_ samples: [Sample]) -> [String: Any] {
    let ok = samples.filter { $0.error == nil }
    let tps = ok.compactMap(\.tokensPerSecond)
    return ["count": samples.count, "errors": samples.count - ok.count,
            "ttft_ms_p50": round2(median(ok.map(\.ttftMs))), "ttft_ms_p99": round2(percentile(ok.map(\.ttftMs), 0.99)),
            "total_ms_p50": round2(median(ok.map(\.totalMs))), "tokens_per_s_p50": round2(median(tps))]
}

let ds0 = stats(directSamples)
let rs0 = stats(remoteSamples)
let addedP50 = median(added)
let addedP99 = percentile(added, 0.99)
let cpuPercent = medianRound.percent
// The emulator spends more CPU serving the Homebase (whose paced reads cost its kernel more window updates)
// than serving the same load straight: the figure against its direct window is the stricter one.
let cpuPercentOfDirect = medianRound.percentOfDirect
let allCompleted = completedAllRounds == rounds * streamsPerRound
// The envelope layer's own cost, in this process (no I/O): medians of many runs.
func envelopeCost() -> [String: Any] {
    func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
    func us(_ body: () -> Void) -> Double {
        let t = Posix.monotonicNs
        body()
        return Double(Posix.monotonicNs - t) / 1000
    }
    let a = SigningSecretKey.generate(), b = SigningSecretKey.generate()
    let chunk = Message.inferChunk(InferChunk(id: SecureRandom.uuidString(), seq: 7, text: " a few tokens of text"))
    var handshakes: [Double] = []
    var ta = try! SessionTable(identity: a), tb = try! SessionTable(identity: b)
    for i in 0..<200 {
        handshakes.append(us {
            let m1 = try! ta.initiate(to: b.publicKey, channel: .sibling, sessionID: SecureRandom.publicBytes(8),
                                      ephemeral: .generate(), messageID: SecureRandom.publicBytes(16),
                                      sentAtMs: UInt64(i), nowMs: 1)
            guard case .success(.initiation(let r)) = tb.receive(
                try! SessionEnvelope(decoding: m1[...]), nowMs: 1, ephemeral: { .generate() },
                replyMessageID: { SecureRandom.publicBytes(16) }, replySentAtMs: 1) else { fail("handshake") }
            tb.commit(r)
            guard case .success(.established) = ta.receive(
                try! SessionEnvelope(decoding: r.reply[...]), nowMs: 1, ephemeral: { .generate() },
                replyMessageID: { [] }, replySentAtMs: 1) else { fail("handshake") }
        })
    }
    let e2e = try! E2E.deriveKey(selfSecret: a, peer: b.publicKey)
    var v1: [Double] = [], v2: [Double] = []
    // Interleaved batches, so the machine's noise falls on both alike; the medians are reported.
    for _ in 0..<40 {
        v1.append(us {
            for _ in 0..<250 {
                var out: [UInt8] = []
                EnvelopeSealer.seal(channel: .sibling, sender: a.publicKey, recipient: b.publicKey,
                                    messageID: SecureRandom.publicBytes(16), sentAtMs: 1,
                                    nonce: SecureRandom.publicBytes(24), key: e2e, appendingTo: &out,
                                    plaintext: { chunk.appendJSON(to: &$0) })
                let opened = try! EnvelopeSealer.open(try! Envelope(decoding: out), key: e2e)
                _ = try! Message(json: EnvelopePadding.unpad(opened))
            }
        } / 250)
        v2.append(us {
            for _ in 0..<250 {
                var out: [UInt8] = []
                _ = ta.sealTransport(to: b.publicKey, channel: .sibling, messageID: SecureRandom.publicBytes(16),
                                     sentAtMs: 1, nowMs: 1, appendingTo: &out, plaintext: { chunk.appendJSON(to: &$0) })
                guard case .success(.transport(_, let p)) = tb.receive(
                    try! SessionEnvelope(decoding: out[...]), nowMs: 1, ephemeral: { .generate() },
                    replyMessageID: { [] }, replySentAtMs: 1) else { fail("transport") }
                _ = try! Message(json: EnvelopePadding.unpad(p))
            }
        } / 250)
    }
    return ["handshake_us_p50": round2(median(handshakes)), "chunk_seal_open_us_v1": round2(median(v1)),
            "chunk_seal_open_us_v2": round2(median(v2)), "chunk_v2_over_v1": round2(median(v2) / median(v1))]
}
let envelopeCosts = envelopeCost()

var report: [String: Any] = [
    "model": model,
    "envelope": ["version": envelopeVersion, "messenger": messenger.sessionCounts.initiated > 0 ? "v2 session" : "v1",
                 "cost": envelopeCosts] as [String: Any],
    "answer_tokens": answerTokens,
    "sequential": [
        "count": count, "direct": stats(directSamples), "through_homebase": stats(remoteSamples),
        "added_ttft_ms_p50": round2(addedP50), "added_ttft_ms_p99": round2(addedP99),
        "added_ttft_ms_min": round2(added.min() ?? .nan), "added_ttft_ms_max": round2(added.max() ?? .nan),
        "errors": Array(Set(sequentialErrors)),
        "targets": ["added_ttft_ms_p50_max": 5, "added_ttft_ms_p99_max": 20],
        "pass_p50": addedP50 <= 5, "pass_p99": addedP99 <= 20,
    ] as [String: Any],
    "concurrent": [
        "streams": concurrency, "sustain": sustain, "streams_per_round": streamsPerRound, "rounds": rounds,
        "completed": medianRound.completed, "errors": concurrentErrors,
        "per_round": roundResults.map {
            ["window_ms": round2($0.windowMs), "completed": $0.completed,
             "homebase_cpu_ms": round2($0.homebaseCPU ?? .nan), "emulator_cpu_ms": round2($0.ollamaCPU ?? .nan),
             "emulator_cpu_ms_direct": round2($0.ollamaDirectCPU ?? .nan), "relay_cpu_ms": round2($0.relayCPU ?? .nan),
             "homebase_cpu_percent_of_emulator": round2($0.percent ?? .nan),
             "homebase_cpu_percent_of_emulator_direct": round2($0.percentOfDirect ?? .nan)] as [String: Any]
        },
        "median_round": medianIndex,
        "completed_all_rounds": completedAllRounds,
        "queued_tells_all_rounds": dispatcher.queuedTells.load(ordering: .relaxed),
        "chunks_received_whole_run": dispatcher.chunks.load(ordering: .relaxed),
        "window_ms": round2(medianRound.windowMs), "through_homebase": stats(medianRound.samples),
        "homebase_cpu_ms": round2(medianRound.homebaseCPU ?? .nan), "emulator_cpu_ms": round2(medianRound.ollamaCPU ?? .nan),
        "relay_cpu_ms": round2(medianRound.relayCPU ?? .nan),
        "homebase_rss_kb_before": residentBefore ?? -1, "homebase_rss_kb_after": residentAfter ?? -1,
        "drift": Dictionary(uniqueKeysWithValues: drifts.map {
            ($0.name.lowercased(), ["rounds_per_third": $0.roundsPerThird, "first_third_cpu_ms": round2($0.first),
                                    "last_third_cpu_ms": round2($0.last)] as [String: Any])
        }),
        "homebase_cpu_percent_of_emulator": round2(cpuPercent ?? .nan),
        "homebase_cpu_percent_of_emulator_direct": round2(cpuPercentOfDirect ?? .nan),
        "target_percent_max": 10, "pass": allCompleted && (cpuPercent ?? .infinity) <= 10,
        "direct_window_ms": round2(medianRound.directWindowMs), "emulator_cpu_ms_direct": round2(medianRound.ollamaDirectCPU ?? .nan),
        "direct": stats(medianRound.directSamples),
        "homebase_threads": medianRound.threads.map {
            ["name": $0.name, "cpu_ms": round2($0.cpuMs), "context_switches": $0.switches] as [String: Any]
        },
    ] as [String: Any],
]
// Per request and per token (issue 35): the Homebase's CPU against the engine's over the median round's window.
let roundTokens = Double(medianRound.samples.filter { $0.error == nil }.reduce(0) { $0 + $1.tokens })
let roundRequests = Double(medianRound.completed)
let directTPS = ds0["tokens_per_s_p50"] as? Double
let remoteTPS = rs0["tokens_per_s_p50"] as? Double
let tpsRatio = directTPS.flatMap { d in remoteTPS.map { d > 0 ? $0 / d : .nan } }
report["per_token"] = [
    "tokens_in_median_round": roundTokens, "requests_in_median_round": roundRequests,
    "homebase_cpu_ms_per_request": round2((medianRound.homebaseCPU ?? .nan) / roundRequests),
    "homebase_cpu_ms_per_token": round2((medianRound.homebaseCPU ?? .nan) / roundTokens),
    "engine_cpu_ms_per_request": round2((medianRound.ollamaCPU ?? .nan) / roundRequests),
    "engine_cpu_ms_per_token": round2((medianRound.ollamaCPU ?? .nan) / roundTokens),
    "tokens_per_s_ratio": round2(tpsRatio ?? .nan), "target_tokens_per_s_ratio_min": 0.95,
    "cpu_target_percent_max": cpuTarget,
] as [String: Any]
report["pass"] = addedP50 <= 5 && addedP99 <= 20 && allCompleted && (cpuPercent ?? .infinity) <= cpuTarget
    && (basePrompt == nil || (tpsRatio ?? 0) >= 0.95)

let json = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys])
if let out = options["out"] {
    guard FileManager.default.createFile(atPath: out, contents: json) else { fail("cannot write \(out)") }
} else {
    FileHandle.standardOutput.write(json + Data("\n".utf8))
}

func f(_ v: Double?) -> String { v.map { String(format: "%.2f", $0) } ?? "n/a" }
let ds = stats(directSamples)
let rs = stats(remoteSamples)
let table = """

    inference bench (\(model), answers of \(answerTokens) tokens, \(count) sequential pairs, \(concurrency) concurrent streams\(
        sustain > 1 ? " kept in flight for \(streamsPerRound)" : "");
    the streams' rows are the median of \(rounds) rounds)
    envelope: v\(envelopeVersion) (\(messenger.sessionCounts.initiated) handshake(s), \(messenger.sessionCounts.sealed) sealed, \(messenger.sessionCounts.opened) opened on sessions);
    in-process: handshake \(f(envelopeCosts["handshake_us_p50"] as? Double)) us, chunk seal+open v1 \(f(envelopeCosts["chunk_seal_open_us_v1"] as? Double)) us, v2 \(f(envelopeCosts["chunk_seal_open_us_v2"] as? Double)) us
    | measure                               | direct     | via Homebase | target      |
    |---------------------------------------|------------|--------------|-------------|
    | TTFT p50 (ms)                         | \(f(ds["ttft_ms_p50"] as? Double).padding(10)) | \(f(rs["ttft_ms_p50"] as? Double).padding(12)) |             |
    | TTFT p99 (ms)                         | \(f(ds["ttft_ms_p99"] as? Double).padding(10)) | \(f(rs["ttft_ms_p99"] as? Double).padding(12)) |             |
    | tokens/s p50                          | \(f(ds["tokens_per_s_p50"] as? Double).padding(10)) | \(f(rs["tokens_per_s_p50"] as? Double).padding(12)) |             |
    | added TTFT p50 (ms)                   |            | \(f(addedP50).padding(12)) | <= 5 \((addedP50 <= 5 ? "ok" : "MISS").padding(6)) |
    | added TTFT p99 (ms)                   |            | \(f(addedP99).padding(12)) | <= 20 \((addedP99 <= 20 ? "ok" : "MISS").padding(5)) |
    | \("\(concurrency) streams: completed, all rounds".padding(37)) |            | \("\(completedAllRounds) of \(rounds * streamsPerRound)".padding(12)) |             |
    | \("\(concurrency) streams: Homebase CPU (ms)".padding(37)) |            | \(f(medianRound.homebaseCPU).padding(12)) |             |
    | \("\(concurrency) streams: emulator CPU (ms)".padding(37)) | \(f(medianRound.ollamaDirectCPU).padding(10)) | \(f(medianRound.ollamaCPU).padding(12)) |             |
    | \("\(concurrency) streams: relay CPU (ms)".padding(37)) |            | \(f(medianRound.relayCPU).padding(12)) |             |
    | Homebase CPU as % of emulator's       |            | \(f(cpuPercent).padding(12)) | <= 10 \(((cpuPercent ?? .infinity) <= 10 ? "ok" : "MISS").padding(5)) |
    | ... of the emulator's direct window   |            | \(f(cpuPercentOfDirect).padding(12)) | <= 10 \(((cpuPercentOfDirect ?? .infinity) <= 10 ? "ok" : "MISS").padding(5)) |

    """
FileHandle.standardError.write(Data(table.utf8))
if basePrompt != nil {
    let r = tpsRatio ?? .nan
    let perToken = """
        real engine (\(engineName)), median round of \(Int(roundRequests)) answers, \(Int(roundTokens)) tokens:
          tokens/s via Homebase over direct: \(f(r)) (target >= 0.95 \(r >= 0.95 ? "ok" : "MISS"))
          Homebase CPU: \(f((medianRound.homebaseCPU ?? .nan) / roundRequests)) ms per request, \(f((medianRound.homebaseCPU ?? .nan) / roundTokens)) ms per token
          engine CPU:   \(f((medianRound.ollamaCPU ?? .nan) / roundRequests)) ms per request, \(f((medianRound.ollamaCPU ?? .nan) / roundTokens)) ms per token
          Homebase CPU as % of the engine's: \(f(cpuPercent)) (target <= \(f(cpuTarget)) \((cpuPercent ?? .infinity) <= cpuTarget ? "ok" : "MISS"))

        """
    FileHandle.standardError.write(Data(perToken.utf8))
}
var roundTable = "Rounds (Homebase ms / emulator ms same window / emulator ms direct = % / % of direct):\n"
for (i, r) in roundResults.enumerated() {
    let done = r.completed
    roundTable += "  \(i + 1)\(i == 0 ? " (first after start)" : ""): \(f(r.homebaseCPU)) / \(f(r.ollamaCPU)) / \(f(r.ollamaDirectCPU))"
        + " = \(f(r.percent)) % / \(f(r.percentOfDirect)) %"
        + "\(done == streamsPerRound ? "" : ", \(done) of \(streamsPerRound) completed")\n"
}
for d in drifts {
    roundTable += "Drift: \(d.name) ms per round, median of the first \(d.roundsPerThird) rounds \(f(d.first)), of the"
        + " last \(d.roundsPerThird) \(f(d.last)) (\(String(format: "%+.1f", d.changePercent)) %)\n"
}
if let before = residentBefore, let after = residentAfter {
    roundTable += "Homebase resident memory: \(before / 1024) MiB before the rounds, \(after / 1024) MiB after\n"
}
FileHandle.standardError.write(Data(roundTable.utf8))
// Where the Homebase's CPU went during the median round's window, per thread name (schedstat, ns resolution).
var threadTable = "Homebase threads, \(concurrency) streams\(sustain > 1 ? " in flight, \(streamsPerRound) in all" : ""):\n" + medianRound.threads.filter { $0.cpuMs >= 0.05 }
    .map { "  \($0.name.padding(24)) \(f($0.cpuMs).padding(8)) ms  \($0.switches) switches\n" }.joined()
threadTable += "  total \(f(medianRound.threads.reduce(0) { $0 + $1.cpuMs })) ms, \(medianRound.threads.reduce(0) { $0 + $1.switches }) switches\n"
FileHandle.standardError.write(Data(threadTable.utf8))

extension String {
    func padding(_ width: Int) -> String { self.count >= width ? self : self + String(repeating: " ", count: width - self.count) }
}
