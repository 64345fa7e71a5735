import Synchronization
import HomebaseCore
import HomebaseNode
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct HomebaseDaemonTests {
    @Test func stopEndsRunAndCancelsInFlightRequests() async throws {
        let engine = FakeEngine([.text("long answer"), .hang])
        let h = try Harness(engine: engine)
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        h.request("s1", from: phone.messenger)
        _ = await phone.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        await h.stop()
        #expect(engine.cancellations == 1)
        #expect(h.daemon.inference.activeCount == 0)
        // Nothing more is sent for the cancelled request.
        #expect(phone.inbox.inference("s1").count == 2)
    }

    /// Replay ids committed without a sync are synced by the daemon within a state poll, each time.
    @Test func theDaemonSyncsTheReplaySet() async throws {
        let h = try Harness(unsyncedSeen: true)
        let seen = try #require(h.seen)
        await h.startServing()
        for id: UInt8 in 1...2 {
            #expect(try seen.insertIfNew(sender: testKey(0x31), messageID: [id], sentAtMs: h.clock.value))
            await eventually("synced by the state poll") { !seen.hasUnsyncedIDs }
        }
        await h.stop()
    }

    @Test func aPairingMadeByAnotherProcessIsPickedUp() async throws {
        let h = try Harness()
        await h.startServing()
        // The CLI's own connection: it pairs a device by writing the state database directly.
        let cli = try HomebaseState(path: h.directoryOnDisk.file("state.db"))
        let pairing = PairingService(state: cli)
        let code = try PairingCode.parse(pairing.createPairingCode(relayURL: "ws://r", nowMs: h.clock.value))
        _ = try pairing.redeem(sender: testKey(0x55), secret: code.secretHex, name: "laptop", nowMs: h.clock.value)
        await eventually("directory reloaded") { h.directory.siblings == [testKey(0x55)] }

        // Settings written by the CLI reach admission control.
        var settings = try cli.settings()
        settings.maxConcurrentRequests = 1
        settings.maxQueuedRequests = 0
        try cli.setSettings(settings)
        let engine = h.engine
        engine.setScript([.waitForGate, .finish(.stop, nil)])
        let laptop = h.device(0x55)
        await eventually("limits applied") {
            let limits = h.daemon.inference.currentLimits
            return limits.maxConcurrent == 1 && limits.maxQueued == 0
        }
        h.request("a", from: laptop.messenger)
        h.request("b", from: laptop.messenger)
        #expect(await laptop.inbox.finished("b").map(\.errorCode) == ["busy"])
        engine.gate.open()
        _ = await laptop.inbox.finished("a")

        // And pinned models reach the runtime monitor, without a restart.
        try cli.setSettings(try cli.settings().applying([.pin(["qwen2.5:7b"])]))
        await eventually("pins applied") { h.runtime.pinned == ["qwen2.5:7b"] }
        await h.stop()
    }

    @Test func siblingsRosterAndAdvertsAreIgnored() async throws {
        let h = try Harness()
        let phone = try h.enrolledHandset(0x11)
        await h.startServing()
        let roster = try #require(try h.state.currentRoster())
        phone.messenger.send(.roster(roster.blob), to: h.homebase, channel: .sibling, store: false)
        phone.messenger.send(.advert(roster.blob), to: h.homebase, channel: .sibling, store: false)
        phone.messenger.send(.advertRequest, to: h.homebase, channel: .sibling, store: false)
        _ = await phone.inbox.first("advert answer") { if case .advert = $0 { true } else { false } }
        await eventually("two adverts") { phone.inbox.messages.filter { if case .advert = $0 { true } else { false } }.count == 2 }
        #expect(h.hub.sent.filter { $0.from == h.homebase }.map(\.type) == ["advert", "advert"])
        await h.stop()
    }
}

@Suite(.timeLimit(.minutes(1))) struct HomebaseDaemonStopRaceTests {
    /// `stop()` arriving while `run()` is suspended in its start-up work (actor reentrancy) must still end `run()`;
    /// before the fix the loops started after the stop and `run()` never returned (a hung test run).
    @Test func stopDuringStartUpEndsRun() async throws {
        for _ in 0..<30 {
            let h = try Harness()
            h.start()
            await Task.yield()
            let done = Atomic<Bool>(false)
            Task { await h.stop(); done.store(true, ordering: .releasing) }
            let deadline = ContinuousClock.now + .seconds(3)
            while !done.load(ordering: .acquiring), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let ended = done.load(ordering: .acquiring)
            #expect(ended)
            if !ended { return }
        }
    }
}
