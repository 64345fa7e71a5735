import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// `conformance homebase PUBKEY --relay URL --hostile`: attacks on a live Homebase through a relay, as strangers
/// (fresh keys) and as a granted guest. It first joins as a guest and waits for the grant, like the protocol
/// checks; then, during every attack, two probes run: the relay probe (`LatencyProbe`: the relay stays
/// responsive) and the host probe (the guest's `advert.request` answered by an `advert`: the host stays
/// responsive). The host's memory is followed with `--pid` (its /proc/PID/status).
///
/// - `guest-granted`: the guest's `contact.join` is answered by a `contact.grant` (the operator grants it).
/// - `probe-baseline`: both probes alone.
/// - `deep-json-stranger`, `huge-json-stranger`: `HostileJSON` shapes sealed correctly by a stranger: never a
///   reply, the host stays up and bounded.
/// - `deep-json-guest`, `huge-json-guest`: the same from the granted guest: nothing, or `infer.error
///   bad_request` for a request's id; a request over 512 messages must get `bad_request`.
/// - `non-relations`: every message type from a stranger on both channels, and the guest's on sync_delta (it is
///   no sibling): no reply at all.
/// - `forged-envelopes`: a stranger's envelopes claiming to come from the guest, addressed elsewhere, on an
///   unknown channel, from the future, expired, of version 2, tampered or truncated: no reply to it, nothing
///   for their request ids to the guest.
/// - `pending-guest-request-flood`: a stranger joins (a pending guest) and sends `requestFlood` requests at once:
///   the granted guest is still served meanwhile.
/// - `pair-request-flood`: `freshKeys` fresh keys each send a `pair.request` with a wrong secret: at most 10 are
///   examined a minute (messages.md §4), the rest are refused `rate_limited` or not answered.
/// - `contact-join-flood`: `freshKeys` fresh keys each send `contact.join`: no reply (a stranger learns nothing),
///   and the granted guest joining again still gets its grant.
public enum HostileHomebaseChecks {
    public static let names = [
        "guest-granted", "probe-baseline", "deep-json-stranger", "huge-json-stranger", "deep-json-guest",
        "huge-json-guest", "non-relations", "forged-envelopes", "pending-guest-request-flood",
        "pair-request-flood", "contact-join-flood",
    ]

    public static func run(_ o: HomebaseCheckOptions, into runner: CheckRunner) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                Self.runBlocking(o, into: runner)
                done.resume()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    static func runBlocking(_ o: HomebaseCheckOptions, into runner: CheckRunner) {
        let h = o.hostile ?? HostileOptions()
        let url: RelayURL
        let line: GuestLine
        do {
            url = try RawWebSocket.endpoint(o.relayURL)
            let key = try HomebaseChecks.identity(stateDirectory: o.stateDirectory)
            line = try GuestLine(url: url, token: o.token, key: key, host: o.host)
        } catch {
            for name in Self.names { runner.record(name, name == "guest-granted" ? .fail("\(error)") : .skip("no guest")) }
            return
        }
        defer { line.close() }
        let granted = Self.join(line, o)
        runner.record("guest-granted", granted)
        guard case .passed = granted else {
            for name in Self.names.dropFirst() { runner.record(name, .skip("no grant")) }
            return
        }
        let relayProbe: LatencyProbe
        do { relayProbe = try LatencyProbe(url: url, token: o.token, interval: h.probeInterval) } catch {
            for name in Self.names.dropFirst() { runner.record(name, .fail("no relay probe: \(error)")) }
            return
        }
        let hostProbe = HostProbe(line: line, interval: h.hostProbeInterval)
        defer {
            hostProbe.stop()
            relayProbe.stop()
        }
        let scheduler = SchedulerProbe()
        defer { scheduler.stop() }
        let monitor = HostileMonitor(probes: [.init(label: "relay probe", probe: relayProbe, p99Limit: h.p99Limit),
                                              .init(label: "host probe", probe: hostProbe, p99Limit: h.hostP99Limit),
                                              .init(label: "scheduler lateness", probe: scheduler, p99Limit: nil)],
                                     gauge: MemoryGauge(pid: h.pid, metrics: nil), minimumWindow: h.minimumWindow)
        let attack = HomebaseAttack(o: o, h: h, url: url, line: line, monitor: monitor)
        let steps: [(String, () throws -> CheckOutcome)] = [
            ("probe-baseline", attack.baseline),
            ("deep-json-stranger", { try attack.jsonFromStranger(deep: true) }),
            ("huge-json-stranger", { try attack.jsonFromStranger(deep: false) }),
            ("deep-json-guest", { try attack.jsonFromGuest(deep: true) }),
            ("huge-json-guest", { try attack.jsonFromGuest(deep: false) }),
            ("non-relations", attack.nonRelations),
            ("forged-envelopes", attack.forgedEnvelopes),
            ("pending-guest-request-flood", attack.pendingGuestFlood),
            ("pair-request-flood", attack.pairRequestFlood),
            ("contact-join-flood", attack.contactJoinFlood),
        ]
        for (name, body) in steps where h.only.isEmpty || h.only.contains(name) {
            let outcome: CheckOutcome
            do { outcome = try body() } catch { outcome = .fail("\(error)") }
            runner.record(name, outcome)
        }
    }

