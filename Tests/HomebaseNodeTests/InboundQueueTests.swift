import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import Testing
@testable import HomebaseNode

/// The messenger's inbound queue is bounded without loss (issue 38, defect 1): a message the consumer has no room
/// for is refused before its replay id is recorded or its frame acknowledged, and counted. Before, `inbound` was an
/// `AsyncStream` that forgot the oldest messages of a burst after they had been acknowledged to the relay.
@Suite(.serialized, .timeLimit(.minutes(1))) struct InboundQueueTests {
    static func message(_ n: Int) -> InboundMessage {
        InboundMessage(sender: PublicKey(bytes: Array(repeating: 7, count: 32))!, channel: .contact,
                       message: .contactJoin(name: "n\(n)"), sentAtMs: 1, messageID: [UInt8(n)])
    }

    /// A relay, a state folder for the host (which is not connected yet), and a connected sender.
    struct Rig {
        let relay: LocalRelay
        let dir: String
        let hostKey = SigningSecretKey.generate()
        let sender: RelayMessenger

        init() async throws {
            self.relay = try LocalRelay()
            self.dir = FileManager.default.temporaryDirectory.appendingPathComponent("inbound-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: self.dir, withIntermediateDirectories: true)
            self.sender = try await connectedMessenger(self.relay)
        }

        func stop() {
            self.sender.stop()
            self.relay.stop()
            try? FileManager.default.removeItem(atPath: self.dir)
        }
    }

    @Test func reservationsNeverPassTheCapacityAndTakingFreesAPlace() async {
        let queue = InboundQueue(capacity: 3)
        #expect(queue.reserve(2) == 2)
        #expect(queue.reserve(5) == 1)
        #expect(queue.reserve(1) == 0)
        queue.yield(Self.message(0))
        queue.yield(Self.message(1))
        queue.release()  // the third place went to no message (handled inline)
        #expect(queue.count == 2)
        var it = queue.messages.makeAsyncIterator()
        #expect(await it.next()?.messageID == [0])
        #expect(queue.count == 1)
        #expect(queue.reserve(9) == 2)
        queue.release(2)
        #expect(await it.next()?.messageID == [1])
        #expect(queue.count == 0)
        queue.finish()
        #expect(await it.next() == nil)
    }

    @Test func aYieldAfterTheConsumerEndedGivesItsPlaceBack() {
        let queue = InboundQueue(capacity: 1)
        queue.finish()
        #expect(queue.reserve(1) == 1)
        queue.yield(Self.message(0))
        #expect(queue.count == 0)
    }

    /// Five stored frames reach a host whose consumer takes nothing: two fit, three are refused (counted), and the
    /// refused ones are neither recorded as seen nor acknowledged, so the next connection gets exactly them.
    @Test func aBurstPastTheCapacityIsRefusedUnacknowledgedAndComesAgain() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let (relay, dir, hostKey, sender) = (rig.relay, rig.dir, rig.hostKey, rig.sender)
        for n in 0..<5 {
            let outcome = await sender.sendAndWait(.contactJoin(name: "n\(n)"), to: hostKey.publicKey,
                                                   channel: .contact, store: true)
            #expect(outcome == .receipt(.stored))
        }

        func host(capacity: Int) async throws -> RelayMessenger {
            let seen = try SeenMessageStore(database: Database(path: dir + "/state.db"), syncsEveryCommit: false)
            let m = RelayMessenger(url: relay.url, key: hostKey, seen: seen, relation: { _ in .contact },
                                   logger: .discard(), inboundCapacity: capacity)
            m.start()
            var events = m.events.makeAsyncIterator()
            guard case .connected = await events.next() else { throw MessengerTestError("did not connect") }
            return m
        }
        /// Up to `count` joins' names, waiting at most 5 s (a lost message must fail the test, not hang it).
        func names(_ m: RelayMessenger, _ count: Int) async -> [String] {
            await withTaskGroup(of: [String]?.self) { group in
                group.addTask {
                    var it = m.inbound.makeAsyncIterator()
                    var names: [String] = []
                    for _ in 0..<count {
                        guard case .contactJoin(let name)? = await it.next()?.message else { break }
                        names.append(name)
                    }
                    return names
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(5))
                    return nil
                }
                let first = await group.next()!
                group.cancelAll()
                return first ?? ["timed out"]
            }
        }

        let first = try await host(capacity: 2)
        #expect(await SettledDeliveryTests.eventually { first.dropCounts[RelayMessenger.inboundFullReason] == 3 })
        #expect(await names(first, 2) == ["n0", "n1"])
        // The two taken were acknowledged as they were handed on: let those ACKs reach the relay.
        try await Task.sleep(for: .milliseconds(200))
        first.stop()

        let second = try await host(capacity: 16)
        #expect(await names(second, 3) == ["n2", "n3", "n4"], "refused messages were lost")
        #expect(second.dropCounts.isEmpty, "a refused message was recorded as seen: \(second.dropCounts)")
        try await Task.sleep(for: .milliseconds(200))
        second.stop()

        let third = try await host(capacity: 16)
        #expect(await nextInbound(third, timeout: .milliseconds(500)) == nil)
        third.stop()
    }

    /// Issue 38, defect 3: a state database that cannot record replay ids is counted as `store_error`, not as a
    /// replay, and the message stays unacknowledged (it comes again once the store works).
    @Test func aReplayStoreFailureIsCountedAsAStoreErrorNotAReplay() async throws {
        let rig = try await Rig()
        defer { rig.stop() }
        let (relay, dir, hostKey, sender) = (rig.relay, rig.dir, rig.hostKey, rig.sender)
        #expect(await sender.sendAndWait(.contactJoin(name: "Sam"), to: hostKey.publicKey, channel: .contact,
                                         store: true) == .receipt(.stored))

        func host(breakStore: Bool) async throws -> RelayMessenger {
            let db = try Database(path: dir + "/state.db")
            let seen = try SeenMessageStore(database: db, syncsEveryCommit: false)
            if breakStore { try db.execute("DROP TABLE seen_messages") }
            let m = RelayMessenger(url: relay.url, key: hostKey, seen: seen, relation: { _ in .contact },
                                   logger: .discard())
            m.start()
            var events = m.events.makeAsyncIterator()
            guard case .connected = await events.next() else { throw MessengerTestError("did not connect") }
            return m
        }
        let broken = try await host(breakStore: true)
        #expect(await SettledDeliveryTests.eventually { broken.dropCounts[RelayMessenger.storeErrorReason] == 1 })
        #expect(broken.dropCounts["replay"] == nil)
        broken.stop()
        try FileManager.default.removeItem(atPath: dir + "/state.db")

        let working = try await host(breakStore: false)
        #expect(await nextInbound(working)?.message == .contactJoin(name: "Sam"), "the message was acknowledged")
        working.stop()
    }
}
