import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import Testing
@testable import HomebaseService

@Suite struct GuestRegistryTests {
    static let now: UInt64 = 1_800_000_000_000

    static func open(_ dir: TemporaryDirectory, maxPending: Int = 64) throws -> (HomebaseState, GuestRegistry) {
        let state = try HomebaseState(path: dir.file("state.db"))
        try state.initialize(settings: HomebaseSettings(relayURL: "ws://r/v1"), nowMs: Self.now)
        return (state, try GuestRegistry(state: state, maxPending: maxPending))
    }

    @Test func aGrantIsSignedByTheDeviceKeyOverTheExactPayload() throws {
        let dir = try TemporaryDirectory()
        let (state, registry) = try Self.open(dir)
        let host = try state.deviceKey().publicKey
        let (grant, messages) = try registry.grant(guest: testKey(0x21), models: .only(["a:1", "b:2", "a:1"]),
                                                   expiresAt: Self.now + 60_000, nowMs: Self.now)
        #expect(messages == [.grant(grant.blob), .advert])
        #expect(Signature.verify(grant.blob.signature, message: grant.blob.payload, context: SignatureContext.grant,
                                 publicKey: host))
        #expect(!Signature.verify(grant.blob.signature, message: grant.blob.payload, context: SignatureContext.advert,
                                  publicKey: host))
        let payload = try #require(SignedPayloadJSON.decode(GrantPayload.self, from: grant.blob.payload))
        #expect(payload.host == host.hex)
        #expect(payload.guest == testKey(0x21).hex)
        #expect(payload.models == .only(["a:1", "b:2"]))
        #expect(payload.issuedAt == Self.now)
        #expect(payload.expiresAt == Self.now + 60_000)
        // An invitation: granted though it never joined.
        let record = try #require(registry.record(for: testKey(0x21)))
        #expect(record.state == .granted)
        #expect(record.joinedAtMs == nil)
        #expect(registry.isContact(testKey(0x21)))
        #expect(try registry.pendingOutbox().map(\.kind) == [.grant])
    }

    @Test func badGrantsAreRefused() throws {
        let dir = try TemporaryDirectory()
        let (state, registry) = try Self.open(dir)
        let host = try state.deviceKey().publicKey
        #expect(throws: GuestRegistryError.notAGuest(host)) {
            try registry.grant(guest: host, models: .all, expiresAt: nil, nowMs: Self.now)
        }
        #expect(throws: GuestRegistryError.noModels) {
            try registry.grant(guest: testKey(1), models: .only([]), expiresAt: nil, nowMs: Self.now)
        }
        #expect(throws: GuestRegistryError.alreadyExpired) {
            try registry.grant(guest: testKey(1), models: .all, expiresAt: Self.now, nowMs: Self.now)
        }
        #expect(throws: GuestRegistryError.unknownGuest(testKey(9))) {
            try registry.revoke(guest: testKey(9), nowMs: Self.now)
        }
        #expect(throws: GuestRegistryError.invalidLimit) {
            try registry.setLimits(guest: testKey(9), GuestLimitOverride(maxConcurrent: 0))
        }
        #expect(try registry.guests(nowMs: Self.now).isEmpty)
    }

    @Test func pendingJoinsAreBoundedByEvictingTheOldest() throws {
        let dir = try TemporaryDirectory()
        let (_, registry) = try Self.open(dir, maxPending: 4)
        try registry.grant(guest: testKey(0xF0), models: .all, expiresAt: nil, nowMs: Self.now)
        for i in 0..<10 {
            _ = try registry.recordJoin(guest: testKey(UInt8(i + 1)), name: "s\(i)", nowMs: Self.now + UInt64(i))
        }
        let pending = try registry.guests(nowMs: Self.now).filter { $0.state == .pending }
        #expect(pending.map(\.pubkey) == (7...10).map { testKey(UInt8($0)).hex })
        // Granted guests are never evicted by strangers.
        #expect(registry.record(for: testKey(0xF0))?.state == .granted)
        #expect(!registry.isContact(testKey(1)))
        // A repeated join from a pending guest neither duplicates nor evicts.
        #expect(try registry.recordJoin(guest: testKey(10), name: "again", nowMs: Self.now + 99)
                == .pending(isNew: false, evicted: nil))
    }

    @Test func joinsOfGrantedAndRevokedGuestsReportTheirState() throws {
        let dir = try TemporaryDirectory()
        let (_, registry) = try Self.open(dir)
        try registry.grant(guest: testKey(1), models: .all, expiresAt: nil, nowMs: Self.now)
        guard case .granted(let record) = try registry.recordJoin(guest: testKey(1), name: "Ann", nowMs: Self.now + 5)
        else {
            Issue.record("expected granted")
            return
        }
        #expect(record.joinedAtMs == Self.now + 5)
        #expect(record.name == "Ann")
        try registry.revoke(guest: testKey(1), nowMs: Self.now + 6)
        #expect(try registry.recordJoin(guest: testKey(1), name: "Ann", nowMs: Self.now + 7) == .revoked)
        #expect(registry.record(for: testKey(1))?.state == .revoked)
    }

    @Test func hostileNamesAreCleanedAndCut() {
        #expect(GuestRegistry.sanitised("Ann\u{0}\u{1b}[31m\nB") == "Ann[31mB")
        let long = String(repeating: "é", count: 100)
        let cut = GuestRegistry.sanitised(long)
        #expect(cut.utf8.count <= GuestRegistry.maxNameBytes)
        #expect(cut == String(repeating: "é", count: 32))
    }

    @Test func grantsRevocationsLimitsAndUsageSurviveAReopen() throws {
        let dir = try TemporaryDirectory()
        do {
            let (_, registry) = try Self.open(dir)
            try registry.grant(guest: testKey(1), models: .all, expiresAt: nil, nowMs: Self.now)
            try registry.grant(guest: testKey(2), models: .only(["m"]), expiresAt: Self.now + 10, nowMs: Self.now)
            try registry.revoke(guest: testKey(2), nowMs: Self.now + 1)
            _ = try registry.recordJoin(guest: testKey(3), name: "pat", nowMs: Self.now + 2)
            try registry.setLimits(guest: testKey(1), GuestLimitOverride(tokensPerDay: 5))
            try registry.recordUsage(guest: testKey(1), usage: Usage(promptTokens: 7, completionTokens: 3),
                                     nowMs: Self.now)
            try registry.recordUsage(guest: testKey(1), usage: Usage(promptTokens: 1, completionTokens: 1),
                                     nowMs: Self.now + GuestRegistry.dayMs)
        }
        let (_, reopened) = try Self.open(dir)
        #expect(reopened.record(for: testKey(1))?.state == .granted)
        #expect(reopened.record(for: testKey(1))?.limits == GuestLimits(maxConcurrent: 2, requestsPerMinute: 20,
                                                                         tokensPerDay: 5))
        #expect(reopened.record(for: testKey(2))?.state == .revoked)
        #expect(reopened.record(for: testKey(2))?.revokedAtMs == Self.now + 1)
        #expect(reopened.record(for: testKey(3))?.state == .pending)
        let summaries = try reopened.guests(nowMs: Self.now + GuestRegistry.dayMs)
        #expect(summaries.map(\.state) == [.granted, .pending, .revoked])
        #expect(summaries[0].usage == GuestUsage(requests: 2, promptTokens: 8, completionTokens: 4))
        #expect(summaries[0].usageToday == GuestUsage(requests: 1, promptTokens: 1, completionTokens: 1))
        #expect(try reopened.dailyUsage(guest: testKey(1)).map(\.usage.requests) == [1, 1])
    }

    @Test func leavingForgetsTheGuest() throws {
        let dir = try TemporaryDirectory()
        let (_, registry) = try Self.open(dir)
        try registry.grant(guest: testKey(1), models: .all, expiresAt: nil, nowMs: Self.now)
        try registry.recordUsage(guest: testKey(1), usage: Usage(promptTokens: 1, completionTokens: 1), nowMs: Self.now)
        #expect(try registry.remove(guest: testKey(1)))
        #expect(!registry.isContact(testKey(1)))
        #expect(try registry.pendingOutbox().isEmpty)
        #expect(try registry.dailyUsage(guest: testKey(1)).isEmpty)
        #expect(try !registry.remove(guest: testKey(1)))
    }

    @Test func guestsJSONHasEveryKeyAndNoContent() throws {
        let dir = try TemporaryDirectory()
        let (_, registry) = try Self.open(dir)
        try registry.grant(guest: testKey(1), models: .only(["qwen2.5:7b"]), expiresAt: Self.now + 5,
                           nowMs: Self.now)
        _ = try registry.recordJoin(guest: testKey(2), name: "pat", nowMs: Self.now)
        let json = GuestSummary.json(try registry.guests(nowMs: Self.now + 10))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        #expect(parsed.count == 2)
        #expect(parsed[0]["pubkey"] as? String == testKey(1).hex)
        #expect(parsed[0]["state"] as? String == "granted")
        #expect(parsed[0]["expired"] as? Bool == true)
        #expect(parsed[0]["models"] as? [String] == ["qwen2.5:7b"])
        #expect((parsed[0]["usage"] as? [String: Any])?["prompt_tokens"] as? Int == 0)
        #expect(parsed[1]["state"] as? String == "pending")
        #expect(parsed[1]["models"] is NSNull)
        #expect(Set(parsed[1].keys) == ["pubkey", "name", "state", "expired", "models", "joined_at", "issued_at",
                                        "expires_at", "revoked_at", "limits", "usage", "usage_today"])
    }
}
