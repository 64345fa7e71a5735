import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

/// The sizes of the hostile attacks and the bounds they are judged by (`conformance relay URL --hostile`).
public struct HostileOptions: Sendable {
    /// Half-open connections per attack (issue 23: 10,000).
    public var connections = 10_000
    /// The relay's cap on connections not yet authenticated (relay.md §6: 4,096): upgrades beyond it get 503.
    public var maxPendingAuth = 4_096
    /// Connections trickling a head or an AUTH frame a byte at a time.
    public var slowlorisConnections = 200
    /// How long a trickled head or AUTH lasts, in auth deadlines: longer than the deadline, so the relay must
    /// cut it.
    public var trickleDeadlines = 2.0
    /// Bytes of a head that never ends sent before giving up on the relay refusing it.
    public var endlessHeadBytes = 64 << 20
    /// Connections sending random bytes after AUTH (a tenth of them unframed).
    public var randomConnections = 1_000
    /// Connections flooding maximal frames at a live recipient, and for how long.
    public var flooders = 4
    public var floodDuration: Duration = .seconds(5)
    /// The well-behaved client's round trip must stay under this at the 99th percentile.
    public var p99Limit: Duration = .milliseconds(10)
    /// A STORE frame's RECEIPT 1 (after a durable write, an fsync or two) must stay under this at the 99th
    /// percentile.
    public var storeP99Limit: Duration = .milliseconds(250)
    public var probeInterval: Duration = .milliseconds(5)
    /// How long `probe-baseline` times the round trip with no attack.
    public var baseline: Duration = .seconds(2)
    /// The shortest window an attack is measured over (`HostileMonitor.minimumWindow`).
    public var minimumWindow: Duration = .seconds(1)
    /// The pid of the process under test: memory from /proc/PID/status; without it, the
    /// `process_resident_memory_bytes` gauge of `/metrics` (with --http); without both, memory is not judged.
    public var pid: Int32?
    /// Growth of resident memory allowed during one attack, besides `memoryPerConnection` for each connection
    /// it holds open.
    public var memoryBudget = 32 << 20
    public var memoryPerConnection = 4 << 10
    /// The relay's hard WebSocket message limit; nil: relay.md §6's default (max_payload + 64 KiB + 38).
    public var hardLimit: Int?
    /// Run only these checks (by name); empty: all.
    public var only: Set<String> = []

    // The Homebase's attacks (`conformance homebase … --hostile`).
    /// Copies of each deep, huge or forged envelope sent.
    public var copies = 10
    /// Fresh keys in the pair.request and contact.join floods.
    public var freshKeys = 200
    /// Requests a pending guest sends at once.
    public var requestFlood = 2_000
    /// pair.requests a Homebase examines a minute (messages.md §4: 10).
    public var pairPerMinute = 10
    /// The host probe (the guest's advert.request answered) must stay under this at the 99th percentile.
    public var hostP99Limit: Duration = .milliseconds(50)
    public var hostProbeInterval: Duration = .milliseconds(50)
    /// How long the host has, after an attack, to answer what it should (and not what it should not).
    public var linger: Duration = .seconds(2)

    public init() {}
}

/// `conformance relay URL --hostile`: attacks on a live relay (plain `ws://`, on this machine or a loopback
/// port), each judged by its own rule and by two shared ones: a well-behaved client's round trip (a
/// `LatencyProbe`) stays under `p99Limit` at the 99th percentile during the attack, and the relay's resident
/// memory grows by at most `memoryBudget` (plus `memoryPerConnection` per held connection).
///
/// - `probe-baseline`: the probe alone, for comparison (a shared machine shows its own noise here).
/// - `half-open-tcp`: `connections` TCP connections that never send a byte; the relay closes each within the auth
///   deadline (+2 s) of its connecting.
/// - `half-open-upgrade`: `connections` upgrades that never AUTH; at most `maxPendingAuth` get 101 (and then close
///   1008 within the deadline), every other one HTTP 503.
/// - `slowloris-trickle`: heads, and AUTH frames after an upgrade, trickled a byte at a time over twice the auth
///   deadline; the relay cuts each within the deadline (+2 s).
/// - `slowloris-endless-head`: heads that never end (one endless line, endless fields, endless blank lines, an
///   endless request line) sent at full speed; the relay refuses each before `endlessHeadBytes` are sent.
/// - `random-bytes-after-auth`: random binary messages after READY are closed 1008; random unframed bytes end the
///   connection.
/// - `maximal-frame-delivered`: a SEND of exactly max_payload is delivered byte for byte, live and stored.
/// - `over-max-payload-receipt-4`: max_payload + 1 and the largest message under the hard limit get RECEIPT 4
///   and the connection stays usable.
/// - `over-hard-limit-1009`: a frame header announcing more than the hard limit (alone, without its payload) and
///   fragments crossing it are closed 1009 at the header, before the payload is buffered.
/// - `maximal-frame-flood`, `minimal-frame-flood`: `flooders` connections send maximal (or empty) frames to a live
///   recipient as fast as they can for `floodDuration`.
/// - `store-and-ack-flood`: `flooders` connections STORE frames to themselves and ACK each as it arrives, for
///   `floodDuration`: the relay's durable mailbox must keep serving others (a `StoreProbe` times a STORE's
///   RECEIPT 1, p99 under `storeP99Limit`).
public enum HostileRelayChecks {
    public static let names = [
        "probe-baseline", "half-open-tcp", "half-open-upgrade", "slowloris-trickle", "slowloris-endless-head",
        "random-bytes-after-auth", "maximal-frame-delivered", "over-max-payload-receipt-4", "over-hard-limit-1009",
        "maximal-frame-flood", "minimal-frame-flood", "store-and-ack-flood",
    ]

