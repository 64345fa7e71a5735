import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import HomebaseService
import HomebaseStore
import HomebaseTransport
import Testing

/// A guest's stored `contact.join` and a Homebase killed between receiving it and recording it (issue 23): the
/// relay keeps the frame until the daemon committed the join, so the restarted daemon gets it again and records
/// it; once recorded, nothing comes again.
@Suite("Durable joins", .serialized, .timeLimit(.minutes(1)))
struct DurableJoinTests {
    /// What the daemon's process does up to the handing on of what arrives, on the daemon's state database, and
    /// then nothing more: a kill -9 before the daemon's handler ran.
    static func receiveOnly(_ relayURL: String, state: HomebaseState) async throws -> [InboundMessage] {
        let messenger = RelayMessenger(
            url: relayURL, key: try state.deviceKey(),
            seen: try SeenMessageStore(database: state.database, syncsEveryCommit: false),
            relation: { _ in .stranger }, logger: .discard(), settledTypes: InboundLedger.hostSettledTypes)
        messenger.start()
        let listening = Task {
            var got: [InboundMessage] = []
            for await m in messenger.inbound { got.append(m) }
            return got
        }
        try await Task.sleep(for: .milliseconds(700))
        messenger.stop()  // ends `inbound`
        return await listening.value
    }

    @Test("a join received but not recorded before a kill is delivered again and recorded")
    func aJoinSurvivesAKillBeforeItWasRecorded() async throws {
        let relay = try IntegrationRelay()
        defer { relay.stop() }
        let dir = temporaryDirectory("durable-join")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = try HomebaseState(path: dir + "/state.db")
        _ = try state.initialize(settings: HomebaseSettings(relayURL: relay.url, ollamaURL: "http://127.0.0.1:1",
                                                            deviceName: "integ-homebase"),
                                 nowMs: Posix.wallClockMs)
        let host = try state.deviceKey().publicKey

        let guestKey = SigningSecretKey.generate()
        let guest = RelayMessenger(url: relay.url, key: guestKey, seen: nil, relation: { _ in .contact },
                                   logger: .discard())
        guest.start()
        defer { guest.stop() }
        #expect(await eventually(.seconds(5)) { guest.isConnected })
        let outcome = await guest.sendAndWait(.contactJoin(name: "Sam"), to: host, channel: .contact, store: true)
        #expect(outcome == .receipt(.stored))

        let before = try await Self.receiveOnly(relay.url, state: state)
        #expect(before.map(\.message) == [.contactJoin(name: "Sam")])
        #expect(try GuestRegistry(state: state).currentRecord(for: guestKey.publicKey) == nil)

        // The daemon starts again: the relay still holds the join, and its unsettled id lets it through.
        let homebase = try IntegrationHomebase(relayURL: relay.url, ollamaURL: "http://127.0.0.1:1", directory: dir)
        let registry = try GuestRegistry(state: state)
        let recorded = await eventually(.seconds(10)) {
            (try? registry.currentRecord(for: guestKey.publicKey))?.state == .pending
        }
        #expect(recorded, "the join was lost: acknowledged to the relay before the daemon recorded it")
        // The daemon settled it once recorded (its ACK on the way out), so a later start finds nothing more.
        try await Task.sleep(for: .milliseconds(300))
        await homebase.stop()
        let after = try await Self.receiveOnly(relay.url, state: state)
        #expect(after.isEmpty, "delivered again after it was recorded: \(after.map(\.message.type))")
    }
}
