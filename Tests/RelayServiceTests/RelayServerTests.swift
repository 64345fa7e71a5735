import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Testing
@testable import RelayService

/// The relay against every rule of Protocol/relay.md, over real sockets on 127.0.0.1.
@Suite(.timeLimit(.minutes(1)), .serialized) struct RelayServerTests {
    @Test func healthzAndMetrics() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let (status, body) = try relay.httpGet("/healthz")
        #expect(status == 200 && body == "ok")
        let (ms, metrics) = try relay.httpGet("/metrics")
        #expect(ms == 200)
        #expect(metrics.contains("# TYPE relay_frames_forwarded_total counter"))
        #expect(metrics.contains("relay_frames_dropped_total{reason=\"mailbox_full\"} 0"))
        #expect(try relay.httpGet("/nope").0 == 404)
    }

    @Test func metricsOnASeparateListener() throws {
        let relay = try TestRelay(metricsListener: true)
        defer { relay.stop() }
        let port = try #require(relay.server.metricsPort)
        #expect(try relay.httpGet("/metrics", port: port).0 == 200)
        #expect(try relay.httpGet("/metrics").0 == 404)
    }

    @Test func loginGivesReadyWithTheLimits() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        #expect(a.ready?.stored == 0 && a.ready?.maxPayload == 262_144)
        #expect(a.ws.selectedSubprotocol == "homebase-relay.v1")
    }

    @Test func badSignatureCloses1008() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay, login: false)
        guard case .challenge(_, let nonce, _) = try a.next() else { throw TestFailure("no challenge") }
        let other = SigningSecretKey.generate()
        try a.send(.auth(publicKey: a.pk, signature: other.sign(nonce, context: SignatureContext.relayAuth)))
        #expect(a.closeCode() == 1008)
    }

    @Test func signatureOverTheWrongContextCloses1008() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay, login: false)
        guard case .challenge(_, let nonce, _) = try a.next() else { throw TestFailure("no challenge") }
        try a.send(.auth(publicKey: a.pk, signature: a.key.sign(nonce, context: SignatureContext.advert)))
        #expect(a.closeCode() == 1008)
    }

    @Test func frameBeforeAuthCloses1008() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay, login: false)
        _ = try a.next()
        try a.send(1, to: a.pk)
        #expect(a.closeCode() == 1008)
    }

    @Test func silentClientIsClosedAtTheAuthDeadline() throws {
        var limits = RelayLimits()
        limits.authDeadlineMs = 200
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay, login: false)
        _ = try a.next()
        let start = ContinuousClock.now
        #expect(a.closeCode(timeout: .seconds(4)) == 1008)
        #expect(ContinuousClock.now - start < .seconds(3))
    }

    @Test func slowlorisHTTPIsDroppedAtTheDeadline() throws {
        var limits = RelayLimits()
        limits.authDeadlineMs = 200
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let s = try TCPClientStream.connect(host: "127.0.0.1", port: relay.server.port, timeout: .seconds(1))
        try s.send(Array("GET /v1/relay HTTP/1.1\r\nHost: x\r\n".utf8), deadline: nil)  // never finishes
        let got = try s.receive(maxBytes: 100, timeout: .seconds(4))
        #expect(got.isEmpty)  // closed by the relay
    }

    @Test func textMessageCloses1003() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        try a.ws.send(text: "hello")
        #expect(a.closeCode() == 1003)
    }

    @Test func hugeMessageCloses1009() throws {
        var limits = RelayLimits()
        limits.maxPayloadBytes = 1_000
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        try a.send(1, to: a.pk, payload: [UInt8](repeating: 7, count: limits.maxMessageBytes + 1))
        #expect(a.closeCode() == 1009)
    }

    @Test func payloadOverTheLimitGetsReceipt4() throws {
        var limits = RelayLimits()
        limits.maxPayloadBytes = 1_000
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        #expect(a.ready?.maxPayload == 1_000)
        try a.send(9, to: a.pk, payload: [UInt8](repeating: 7, count: 1_001))
        #expect(try a.receipt() == (9, .payloadTooLarge))
        // Counted where it is refused (issue 38, defect 3: the counter stayed 0), with send_id 0 too.
        try a.send(0, to: a.pk, payload: [UInt8](repeating: 7, count: 1_001))
        try a.send(10, to: a.pk, payload: [UInt8](repeating: 7, count: 1_001))
        #expect(try a.receipt() == (10, .payloadTooLarge))
        #expect(try relay.httpGet("/metrics").1.contains("relay_frames_dropped_total{reason=\"payload_too_large\"} 3\n"))
    }

    @Test func reservedFlagsGetReceipt6() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        try a.send(.send(sendID: 3, recipient: a.pk, flags: 0x82, payload: [1][...]))
        #expect(try a.receipt() == (3, .badFlags))
        try a.send(.send(sendID: 0, recipient: a.pk, flags: 0x82, payload: [1][...]))
        try a.send(.send(sendID: 4, recipient: a.pk, flags: 0x02, payload: [1][...]))
        #expect(try a.receipt() == (4, .badFlags))
        #expect(try relay.httpGet("/metrics").1.contains("relay_frames_dropped_total{reason=\"bad_flags\"} 3\n"))
    }

    @Test func liveFrameIsForwardedWithTheAuthenticatedSender() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        let b = try TestClient(relay)
        try a.send(5, to: b.pk, payload: [9, 8, 7])
        #expect(try a.receipt() == (5, .delivered))
        #expect(try b.next() == .deliver(sender: a.pk, deliveryID: 0, payload: [9, 8, 7][...]))
        // send_id 0 asks for no receipt
        try a.send(0, to: b.pk, payload: [1])
        #expect(try b.next() == .deliver(sender: a.pk, deliveryID: 0, payload: [1][...]))
        try a.send(6, to: b.pk, payload: [2])
        #expect(try a.receipt() == (6, .delivered))
    }

    @Test func offlineRecipientWithoutStoreGetsReceipt2() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        let nobody = SigningSecretKey.generate().publicKey
        let start = ContinuousClock.now
        try a.send(11, to: nobody)
        #expect(try a.receipt() == (11, .recipientOffline))
        #expect(ContinuousClock.now - start < .milliseconds(500))
    }

    @Test func storedFramesAreDeliveredInOrderRedeliveredUntilAckedThenGone() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        let bKey = SigningSecretKey.generate()
        for i in 1...3 {
            try a.send(UInt32(i), to: bKey.publicKey, store: true, payload: [UInt8(i)])
            #expect(try a.receipt() == (UInt32(i), .stored))
        }
        var ids: [UInt64] = []
        do {
            let b = try TestClient(relay, key: bKey)
            #expect(b.ready?.stored == 3)
            for i in 1...3 {
                guard case .deliver(let s, let id, let p) = try b.next() else { throw TestFailure("no DELIVER") }
                #expect(s == a.pk && id != 0 && p == [UInt8(i)][...])
                ids.append(id)
            }
            #expect(ids == ids.sorted())
            try b.send(.ack(deliveryID: ids[0]))
            b.ws.close()
        }
        Thread.sleep(forTimeInterval: 0.2)
        do {
            let b = try TestClient(relay, key: bKey)
            #expect(b.ready?.stored == 2)
            #expect(try b.next() == .deliver(sender: a.pk, deliveryID: ids[1], payload: [2][...]))
            #expect(try b.next() == .deliver(sender: a.pk, deliveryID: ids[2], payload: [3][...]))
            try b.send(.ack(deliveryID: ids[1]))
            try b.send(.ack(deliveryID: ids[2]))
            try b.send(.ack(deliveryID: 999_999))  // unknown: ignored
            b.ws.close()
        }
        Thread.sleep(forTimeInterval: 0.2)
        let b = try TestClient(relay, key: bKey)
        #expect(b.ready?.stored == 0)
    }

    @Test func storeToAnOnlineRecipientIsDeliveredWithItsIDAndReceipt0() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        let b = try TestClient(relay)
        try a.send(1, to: b.pk, store: true, payload: [1])
        try a.send(2, to: b.pk, store: false, payload: [2])
        try a.send(3, to: b.pk, store: true, payload: [3])
        var receipts: [UInt32: ReceiptStatus] = [:]
        for _ in 0..<3 {
            let (id, s) = try a.receipt()
            receipts[id] = s
        }
        #expect(receipts == [1: .delivered, 2: .delivered, 3: .delivered])
        // Order is kept: the live frame waits behind the stored one sent before it.
        guard case .deliver(_, let id1, let p1) = try b.next() else { throw TestFailure("1") }
        #expect(id1 != 0 && p1 == [1][...])
        #expect(try b.next() == .deliver(sender: a.pk, deliveryID: 0, payload: [2][...]))
        guard case .deliver(_, let id3, let p3) = try b.next() else { throw TestFailure("3") }
        #expect(id3 > id1 && p3 == [3][...])
    }

    @Test func fullMailboxGetsReceipt3() throws {
        var limits = RelayLimits()
        limits.mailboxMaxFrames = 2
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let b = SigningSecretKey.generate().publicKey
        for i in 1...2 {
            try a.send(UInt32(i), to: b, store: true)
            #expect(try a.receipt() == (UInt32(i), .stored))
        }
        try a.send(3, to: b, store: true)
        #expect(try a.receipt() == (3, .mailboxFull))
    }

    @Test func newestConnectionWinsAndTheOldOneGets4001() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let key = SigningSecretKey.generate()
        let first = try TestClient(relay, key: key)
        let second = try TestClient(relay, key: key)
        #expect(first.closeCode() == 4001)
        let a = try TestClient(relay)
        try a.send(1, to: key.publicKey, payload: [4])
        #expect(try a.receipt() == (1, .delivered))
        #expect(try second.next() == .deliver(sender: a.pk, deliveryID: 0, payload: [4][...]))
    }

    @Test func theUpgradeAnnouncesTheSendLimits() throws {
        var limits = RelayLimits()
        limits.sendFramesPerSecond = 50
        limits.sendFramesBurst = 75
        limits.sendBytesPerSecond = 1_000_000
        limits.sendBytesBurst = 1_500_000.5
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let ws = try WebSocketClient.connect(relay.url, options: .init(subprotocol: RelayServer.subprotocol))
        #expect(RelaySendLimits(announcedIn: ws.responseHeaders) == RelaySendLimits(limits))
    }

    @Test func aRateGivenAloneBringsItsBurstAndNonFiniteRatesAreRefused() throws {
        var c = RelayConfiguration()
        try c.apply(["send_frames_per_second": "50", "send_bytes_per_second": "1000"])
        #expect(c.limits.sendFramesBurst == 100 && c.limits.sendBytesBurst == 2_000)
        try c.apply(["send_frames_per_second": "50", "send_frames_burst": "7"])
        #expect(c.limits.sendFramesBurst == 7)
        try c.apply(["busy_poll_us": "50"])
        #expect(c.busyPollMicroseconds == 50)
        #expect(throws: RelayConfigurationError.self) { try c.apply(["busy_poll_us": "10001"]) }
        #expect(throws: RelayConfigurationError.self) { try c.apply(["busy_poll_us": "-1"]) }
        for bad in ["inf", "nan", "-1", "0", "1e999", "x"] {
            #expect(throws: RelayConfigurationError.self) { try c.apply(["send_frames_per_second": bad]) }
        }
    }

    @Test func floodingSenderGetsReceipt5() throws {
        var limits = RelayLimits()
        limits.sendFramesPerSecond = 1
        limits.sendFramesBurst = 3
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let b = try TestClient(relay)
        for i in 1...5 { try a.send(UInt32(i), to: b.pk) }
        var statuses: [ReceiptStatus] = []
        for _ in 1...5 { statuses.append(try a.receipt().1) }
        #expect(statuses.filter { $0 == .delivered }.count == 3)
        #expect(statuses.filter { $0 == .rateLimited }.count == 2)
        #expect(try relay.httpGet("/metrics").1.contains("relay_frames_dropped_total{reason=\"rate_limited\"} 2\n"))
    }

    /// Issue 23: a connection sending far over its SEND limits is read at twice them (the relay stops reading it
    /// and TCP pushes back), not as fast as it can push frames the relay then refuses.
    @Test(.timeLimit(.minutes(1)))
    func aFloodIsReadAtTwiceTheSendLimitsNotFaster() throws {
        var limits = RelayLimits()
        limits.sendFramesPerSecond = 100
        limits.sendFramesBurst = 100
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let offline = SigningSecretKey.generate().publicKey
        // 400 frames at once: 200 are read at once (twice the burst), the other 200 at 200 a second.
        try a.ws.send(binaryMessages: (1...400).map {
            RelayFrame.send(sendID: UInt32($0), recipient: offline, flags: 0, payload: [1][...]).encoded()
        })
        var statuses = [try a.receipt().1]
        let started = ContinuousClock.now
        for _ in 2...400 { statuses.append(try a.receipt(timeout: .seconds(10)).1) }
        #expect(ContinuousClock.now - started >= .milliseconds(700))
        #expect(statuses.filter { $0 == .recipientOffline }.count >= 100)
        #expect(statuses.contains(.rateLimited))
        let (_, metrics) = try relay.httpGet("/metrics")
        #expect(!metrics.contains("relay_paced_reads_total 0\n") && metrics.contains("relay_paced_reads_total "))
    }

    /// Issue 23: one connection's messages are handled at most `messagesPerTurn` per loop turn, the others served
    /// in between (a burst of small frames used to hold the loop until all of it was handled).
    @Test(.timeLimit(.minutes(1)))
    func aBurstOfSmallFramesIsHandledInTurns() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        let a = try TestClient(relay)
        let offline = SigningSecretKey.generate().publicKey
        // The loop is held while the burst arrives, so it finds all of it in one read.
        let hold = DispatchSemaphore(value: 0)
        relay.server.loop.execute { hold.wait() }
        try a.ws.send(binaryMessages: (1...1000).map {
            RelayFrame.send(sendID: UInt32($0), recipient: offline, flags: 0, payload: [1][...]).encoded()
        })
        Thread.sleep(forTimeInterval: 0.1)
        hold.signal()
        for _ in 1...1000 { _ = try a.receipt() }
        let (_, metrics) = try relay.httpGet("/metrics")
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("relay_turns_yielded_total ") }
        let yielded = line.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        #expect(yielded >= 1000 / RelayConnection.messagesPerTurn - 1, "\(line ?? "no relay_turns_yielded_total")")
    }

    @Test(.timeLimit(.minutes(1)))
    func aReaderThatStopsIsDroppedFromThenClosed4002() throws {
        var limits = RelayLimits()
        limits.outboundQueueMaxBytes = 256 * 1024
        limits.outboundStallMs = 1_000
        limits.closeFlushTimeoutMs = 500
        limits.pingIntervalMs = 600  // sweeps every 200 ms
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let slow = try TestClient(relay)
        let payload = [UInt8](repeating: 1, count: 60_000)
        var offline = false
        for i in 1...400 where !offline {
            try a.send(UInt32(i), to: slow.pk, payload: payload)
            if try a.receipt().1 == .recipientOffline { offline = true }
        }
        #expect(offline)
        // It reads nothing: after the stall time it is closed (4002), and let go when its close frame cannot go.
        let deadline = ContinuousClock.now + .seconds(10)
        while relay.server.connectionCounts().all > 1, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(relay.server.connectionCounts().all == 1)
        let (_, metrics) = try relay.httpGet("/metrics")
        #expect(metrics.contains("relay_closes_total{reason=\"too_slow\"} 1"))
        #expect(!metrics.contains("relay_frames_dropped_total{reason=\"recipient_slow\"} 0\n"))
    }

    /// Issue 23: a burst larger than the recipient can take at once no longer closes it (4002). Frames past its
    /// queue's bound are dropped (RECEIPT 2) while it reads what it got, and it stays connected: closing it let any
    /// sender knock any device off the relay with a few megabytes.
    @Test(.timeLimit(.minutes(1)))
    func aBurstPastTheQueueDoesNotDisconnectTheRecipient() throws {
        var limits = RelayLimits()
        limits.outboundQueueMaxBytes = 256 * 1024
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let b = try TestClient(relay)
        // B reads nothing while 80 frames of 200 KB (16 MB) arrive at once.
        let payload = [UInt8](repeating: 7, count: 200_000)
        try a.ws.send(binaryMessages: (1...80).map {
            RelayFrame.send(sendID: UInt32($0), recipient: b.pk, flags: 0, payload: payload[...]).encoded()
        })
        var statuses: [ReceiptStatus] = []
        for _ in 1...80 { statuses.append(try a.receipt(timeout: .seconds(10)).1) }
        #expect(statuses.contains(.recipientOffline))
        // B reads what it was given, and is still there for the next frame.
        let delivered = statuses.filter { $0 == .delivered }.count
        for _ in 0..<delivered {
            guard case .deliver(a.pk, 0, let got) = try b.next(timeout: .seconds(10)) else {
                Issue.record("not a DELIVER")
                return
            }
            #expect(got.count == payload.count)
        }
        try a.send(999, to: b.pk, payload: [9])
        #expect(try a.receipt() == (999, .delivered))
        #expect(try b.next() == .deliver(sender: a.pk, deliveryID: 0, payload: [9][...]))
    }

    /// Issue 23: a mailbox of large frames is delivered a queue's worth at a time, not a 64-frame page at once
    /// (16 MiB of maximal frames), which closed any reader that could not take it all at once: a mailbox anyone
    /// can fill kept its owner from ever draining it.
    @Test(.timeLimit(.minutes(1)))
    func aMailboxOfLargeFramesIsDeliveredAQueueAtATime() throws {
        var limits = RelayLimits()
        limits.outboundQueueMaxBytes = 256 * 1024
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let cKey = SigningSecretKey.generate()
        let payload = [UInt8](repeating: 3, count: 200_000)
        for i in 1...64 {
            try a.send(UInt32(i), to: cKey.publicKey, store: true, payload: payload)
            #expect(try a.receipt().1 == .stored)
        }
        let c = try TestClient(relay, key: cKey)
        #expect(c.ready?.stored == 64)
        var ids: [UInt64] = []
        for _ in 1...64 {
            guard case .deliver(_, let id, let got) = try c.next(timeout: .seconds(10)), got.count == payload.count else {
                Issue.record("stored frame \(ids.count + 1) missing")
                return
            }
            ids.append(id)
            try c.send(.ack(deliveryID: id))
        }
        #expect(ids == ids.sorted() && Set(ids).count == 64)
        let (_, metrics) = try relay.httpGet("/metrics")
        #expect(!metrics.contains("too_slow"))
    }

    /// Found by tools/soak: a reader closed 4002 that never reads again never takes its close frame, and the
    /// relay held its socket and queue for good. It is dropped once the close-flush timeout has passed (after the
    /// stall that closes it 4002: a full queue alone no longer does).
    @Test func readerThatNeverReadsIsDroppedAfterTheCloseFlushTimeout() throws {
        var limits = RelayLimits()
        limits.outboundQueueMaxBytes = 256 * 1024
        limits.outboundStallMs = 500
        limits.closeFlushTimeoutMs = 300
        limits.pingIntervalMs = 600  // the sweep runs every 200 ms
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        let silent = try TestClient(relay)
        let payload = [UInt8](repeating: 1, count: 60_000)
        var offline = false
        for i in 1...400 where !offline {
            try a.send(UInt32(i), to: silent.pk, payload: payload)
            if try a.receipt().1 == .recipientOffline { offline = true }
        }
        #expect(offline)
        #expect(relay.server.connectionCounts().all == 2)
        let deadline = ContinuousClock.now + .seconds(5)
        while relay.server.connectionCounts().all > 1, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(relay.server.connectionCounts().all == 1)
        let b = try TestClient(relay)
        try a.send(1, to: b.pk)
        #expect(try a.receipt() == (1, .delivered))
        withExtendedLifetime(silent) {}
    }

    @Test func idleClientIsClosedAfterMissedPings() throws {
        var limits = RelayLimits()
        limits.pingIntervalMs = 300
        limits.idleTimeoutMs = 900
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let a = try TestClient(relay)
        // A client that answers pings stays (receive answers them while it waits).
        let b = try TestClient(relay)
        #expect(try b.ws.receive(timeout: .milliseconds(2_200)) == nil)
        #expect(a.closeCode(timeout: .seconds(2)) == 1001)
        try b.send(1, to: SigningSecretKey.generate().publicKey)
        #expect(try b.receipt() == (1, .recipientOffline))
    }

    @Test func accessTokenIsRequiredWhenConfigured() throws {
        let relay = try TestRelay(admission: Admission(tokens: ["s3cret"]))
        defer { relay.stop() }
        #expect(throws: WebSocketClient.Error.self) { _ = try TestClient(relay) }
        do {
            _ = try TestClient(relay)
        } catch .httpStatus(let status, _) as WebSocketClient.Error {
            #expect(status == 401)
        }
        let a = try TestClient(relay, headers: [("Authorization", "Bearer s3cret")])
        #expect(a.ready != nil)
        let b = try TestClient(relay, url: relay.url + "?token=s3cret")
        #expect(b.ready != nil)
    }

    @Test func keysOutsideTheAllowlistAreClosed1008AndReloadApplies() throws {
        let allowed = SigningSecretKey.generate()
        let relay = try TestRelay(admission: Admission(allowedKeys: [allowed.publicKey]))
        defer { relay.stop() }
        let ok = try TestClient(relay, key: allowed)
        #expect(ok.ready != nil)
        let stranger = SigningSecretKey.generate()
        let s = try TestClient(relay, key: stranger, login: false)
        guard case .challenge(_, let nonce, _) = try s.next() else { throw TestFailure("no challenge") }
        try s.send(.auth(publicKey: stranger.publicKey, signature: stranger.sign(nonce, context: SignatureContext.relayAuth)))
        #expect(s.closeCode() == 1008)
        relay.server.reloadAdmission(Admission(allowedKeys: [allowed.publicKey, stranger.publicKey]))
        let again = try TestClient(relay, key: stranger)
        #expect(again.ready != nil)
    }

    @Test func shutdownClosesClientsWith1012() throws {
        let relay = try TestRelay()
        let a = try TestClient(relay)
        relay.server.shutdown()
        #expect(a.closeCode() == 1012)
        relay.stop()
    }

    @Test func unknownPathAndPlainGetAreRefused() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        #expect(try relay.httpGet("/v1/relay").0 == 400)  // not an upgrade
        #expect(throws: WebSocketClient.Error.self) {
            _ = try WebSocketClient.connect("ws://127.0.0.1:\(relay.server.port)/elsewhere")
        }
    }

    /// Issue 23: connections reaching the auth deadline together are closed `sweepClosesPerTurn` per loop turn,
    /// the other connections served in between (10,000 closed in one turn held the relay up for 250 ms).
    @Test(.timeLimit(.minutes(1)))
    func aWaveOfExpiringConnectionsIsClosedInTurns() throws {
        var limits = RelayLimits()
        limits.authDeadlineMs = 200
        limits.pingIntervalMs = 300
        limits.idleTimeoutMs = 10_000
        let relay = try TestRelay(limits: limits)
        defer { relay.stop() }
        let count = 2 * RelayServer.sweepClosesPerTurn + 100
        var idle: [TCPClientStream] = []
        for _ in 0..<count {
            idle.append(try TCPClientStream.connect(host: "127.0.0.1", port: relay.server.port, timeout: .seconds(2)))
        }
        defer { for s in idle { s.close() } }
        let deadline = ContinuousClock.now + .seconds(10)
        while relay.server.connectionCounts().all > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(relay.server.connectionCounts().all == 0)
        #expect(relay.server.onLoop { relay.server.sweepTurnsDeferred } >= 1)
    }

    @Test func manyIdleConnectionsDoNotDisturbOthers() throws {
        let relay = try TestRelay()
        defer { relay.stop() }
        var idle: [TCPClientStream] = []
        for _ in 0..<500 {
            idle.append(try TCPClientStream.connect(host: "127.0.0.1", port: relay.server.port, timeout: .seconds(2)))
        }
        let a = try TestClient(relay)
        let b = try TestClient(relay)
        try a.send(1, to: b.pk)
        #expect(try a.receipt() == (1, .delivered))
        #expect(relay.server.connectionCounts().all >= 502)
        for s in idle { s.close() }
    }

    /// A relay that stopped is freed, and with it its listeners, its loop's descriptors and its database: the
    /// loop kept the server's flush handler and timers (which capture the server) after `run()` returned.
    @Test func aStoppedRelayIsFreed() throws {
        weak var server: RelayServer?
        do {
            let relay = try TestRelay()
            server = relay.server
            relay.stop()
        }
        // The relay's thread lets go of its closure (and the server) just after `run()` signalled its end.
        let deadline = ContinuousClock.now + .seconds(5)
        while server != nil, ContinuousClock.now < deadline { usleep(1_000) }
        #expect(server == nil)
    }
}
