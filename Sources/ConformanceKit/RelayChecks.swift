import Foundation
import Synchronization
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// What `conformance relay` is told about the relay under test.
public struct RelayCheckOptions: Sendable {
    /// `ws://` or `wss://` URL of the relay endpoint (`…/v1/relay`).
    public var url: String
    /// `http(s)://host:port` for `/healthz` and `/metrics`; nil skips those checks.
    public var httpBase: String?
    /// Access token (sent as `Authorization: Bearer`); when given, a connection without it must get HTTP 401.
    public var token: String?
    /// Shell command that kill -9s and restarts the relay; enables the durability check.
    public var restartCommand: String?
    /// The relay's auth deadline; the late-auth check waits this plus 2 s (spec: 10 s, so 12 s).
    public var authDeadline: Duration = .seconds(10)
    /// Frames a mailbox holds before RECEIPT 3 (spec default 1,000).
    public var mailboxFrames = 1_000
    /// Frames sent at once to trip the rate limit (spec default burst: 4,000).
    public var rateBurstFrames = 6_000
    /// When true, a relay that does not rate-limit `rateBurstFrames` fails; otherwise that check is skipped.
    public var expectRateLimit = false
    /// Frames stored before the kill -9 in the durability check.
    public var durabilityFrames = 20
    public var caFile: String?
    public var insecureSkipVerify = false
    /// Set: run the hostile suite (`HostileRelayChecks`) instead of the protocol checks.
    public var hostile: HostileOptions?
    /// More endpoints of the same relay (the edges of a fleet, `--also URL`): connections then go to `url` and
    /// these in turn, so the two clients of every check sit on different edges and a reconnect changes edge.
    public var otherURLs: [String] = []
    let rotation = EndpointRotation()

    public init(url: String) { self.url = url }

    /// The endpoint for the next connection.
    func nextURL() -> String {
        guard !self.otherURLs.isEmpty else { return self.url }
        let all = [self.url] + self.otherURLs
        return all[self.rotation.next() % all.count]
    }
}

/// Hands out 0, 1, 2, … across threads.
final class EndpointRotation: Sendable {
    private let counter = Mutex(0)
    func next() -> Int { self.counter.withLock { n in defer { n += 1 }; return n } }
}

/// `conformance relay URL`: every rule of Protocol/relay.md that can be observed from outside, against any relay.
/// Each check uses fresh random keys, so checks do not disturb each other (nor other users of the relay).
public enum RelayChecks {
    public static func checks(_ o: RelayCheckOptions) -> [Check] {
        var list = Self.loginChecks(o) + Self.forwardingChecks(o) + Self.storeChecks(o) + Self.limitChecks(o)
        list += Self.httpChecks(o)
        if o.token != nil {
            list.append(Check("admission-token-required") {
                do {
                    _ = try RawRelayClient(o, withToken: false)
                    return .fail("upgrade without the token was accepted")
                } catch {
                    let text = "\(error)"
                    return text.contains("401") ? .pass : .fail("refused, but not with HTTP 401: \(text)")
                }
            })
        }
        if let command = o.restartCommand {
            list.append(Check("durability-kill-9") { try await Self.durability(o, command: command) })
        }
        return list
    }

    /// A key nobody is connected as.
    static func offlineKey() -> PublicKey { SigningSecretKey.generate().publicKey }

    // MARK: Login (§3)