    /// Runs every hostile check in order into `runner`, on a thread of its own (the I/O blocks).
    public static func run(_ o: RelayCheckOptions, into runner: CheckRunner) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                Self.runBlocking(o, into: runner)
                done.resume()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    static func runBlocking(_ o: RelayCheckOptions, into runner: CheckRunner) {
        let h = o.hostile ?? HostileOptions()
        let url: RelayURL
        let probe: LatencyProbe
        do {
            url = try RawWebSocket.endpoint(o.url)
            probe = try LatencyProbe(url: url, token: o.token, interval: h.probeInterval)
        } catch {
            for name in Self.names { runner.record(name, .fail("\(error)")) }
            return
        }
        defer { probe.stop() }
        let gauge = MemoryGauge(pid: h.pid, metrics: o.httpBase.flatMap { RelayURL($0) })
        let scheduler = SchedulerProbe()
        defer { scheduler.stop() }
        let store: StoreProbe
        do { store = try StoreProbe(url: url, token: o.token) } catch {
            for name in Self.names { runner.record(name, .fail("no store probe: \(error)")) }
            return
        }
        defer { store.stop() }
        let monitor = HostileMonitor(probes: [.init(label: "probe", probe: probe, p99Limit: h.p99Limit),
                                              .init(label: "store probe", probe: store, p99Limit: h.storeP99Limit),
                                              .init(label: "scheduler lateness", probe: scheduler, p99Limit: nil)],
                                     gauge: gauge, minimumWindow: h.minimumWindow)
        let attack = RelayAttack(o: o, h: h, url: url, monitor: monitor)
        let steps: [(String, () throws -> CheckOutcome)] = [
            ("probe-baseline", attack.baseline),
            ("half-open-tcp", attack.halfOpenTCP),
            ("half-open-upgrade", attack.halfOpenUpgrade),
            ("slowloris-trickle", attack.slowlorisTrickle),
            ("slowloris-endless-head", attack.endlessHead),
            ("random-bytes-after-auth", attack.randomAfterAuth),
            ("maximal-frame-delivered", attack.maximalFrameDelivered),
            ("over-max-payload-receipt-4", attack.overMaxPayload),
            ("over-hard-limit-1009", attack.overHardLimit),
            ("maximal-frame-flood", { try attack.frameFlood(payloadBytes: nil) }),
            ("minimal-frame-flood", { try attack.frameFlood(payloadBytes: 0) }),
            ("store-and-ack-flood", attack.storeAndAckFlood),
        ]
        for (name, body) in steps where h.only.isEmpty || h.only.contains(name) {
            let outcome: CheckOutcome
            do { outcome = try body() } catch { outcome = .fail("\(error)") }
            runner.record(name, outcome)
        }
    }
}

/// The attacks of `HostileRelayChecks`, sharing the relay's address, the options and the monitor.
struct RelayAttack {
    let o: RelayCheckOptions
    let h: HostileOptions
    let url: RelayURL
    let monitor: HostileMonitor

    /// When the relay must have cut a connection that did not authenticate: the deadline, plus 2 s for its sweep.
    var cutoff: Duration { self.o.authDeadline + .seconds(2) }

    // MARK: Baseline

    func baseline() throws -> CheckOutcome {
        let (_, window) = try self.monitor.during { Thread.sleep(until: .now + self.h.baseline) }
        return self.monitor.verdict(window, problems: [], figures: "\(Self.seconds(self.h.baseline)) s, no attack",
                                    memoryBudget: self.h.memoryBudget)
    }

    // MARK: Half-open connections

    /// Throws a reason when this process cannot hold `count` more connections (after raising its soft limit).
    func requireDescriptors(_ count: Int) throws {
        let limit = Posix.raiseDescriptorLimit()
        guard limit >= count + 64 else {
            throw CheckFailure("this process may open \(limit) descriptors, too few for \(count) connections "
                               + "(raise the hard limit: ulimit -Hn)")
        }
    }

