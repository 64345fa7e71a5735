import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import Testing
@testable import HomebaseService

@Suite struct HomebaseStateTests {
    static let settings = HomebaseSettings(relayURL: "wss://relay.example.org/v1", deviceName: "desk")

    @Test func initialiseCreatesTheIdentityOnceAndASignedFirstRoster() throws {
        let dir = try TemporaryDirectory()
        let state = try HomebaseState(path: dir.file("state.db"))
        #expect(try state.isInitialized == false)
        #expect(throws: HomebaseStateError.notInitialized) { try state.deviceKey() }

        let pk = try state.initialize(settings: Self.settings, nowMs: 1_000)
        let again = try state.initialize(settings: Self.settings, nowMs: 2_000)
        #expect(pk == again)
        #expect(try state.deviceKey().publicKey == pk)

        let account = try #require(try state.accountKey())
        let roster = try #require(try state.currentRoster())
        #expect(roster.version == 1)
        #expect(roster.payload.account == account.publicKey.hex)
        // The Homebase's own entry says it speaks v2 (Protocol/envelope.md §7.8).
        #expect(roster.payload.devices == [RosterPayload.Device(pk: pk.hex, name: "desk", role: "homebase",
                                                                 addedAt: 1_000, envelopes: [1, 2])])
        #expect(Signature.verify(roster.blob.signature, message: roster.blob.payload, context: SignatureContext.roster,
                                 publicKey: account.publicKey))
    }

    @Test func aSecondConnectionSeesSettingsAndTheStateVersionMoves() throws {
        let dir = try TemporaryDirectory()
        let daemonSide = try HomebaseState(path: dir.file("state.db"))
        try daemonSide.initialize(settings: Self.settings, nowMs: 1)
        let before = try daemonSide.stateVersion()

        // The CLI opens its own connection on the same WAL file.
        let cliSide = try HomebaseState(path: dir.file("state.db"))
        var changed = try cliSide.settings()
        changed.pinnedModels = ["qwen2.5:7b"]
        changed.maxConcurrentRequests = 2
        try cliSide.setSettings(changed)

        #expect(try daemonSide.stateVersion() > before)
        #expect(try daemonSide.settings() == changed)
    }

    @Test func advertSeqStrictlyIncreasesAcrossReopen() throws {
        let dir = try TemporaryDirectory()
        var seen: [UInt64] = []
        for _ in 0..<3 {
            let state = try HomebaseState(path: dir.file("state.db"))
            seen.append(try state.nextAdvertSeq())
            seen.append(try state.nextAdvertSeq())
        }
        #expect(seen == [1, 2, 3, 4, 5, 6])
    }

    @Test func hostileLimitsInStoredSettingsAreClamped() throws {
        let dir = try TemporaryDirectory()
        let state = try HomebaseState(path: dir.file("state.db"))
        try state.initialize(settings: Self.settings, nowMs: 1)
        try state.keyValues.setString(#"{"relay_url":"ws://r","max_concurrent_requests":0,"max_queued_requests":-5}"#,
                                      forKey: "homebase.settings")
        let settings = try state.settings()
        #expect(settings.maxConcurrentRequests == 1)
        #expect(settings.maxQueuedRequests == 0)
        #expect(settings.ollamaURL == HomebaseSettings.defaultOllamaURL)

        try state.keyValues.setString("not json", forKey: "homebase.settings")
        #expect(throws: HomebaseStateError.self) { try state.settings() }
    }
}
