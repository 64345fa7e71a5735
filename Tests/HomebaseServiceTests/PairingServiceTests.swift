import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Testing
@testable import HomebaseService

@Suite(.timeLimit(.minutes(1))) struct PairingServiceTests {
    @Test func aHandsetPairsAndEverySiblingLearnsTheNewRoster() async throws {
        let h = try Harness()
        await h.startServing()
        defer { Task { await h.stop() } }
        let first = try await h.pairedHandset(0x11, name: "phone")

        let second = h.device(0x22)
        let code = try h.daemon.pairing.createPairingCode(relayURL: "wss://relay.example.org/v1",
                                                          nowMs: h.clock.value)
        let parsed = try PairingCode.parse(code)
        #expect(parsed.homebase == h.homebase)
        #expect(parsed.relayURL == "wss://relay.example.org/v1")
        #expect(code.hasPrefix("hb1:\(h.homebase.hex):"))

        second.messenger.send(.pairRequest(secret: parsed.secretHex, name: "tablet"), to: h.homebase,
                              channel: .sibling, store: false)
        let accept = await second.inbox.first("pair.accept") { if case .pairAccept = $0 { true } else { false } }
        guard case .pairAccept(let blob) = accept else { return }

        let account = try h.accountKey
        #expect(Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.roster,
                                 publicKey: account))
        let roster = try #require(SignedPayloadJSON.decode(RosterPayload.self, from: blob.payload))
        #expect(roster.account == account.hex)
        #expect(roster.version == 3)
        #expect(roster.devices.map(\.role) == ["homebase", "handset", "handset"])
        #expect(roster.devices.map(\.name) == ["desk", "phone", "tablet"])
        #expect(Set(roster.devicePublicKeys) == [h.homebase, first.key, second.key])

        // The earlier sibling gets the same signed roster (stored); the new device gets no extra `roster`.
        let update = await first.inbox.first("roster") { $0 == .roster(blob) }
        #expect(update != nil)
        #expect(!second.inbox.messages.contains { if case .roster = $0 { true } else { false } })
        #expect(h.directory.siblings == [first.key, second.key].sorted())
        #expect(try h.state.currentRoster()?.blob == blob)
    }

    @Test func wrongExpiredAndReusedCodesAreRejected() async throws {
        let h = try Harness()
        let pairing = h.daemon.pairing
        let now = h.clock.value
        let code = try PairingCode.parse(pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now))

        #expect(try pairing.redeem(sender: testKey(1), secret: String(repeating: "0", count: 32), name: "x",
                                   nowMs: now) == .rejected(.invalidCode))
        #expect(try pairing.redeem(sender: testKey(1), secret: "not hex", name: "x", nowMs: now)
                == .rejected(.invalidCode))
        #expect(try pairing.redeem(sender: testKey(1), secret: code.secretHex + "00", name: "x", nowMs: now)
                == .rejected(.invalidCode))

        guard case .accepted(let roster) = try pairing.redeem(sender: testKey(2), secret: code.secretHex,
                                                             name: "phone", nowMs: now + 1) else {
            Issue.record("a fresh code was not accepted")
            return
        }
        #expect(roster.payload.devicePublicKeys.contains(testKey(2)))
        #expect(try pairing.redeem(sender: testKey(3), secret: code.secretHex, name: "thief", nowMs: now + 2)
                == .rejected(.used))

        let late = try PairingCode.parse(pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now))
        #expect(try pairing.redeem(sender: testKey(4), secret: late.secretHex, name: "late",
                                   nowMs: now + PairingService.codeLifetimeMs) == .rejected(.expired))
        // A rejected attempt never touched the roster.
        #expect(try h.state.currentRoster()?.payload.devicePublicKeys.count == 2)
    }

    /// A `pair.request` delivered again (the daemon killed after redeeming the code, before the relay heard the
    /// ACK: `InboundLedger`) or sent again after a lost pair.accept: the device that used the code is accepted
    /// again, the roster unchanged; anyone else still gets `used`.
    @Test func theDeviceThatUsedACodeIsAcceptedAgain() async throws {
        let h = try Harness()
        let pairing = h.daemon.pairing
        let now = h.clock.value
        let code = try PairingCode.parse(pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now))
        guard case .accepted(let roster) = try pairing.redeem(sender: testKey(2), secret: code.secretHex,
                                                             name: "phone", nowMs: now + 1) else {
            Issue.record("a fresh code was not accepted")
            return
        }
        #expect(try pairing.redeem(sender: testKey(2), secret: code.secretHex, name: "phone", nowMs: now + 2)
                == .accepted(roster))
        #expect(try h.state.currentRoster() == roster)
        #expect(try pairing.redeem(sender: testKey(3), secret: code.secretHex, name: "thief", nowMs: now + 3)
                == .rejected(.used))
    }

    @Test func aRejectIsSentToTheRequester() async throws {
        let h = try Harness()
        await h.startServing()
        defer { Task { await h.stop() } }
        let stranger = h.device(0x33)
        stranger.messenger.send(.pairRequest(secret: String(repeating: "ab", count: 16), name: "x"),
                                to: h.homebase, channel: .sibling, store: false)
        let reject = await stranger.inbox.first("pair.reject") { if case .pairReject = $0 { true } else { false } }
        #expect(reject == .pairReject(reason: "invalid_code"))
        #expect(h.directory.siblings.isEmpty)
    }

    @Test func requestsAreRateLimitedAndAFloodIsNotAnsweredWithoutBound() throws {
        let h = try Harness()
        let pairing = h.daemon.pairing
        let now = h.clock.value
        let code = try PairingCode.parse(pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now))
        let wrong = String(repeating: "1", count: 32)
        for i in 0..<10 {
            #expect(try pairing.redeem(sender: testKey(UInt8(i)), secret: wrong, name: "x", nowMs: now)
                    == .rejected(.invalidCode))
        }
        // Even the right secret is refused while the budget is spent.
        #expect(try pairing.redeem(sender: testKey(99), secret: code.secretHex, name: "x", nowMs: now)
                == .rejected(.rateLimited))
        var outcomes: [PairingOutcome] = []
        for _ in 0..<50 { outcomes.append(try pairing.redeem(sender: testKey(98), secret: wrong, name: "x", nowMs: now)) }
        #expect(outcomes.filter { $0 == .rejected(.rateLimited) }.count == 9)
        #expect(outcomes.filter { $0 == .dropped }.count == 41)

        // A minute later the bucket has refilled.
        #expect(try pairing.redeem(sender: testKey(99), secret: code.secretHex, name: "x", nowMs: now + 60_000)
                != .rejected(.rateLimited))
    }

    @Test func atMostSixteenCodesAreOpen() throws {
        let h = try Harness()
        let now = h.clock.value
        for _ in 0..<PairingService.maxOpenCodes {
            _ = try h.daemon.pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now)
        }
        #expect(try h.state.openPairingCodeCount(nowMs: now) == 16)
        #expect(throws: PairingError.tooManyOpenCodes(16)) {
            try h.daemon.pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now)
        }
        // Once they expire, new ones can be made.
        _ = try h.daemon.pairing.createPairingCode(relayURL: "ws://r/v1", nowMs: now + PairingService.codeLifetimeMs)
    }

    @Test func namesAreCleaned() {
        #expect(PairingService.cleanName("  phone\u{0}\n") == "phone")
        #expect(PairingService.cleanName("") == "handset")
        #expect(PairingService.cleanName(String(repeating: "é", count: 200)).count == PairingService.maxNameLength)
    }
}
