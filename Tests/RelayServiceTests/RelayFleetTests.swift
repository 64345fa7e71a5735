import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Testing
@testable import RelayService

/// Two relay edges over one nats-server with JetStream (replicas 1): the rules a fleet adds to Protocol/relay.md's,
/// which a single relay keeps by construction. Skipped where nats-server is missing; tools/fleet-test covers the
/// three-node cluster and the kills.
@Suite(.timeLimit(.minutes(1)), .serialized, .enabled(if: TestNATS.available, "needs nats-server (tools/bootstrap)"))
struct RelayFleetTests {
    /// Two edges over a fresh nats-server; the body gets them, everything is stopped after.
    func withFleet(limits: RelayLimits = RelayLimits(), _ body: (TestRelay, TestRelay) throws -> Void) throws {
        let nats = try TestNATS()
        defer { nats.stop() }
        let e1 = try TestRelay(limits: limits, nats: nats, edgeID: "e1")
        defer { e1.stop() }
        let e2 = try TestRelay(limits: limits, nats: nats, edgeID: "e2")
        defer { e2.stop() }
        try body(e1, e2)
    }

    /// One sender's STORE and live frames, sent without waiting, reach a recipient on another edge in the order
    /// sent: a live frame must not overtake a STORE still on its way into JetStream.
    @Test func oneSendersStoreAndLiveFramesKeepTheirOrderAcrossEdges() throws {
        try self.withFleet { e1, e2 in
            let a = try TestClient(e1), b = try TestClient(e2)
            for i in 0..<20 { try a.send(UInt32(i + 1), to: b.pk, store: i % 2 == 0, payload: [UInt8(i)]) }
            var order: [UInt8] = []
            while order.count < 20 {
                guard case .deliver(let sender, let id, let p) = try b.next() else { continue }
                #expect(sender == a.pk)
                #expect((id != 0) == (p[p.startIndex] % 2 == 0), "STORE frames carry a delivery id, live ones 0")
                order.append(p[p.startIndex])
                if id != 0 { try b.send(.ack(deliveryID: id)) }
            }
            #expect(order == Array(0..<20))
            var statuses: [ReceiptStatus] = []
            for _ in 0..<20 { statuses.append(try a.receipt().1) }
            #expect(statuses.allSatisfy { $0 == .delivered })
        }
    }

    /// A key's login on a second edge gets READY only once the edge holding the key has let it go, so that a
    /// frame sent after READY through the old edge reaches the new login (tools/fleet-test's takeover check once
    /// lost that race on a loaded machine). Edge 1 is kept busy, so it hears the new claim late.
    @Test func aTakeoverIsReadyOnlyOnceTheOldEdgeLetTheKeyGo() throws {
        try self.withFleet { e1, e2 in
            let key = SigningSecretKey.generate()
            let old = try TestClient(e1, key: key)
            e1.server.loop.execute { Thread.sleep(forTimeInterval: 0.6) }
            let start = ContinuousClock.now
            let new = try TestClient(e2, key: key)  // returns at READY
            #expect(ContinuousClock.now - start >= .milliseconds(400), "READY came before edge 1 let the key go")
            #expect(old.closeCode(timeout: .seconds(2)) == 4001)
            let sender = try TestClient(e1)
            try sender.send(9, to: key.publicKey, payload: [4, 2])
            guard case .deliver(_, 0, let p) = try new.next() else { throw TestFailure("no live DELIVER on the new login") }
            #expect(Array(p) == [4, 2])
            #expect(try sender.receipt() == (9, .delivered))
        }
    }

    @Test func aLiveFrameToAKeyHeldNowhereGetsReceipt2AtOnce() throws {
        try self.withFleet { e1, _ in
            let a = try TestClient(e1)
            let start = ContinuousClock.now
            try a.send(5, to: SigningSecretKey.generate().publicKey)
            #expect(try a.receipt() == (5, .recipientOffline))
            // NATS answers "no responders" at once: no time-out is waited for.
            #expect(ContinuousClock.now - start < .milliseconds(500))
        }
    }

    @Test func aStoreForAKeyOnAnotherEdgeIsDeliveredThereWithReceipt0() throws {
        try self.withFleet { e1, e2 in
            let a = try TestClient(e1), b = try TestClient(e2)
            try a.send(7, to: b.pk, store: true, payload: [9, 9])
            guard case .deliver(_, let id, let p) = try b.next() else { throw TestFailure("no DELIVER") }
            #expect(id != 0 && Array(p) == [9, 9])
            #expect(try a.receipt() == (7, .delivered))
        }
    }

    /// JetStream keeps the frame limit per recipient whichever edge stores; the byte limit is counted per edge.
    @Test func theMailboxLimitsHoldPerRecipient() throws {
        var limits = RelayLimits()
        limits.mailboxMaxFrames = 3
        limits.mailboxMaxBytes = 1_000
        try self.withFleet(limits: limits) { e1, e2 in
            let a = try TestClient(e1), c = try TestClient(e2)
            let offline = SigningSecretKey.generate().publicKey
            for i in 1...3 { try a.send(UInt32(i), to: offline, store: true, payload: [UInt8(i)]) }
            for i in 1...3 { #expect(try a.receipt() == (UInt32(i), .stored)) }
            try c.send(4, to: offline, store: true, payload: [4])
            #expect(try c.receipt() == (4, .mailboxFull), "the fourth frame, through the other edge")
            let big = SigningSecretKey.generate().publicKey
            try a.send(5, to: big, store: true, payload: [UInt8](repeating: 1, count: 600))
            #expect(try a.receipt() == (5, .stored))
            try a.send(6, to: big, store: true, payload: [UInt8](repeating: 2, count: 600))
            #expect(try a.receipt() == (6, .mailboxFull), "1,200 bytes would pass 1,000")
        }
    }

    /// A client that logs in on the other edge gets what it did not acknowledge, and an ACK through one edge
    /// is seen by the other.
    @Test func storedFramesFollowTheirRecipientAcrossEdges() throws {
        try self.withFleet { e1, e2 in
            let a = try TestClient(e1)
            let key = SigningSecretKey.generate()
            for i in 1...3 { try a.send(UInt32(i), to: key.publicKey, store: true, payload: [UInt8(i)]) }
            for _ in 1...3 { _ = try a.receipt() }
            let r1 = try TestClient(e2, key: key)
            #expect(r1.ready?.stored == 3)
            var ids: [UInt64] = []
            for _ in 1...3 { if case .deliver(_, let id, _) = try r1.next() { ids.append(id) } }
            try r1.send(.ack(deliveryID: ids[0]))
            try r1.send(1, to: SigningSecretKey.generate().publicKey)
            _ = try r1.receipt()
            r1.ws.close()
            let r2 = try TestClient(e1, key: key)
            #expect(r2.ready?.stored == 2)
            guard case .deliver(_, let first, _) = try r2.next() else { throw TestFailure("no redelivery") }
            #expect(first == ids[1])
        }
    }

    @Test func metricsShowTheNATSConnection() throws {
        try self.withFleet { e1, _ in
            let (_, body) = try e1.httpGet("/metrics")
            #expect(body.contains("relay_nats_connected 1"))
            #expect(body.contains("relay_fleet_keys_held 0"))
        }
    }
}
