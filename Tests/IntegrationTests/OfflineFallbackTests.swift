import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseRouter
import Testing

/// Issue 4's "done when": a paired handset is served remotely; once the Homebase stops, the next chat answers
/// on-device with reason `offline` in under a second, thanks to the relay's offline RECEIPT (not a watchdog).
@Suite("On-device fallback when the Homebase stops", .serialized, .timeLimit(.minutes(1)))
struct OfflineFallbackTests {
    @Test("remote, then the Homebase stops, then on-device with reason offline in under a second")
    func fallsBackOfflineQuickly() async throws {
        try await IntegrationSystem.with { system in
            let served = await system.handset.chat("What is the weather at home?")
            #expect(served.answer.result.providerKind == .sibling)
            #expect(served.answer.result.fallback == nil)

            await system.homebase.stop()
            let start = ContinuousClock.now
            let after = await system.handset.chat("And now?")
            let elapsed = ContinuousClock.now - start

            // The route is still External (the advert is fresh); the call itself fell back.
            #expect(after.answer.resolution.route == .external)
            #expect(after.answer.result.providerKind == .onDevice)
            #expect(after.answer.result.fallback?.reason == .offline)
            #expect(after.answer.result.fallback?.from == .sibling)
            #expect(after.answer.result.text == FloorProvider().answer(ChatRequest(messages: [.user("And now?")])).text)
            #expect(elapsed < .seconds(1), "fallback took \(elapsed)")
            let json = after.answer.json
            #expect(json["provider"] as? String == "on-device")
            #expect((json["fallback"] as? [String: Any])?["reason"] as? String == "offline")
            print("offline fallback answered in \(elapsed)")
        }
    }
}
