import Foundation
import HomebaseCore
import HomebaseCrypto
import Synchronization

/// What `conformance fleet` is told about a relay fleet under test.
public struct FleetCheckOptions: Sendable {
    /// `ws://…/v1/relay` of two edges of one fleet.
    public var edges: [String]
    /// kill -9 of the second edge, and its restart (waiting until it listens again).
    public var killEdge: String?
    public var restartEdge: String?
    /// kill -9 of one NATS node, and its restart (waiting until it has rejoined).
    public var killNATS: String?
    public var restartNATS: String?
    /// Frames sent across the NATS node's kill and restart.
    public var frames = 400
    public init(edges: [String]) { self.edges = edges }

    var relay: RelayCheckOptions { RelayCheckOptions(url: self.edges[0]) }
}

/// `conformance fleet URL1 URL2`: what only a fleet can get wrong. Nothing stored is lost when an edge or a
/// NATS node dies; a login on another edge takes the key over at once.
public enum FleetChecks {
    public static func checks(_ o: FleetCheckOptions) -> [Check] {
        var list = [Check("fleet-takeover-across-edges") { try Self.takeover(o) }]
        if let kill = o.killEdge, let restart = o.restartEdge {
            list.append(Check("fleet-edge-kill-9") { try await Self.edgeKill(o, kill: kill, restart: restart) })
        }
        if let kill = o.killNATS, let restart = o.restartNATS {
            list.append(Check("fleet-nats-node-kill-9") { try await Self.natsKill(o, kill: kill, restart: restart) })
        }
        return list
    }

    /// K is on edge 1; K logs in on edge 2 and a frame sent to K right after its READY reaches the new login,
    /// while the old one is closed with 4001.
    static func takeover(_ o: FleetCheckOptions) throws -> CheckOutcome {
        let key = SigningSecretKey.generate()
        let old = try RawRelayClient.loggedIn(o.relay, key: key, url: o.edges[0])
        let sender = try RawRelayClient.loggedIn(o.relay, url: o.edges[0])
        defer { sender.close() }
        let new = try RawRelayClient.loggedIn(o.relay, key: key, url: o.edges[1])
        defer { new.close() }
        let readyAt = ContinuousClock.now
        try sender.send(9, to: key.publicKey, payload: Array("after-takeover".utf8))
        let f = try new.next()
        guard case .deliver(_, 0, let p) = f, Array(p) == Array("after-takeover".utf8) else {
            return .fail("the new login got \(f.type), not the live frame sent after its READY")
        }
        let r = try sender.receipt()
        guard r == (9, .delivered) else { return .fail("the sender got \(r), expected (9, 0)") }
        let closed = old.expectClose(4001, timeout: .seconds(2))
        guard closed == .pass else { return closed }
        let ms = (ContinuousClock.now - readyAt) / .milliseconds(1)
        return .passed(String(format: "old login closed 4001 %.1f ms after the new READY", ms))
    }

    /// R (edge 2) holds 40 stored frames unacknowledged; edge 2 dies; R on edge 1 gets all 40 again, same ids,
    /// same order.
    static func edgeKill(_ o: FleetCheckOptions, kill: String, restart: String) async throws -> CheckOutcome {
        let rKey = SigningSecretKey.generate()
        let a = try RawRelayClient.loggedIn(o.relay, url: o.edges[0])
        defer { a.close() }
        let r = try RawRelayClient.loggedIn(o.relay, key: rKey, url: o.edges[1])
        let payloads = (0..<40).map { Array("stored-\($0)".utf8) }
        for (i, p) in payloads.enumerated() {
            try a.send(UInt32(i + 1), to: rKey.publicKey, flags: SendFlags.store, payload: p)
            let got = try a.receipt()
            guard got == (UInt32(i + 1), .delivered) else {
                return .fail("STORE \(i + 1) to a recipient on the other edge got \(got), expected status 0")
            }
        }
        var ids: [UInt64] = []
        for (i, p) in payloads.enumerated() {
            let f = try r.next()
            guard case .deliver(_, let id, let got) = f, id != 0, Array(got) == p else {
                return .fail("frame \(i + 1) not delivered in order on edge 2 (got \(f.type))")
            }
            ids.append(id)
        }
        do { try await HomebaseChecks.shell(kill) } catch { return .fail("kill command failed: \(error)") }
        r.close()
        var c = try RelayChecks.reconnect(o.relay, key: rKey, url: o.edges[0])
        guard c.stored == 40 else { return .fail("on edge 1 after edge 2's kill -9, READY.stored is \(c.stored), expected 40") }
        for (i, id) in ids.enumerated() {
            let f = try c.next()
            guard case .deliver(_, id, let got) = f, Array(got) == payloads[i] else {
                return .fail("redelivery \(i + 1) is not frame \(i + 1) with delivery_id \(id)")
            }
            try c.send(.ack(deliveryID: id))
        }
        try c.send(1, to: RelayChecks.offlineKey())
        _ = try c.receipt()
        c.close()
        c = try RelayChecks.reconnect(o.relay, key: rKey, expectingStored: 0, url: o.edges[0])
        c.close()
        guard c.stored == 0 else { return .fail("acknowledged frames still stored (READY.stored \(c.stored))") }
        do { try await HomebaseChecks.shell(restart) } catch { return .fail("restart command failed: \(error)") }
        return .passed("40 of 40 stored frames redelivered through edge 1")
    }