    /// `contact.join`, then waits for the grant (the operator's `homebase grant`, or at once for a key granted
    /// before).
    static func join(_ line: GuestLine, _ o: HomebaseCheckOptions) -> CheckOutcome {
        let start = line.count
        do { try line.send(.contactJoin(name: o.guestName), channel: .contact, store: true) } catch {
            return .fail("cannot send contact.join: \(error)")
        }
        let hex = line.publicKey.hex
        o.notice("conformance guest key: \(hex)")
        o.notice("waiting for a grant: run  homebase grant \(hex)")
        if let hook = o.onWaitingForGrant {
            let key = line.publicKey
            Task { await hook(key) }
        }
        let began = ContinuousClock.now
        let granted = line.wait(from: start, timeout: o.waitGrant) { replies in
            replies.contains { if case .contactGrant = $0.message { true } else { false } }
        }
        guard granted else {
            return .fail("no contact.grant within \(o.waitGrant) of contact.join"
                         + (line.connectionFailure.map { " (\($0))" } ?? ""))
        }
        // The grant is followed by an advert; let it arrive so it does not count as an answer to an attack.
        _ = line.wait(from: start, timeout: .seconds(5)) { replies in
            replies.contains { if case .advert = $0.message { true } else { false } }
        }
        return .passed("granted \(RelayAttack.seconds(.now - began)) s after contact.join")
    }
}

/// The attacks of `HostileHomebaseChecks`.
struct HomebaseAttack {
    let o: HomebaseCheckOptions
    let h: HostileOptions
    let url: RelayURL
    let line: GuestLine
    let monitor: HostileMonitor

    func stranger() throws -> HostPeer { try HostPeer(url: self.url, token: self.o.token, host: self.o.host) }

    /// Closes strangers' connections after a `contact.leave` each, so a join they made (some shapes are valid
    /// joins) does not stay in the host's list of pending guests. Twice, a linger apart: a host decides who may
    /// send `contact.leave` when it arrives, so a leave that overtook the handling of its join was dropped.
    func dismiss(_ peers: [HostPeer]) {
        for round in 0..<2 {
            if round > 0 { Thread.sleep(until: .now + self.h.linger) }
            for peer in peers {
                // Until its RECEIPT says the relay delivered it (a host busy with an attack may have had it dropped);
                // the connection is reset after, so the relay must have passed it on first.
                for _ in 0..<5 {
                    guard let id = try? peer.sendEnvelope(peer.seal(Message.contactLeave.jsonBytes(), channel: .contact)),
                          peer.awaitReceipt(id, timeout: .seconds(2)) != .delivered
                    else { break }
                    Thread.sleep(forTimeInterval: 0.2)
                }
            }
        }
        for peer in peers { peer.close() }
    }