    /// Opens `count` TCP connections at once (in waves of 1,000, the listen backlog's order of size), each timed
    /// from when its wave was connected.
    func connectMany(_ count: Int) throws -> (sockets: [RawSocket], opened: [ContinuousClock.Instant]) {
        try self.requireDescriptors(count)
        var sockets: [RawSocket] = []
        var opened: [ContinuousClock.Instant] = []
        sockets.reserveCapacity(count)
        while sockets.count < count {
            let wave = min(1_000, count - sockets.count)
            do {
                sockets += try RawSocket.connectMany(wave, host: self.url.host, port: self.url.port, timeout: .seconds(10))
            } catch {
                for s in sockets { s.close() }
                throw CheckFailure("after \(sockets.count) connections: \(error)")
            }
            opened += repeatElement(ContinuousClock.now, count: wave)
        }
        return (sockets, opened)
    }

    /// Whether a well-behaved client can start now: the status of a fresh upgrade (101, or the refusal).
    func upgradeStatus() -> String {
        do {
            let s = try RawSocket.connect(host: self.url.host, port: self.url.port)
            defer { s.close() }
            try s.send(RawWebSocket.upgradeRequest(self.url, token: self.o.token))
            return "HTTP \(try RawWebSocket.readResponseHead(s, timeout: .seconds(5)).status)"
        } catch {
            return "\(error)"
        }
    }