    /// S (edge 1) sends `frames` frames to R (edge 2), STORE and live in turn, while a NATS node is killed and
    /// restarted. Every frame the relay accepted (STORE: RECEIPT 0 or 1; live: RECEIPT 0) must reach R; a STORE
    /// refused for want of JetStream (RECEIPT 2) is sent again, as a client would.
    static func natsKill(_ o: FleetCheckOptions, kill: String, restart: String) async throws -> CheckOutcome {
        let rKey = SigningSecretKey.generate()
        let s = try RawRelayClient.loggedIn(o.relay, url: o.edges[0])
        defer { s.close() }
        let received = Mutex(Set<String>())
        let stop = Mutex(false)
        let reader = Thread {
            guard let r = try? RawRelayClient.loggedIn(o.relay, key: rKey, url: o.edges[1]) else { return }
            defer { r.close() }
            while !stop.withLock({ $0 }) {
                guard let f = try? r.nextOrNil(timeout: .milliseconds(100)) else { continue }
                if case .deliver(_, let id, let p) = f {
                    _ = received.withLock { $0.insert(String(decoding: p, as: UTF8.self)) }
                    if id != 0 { try? r.send(.ack(deliveryID: id)) }
                }
            }
        }
        reader.start()
        defer { stop.withLock { $0 = true } }
        try await Task.sleep(for: .milliseconds(300))  // R logged in
        var accepted = Set<String>(), liveRefused = 0, storeRetries = 0
        var outstanding: [UInt32: (text: String, store: Bool)] = [:]
        // STOREs refused meanwhile (JetStream electing a new stream leader takes seconds), sent again when due.
        var retries: [(text: String, due: ContinuousClock.Instant)] = []
        var killTask: Task<Void, any Error>?, restartTask: Task<Void, any Error>?
        var nextID: UInt32 = 1
        func send(_ text: String, store: Bool) throws {
            outstanding[nextID] = (text, store)
            try s.send(nextID, to: rKey.publicKey, flags: store ? SendFlags.store : 0, payload: Array(text.utf8))
            nextID += 1
        }
        func readReceipts(wait: Duration) throws {
            while let f = try s.nextOrNil(timeout: wait) {
                guard case .receipt(let id, let status) = f, let sent = outstanding.removeValue(forKey: id) else { continue }
                switch (status, sent.store) {
                case (.delivered, _), (.stored, true): accepted.insert(sent.text)
                case (_, true): retries.append((sent.text, .now + .milliseconds(250)))
                case (_, false): liveRefused += 1
                }
            }
        }
        func resendDue() throws {
            let now = ContinuousClock.now
            let due = retries.filter { $0.due <= now }
            retries.removeAll { $0.due <= now }
            for r in due {
                storeRetries += 1
                try send(r.text, store: true)
            }
        }
        // Spread over about 12 s: the kill at a quarter, the restart at 60 %, so traffic runs on two nodes a while.
        let pace = Duration.milliseconds(max(1, 12_000 / o.frames))
        for i in 0..<o.frames {
            if i == o.frames / 4 { killTask = Task { try await HomebaseChecks.shell(kill) } }
            if i == o.frames * 6 / 10 {
                try await killTask?.value
                restartTask = Task { try await HomebaseChecks.shell(restart) }
            }
            try send("f\(i)", store: i % 2 == 0)
            try readReceipts(wait: pace)
            try resendDue()
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !(outstanding.isEmpty && retries.isEmpty), ContinuousClock.now < deadline {
            try readReceipts(wait: .milliseconds(50))
            try resendDue()
        }
        do { try await restartTask?.value } catch { return .fail("NATS restart command failed: \(error)") }
        let arrivalDeadline = ContinuousClock.now + .seconds(20)
        var missing = accepted.subtracting(received.withLock { $0 })
        while !missing.isEmpty, ContinuousClock.now < arrivalDeadline {
            try await Task.sleep(for: .milliseconds(200))
            missing = accepted.subtracting(received.withLock { $0 })
        }
        let stores = accepted.filter { Int($0.dropFirst())! % 2 == 0 }.count
        let summary = "\(accepted.count) of \(o.frames) accepted (\(stores) stored of \(o.frames / 2)), "
            + "\(liveRefused) live refused with RECEIPT 2, \(storeRetries) STOREs sent again, "
            + "\(outstanding.count + retries.count) unsettled"
        guard missing.isEmpty else { return .fail("\(missing.count) accepted frames never arrived (\(summary))") }
        guard stores == (o.frames + 1) / 2 else { return .fail("not every STORE was taken in the end: \(summary)") }
        return .passed(summary)
    }
}
