import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import Testing
@testable import HomebaseNode

/// A Homebase's `contact.join` (a message whose effect is state the owner commits later: `InboundLedger`) through a
/// real relay: its stored frame is acknowledged only once the owner settled it, so a host killed in between gets
/// it again, handed on (not refused as a replay); one killed after settling, before the ACK went, drops the
/// redelivery as a replay and acknowledges it.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SettledDeliveryTests {
    /// A host messenger on the replay set in `path` (a new process each time: nothing in memory survives).
    struct Host {
        let messenger: RelayMessenger
        let seen: SeenMessageStore

        init(_ relay: LocalRelay, key: SigningSecretKey, path: String) async throws {
            self.seen = try SeenMessageStore(database: Database(path: path), syncsEveryCommit: false)
            self.messenger = RelayMessenger(url: relay.url, key: key, seen: self.seen, relation: { _ in .contact },
                                            logger: .discard(), settledTypes: InboundLedger.hostSettledTypes)
            self.messenger.start()
            var events = self.messenger.events.makeAsyncIterator()
            guard case .connected = await events.next() else { throw MessengerTestError("did not connect") }
        }
    }

    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test func aJoinIsAcknowledgedOnlyOnceSettledAndSurvivesAKillBeforeIt() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settled-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let hostKey = SigningSecretKey.generate()
        let guest = try await connectedMessenger(relay)
        defer { guest.stop() }
        let outcome = await guest.sendAndWait(.contactJoin(name: "Sam"), to: hostKey.publicKey, channel: .contact,
                                              store: true)
        #expect(outcome == .receipt(.stored))

        // Handed on, then killed before its handler committed anything: no ACK went.
        let first = try await Host(relay, key: hostKey, path: path)
        let join = try #require(await nextInbound(first.messenger))
        #expect(join.message == .contactJoin(name: "Sam"))
        first.messenger.stop()

        // The relay delivers it again, and it is handed on again: its id is recorded, but unsettled. A handler
        // that failed (a store error) leaves it unacknowledged too.
        let second = try await Host(relay, key: hostKey, path: path)
        let again = try #require(await nextInbound(second.messenger), "the join was lost: acknowledged before settled")
        #expect(again.messageID == join.messageID)
        #expect(second.messenger.dropCounts["replay"] == nil)
        second.messenger.settle(again, durable: false)
        second.messenger.stop()

        // Killed after the effect was committed and the id settled, before the ACK: a replay, acknowledged.
        let third = try await Host(relay, key: hostKey, path: path)
        let once = try #require(await nextInbound(third.messenger))
        #expect(once.messageID == join.messageID)
        try third.seen.markSettled([.init(sender: once.sender, messageID: once.messageID, sentAtMs: once.sentAtMs)])
        third.messenger.stop()
        let fourth = try await Host(relay, key: hostKey, path: path)
        #expect(await Self.eventually { fourth.messenger.dropCounts["replay"] == 1 })
        fourth.messenger.stop()

        // That ACK went: nothing comes any more.
        let fifth = try await Host(relay, key: hostKey, path: path)
        #expect(await nextInbound(fifth.messenger, timeout: .milliseconds(500)) == nil)
        #expect(fifth.messenger.dropCounts.isEmpty)
        fifth.messenger.stop()
    }

    @Test func settlingAcknowledgesAndOtherMessagesAreAcknowledgedAtOnce() async throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settled-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let hostKey = SigningSecretKey.generate()
        let guest = try await connectedMessenger(relay)
        defer { guest.stop() }
        _ = await guest.sendAndWait(.contactLeave, to: hostKey.publicKey, channel: .contact, store: true)
        _ = await guest.sendAndWait(.advertRequest, to: hostKey.publicKey, channel: .contact, store: true)

        let first = try await Host(relay, key: hostKey, path: path)
        let leave = try #require(await nextInbound(first.messenger))
        #expect(leave.message == .contactLeave)
        #expect(await nextInbound(first.messenger)?.message == .advertRequest)
        first.messenger.settle(leave, durable: true)
        // The settle's ACK is queued behind nothing: give it a moment to reach the relay before the stop.
        try await Task.sleep(for: .milliseconds(200))
        first.messenger.stop()

        // Both were acknowledged: the advert.request as it was handed on, the leave once settled.
        let second = try await Host(relay, key: hostKey, path: path)
        #expect(await nextInbound(second.messenger, timeout: .milliseconds(500)) == nil)
        #expect(second.messenger.dropCounts.isEmpty)
        second.messenger.stop()
    }
}