    /// After an attack: a fresh client logs in (the relay has let go of the attack's connections).
    func freshLogin() -> String? {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            do {
                try RawWebSocket.loggedIn(self.url, token: self.o.token).close()
                return nil
            } catch {
                if ContinuousClock.now > deadline { return "a fresh client cannot log in afterwards: \(error)" }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    func halfOpenTCP() throws -> CheckOutcome {
        let n = self.h.connections
        let cutoff = self.cutoff
        let ((openedIn, ends, newcomer), window) = try self.monitor.during {
            let started = ContinuousClock.now
            let (sockets, opened) = try self.connectMany(n)
            defer { for s in sockets { s.close() } }
            let openedIn = ContinuousClock.now - started
            // Informational: the relay's cap counts these connections, so a newcomer is refused (503) meanwhile.
            let newcomer = self.upgradeStatus()
            let ends = SocketSet.waitForEnds(sockets, timeout: cutoff + openedIn).enumerated().map { i, e in
                e.at.map { $0 - opened[i] }
            }
            return (openedIn, ends, newcomer)
        }
        var problems: [String] = []
        let late = ends.filter { $0 == nil || $0! > cutoff }.count
        if late > 0 { problems.append("\(late) of \(n) connections not closed by the relay within \(cutoff) of connecting") }
        if let p = self.freshLogin() { problems.append(p) }
        let closed = ends.compactMap { $0 }
        let figures = "\(n) connections opened in \(Self.seconds(openedIn)) s, "
            + "closed by the relay \(Self.range(closed)) s after connecting; a new upgrade meanwhile: \(newcomer)"
        return self.monitor.verdict(window, problems: problems, figures: figures,
                                    memoryBudget: self.h.memoryBudget + n * self.h.memoryPerConnection)
    }

    func halfOpenUpgrade() throws -> CheckOutcome {
        let n = self.h.connections
        let batch = 100
        let cutoff = self.cutoff
        struct Tally {
            var statuses: [Int: Int] = [:]
            var errors: [String] = []
            var upgraded: [(socket: RawSocket, at: ContinuousClock.Instant, leftover: [UInt8])] = []
        }
        let (result, window) = try self.monitor.during { () throws -> (Tally, [SocketSet.End]) in
            try self.requireDescriptors(n)
            var t = Tally()
            var i = 0
            while i < n {
                let (sockets, _) = try self.connectMany(min(batch, n - i))
                for s in sockets { try s.send(RawWebSocket.upgradeRequest(self.url, token: self.o.token)) }
                for s in sockets {
                    do {
                        let (status, leftover) = try RawWebSocket.readResponseHead(s, timeout: .seconds(5))
                        t.statuses[status, default: 0] += 1
                        if status == 101 { t.upgraded.append((s, .now, leftover)) } else { s.close() }
                    } catch {
                        t.errors.append("\(error)")
                        s.close()
                    }
                }
                i += sockets.count
            }
            let ends = SocketSet.waitForEnds(t.upgraded.map(\.socket), timeout: cutoff)
            for u in t.upgraded { u.socket.close() }
            return (t, ends)
        }
        let (t, ends) = result
        var problems: [String] = []
        let accepted = t.statuses[101, default: 0]
        let refused = t.statuses[503, default: 0]
        // Pending at once: the upgrades answered 101 within half an auth deadline of the first (none of them can
        // have reached its deadline yet). On a slow machine the batches outlast the deadline, the relay closes
        // the first upgraded ones (1008) and rightly accepts as many again: those are not over the cap.
        let first = t.upgraded.first?.at
        let atOnce = first.map { f in t.upgraded.filter { $0.at - f < self.o.authDeadline / 2 }.count } ?? 0
        if atOnce > self.h.maxPendingAuth {
            problems.append("\(atOnce) upgrades without AUTH accepted at once, over the cap of \(self.h.maxPendingAuth)")
        }
        if accepted < min(n, self.h.maxPendingAuth) - batch {
            problems.append("only \(accepted) upgrades accepted, far below the cap of \(self.h.maxPendingAuth)")
        }
        let others = t.statuses.filter { $0.key != 101 && $0.key != 503 }
        if !others.isEmpty || !t.errors.isEmpty {
            problems.append("upgrades answered otherwise than 101 or 503: \(Self.tally(others))"
                            + (t.errors.first.map { ", \(t.errors.count) failed (\($0))" } ?? ""))
        }
        var codes: [String: Int] = [:]
        var times: [Duration] = []
        var late = 0
        for (u, e) in zip(t.upgraded, ends) {
            codes[Self.closeCode(u.leftover + e.bytes), default: 0] += 1
            if let at = e.at, at - u.at <= cutoff { times.append(at - u.at) } else { late += 1 }
        }
        if late > 0 { problems.append("\(late) of \(accepted) upgraded connections not closed within \(cutoff)") }
        let not1008 = codes.filter { $0.key != "1008" }
        if !not1008.isEmpty { problems.append("upgraded connections ended otherwise than close 1008: \(not1008)") }
        if let p = self.freshLogin() { problems.append(p) }
        let figures = "\(n) upgrades without AUTH: \(accepted) × 101 (\(atOnce) at once), \(refused) × 503; the upgraded closed "
            + "\(Self.tally(codes)) \(Self.range(times)) s after the upgrade"
        return self.monitor.verdict(window, problems: problems, figures: figures,
                                    memoryBudget: self.h.memoryBudget + accepted * self.h.memoryPerConnection)
    }

    // MARK: Slowloris

    func slowlorisTrickle() throws -> CheckOutcome {
        let n = max(2, self.h.slowlorisConnections)
        let cutoff = self.cutoff
        let span = self.o.authDeadline * self.h.trickleDeadlines
        // A head longer than the trickle lasts, so it never completes; the AUTH frame is 103 bytes.
        var head = RawWebSocket.upgradeRequest(self.url, token: self.o.token)
        head.insert(contentsOf: Array("X-Slow: \(String(repeating: "s", count: 200))\r\n".utf8), at: head.count - 2)
        let headGap = span / head.count
        let key = SigningSecretKey.generate()
        let authBytes = RawWebSocket.masked(.binary, RelayFrame.auth(publicKey: key.publicKey,
                                                                      signature: [UInt8](repeating: 0, count: 64)).encoded())
        let authGap = span / authBytes.count
        struct Slow {
            var socket: RawSocket
            var bytes: [UInt8]
            var gap: Duration
            var sent = 0
            var started: ContinuousClock.Instant
            var ended: Duration?
            var nextAt: ContinuousClock.Instant
        }
        let (slows, window) = try self.monitor.during { () throws -> [Slow] in
            try self.requireDescriptors(n)
            var slows: [Slow] = []
            for i in 0..<n {
                if i % 2 == 0 {
                    let s = try RawSocket.connect(host: self.url.host, port: self.url.port)
                    slows.append(Slow(socket: s, bytes: head, gap: headGap, started: .now, nextAt: .now))
                } else {
                    let ws = try RawWebSocket.open(self.url, token: self.o.token)
                    slows.append(Slow(socket: ws.socket, bytes: authBytes, gap: authGap, started: .now, nextAt: .now))
                }
            }
            let deadline = ContinuousClock.now + cutoff + .seconds(1)
            var scratch = [UInt8](repeating: 0, count: 4096)
            while ContinuousClock.now < deadline, slows.contains(where: { $0.ended == nil }) {
                let now = ContinuousClock.now
                for i in slows.indices where slows[i].ended == nil {
                    // Read what the relay says (CHALLENGE, a close, EOF) without waiting.
                    let n = scratch.withUnsafeMutableBytes { recv(slows[i].socket.fd, $0.baseAddress!, 4096, Int32(MSG_DONTWAIT)) }
                    if n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                        slows[i].ended = now - slows[i].started
                        continue
                    }
                    if now >= slows[i].nextAt, slows[i].sent < slows[i].bytes.count {
                        let byte = slows[i].bytes[slows[i].sent]
                        let sent = withUnsafeBytes(of: byte) { slows[i].socket.sendSome($0) }
                        if sent == nil { slows[i].ended = now - slows[i].started } else { slows[i].sent += sent! }
                        slows[i].nextAt = now + slows[i].gap
                    }
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
            for s in slows { s.socket.close() }
            return slows
        }
        var problems: [String] = []
        var figures: [String] = []
        for (label, picked, gap) in [("heads", slows.enumerated().filter { $0.offset % 2 == 0 }.map(\.element), headGap),
                                     ("AUTH frames", slows.enumerated().filter { $0.offset % 2 == 1 }.map(\.element), authGap)] {
            let late = picked.filter { $0.ended == nil || $0.ended! > cutoff }
            if !late.isEmpty {
                let most = late.map(\.sent).max() ?? 0
                problems.append("\(late.count) of \(picked.count) trickled \(label) not cut within \(cutoff) "
                                + "(up to \(most) bytes sent)")
            }
            let sent = picked.map(\.sent)
            figures.append("\(picked.count) \(label) at 1 byte / \(LatencyStats.ms(gap)) ms cut after "
                           + "\(Self.range(picked.compactMap(\.ended))) s (\(sent.min() ?? 0)-\(sent.max() ?? 0) bytes sent)")
        }
        if let p = self.freshLogin() { problems.append(p) }
        return self.monitor.verdict(window, problems: problems, figures: figures.joined(separator: ", "),
                                    memoryBudget: self.h.memoryBudget + n * self.h.memoryPerConnection)
    }

    func endlessHead() throws -> CheckOutcome {
        let host = "Host: \(self.url.hostHeader)\r\n"
        let shapes: [(String, String, String)] = [
            ("endless header line", "GET \(self.url.target) HTTP/1.1\r\n\(host)X-Pad: ", "a"),
            ("endless header fields", "GET \(self.url.target) HTTP/1.1\r\n\(host)", "X-Field: value\r\n"),
            ("endless blank lines", "", "\r\n"),
            ("endless request line", "GET /", "a"),
        ]
        let budget = self.h.endlessHeadBytes
        let (results, window) = try self.monitor.during { () throws -> [(String, Int, String?)] in
            try shapes.map { name, prefix, filler in
                let s = try RawSocket.connect(host: self.url.host, port: self.url.port)
                defer { s.close() }
                var chunk = Array(prefix.utf8)
                let unit = Array(filler.utf8)
                var sent = 0
                var answer: String?
                var first = true
                while sent < budget && answer == nil {
                    if !first { chunk.removeAll(keepingCapacity: true) }
                    first = false
                    while chunk.count < 64 * 1024 { chunk += unit }
                    var offset = 0
                    while offset < chunk.count {
                        guard let n = chunk[offset...].withUnsafeBytes({ s.sendSome($0) }) else {
                            answer = "hung up"
                            break
                        }
                        offset += n
                        sent += n
                        if n == 0 { _ = s.wait(for: Int16(POLLOUT | POLLIN), timeout: .milliseconds(50)) }
                        if case .bytes(let b) = s.receive(timeout: .zero) {
                            answer = Self.status(b)
                            break
                        }
                    }
                }
                if answer == nil || answer == "hung up" {
                    // Whatever the relay said before hanging up (or, if it has not, within the cutoff).
                    switch s.receive(timeout: answer == nil ? self.cutoff : .milliseconds(200)) {
                    case .bytes(let b): answer = (answer == nil ? "after the whole budget: " : "") + Self.status(b)
                    case .closed, .failed: answer = answer ?? "closed after the whole budget"
                    case .timedOut: break
                    }
                }
                return (name, sent, sent >= budget ? "took all \(budget >> 20) MiB, then \(answer ?? "nothing")" : answer)
            }
        }
        var problems: [String] = []
        var figures: [String] = []
        for (name, sent, answer) in results {
            figures.append("\(name): \(answer ?? "no answer") after \(sent >> 10) KiB")
            if sent >= budget || answer == nil {
                problems.append("\(name): the relay took \(sent >> 20) MiB without refusing the head")
            }
        }
        if let p = self.freshLogin() { problems.append(p) }
        return self.monitor.verdict(window, problems: problems, figures: figures.joined(separator: ", "),
                                    memoryBudget: self.h.memoryBudget)
    }

    // MARK: Garbage after AUTH

    /// Random bytes that are not a frame a client may send after READY (a SEND or an ACK would be served).
    static func randomNonFrame(maxLength: Int) -> [UInt8] {
        var rng = SystemRandomNumberGenerator()
        while true {
            let bytes = (0..<Int.random(in: 1...maxLength, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            switch try? RelayFrame(decoding: bytes) {
            case .send, .ack: continue
            default: return bytes
            }
        }
    }

    func randomAfterAuth() throws -> CheckOutcome {
        let framed = max(1, self.h.randomConnections - self.h.randomConnections / 10)
        let unframed = max(1, self.h.randomConnections / 10)
        let ((framedCodes, unframedEnds), window) = try self.monitor.during { () throws -> ([String: Int], [String: Int]) in
            var framedCodes: [String: Int] = [:]
            for _ in 0..<framed {
                let ws = try RawWebSocket.loggedIn(self.url, token: self.o.token)
                defer { ws.close() }
                try ws.sendRaw(RawWebSocket.masked(.binary, Self.randomNonFrame(maxLength: 4096)))
                framedCodes[Self.describe(try ws.ending(timeout: .seconds(5))), default: 0] += 1
            }
            var unframedEnds: [String: Int] = [:]
            var rng = SystemRandomNumberGenerator()
            for _ in 0..<unframed {
                let ws = try RawWebSocket.loggedIn(self.url, token: self.o.token)
                defer { ws.close() }
                var sent = 0
                var end: RawWebSocket.Event?
                while sent < 1 << 20, end == nil {
                    let chunk = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    guard (try? ws.socket.send(chunk, deadline: .now + .seconds(5))) == true else { break }
                    sent += chunk.count
                    end = try ws.next(timeout: .zero).flatMap { if case .frame = $0 { nil } else { $0 } }
                }
                end = try end ?? ws.ending(timeout: .seconds(5))
                unframedEnds[Self.describe(end), default: 0] += 1
            }
            return (framedCodes, unframedEnds)
        }
        var problems: [String] = []
        let not1008 = framedCodes.filter { $0.key != "close 1008" }
        if !not1008.isEmpty { problems.append("random messages after READY ended \(Self.tally(not1008)), expected close 1008") }
        let open = unframedEnds["still open", default: 0]
        if open > 0 { problems.append("\(open) connections sending unframed garbage still open after 1 MiB and 5 s") }
        let figures = "\(framed) random messages: \(Self.tally(framedCodes)); \(unframed) unframed streams: "
            + Self.tally(unframedEnds)
        return self.monitor.verdict(window, problems: problems, figures: figures, memoryBudget: self.h.memoryBudget)
    }

    // MARK: Maximal frames

    func maximalFrameDelivered() throws -> CheckOutcome {
        let a = try RawWebSocket.loggedIn(self.url, token: self.o.token)
        let b = try RawWebSocket.loggedIn(self.url, token: self.o.token)
        defer { a.close(); b.close() }
        let max = Int(a.maxPayload)
        let payload = (0..<max).map { _ in UInt8.random(in: 0...255) }
        try a.send(.send(sendID: 1, recipient: b.publicKey!, flags: 0, payload: payload[...]))
        guard case .deliver(_, 0, let got) = try b.frame(), Array(got) == payload else {
            return .fail("a live SEND of max_payload (\(max)) bytes was not delivered intact")
        }
        guard case .receipt(1, .delivered) = try a.frame() else { return .fail("no RECEIPT 0 for the live maximal SEND") }
        let offline = SigningSecretKey.generate()
        try a.send(.send(sendID: 2, recipient: offline.publicKey, flags: SendFlags.store, payload: payload[...]))
        guard case .receipt(2, .stored) = try a.frame() else { return .fail("no RECEIPT 1 for the stored maximal SEND") }
        let c = try RawWebSocket.loggedIn(self.url, token: self.o.token, key: offline)
        defer { c.close() }
        guard case .deliver(_, let id, let stored) = try c.frame(), Array(stored) == payload else {
            return .fail("a stored SEND of max_payload bytes was not delivered intact")
        }
        try c.send(.ack(deliveryID: id))
        return .passed("\(max) bytes delivered intact, live and stored")
    }

    /// The hard message limit: given, or relay.md §6's default for the announced max_payload.
    func hardLimit(maxPayload: UInt32) -> Int { self.h.hardLimit ?? Int(maxPayload) + 64 * 1024 + 38 }

    func overMaxPayload() throws -> CheckOutcome {
        let a = try RawWebSocket.loggedIn(self.url, token: self.o.token)
        defer { a.close() }
        let hard = self.hardLimit(maxPayload: a.maxPayload)
        let target = SigningSecretKey.generate().publicKey
        for (id, size) in [(UInt32(1), Int(a.maxPayload) + 1), (2, hard - 38)] {
            try a.send(.send(sendID: id, recipient: target, flags: 0, payload: [UInt8](repeating: 0x42, count: size)[...]))
            switch try a.next(timeout: .seconds(5)) {
            case .frame(.receipt(id, .payloadTooLarge)): continue
            case let other: return .fail("a SEND of \(size) payload bytes got \(Self.describe(other)), expected RECEIPT 4")
            }
        }
        try a.send(.send(sendID: 3, recipient: target, flags: 0, payload: [1]))
        guard case .frame(.receipt(3, .recipientOffline)) = try a.next(timeout: .seconds(5)) else {
            return .fail("the connection is not usable after RECEIPT 4")
        }
        return .passed("max_payload + 1 (\(Int(a.maxPayload) + 1)) and \(hard - 38) payload bytes (a \(hard)-byte "
                       + "message, the hard limit): RECEIPT 4, connection kept")
    }

    func overHardLimit() throws -> CheckOutcome {
        var figures: [String] = []
        // A header alone: the relay must refuse on the declared length, not wait for (and buffer) the payload.
        for declared in [UInt64(0), UInt64(Int64.max)] {
            let a = try RawWebSocket.loggedIn(self.url, token: self.o.token)
            defer { a.close() }
            let length = declared == 0 ? UInt64(self.hardLimit(maxPayload: a.maxPayload) + 1) : declared
            var header: [UInt8] = [0x82, 0x80 | 127]
            for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: length >> UInt64(shift))) }
            header += [1, 2, 3, 4]
            try a.sendRaw(header)
            let end = try a.ending(timeout: .seconds(5))
            guard end == .closed(1009) else {
                return .fail("a header announcing \(length) bytes (no payload sent) ended \(Self.describe(end)), "
                             + "expected close 1009")
            }
            figures.append("header of \(length) bytes alone: close 1009")
        }
        // Fragments up to the limit, then the header of one that crosses it.
        let a = try RawWebSocket.loggedIn(self.url, token: self.o.token)
        defer { a.close() }
        let hard = self.hardLimit(maxPayload: a.maxPayload)
        let piece = 64 * 1024
        var sent = 0
        var opcode = WebSocketOpcode.binary
        while sent + piece <= hard {
            try a.sendRaw(RawWebSocket.masked(opcode, [UInt8](repeating: 0x10, count: piece), fin: false))
            opcode = .continuation
            sent += piece
        }
        let crossing = hard - sent + 1
        var header: [UInt8] = [0x00, 0x80 | 127]  // continuation, not final, masked
        for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: UInt64(crossing) >> UInt64(shift))) }
        header += [9, 9, 9, 9]
        try a.sendRaw(header)
        let end = try a.ending(timeout: .seconds(5))
        guard end == .closed(1009) else {
            return .fail("fragments of \(sent) bytes then the header of one of \(crossing) ended \(Self.describe(end)), "
                         + "expected close 1009")
        }
        figures.append("\(sent) bytes in fragments, then the header of a \(crossing)-byte one: close 1009")
        return .passed(figures.joined(separator: "; "))
    }

    /// Floods a live recipient with SENDs of `payloadBytes` (nil: max_payload), many frames per write.
    func frameFlood(payloadBytes: Int?) throws -> CheckOutcome {
        let sink = try RawWebSocket.loggedIn(self.url, token: self.o.token)
        defer { sink.close() }
        let sinkKey = sink.publicKey!
        let stopSink = Atomic<Bool>(false)
        let sunk = Atomic<Int>(0)
        let sinkDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            HostileMonitor.lowerPriority()
            while !stopSink.load(ordering: .relaxed) {
                if case .bytes(let b) = sink.socket.receive(maxBytes: 1 << 20, timeout: .milliseconds(50)) {
                    sunk.add(b.count, ordering: .relaxed)
                }
            }
            sinkDone.signal()
        }
        let flooders = try (0..<self.h.flooders).map { _ in try RawWebSocket.loggedIn(self.url, token: self.o.token) }
        defer { for f in flooders { f.close() } }
        let payload = (0..<(payloadBytes ?? Int(flooders[0].maxPayload))).map { _ in UInt8.random(in: 0...255) }
        let one = RawWebSocket.masked(.binary, RelayFrame.send(sendID: 1, recipient: sinkKey, flags: 0,
                                                                payload: payload[...]).encoded())
        // Small frames go many to a write, as a flooder would send them.
        let frame = Array(repeatElement(one, count: max(1, 64 * 1024 / one.count)).joined())
        let duration = self.h.floodDuration
        let (tallies, window) = try self.monitor.during { () -> [(sent: Int, receipts: [String: Int], ended: String?)] in
            let results = Mutex<[(Int, [String: Int], String?)]>([])
            let group = DispatchGroup()
            for f in flooders {
                group.enter()
                Thread.detachNewThread {
                    HostileMonitor.lowerPriority()
                    let r = Self.flood(f, frame: frame, for: duration)
                    results.withLock { $0.append(r) }
                    group.leave()
                }
            }
            group.wait()
            return results.withLock { $0.map { (sent: $0.0, receipts: $0.1, ended: $0.2) } }
        }
        stopSink.store(true, ordering: .relaxed)
        sinkDone.wait()
        var problems: [String] = []
        var receipts: [String: Int] = [:]
        for t in tallies { receipts.merge(t.receipts, uniquingKeysWith: +) }
        let ended = tallies.compactMap(\.ended)
        if !ended.isEmpty { problems.append("\(ended.count) flooders were cut off: \(ended[0])") }
        if let p = self.freshLogin() { problems.append(p) }
        let total = tallies.map(\.sent).reduce(0, +)
        let figures = "\(flooders.count) connections sent \(total >> 20) MiB of \(payload.count)-byte frames in "
            + "\(Self.seconds(duration)) s; receipts \(Self.tally(receipts)); the recipient read \(sunk.load(ordering: .relaxed) >> 20) MiB"
        return self.monitor.verdict(window, problems: problems, figures: figures, memoryBudget: self.h.memoryBudget)
    }

    func storeAndAckFlood() throws -> CheckOutcome {
        let flooders = try (0..<self.h.flooders).map { _ in try RawWebSocket.loggedIn(self.url, token: self.o.token) }
        defer { for f in flooders { f.close() } }
        let duration = self.h.floodDuration
        let (tallies, window) = try self.monitor.during { () -> [(stored: Int, acked: Int, ended: String?)] in
            let results = Mutex<[(Int, Int, String?)]>([])
            let group = DispatchGroup()
            for f in flooders {
                group.enter()
                Thread.detachNewThread {
                    HostileMonitor.lowerPriority()
                    let r = Self.storeAndAck(f, for: duration)
                    results.withLock { $0.append(r) }
                    group.leave()
                }
            }
            group.wait()
            return results.withLock { $0.map { (stored: $0.0, acked: $0.1, ended: $0.2) } }
        }
        var problems: [String] = []
        let ended = tallies.compactMap(\.ended)
        if !ended.isEmpty { problems.append("\(ended.count) flooders were cut off: \(ended[0])") }
        let figures = "\(flooders.count) connections stored \(tallies.map(\.stored).reduce(0, +)) frames to themselves and "
            + "acknowledged \(tallies.map(\.acked).reduce(0, +)) in \(Self.seconds(duration)) s"
        return self.monitor.verdict(window, problems: problems, figures: figures, memoryBudget: self.h.memoryBudget)
    }

    /// STOREs 16-byte frames to itself, 100 in flight, ACKing each DELIVER, for `duration`: frames stored and
    /// acknowledged, and how the connection ended if the relay ended it.
    static func storeAndAck(_ ws: RawWebSocket, for duration: Duration) -> (Int, Int, String?) {
        guard let me = ws.publicKey else { return (0, 0, "not logged in") }
        let until = ContinuousClock.now + duration
        var stored = 0
        var acked = 0
        var inFlight = 0
        var id: UInt32 = 0
        do {
            while ContinuousClock.now < until {
                var burst: [UInt8] = []
                while inFlight < 100 {
                    id &+= 1
                    burst += RawWebSocket.masked(.binary, RelayFrame.send(sendID: id, recipient: me, flags: SendFlags.store,
                                                                          payload: [UInt8](repeating: 5, count: 16)[...]).encoded())
                    inFlight += 1
                }
                if !burst.isEmpty { try ws.sendRaw(burst) }
                switch try ws.next(timeout: .milliseconds(100)) {
                case .frame(.deliver(_, let deliveryID, _)):
                    if deliveryID != 0 {
                        try ws.send(.ack(deliveryID: deliveryID))
                        acked += 1
                    }
                case .frame(.receipt(_, let status)):
                    inFlight -= 1
                    if status == .delivered || status == .stored { stored += 1 }
                case .none, .frame: continue
                case .some(let other): return (stored, acked, Self.describe(other))
                }
            }
        } catch {
            return (stored, acked, "\(error)")
        }
        return (stored, acked, nil)
    }

    /// Sends `frame` back to back for `duration`, reading receipts as they come; bytes sent, receipts by status,
    /// and how the connection ended if the relay ended it.
    static func flood(_ ws: RawWebSocket, frame: [UInt8], for duration: Duration) -> (Int, [String: Int], String?) {
        let until = ContinuousClock.now + duration
        var sent = 0
        var offset = 0
        var receipts: [String: Int] = [:]
        while ContinuousClock.now < until {
            guard let n = frame[offset...].withUnsafeBytes({ ws.socket.sendSome($0) }) else {
                return (sent, receipts, "the relay hung up")
            }
            sent += n
            offset = (offset + n) % frame.count
            if n == 0 { _ = ws.socket.wait(for: Int16(POLLOUT), timeout: .milliseconds(20)) }
            while let e = try? ws.next(timeout: .zero) {
                switch e {
                case .frame(.receipt(_, let status)): receipts["\(status.rawValue)", default: 0] += 1
                case .frame: continue
                default: return (sent, receipts, Self.describe(e))
                }
            }
        }
        return (sent, receipts, nil)
    }

    // MARK: Helpers

    static func seconds(_ d: Duration) -> String {
        String(format: "%.1f", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    }

    static func range(_ ds: [Duration]) -> String {
        guard let lo = ds.min(), let hi = ds.max() else { return "-" }
        return "\(Self.seconds(lo))-\(Self.seconds(hi))"
    }

    /// `3 × 1008, 1 × EOF`, largest first.
    static func tally<K: CustomStringConvertible>(_ counts: [K: Int]) -> String {
        counts.isEmpty ? "none" : counts.sorted { $0.value > $1.value }.map { "\($0.value) × \($0.key)" }
            .joined(separator: ", ")
    }

    static func describe(_ e: RawWebSocket.Event?) -> String {
        switch e {
        case .none: "still open"
        case .closed(let code): "close \(code.map(String.init) ?? "without code")"
        case .ended(let why): "ended (\(why))"
        case .frame(let f): "\(f.type)"
        case .other(let what): what
        }
    }

    /// The HTTP status of a response's first bytes, or a description of them.
    static func status(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes.prefix(64), as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 2)
        return parts.count >= 2 && parts[0].hasPrefix("HTTP/") ? "HTTP \(parts[1])" : "\(bytes.count) bytes"
    }

    /// The close code in the bytes a server sent (frames, unmasked): "1008", "no close" or "bad frames".
    static func closeCode(_ bytes: [UInt8]) -> String {
        var p = WebSocketParser(role: .client, maxMessageBytes: 1 << 20)
        p.append(bytes)
        while true {
            guard let e = try? p.next() else { return bytes.isEmpty ? "EOF" : "EOF without close" }
            if case .close(let code, _) = e { return code.map(String.init) ?? "close without code" }
        }
    }
}