    static func loginChecks(_ o: RelayCheckOptions) -> [Check] {
        [
            Check("challenge") {
                let a = try RawRelayClient(o), b = try RawRelayClient(o)
                defer { a.close(); b.close() }
                let n1 = try a.challenge(), n2 = try b.challenge()
                // The decoder already requires 32 bytes; fresh means two connections never share one.
                return n1 == n2 ? .fail("two connections got the same nonce") : .pass
            },
            Check("auth-good") {
                let c = try RawRelayClient.loggedIn(o)
                defer { c.close() }
                return c.maxPayload > 0 ? .pass : .fail("READY announces max_payload 0")
            },
            Check("auth-bad-signature") {
                let c = try RawRelayClient(o)
                let nonce = try c.challenge()
                var sig = c.key.sign(nonce, context: SignatureContext.relayAuth)
                sig[10] ^= 0x01
                try c.send(.auth(publicKey: c.publicKey, signature: sig))
                return c.expectClose(1008)
            },
            Check("auth-wrong-context") {
                let c = try RawRelayClient(o)
                let nonce = try c.challenge()
                try c.send(.auth(publicKey: c.publicKey, signature: c.key.sign(nonce, context: SignatureContext.advert)))
                return c.expectClose(1008)
            },
            Check("auth-late") {
                let c = try RawRelayClient(o)
                _ = try c.challenge()
                return c.expectClose(1008, timeout: o.authDeadline + .seconds(2))
            },
            Check("frame-before-auth") {
                let c = try RawRelayClient(o)
                _ = try c.challenge()
                try c.send(1, to: Self.offlineKey())
                return c.expectClose(1008)
            },
            Check("undecodable-frame") {
                let c = try RawRelayClient.loggedIn(o)
                do { try c.ws.send(binary: [0x55, 1, 2, 3]) } catch { return .fail("send failed: \(error)") }
                return c.expectClose(1008)
            },
            Check("unexpected-frame-after-ready") {
                let c = try RawRelayClient.loggedIn(o)
                try c.send(.ready(stored: 0, maxPayload: 0))
                return c.expectClose(1008)
            },
            Check("text-frame-1003") {
                let c = try RawRelayClient.loggedIn(o)
                do { try c.ws.send(text: "hello") } catch { return .fail("send failed: \(error)") }
                return c.expectClose(1003)
            },
            Check("replacement-4001") {
                let key = SigningSecretKey.generate()
                let first = try RawRelayClient.loggedIn(o, key: key)
                let second = try RawRelayClient(o, key: key)
                defer { second.close() }
                let nonce = try second.challenge()
                try second.send(.auth(publicKey: key.publicKey, signature: key.sign(nonce, context: SignatureContext.relayAuth)))
                // Read the old connection's close before READY: a relay may finish the close handshake first.
                let outcome = first.expectClose(4001)
                guard outcome == .pass else { return outcome }
                guard case .ready = try second.next() else { return .fail("the newer connection got no READY") }
                try second.send(1, to: Self.offlineKey())
                let r = try second.receipt()
                return r == (1, .recipientOffline) ? .pass : .fail("the newer connection got \(r) after replacing")
            },
        ]
    }

    // MARK: Forwarding and receipts (§4)

