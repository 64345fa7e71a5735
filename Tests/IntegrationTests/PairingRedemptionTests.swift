import Foundation
import HomebaseCore
import HomebaseRouter
import HomebaseService
import Testing

/// Pairing codes over the real relay: single use, and 10 minutes of validity. The code's age is injected
/// through `createPairingCode(nowMs:)` (the daemon checks it against the wall clock), so nobody waits.
@Suite("Pairing codes through the relay", .serialized, .timeLimit(.minutes(1)))
struct PairingRedemptionTests {
    @Test("a code pairs one device; reusing it is rejected as used with a clear message")
    func reusedCodeRejected() async throws {
        let relay = try IntegrationRelay()
        let ollama = try IntegrationOllama()
        let homebase = try IntegrationHomebase(relayURL: relay.url, ollamaURL: ollama.url)
        let first = try IntegrationHandset(relayURL: relay.url)
        let second = try IntegrationHandset(relayURL: relay.url)
        do {
            let code = try homebase.pairingCode()
            let ok = try await first.pair(code: code)
            guard case .success(let roster) = ok else { throw IntegrationFailure("first pairing failed: \(ok)") }
            #expect(roster.devicePublicKeys.contains(first.session.publicKey))
            #expect(first.session.account.isPaired)

            let again = try await second.pair(code: code)
            #expect(again.failureValue == .rejected(reason: "used"))
            #expect(again.failureValue?.description.contains("each code pairs one device") == true)
            #expect(!second.session.account.isPaired)
            // The roster still lists only the Homebase and the first handset.
            let devices = try homebase.state.currentRoster()?.payload.devices.map(\.pk) ?? []
            #expect(!devices.contains(second.session.publicKey.hex))
        } catch { Issue.record(error) }
        first.stop()
        second.stop()
        await homebase.stop()
        ollama.stop()
        relay.stop()
    }

    @Test("an expired code is rejected as expired")
    func expiredCodeRejected() async throws {
        let relay = try IntegrationRelay()
        let ollama = try IntegrationOllama()
        let homebase = try IntegrationHomebase(relayURL: relay.url, ollamaURL: ollama.url)
        let handset = try IntegrationHandset(relayURL: relay.url)
        do {
            let code = try homebase.pairingCode(ageMs: PairingService.codeLifetimeMs + 1_000)
            let result = try await handset.pair(code: code)
            #expect(result.failureValue == .rejected(reason: "expired"))
            #expect(result.failureValue?.description.contains("codes last 10 minutes") == true)
            #expect(!handset.session.account.isPaired)
            // One second short of expiry still pairs.
            let fresh = try homebase.pairingCode(ageMs: PairingService.codeLifetimeMs - 1_000)
            let ok = try await handset.pair(code: fresh)
            #expect(ok.failureValue == nil)
        } catch { Issue.record(error) }
        handset.stop()
        await homebase.stop()
        ollama.stop()
        relay.stop()
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