    func verdict(_ window: AttackWindow, _ problems: [String], _ figures: String) -> CheckOutcome {
        self.monitor.verdict(window, problems: problems, figures: figures, memoryBudget: self.h.memoryBudget)
    }

    func baseline() throws -> CheckOutcome {
        let (_, window) = try self.monitor.during { Thread.sleep(until: .now + self.h.baseline) }
        return self.verdict(window, [], "\(RelayAttack.seconds(self.h.baseline)) s, no attack")
    }

    /// A one-line tally of replies: `2 × infer.error bad_request, 1 × advert`.
    static func describe(_ replies: [HostPeer.Reply]) -> String {
        var counts: [String: Int] = [:]
        for r in replies {
            let name: String
            switch r.message {
            case .inferError(let e): name = "infer.error \(e.code)"
            case .pairReject(let reason): name = "pair.reject \(reason)"
            default: name = r.message.type
            }
            counts[name + (r.channel == .sibling ? " (sync_delta)" : ""), default: 0] += 1
        }
        return RelayAttack.tally(counts)
    }

    // MARK: Deep and huge JSON

    func jsonFromStranger(deep: Bool) throws -> CheckOutcome {
        let s = try self.stranger()
        defer { self.dismiss([s]) }
        let id = SecureRandom.uuidString()
        let shapes = deep ? HostileJSON.deep(budget: s.plaintextBudget, requestID: id)
            : HostileJSON.huge(budget: s.plaintextBudget, requestID: id)
        let copies = self.h.copies
        let ((sent, replies), window) = try self.monitor.during { () throws -> (Int, [HostPeer.Reply]) in
            var sent = 0
            for shape in shapes {
                for _ in 0..<copies {
                    let envelope = s.seal(shape.bytes, channel: shape.channel)
                    try s.sendEnvelope(envelope)
                    sent += envelope.count
                }
            }
            return (sent, s.drain(until: .now + self.h.linger))
        }
        var problems: [String] = []
        if !replies.isEmpty { problems.append("the host answered a stranger: \(Self.describe(replies))") }
        let figures = "\(shapes.count) shapes (\(shapes.map(\.name).joined(separator: ", "))) × \(copies), "
            + "\(sent >> 10) KiB sealed by a stranger: \(replies.isEmpty ? "no reply" : Self.describe(replies))"
        return self.verdict(window, problems, figures)
    }

    func jsonFromGuest(deep: Bool) throws -> CheckOutcome {
        let id = SecureRandom.uuidString()
        let shapes = deep ? HostileJSON.deep(budget: self.line.plaintextBudget, requestID: id)
            : HostileJSON.huge(budget: self.line.plaintextBudget, requestID: id)
        let copies = self.h.copies
        let start = self.line.count
        let (sent, window) = try self.monitor.during { () throws -> Int in
            var sent = 0
            for shape in shapes {
                for _ in 0..<copies {
                    let envelope = self.line.seal(shape.bytes, channel: shape.channel)
                    try self.line.sendEnvelope(envelope)
                    sent += envelope.count
                }
            }
            // The answer a request over the limits must get, then the linger for anything else.
            if shapes.contains(where: \.mustBeRefused) {
                _ = self.line.wait(from: start, timeout: self.h.linger * 5) { replies in
                    replies.contains { if case .inferError(let e) = $0.message { e.id == id } else { false } }
                }
            }
            Thread.sleep(until: .now + self.h.linger)
            return sent
        }
        // Adverts answer the host probe (and, with a grant, a join the host accepted: a granted guest joining again
        // gets both again); anything else must be a bad_request for the requests' id.
        let answers = self.line.replies(from: start).filter { if case .advert = $0.message { false } else { true } }
        var problems: [String] = []
        let unexpected = answers.filter { r in
            if case .contactGrant = r.message { return false }
            guard case .inferError(let e) = r.message, e.code == InferErrorCode.badRequest.rawValue else { return true }
            return e.id != id
        }
        if !unexpected.isEmpty { problems.append("unexpected answers: \(Self.describe(unexpected))") }
        if shapes.contains(where: \.mustBeRefused), !answers.contains(where: {
            if case .inferError(let e) = $0.message { e.id == id && e.code == InferErrorCode.badRequest.rawValue } else { false }
        }) {
            problems.append("no infer.error bad_request for an infer.request of 5,000 messages (over 512)")
        }
        let figures = "\(shapes.count) shapes × \(copies), \(sent >> 10) KiB from the granted guest: "
            + (answers.isEmpty ? "no answer" : Self.describe(answers))
        return self.verdict(window, problems, figures)
    }

