import Dispatch
import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// relay-bench: load generator for tools/bench-relay. Loopback only, bounded loops, one JSON line on stdout.
//
//   relay-bench throughput --url URL [--pairs 4] [--seconds 3] [--payload 256] [--receipts] [--server-pid PID]
//   relay-bench rtt        --url URL [--count 5000] [--payload 256] [--self]
//   relay-bench idle       --url URL [--connections 10000] [--threads 8] --server-pid PID
//   relay-bench paced      --url URL [--rate 20000] [--seconds 3] [--payload 256] [--protocol relay|mqtt] [--server-pid PID]
//
// With --server-pid the server's utime+stime (/proc/PID/stat) and VmRSS (/proc/PID/status) are read around the
// measured window, so the CPU and memory figures cover exactly the frames or connections counted here.

let usage = """
    Usage: relay-bench throughput|rtt|idle --url ws://127.0.0.1:PORT/v1/relay [options]
      throughput: --pairs N (4) --seconds S (3) --payload BYTES (256) --window FRAMES (512) --receipts --server-pid PID
      rtt:        --count N (5000) --payload BYTES (256) --self (send to oneself: one relayed leg per sample)
                  --spin (poll for the echo without sleeping: measures the relay, not the VM's wake-up)
      idle:       --connections N (10000) --threads T (8) --server-pid PID
      store:      --senders N (2) --seconds S (3) --window FRAMES (256) --payload BYTES (256) --server-pid PID[,PID]
      any:        --peer-url URL (receivers / B there: another edge) --server-pid PID,PID (summed) --other-pid PID,...
      paced:      --rate FRAMES_PER_S (20000) --seconds S (3) --payload BYTES (256) --server-pid PID
                  --protocol relay|mqtt (relay; mqtt: MQTT 3.1.1 over WebSocket, e.g. mosquitto)
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("relay-bench: \(message)\n".utf8))
    exit(1)
}

// MARK: Arguments

/// The parsed command line.
struct Config: Sendable {
    let mode: String
    let options: [String: String]
    let url: String
    let serverPID: Int32?
    /// `--server-pid` may name several processes (the edges of a fleet): their CPU is summed.
    let serverPIDs: [Int32]
    /// `--other-pid`: more processes whose CPU is reported apart (a fleet's NATS servers).
    let otherPIDs: [Int32]
    /// `--peer-url`: where receivers (throughput) or B (rtt) connect, e.g. another edge of a fleet.
    let peerURL: String

    init(_ arguments: [String]) {
        guard let mode = arguments.first, ["throughput", "rtt", "idle", "paced", "store"].contains(mode) else { fail(usage) }
        var options: [String: String] = [:]
        var index = 1
        while index < arguments.count {
            let a = arguments[index]
            guard a.hasPrefix("--") else { fail("unexpected argument \(a)\n\(usage)") }
            if ["--receipts", "--self", "--spin"].contains(a) {
                options[String(a.dropFirst(2))] = "1"
                index += 1
            } else {
                guard index + 1 < arguments.count else { fail("\(a) needs a value") }
                options[String(a.dropFirst(2))] = arguments[index + 1]
                index += 2
            }
        }
        guard let url = options["url"] else { fail("--url is required\n\(usage)") }
        self.mode = mode
        self.options = options
        self.url = url
        self.serverPIDs = (options["server-pid"] ?? "").split(separator: ",").compactMap { Int32($0) }
        self.serverPID = self.serverPIDs.first
        self.otherPIDs = (options["other-pid"] ?? "").split(separator: ",").compactMap { Int32($0) }
        self.peerURL = options["peer-url"] ?? url
    }

    func int(_ name: String, _ fallback: Int) -> Int {
        guard let v = self.options[name] else { return fallback }
        guard let n = Int(v), n >= 0 else { fail("--\(name) must be a non-negative integer") }
        return n
    }

    func flag(_ name: String) -> Bool { self.options[name] != nil }
}

// MARK: /proc readings of the server

/// utime + stime of `pid` in microseconds.
func cpuMicroseconds(_ pid: Int32) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return nil }
    // Fields after "comm)": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
    return (u + s) * 1_000_000 / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// VmRSS of `pid` in KiB.
func rssKiB(_ pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}

func nowNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func emit(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

// MARK: Login

/// Connects and completes CHALLENGE/AUTH/READY as `key`.
func login(_ url: String, _ key: SigningSecretKey) throws -> WebSocketClient {
    var o = WebSocketClient.Options(subprotocol: "homebase-relay.v1")
    o.connectTimeout = .seconds(10)
    let ws = try WebSocketClient.connect(url, options: o)
    guard let m = try ws.receive(timeout: .seconds(10)),
          case .challenge(_, let nonce, _) = try RelayFrame(decoding: m.payload) else {
        throw BenchError("no CHALLENGE")
    }
    let auth = RelayFrame.auth(publicKey: key.publicKey,
                               signature: key.sign(nonce, context: SignatureContext.relayAuth))
    try ws.send(binary: auth.encoded())
    guard let r = try ws.receive(timeout: .seconds(10)), case .ready = try RelayFrame(decoding: r.payload) else {
        throw BenchError("no READY")
    }
    return ws
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { self.description = d }
}

/// Shares a non-Sendable value with exactly one other thread, handed over before that thread starts.
final class Handoff<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

func runThreads(_ bodies: [@Sendable () -> Void]) {
    let group = DispatchGroup()
    for body in bodies {
        group.enter()
        let t = Thread {
            body()
            group.leave()
        }
        t.stackSize = 1 << 20
        t.start()
    }
    group.wait()
}

// MARK: throughput

/// Each pair: a sender thread pushing batches of pipelined SEND frames to its receiver connection, and a receiver
/// thread counting DELIVERs. A window of frames in flight (returned by the receiver, or by RECEIPTs with
/// --receipts) keeps the relay's outbound queue under its bound (past which it drops frames); the relay is never
/// the one throttled.
/// Per pair counters shared by its sender and receiver threads.
final class PairState: Sendable {
    let sent = Atomic<Int>(0)
    let senderDone = Atomic<Bool>(false)
    let delivered = Atomic<Int>(0)
    let credits: DispatchSemaphore
    init(credits: Int) { self.credits = DispatchSemaphore(value: credits) }
}

func throughput(_ config: Config) throws {
    let pairs = config.int("pairs", 4)
    let seconds = config.int("seconds", 3)
    let payloadSize = config.int("payload", 256)
    let window = max(64, config.int("window", 512))
    let receipts = config.flag("receipts")
    let batch = 32
    var senders: [WebSocketClient] = []
    var receivers: [WebSocketClient] = []
    var receiverKeys: [PublicKey] = []
    for _ in 0..<pairs {
        senders.append(try login(config.url, .generate()))
        let rk = SigningSecretKey.generate()
        receivers.append(try login(config.peerURL, rk))
        receiverKeys.append(rk.publicKey)
    }
    let stop = Atomic<Bool>(false)
    let states = (0..<pairs).map { _ in PairState(credits: window / batch) }
    let badReceipts = Atomic<Int>(0)
    let errors = Mutex<[String]>([])
    let state = Handoff((senders, receivers, receiverKeys))

    let cpu0 = sumCPU(config.serverPIDs), other0 = sumCPU(config.otherPIDs)
    let t0 = nowNanoseconds()
    let endAt = t0 + UInt64(seconds) * 1_000_000_000
    var bodies: [@Sendable () -> Void] = []
    for p in 0..<pairs {
        bodies.append {
            let (senders, _, keys) = state.value
            let st = states[p]
            let ws = senders[p]
            let frame = RelayFrame.send(sendID: receipts ? 1 : 0, recipient: keys[p], flags: 0,
                                        payload: Array(repeating: 0xA5, count: payloadSize)[...]).encoded()
            let messages = Array(repeating: frame, count: batch)
            var n = 0
            var receiptsSeen = 0
            do {
                while nowNanoseconds() < endAt && !stop.load(ordering: .relaxed) {
                    if receipts {
                        while n - receiptsSeen > window - batch {
                            guard let m = try ws.receive(timeout: .seconds(10)) else { throw BenchError("no RECEIPT in 10 s") }
                            if m.payload.count != 6 || m.payload[0] != 0x13 || m.payload[5] != 0 { badReceipts.add(1, ordering: .relaxed) }
                            receiptsSeen += 1
                        }
                    } else if st.credits.wait(timeout: .now() + 10) == .timedOut {
                        throw BenchError("window not returned in 10 s (frames lost?)")
                    }
                    try ws.send(binaryMessages: messages, deadline: .now + .seconds(10))
                    n += batch
                    st.sent.store(n, ordering: .releasing)
                }
                st.senderDone.store(true, ordering: .releasing)
                while receipts && receiptsSeen < n {
                    guard let m = try ws.receive(timeout: .seconds(10)) else { throw BenchError("no RECEIPT in 10 s") }
                    if m.payload.count != 6 || m.payload[0] != 0x13 || m.payload[5] != 0 { badReceipts.add(1, ordering: .relaxed) }
                    receiptsSeen += 1
                }
            } catch {
                errors.withLock { $0.append("sender \(p): \(error)") }
                st.senderDone.store(true, ordering: .releasing)
                stop.store(true, ordering: .relaxed)
            }
        }
        bodies.append {
            let (_, receivers, _) = state.value
            let st = states[p]
            let ws = receivers[p]
            var n = 0
            do {
                while !(st.senderDone.load(ordering: .acquiring) && n >= st.sent.load(ordering: .acquiring)) {
                    guard let m = try ws.receive(timeout: .seconds(5)) else {
                        if st.senderDone.load(ordering: .acquiring) { break }  // frames lost: counted as such
                        continue
                    }
                    guard m.payload.count == 41 + payloadSize, m.payload[0] == 0x11 else { continue }
                    n += 1
                    if n % batch == 0 {
                        st.delivered.store(n, ordering: .relaxed)
                        if !receipts { st.credits.signal() }
                    }
                }
            } catch {
                errors.withLock { $0.append("receiver \(p): \(error)") }
                stop.store(true, ordering: .relaxed)
            }
            st.delivered.store(n, ordering: .relaxed)
        }
    }
    runThreads(bodies)
    let t1 = nowNanoseconds()
    let cpu1 = sumCPU(config.serverPIDs), other1 = sumCPU(config.otherPIDs)
    let totalSent = states.reduce(0) { $0 + $1.sent.load(ordering: .relaxed) }
    let totalDelivered = states.reduce(0) { $0 + $1.delivered.load(ordering: .relaxed) }
    let elapsed = Double(t1 - t0) / 1e9
    var out: [String: Any] = [
        "mode": "throughput", "pairs": pairs, "payload": payloadSize, "receipts": receipts, "window": window,
        "sent": totalSent, "delivered": totalDelivered, "lost": totalSent - totalDelivered,
        "bad_receipts": badReceipts.load(ordering: .relaxed), "seconds": elapsed,
        "frames_per_second": Double(totalDelivered) / elapsed, "errors": errors.withLock { $0 },
    ]
    if let c0 = cpu0, let c1 = cpu1, totalDelivered > 0 {
        out["server_cpu_us"] = c1 - c0
        out["server_cpu_us_per_frame"] = (c1 - c0) / Double(totalDelivered)
        out["server_cpu_utilisation"] = (c1 - c0) / 1e6 / elapsed
    }
    if let o0 = other0, let o1 = other1, totalDelivered > 0 {
        out["other_cpu_us_per_frame"] = (o1 - o0) / Double(totalDelivered)
    }
    emit(out)
    for ws in senders + receivers { ws.close() }
}

/// Summed utime+stime of `pids` in microseconds; nil when none is given or one cannot be read.
func sumCPU(_ pids: [Int32]) -> Double? {
    guard !pids.isEmpty else { return nil }
    var total = 0.0
    for p in pids {
        guard let c = cpuMicroseconds(p) else { return nil }
        total += c
    }
    return total
}

// MARK: store

/// STORE frames to recipients who are offline, each answered by RECEIPT 1 once durable: `--senders` connections
/// (2), each with `--window` (256) frames awaiting their receipt; a fresh recipient every 500 frames so no mailbox
/// fills. Reports stored frames per second and the server's (and `--other-pid`'s) CPU per stored frame.
func store(_ config: Config) throws {
    let senders = config.int("senders", 2)
    let seconds = config.int("seconds", 3)
    let payloadSize = config.int("payload", 256)
    let window = max(1, config.int("window", 256))
    let clients = try (0..<senders).map { _ in try login(config.url, .generate()) }
    let stored = Atomic<Int>(0), refused = Atomic<Int>(0)
    let errors = Mutex<[String]>([])
    let handoff = Handoff(clients)
    let cpu0 = sumCPU(config.serverPIDs), other0 = sumCPU(config.otherPIDs)
    let t0 = nowNanoseconds()
    let endAt = t0 + UInt64(seconds) * 1_000_000_000
    runThreads((0..<senders).map { i in
        {
            let ws = handoff.value[i]
            var sent = 0, answered = 0
            var recipient = SigningSecretKey.generate().publicKey
            let payload = [UInt8](repeating: 0x5A, count: payloadSize)
            do {
                while nowNanoseconds() < endAt || answered < sent {
                    while nowNanoseconds() < endAt, sent - answered < window {
                        if sent % 500 == 0 { recipient = SigningSecretKey.generate().publicKey }
                        sent += 1
                        try ws.send(binary: RelayFrame.send(sendID: UInt32(sent), recipient: recipient, flags: 1,
                                                            payload: payload[...]).encoded())
                    }
                    guard let m = try ws.receive(timeout: .seconds(10)) else { throw BenchError("no RECEIPT in 10 s") }
                    guard m.payload.count == 6, m.payload[0] == 0x13 else { continue }
                    answered += 1
                    if m.payload[5] == 1 { stored.add(1, ordering: .relaxed) } else { refused.add(1, ordering: .relaxed) }
                }
            } catch {
                errors.withLock { $0.append("sender \(i): \(error)") }
            }
        }
    })
    let elapsed = Double(nowNanoseconds() - t0) / 1e9
    let cpu1 = sumCPU(config.serverPIDs), other1 = sumCPU(config.otherPIDs)
    let n = stored.load(ordering: .relaxed)
    var out: [String: Any] = [
        "mode": "store", "senders": senders, "window": window, "payload": payloadSize, "stored": n,
        "refused": refused.load(ordering: .relaxed), "seconds": elapsed,
        "frames_per_second": Double(n) / elapsed, "errors": errors.withLock { $0 },
    ]
    if let c0 = cpu0, let c1 = cpu1, n > 0 { out["server_cpu_us_per_frame"] = (c1 - c0) / Double(n) }
    if let o0 = other0, let o1 = other1, n > 0 { out["other_cpu_us_per_frame"] = (o1 - o0) / Double(n) }
    emit(out)
    for ws in clients { ws.close() }
}

// MARK: rtt

/// One pair ping-pong: A sends to B, B echoes back to A through the relay; a sample is A's full round trip
/// (client → relay → client → relay → client). With --self, A sends to itself: one relayed leg per sample.
func rtt(_ config: Config) throws {
    let count = config.int("count", 5000)
    let payloadSize = config.int("payload", 256)
    let selfLoop = config.flag("self")
    // --spin: wait for each echo by polling without sleeping (yielding the CPU between polls), so the figure is
    // the relay's latency, not how long this VM takes to wake an idle vCPU (~1 ms, platform-notes.md §4).
    let spin = config.flag("spin")
    @Sendable func receive(_ ws: WebSocketClient, timeout: Duration) throws -> (opcode: WebSocketOpcode, payload: [UInt8])? {
        guard spin else { return try ws.receive(timeout: timeout) }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let m = try ws.receive(timeout: .zero) { return m }
            sched_yield()
        }
        return nil
    }
    let warmup = 200
    let ka = SigningSecretKey.generate()
    let a = try login(config.url, ka)
    var b: WebSocketClient?
    var peer = ka.publicKey
    if !selfLoop {
        let kb = SigningSecretKey.generate()
        b = try login(config.peerURL, kb)
        peer = kb.publicKey
    }
    let done = Atomic<Bool>(false)
    let echoFailure = Mutex<String?>(nil)
    let group = DispatchGroup()
    if let b {
        let handoff = Handoff((b, ka.publicKey))
        group.enter()
        Thread {
            let (b, back) = handoff.value
            defer { group.leave() }
            do {
                while !done.load(ordering: .relaxed) {
                    guard let m = try receive(b, timeout: .milliseconds(200)) else { continue }
                    guard m.payload.first == 0x11 else { continue }
                    let echo = RelayFrame.send(sendID: 0, recipient: back, flags: 0, payload: m.payload[41...])
                    try b.send(binary: echo.encoded())
                }
            } catch {
                if !done.load(ordering: .relaxed) { echoFailure.withLock { $0 = "\(error)" } }
            }
        }.start()
    }
    var samples: [UInt64] = []
    samples.reserveCapacity(count)
    var payload = Array(repeating: UInt8(0x5A), count: payloadSize)
    for i in 0..<(warmup + count) {
        payload[0] = UInt8(truncatingIfNeeded: i)
        let frame = RelayFrame.send(sendID: 0, recipient: peer, flags: 0, payload: payload[...]).encoded()
        let start = nowNanoseconds()
        try a.send(binary: frame)
        while true {
            guard let m = try receive(a, timeout: .seconds(5)) else {
                throw BenchError("no echo in 5 s at sample \(i) \(echoFailure.withLock { $0 } ?? "")")
            }
            if m.payload.first == 0x11, m.payload.count == 41 + payloadSize, m.payload[41] == payload[0] { break }
        }
        if i >= warmup { samples.append(nowNanoseconds() - start) }
    }
    done.store(true, ordering: .relaxed)
    group.wait()
    samples.sort()
    func percentile(_ p: Double) -> Double {
        Double(samples[min(samples.count - 1, Int(Double(samples.count) * p))]) / 1000
    }
    emit([
        "mode": "rtt", "path": selfLoop ? "client-relay-client" : "client-relay-client-relay-client",
        "count": samples.count, "payload": payloadSize,
        "p50_us": percentile(0.50), "p90_us": percentile(0.90), "p99_us": percentile(0.99),
        "max_us": Double(samples.last ?? 0) / 1000,
    ])
    a.close()
    b?.close()
}

// MARK: idle

/// Opens `connections` authenticated connections (each its own key: the relay keeps one live connection per key)
/// from `threads` threads, holds them, and reports the server's RSS growth per connection.
func idle(_ config: Config) throws {
    let total = config.int("connections", 10_000)
    let threads = max(1, config.int("threads", 8))
    guard let pid = config.serverPID else { fail("idle needs --server-pid") }
    let keys = (0..<total).map { _ in SigningSecretKey.generate() }
    usleep(300_000)
    guard let before = rssKiB(pid) else { fail("cannot read /proc/\(pid)/status") }
    let t0 = nowNanoseconds()
    let held = Mutex<[[WebSocketClient]]>(Array(repeating: [], count: threads))
    let failures = Mutex<[String]>([])
    let handoff = Handoff(keys)
    runThreads((0..<threads).map { t in
        {
            var mine: [WebSocketClient] = []
            for i in stride(from: t, to: total, by: threads) {
                do {
                    mine.append(try login(config.url, handoff.value[i]))
                } catch {
                    failures.withLock { if $0.count < 20 { $0.append("\(error)") } }
                }
            }
            let result = Handoff(mine)
            held.withLock { $0[t] = result.value }
        }
    })
    let t1 = nowNanoseconds()
    let open = held.withLock { $0.reduce(0) { $0 + $1.count } }
    // Let the server settle (deferred frees, the last READY writes) before reading its RSS.
    usleep(1_000_000)
    let after = rssKiB(pid) ?? before
    // Still open? A relay that dropped connections would look cheap; probe a sample with a ping.
    var alive = 0
    held.withLock { all in
        for ws in all.flatMap({ $0 }).prefix(100) {
            do {
                try ws.ping([1])
                _ = try ws.receive(timeout: .milliseconds(10))
                alive += 1
            } catch {}
        }
    }
    emit([
        "mode": "idle", "connections": open, "failed": total - open, "failures": failures.withLock { $0 },
        "connect_seconds": Double(t1 - t0) / 1e9, "rss_before_kib": before, "rss_after_kib": after,
        "rss_bytes_per_connection": open > 0 ? Double(after - before) * 1024 / Double(open) : 0,
        "alive_of_100_probed": alive,
    ])
    held.withLock { all in for ws in all.flatMap({ $0 }) { ws.abort() } }
}

signal(SIGPIPE, SIG_IGN)
let config = Config(Array(CommandLine.arguments.dropFirst()))
do {
    switch config.mode {
    case "throughput": try throughput(config)
    case "rtt": try rtt(config)
    case "paced": try paced(config)
    case "store": try store(config)
    default: try idle(config)
    }
} catch {
    fail("\(error)")
}