    static func forwardingChecks(_ o: RelayCheckOptions) -> [Check] {
        [
            Check("forward-live-authenticated-sender") {
                let a = try RawRelayClient.loggedIn(o), b = try RawRelayClient.loggedIn(o)
                defer { a.close(); b.close() }
                let payload: [UInt8] = Array("conformance".utf8)
                try a.send(7, to: b.publicKey, payload: payload)
                let f = try b.next()
                guard case .deliver(let sender, let id, let got) = f else { return .fail("B got \(f.type), not DELIVER") }
                guard sender == a.publicKey else { return .fail("DELIVER.sender is not the sending connection's key") }
                guard id == 0 else { return .fail("live DELIVER has delivery_id \(id), expected 0") }
                return Array(got) == payload ? .pass : .fail("payload changed in transit")
            },
            Check("receipt-0-delivered") {
                let a = try RawRelayClient.loggedIn(o), b = try RawRelayClient.loggedIn(o)
                defer { a.close(); b.close() }
                try a.send(0xDEAD_BEEF, to: b.publicKey)
                let r = try a.receipt()
                return r == (0xDEAD_BEEF, .delivered) ? .pass : .fail("got \(r), expected (3735928559, 0)")
            },
            Check("receipt-1-stored") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                try a.send(5, to: Self.offlineKey(), flags: SendFlags.store)
                let r = try a.receipt()
                return r == (5, .stored) ? .pass : .fail("got status \(r.1.rawValue), expected 1 stored")
            },
            Check("receipt-2-offline") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                try a.send(6, to: Self.offlineKey())
                let r = try a.receipt()
                return r == (6, .recipientOffline) ? .pass : .fail("got status \(r.1.rawValue), expected 2 offline")
            },
            Check("receipt-6-bad-flags") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                for (id, flags) in [(UInt32(1), UInt8(0x02)), (2, 0x81)] {
                    try a.send(id, to: Self.offlineKey(), flags: flags)
                    let r = try a.receipt()
                    guard r == (id, .badFlags) else {
                        return .fail("flags 0x\(String(flags, radix: 16)) got status \(r.1.rawValue), expected 6")
                    }
                }
                return .pass
            },
            Check("receipt-send-id-zero-has-none") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                try a.send(0, to: Self.offlineKey())
                try a.send(9, to: Self.offlineKey())
                let r = try a.receipt()
                return r.0 == 9 ? .pass : .fail("a RECEIPT came for send_id 0")
            },
            Check("ack-unknown-ignored") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                try a.send(.ack(deliveryID: 0))
                try a.send(.ack(deliveryID: 0x7FFF_FFFF_FFFF))
                try a.send(3, to: Self.offlineKey())
                let r = try a.receipt()
                return r == (3, .recipientOffline) ? .pass : .fail("after unknown ACKs got \(r)")
            },
        ]
    }

    // MARK: Store and forward (§5)

    static func storeChecks(_ o: RelayCheckOptions) -> [Check] {
        [
            Check("store-to-online-recipient") {
                let a = try RawRelayClient.loggedIn(o), b = try RawRelayClient.loggedIn(o)
                defer { a.close(); b.close() }
                try a.send(1, to: b.publicKey, flags: SendFlags.store)
                let f = try b.next()
                guard case .deliver(let sender, let id, _) = f, sender == a.publicKey else {
                    return .fail("B got \(f.type), not a DELIVER from A")
                }
                guard id != 0 else { return .fail("a STORE frame was delivered with delivery_id 0") }
                try b.send(.ack(deliveryID: id))
                let r = try a.receipt()
                return r == (1, .delivered) ? .pass : .fail("receipt \(r.1.rawValue), expected 0")
            },
            Check("store-and-forward") { try Self.storeAndForward(o) },
        ]
    }

    static func storeAndForward(_ o: RelayCheckOptions) throws -> CheckOutcome {
        let a = try RawRelayClient.loggedIn(o)
        defer { a.close() }
        let cKey = SigningSecretKey.generate()
        let payloads: [[UInt8]] = (1...3).map { [UInt8($0), 0xAB, UInt8($0)] }
        for (i, p) in payloads.enumerated() {
            try a.send(UInt32(i + 1), to: cKey.publicKey, flags: SendFlags.store, payload: p)
            let r = try a.receipt()
            guard r.1 == .stored else { return .fail("frame \(i + 1) got receipt \(r.1.rawValue), expected 1 stored") }
        }
        // First connection: READY counts 3, then 3 DELIVERs in order; ACK only the first.
        var c = try RawRelayClient.loggedIn(o, key: cKey)
        guard c.stored == 3 else { return .fail("READY.stored is \(c.stored), expected 3") }
        var ids: [UInt64] = []
        for (i, p) in payloads.enumerated() {
            let f = try c.next()
            guard case .deliver(let sender, let id, let got) = f else { return .fail("stored frame \(i + 1) missing") }
            guard sender == a.publicKey, Array(got) == p else { return .fail("stored frame \(i + 1) out of order") }
            guard id != 0, id > (ids.last ?? 0) else { return .fail("delivery_ids not increasing: \(ids + [id])") }
            ids.append(id)
        }
        try c.send(.ack(deliveryID: ids[0]))
        // An ACK is fire-and-forget; a round trip (a SEND and its RECEIPT) makes sure the relay has read it.
        try c.send(1, to: Self.offlineKey())
        _ = try c.receipt()
        c.close()
        // Second connection: the two unacknowledged frames again, same ids, same order.
        c = try Self.reconnect(o, key: cKey, expectingStored: 2)
        guard c.stored == 2 else { return .fail("after ACK of 1 of 3, READY.stored is \(c.stored), expected 2") }
        for (i, id) in ids.dropFirst().enumerated() {
            let f = try c.next()
            guard case .deliver(_, let got, let p) = f, got == id, Array(p) == payloads[i + 1] else {
                return .fail("redelivery \(i + 1) is not frame \(i + 2) with delivery_id \(id)")
            }
        }
        try c.send(.ack(deliveryID: ids[1]))
        try c.send(.ack(deliveryID: ids[2]))
        try c.send(1, to: Self.offlineKey())
        _ = try c.receipt()
        c.close()
        // Third connection: nothing left.
        c = try Self.reconnect(o, key: cKey, expectingStored: 0)
        defer { c.close() }
        guard c.stored == 0 else { return .fail("acknowledged frames still stored (READY.stored \(c.stored))") }
        if let f = try c.nextOrNil(timeout: .milliseconds(500)) { return .fail("unexpected \(f.type) after all ACKs") }
        return .pass
    }

    /// Logs in again as `key`; retries briefly, since the relay may not yet have noticed the old connection end.
    static func reconnect(_ o: RelayCheckOptions, key: SigningSecretKey, within: Duration = .seconds(5),
                          url: String? = nil) throws -> RawRelayClient
    {
        let deadline = ContinuousClock.now + within
        while true {
            do { return try RawRelayClient.loggedIn(o, key: key, url: url) } catch {
                if ContinuousClock.now > deadline { throw error }
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    /// Logs in again as `key` until READY counts `stored` frames, for up to `settle`; returns the last login.
    ///
    /// An ACK has no reply and delivery is at-least-once (§5), so the SEND round trip after it shows only that
    /// the relay read it, not that the frame is gone: a fleet's other edge can count before this edge's delete
    /// has landed. A count above `stored` is read again; one that stays for `settle` is the caller's failure.
    static func reconnect(_ o: RelayCheckOptions, key: SigningSecretKey, expectingStored stored: UInt32,
                          settle: Duration = .seconds(2), url: String? = nil) throws -> RawRelayClient
    {
        let deadline = ContinuousClock.now + settle
        while true {
            let c = try Self.reconnect(o, key: key, url: url)
            guard c.stored > stored, ContinuousClock.now < deadline else { return c }
            c.close()
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    // MARK: Limits (§6)

    static func limitChecks(_ o: RelayCheckOptions) -> [Check] {
        [
            Check("receipt-3-mailbox-full") { try Self.mailboxFull(o) },
            Check("receipt-4-payload-too-large") {
                let a = try RawRelayClient.loggedIn(o)
                defer { a.close() }
                try a.send(1, to: Self.offlineKey(), payload: [UInt8](repeating: 0x42, count: Int(a.maxPayload) + 1))
                let r = try a.receipt()
                guard r == (1, .payloadTooLarge) else { return .fail("got status \(r.1.rawValue), expected 4") }
                try a.send(2, to: Self.offlineKey())
                let after = try a.receipt()
                return after == (2, .recipientOffline) ? .pass : .fail("connection unusable after RECEIPT 4")
            },
            Check("receipt-5-rate-limited") { try Self.rateLimit(o) },
            Check("oversize-1009") {
                let a = try RawRelayClient.loggedIn(o)
                // Far over any sensible hard limit for this max_payload (spec: max_payload + 64 KiB + 38).
                let size = 2 * Int(a.maxPayload) + 128 * 1024
                try? a.send(1, to: Self.offlineKey(), payload: [UInt8](repeating: 0x42, count: size))
                return a.expectClose(1009)
            },
        ]
    }

    static func mailboxFull(_ o: RelayCheckOptions) throws -> CheckOutcome {
        let a = try RawRelayClient.loggedIn(o)
        defer { a.close() }
        let target = Self.offlineKey()
        var sent = 0
        while sent < o.mailboxFrames {
            let n = min(100, o.mailboxFrames - sent)
            try a.sendBurst((0..<n).map { i in
                .send(sendID: UInt32(sent + i + 1), recipient: target, flags: SendFlags.store, payload: [7][...])
            })
            for _ in 0..<n {
                let (id, status) = try a.receipt(timeout: .seconds(10))
                guard status == .stored else {
                    return .fail("frame \(id) of \(o.mailboxFrames) got status \(status.rawValue), expected 1 stored")
                }
            }
            sent += n
        }
        try a.send(UInt32(sent + 1), to: target, flags: SendFlags.store, payload: [7])
        let r = try a.receipt()
        return r.1 == .mailboxFull ? .pass
            : .fail("frame \(sent + 1) to a full mailbox got status \(r.1.rawValue), expected 3")
    }

    static func rateLimit(_ o: RelayCheckOptions) throws -> CheckOutcome {
        let a = try RawRelayClient.loggedIn(o)
        defer { a.close() }
        let target = Self.offlineKey()
        var sent = 0
        while sent < o.rateBurstFrames {
            let n = min(500, o.rateBurstFrames - sent)
            try a.sendBurst((0..<n).map { i in
                .send(sendID: UInt32(sent + i + 1), recipient: target, flags: 0, payload: [7][...])
            })
            sent += n
        }
        var counts: [UInt8: Int] = [:]
        for _ in 0..<sent {
            let (_, status) = try a.receipt(timeout: .seconds(10))
            counts[status.rawValue, default: 0] += 1
        }
        if let limited = counts[5], limited > 0 { return .pass }
        let summary = counts.sorted { $0.key < $1.key }.map { "\($0.value)x\($0.key)" }.joined(separator: " ")
        let why = "no RECEIPT 5 for \(sent) frames sent at once (\(summary)); the relay's limit may be higher"
        return o.expectRateLimit ? .fail(why) : .skip(why)
    }

    // MARK: HTTP (§1)

    static func httpChecks(_ o: RelayCheckOptions) -> [Check] {
        guard let base = o.httpBase.map({ $0.hasSuffix("/") ? String($0.dropLast()) : $0 }) else {
            return [
                Check("healthz") { .skip("no --http BASE given") },
                Check("metrics") { .skip("no --http BASE given") },
            ]
        }
        @Sendable func get(_ path: String) async throws -> (Int, String) {
            let r = try await HTTPClient().send(HTTPRequest(
                url: base + path, timeout: .seconds(5), caFile: o.caFile, insecureSkipVerify: o.insecureSkipVerify))
            return (r.head.status, String(decoding: r.body, as: UTF8.self))
        }
        return [
            Check("healthz") {
                let (status, body) = try await get("/healthz")
                guard status == 200 else { return .fail("GET /healthz answered \(status)") }
                return body.trimmingCharacters(in: .whitespacesAndNewlines) == "ok" ? .pass : .fail("body is not `ok`")
            },
            Check("metrics") {
                let (status, body) = try await get("/metrics")
                guard status == 200 else { return .fail("GET /metrics answered \(status)") }
                return body.contains("# TYPE ") ? .pass : .fail("no `# TYPE` line: not Prometheus text format")
            },
        ]
    }

    // MARK: Durability (§5, kill -9)

    static func durability(_ o: RelayCheckOptions, command: String) async throws -> CheckOutcome {
        let dKey = SigningSecretKey.generate()
        let payloads: [[UInt8]] = (0..<o.durabilityFrames).map { i in Array("durable-\(i)".utf8) }
        do {
            let a = try RawRelayClient.loggedIn(o)
            defer { a.close() }
            for (i, p) in payloads.enumerated() {
                try a.send(UInt32(i + 1), to: dKey.publicKey, flags: SendFlags.store, payload: p)
                let r = try a.receipt()
                guard r.1 == .stored else { return .fail("frame \(i + 1) got receipt \(r.1.rawValue), expected 1") }
            }
        }
        // Foundation's blocking waitUntilExit() hung here on Linux when the command left a background child (the
        // restarted relay); the termination handler does not.
        do { try await HomebaseChecks.shell(command) } catch { return .fail("restart command failed: \(error)") }
        let d = try Self.reconnect(o, key: dKey, within: .seconds(20))
        defer { d.close() }
        guard d.stored == UInt32(payloads.count) else {
            return .fail("after kill -9 READY.stored is \(d.stored), expected \(payloads.count)")
        }
        for (i, p) in payloads.enumerated() {
            let f = try d.next()
            guard case .deliver(_, let id, let got) = f, Array(got) == p else {
                return .fail("frame \(i + 1) of \(payloads.count) missing or out of order after kill -9")
            }
            try d.send(.ack(deliveryID: id))
        }
        return .pass
    }
}