    // MARK: Non-relations and forgeries

    static func request(_ id: String) -> Message {
        .inferRequest(InferRequest(id: id, model: "conformance-any", messages: [ChatMessage(role: "user", content: "hi")]))
    }

    func nonRelations() throws -> CheckOutcome {
        let s = try self.stranger()
        defer { s.close() }
        let blob = SignedBlob(payload: Array(#"{"v":1}"#.utf8), signature: [UInt8](repeating: 0, count: 64))
        let guestIDs = [SecureRandom.uuidString(), SecureRandom.uuidString()]
        let contact: [Message] = [
            Self.request(SecureRandom.uuidString()), .advertRequest, .inferCancel(id: "x"), .contactLeave,
            .contactGrant(blob), .contactRevoke(reason: "x"), .advert(blob), .unknown(type: "hostile.unknown"),
        ]
        let sync: [Message] = [
            Self.request(SecureRandom.uuidString()), .advertRequest, .roster(blob), .pairAccept(roster: blob),
            .pairReject(reason: "used"), .advert(blob), .modelChoice(ModelChoice(modelID: "m", vision: false, origin: "x")),
        ]
        let start = self.line.count
        let (replies, window) = try self.monitor.during { () throws -> [HostPeer.Reply] in
            for store in [false, true] {
                for m in contact { try s.send(m, channel: .contact, store: store) }
                for m in sync { try s.send(m, channel: .sibling, store: store) }
            }
            // The guest is a contact, not a sibling: nothing on sync_delta is for it to ask.
            for id in guestIDs { try self.line.send(Self.request(id), channel: .sibling) }
            try self.line.send(.advertRequest, channel: .sibling)
            return s.drain(until: .now + self.h.linger)
        }
        let leaked = self.line.replies(from: start).filter { r in
            if r.channel == .sibling { return true }
            switch r.message {
            case .inferAccept(let a): return guestIDs.contains(a.id)
            case .inferError(let e): return guestIDs.contains(e.id)
            default: return false
            }
        }
        var problems: [String] = []
        if !replies.isEmpty { problems.append("the host answered a stranger: \(Self.describe(replies))") }
        if !leaked.isEmpty { problems.append("the host answered the guest's sync_delta messages: \(Self.describe(leaked))") }
        let figures = "\(2 * (contact.count + sync.count)) messages of every type from a stranger on both channels, "
            + "3 from the guest on sync_delta: \(replies.isEmpty && leaked.isEmpty ? "no reply" : "replies")"
        return self.verdict(window, problems, figures)
    }

    func forgedEnvelopes() throws -> CheckOutcome {
        let s = try self.stranger()
        defer { s.close() }
        let now = Posix.wallClockMs
        var ids: [String] = []
        func forged(_ name: String, _ make: ([UInt8]) -> [UInt8]) -> (String, [UInt8]) {
            let id = SecureRandom.uuidString()
            ids.append(id)
            return (name, make(Self.request(id).jsonBytes()))
        }
        let guest = self.line.publicKey
        let variants: [(String, [UInt8])] = [
            forged("the guest as sender") { s.seal($0, channel: .contact, sender: guest) },
            forged("another recipient") { s.seal($0, channel: .contact, recipient: SigningSecretKey.generate().publicKey) },
            forged("channel 3") { s.seal($0, channel: .unknown(3)) },
            forged("from the future") { s.seal($0, channel: .contact, sentAtMs: now + 3_600_000) },
            forged("expired") { s.seal($0, channel: .contact, sentAtMs: now - 8 * 86_400_000) },
            forged("version 2") { s.seal($0, channel: .contact, version: 2) },
            forged("tampered") { var e = s.seal($0, channel: .contact); e[e.count - 1] ^= 1; return e },
            forged("truncated") { Array(s.seal($0, channel: .contact).prefix(129)) },
            forged("no ciphertext") { Array(s.seal($0, channel: .contact).prefix(EnvelopeHeader.byteCount)) },
        ]
        let start = self.line.count
        let (replies, window) = try self.monitor.during { () throws -> [HostPeer.Reply] in
            for _ in 0..<self.h.copies {
                for (_, envelope) in variants { try s.sendEnvelope(envelope) }
            }
            return s.drain(until: .now + self.h.linger)
        }
        let leaked = self.line.replies(from: start).filter { r in
            if case .inferError(let e) = r.message { return ids.contains(e.id) }
            if case .inferAccept(let a) = r.message { return ids.contains(a.id) }
            return false
        }
        var problems: [String] = []
        if !replies.isEmpty { problems.append("the host answered the forger: \(Self.describe(replies))") }
        if !leaked.isEmpty { problems.append("the host answered the guest for forged requests: \(Self.describe(leaked))") }
        let figures = "\(variants.count) forgeries (\(variants.map(\.0).joined(separator: ", "))) × \(self.h.copies): "
            + (replies.isEmpty && leaked.isEmpty ? "no reply to anyone" : "replies")
        return self.verdict(window, problems, figures)
    }

    // MARK: Floods

    /// A model the guest may use: the first with `completion` in the host's latest advert.
    func grantedModel() -> String? {
        for r in self.line.replies(from: 0).reversed() {
            guard case .advert(let blob) = r.message,
                  let advert = try? JSONDecoder().decode(AdvertPayload.self, from: Data(blob.payload))
            else { continue }
            if let m = advert.models.first(where: { $0.capabilities.contains("completion") }) { return m.tag }
        }
        return nil
    }

    /// The granted guest's request for `model` is served (accept, then done) within 30 s; a reason if not.
    func served(model: String) throws -> String? {
        let id = SecureRandom.uuidString()
        let start = self.line.count
        try self.line.send(.inferRequest(InferRequest(id: id, model: model, messages: [ChatMessage(role: "user", content: "Say hi.")],
                                                      options: InferOptions(maxTokens: 8))), channel: .contact)
        var outcome: String?
        _ = self.line.wait(from: start, timeout: .seconds(30)) { replies in
            for r in replies {
                switch r.message {
                case .inferDone(let d) where d.id == id: outcome = "done"; return true
                case .inferError(let e) where e.id == id: outcome = "infer.error \(e.code)"; return true
                default: continue
                }
            }
            return false
        }
        return outcome == "done" ? nil : "the granted guest's request ended \(outcome ?? "with nothing in 30 s")"
    }

    func pendingGuestFlood() throws -> CheckOutcome {
        guard let model = self.grantedModel() else { return .skip("the host advertises no completion model to the guest") }
        let p = try self.stranger()
        defer { self.dismiss([p]) }
        try p.send(.contactJoin(name: "hostile-pending"), channel: .contact, store: true)
        Thread.sleep(forTimeInterval: 0.5)
        let n = self.h.requestFlood
        let ((replies, servedProblem), window) = try self.monitor.during { () throws -> ([HostPeer.Reply], String?) in
            let frames = (0..<n).map { _ in
                RawWebSocket.masked(.binary, RelayFrame.send(sendID: 0, recipient: self.o.host, flags: 0,
                                                              payload: p.seal(Self.request(SecureRandom.uuidString()).jsonBytes(),
                                                                              channel: .contact)[...]).encoded())
            }
            try p.ws.sendRaw(Array(frames.joined()), timeout: .seconds(30))
            let servedProblem = try self.served(model: model)
            return (p.drain(until: .now + self.h.linger), servedProblem)
        }
        var problems: [String] = []
        if let servedProblem { problems.append(servedProblem) }
        let figures = "a pending guest sent \(n) requests at once: answered \(replies.isEmpty ? "nothing" : Self.describe(replies)); "
            + "the granted guest's request meanwhile: \(servedProblem == nil ? "served" : "not served")"
        return self.verdict(window, problems, figures)
    }

    /// Connects `count` fresh keys (logged in, so they can be answered).
    func strangers(_ count: Int) throws -> [HostPeer] {
        var peers: [HostPeer] = []
        do {
            for _ in 0..<count { peers.append(try self.stranger()) }
        } catch {
            for p in peers { p.close() }
            throw error
        }
        return peers
    }

    /// Everything the host sends `peers` until `deadline`, in turns.
    static func drain(_ peers: [HostPeer], until deadline: ContinuousClock.Instant) -> [HostPeer.Reply] {
        var replies: [HostPeer.Reply] = []
        repeat {
            for p in peers { replies += p.drain(until: .now) }
            Thread.sleep(forTimeInterval: 0.02)
        } while ContinuousClock.now < deadline
        return replies
    }

    func pairRequestFlood() throws -> CheckOutcome {
        let peers = try self.strangers(self.h.freshKeys)
        defer { for p in peers { p.close() } }
        let started = ContinuousClock.now
        let (replies, window) = try self.monitor.during { () throws -> [HostPeer.Reply] in
            for p in peers {
                try p.send(.pairRequest(secret: Hex.encode(SecureRandom.bytes(16)), name: "hostile"), channel: .sibling)
            }
            return Self.drain(peers, until: .now + self.h.linger + .seconds(1))
        }
        let minutes = Double((ContinuousClock.now - started).components.seconds) / 60
        let examinedLimit = self.h.pairPerMinute + Int((Double(self.h.pairPerMinute) * minutes).rounded(.up))
        let examined = replies.filter { if case .pairReject(let r) = $0.message { r != "rate_limited" } else { true } }
        var problems: [String] = []
        if examined.count > examinedLimit {
            problems.append("\(examined.count) pair.requests examined, over \(examinedLimit) (\(self.h.pairPerMinute) a minute)")
        }
        let figures = "\(peers.count) pair.requests from fresh keys: \(Self.describe(replies)), "
            + "\(peers.count - replies.count) unanswered"
        return self.verdict(window, problems, figures)
    }

    func contactJoinFlood() throws -> CheckOutcome {
        let peers = try self.strangers(self.h.freshKeys)
        defer { self.dismiss(peers) }
        let start = self.line.count
        let ((replies, regranted), window) = try self.monitor.during { () throws -> ([HostPeer.Reply], Bool) in
            for p in peers { try p.send(.contactJoin(name: "hostile"), channel: .contact, store: true) }
            // A granted guest joining again gets its grant again, flood or not.
            try self.line.send(.contactJoin(name: self.o.guestName), channel: .contact, store: true)
            let regranted = self.line.wait(from: start, timeout: .seconds(5)) { replies in
                replies.contains { if case .contactGrant = $0.message { true } else { false } }
            }
            return (Self.drain(peers, until: .now + self.h.linger), regranted)
        }
        var problems: [String] = []
        if !replies.isEmpty { problems.append("strangers' joins were answered: \(Self.describe(replies))") }
        if !regranted { problems.append("the granted guest's join during the flood got no contact.grant within 5 s") }
        let figures = "\(peers.count) contact.joins from fresh keys: \(replies.isEmpty ? "no reply" : Self.describe(replies)); "
            + "the granted guest's join: \(regranted ? "grant again" : "no grant")"
        return self.verdict(window, problems, figures)
    }
}
