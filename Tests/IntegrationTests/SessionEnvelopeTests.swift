import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseNode
import HomebaseDevice
import HomebaseRouter
import HomebaseService
import HomebaseTransport
import Testing

/// Issue 25's "done when": a handset and a guest each stream through v2 envelopes (Protocol/envelope.md §7)
/// with a real Homebase, relay and emulator; the rest of the suite (every other integration test) is the v1
/// traffic that still flows, adverts and grants included.
@Suite("v2 envelopes end to end", .serialized, .timeLimit(.minutes(1)))
struct SessionEnvelopeTests {
    @Test("a paired handset streams through a v2 session")
    func handsetStreamsOverASession() async throws {
        try await IntegrationSystem.with(tokensPerSecond: 200) { system in
            let prompt = "Tell me about rivers and stones"
            let (events, answer, _) = await system.handset.chat(prompt)
            #expect(answer.result.providerKind == .sibling && answer.result.fallback == nil)
            #expect(answer.result.text == IntegrationOllama.expectedText(prompt))
            #expect(events.restartReasons.isEmpty)
            #expect(answer.envelope == 2 && answer.json["envelope"] as? Int == 2)
            let m = try #require(system.handset.session.messenger as? RelayMessenger)
            // The Homebase's signed advert said v2: the request went on a session the handset made, and the
            // accept, the chunks and the done came back on it.
            #expect(m.envelopeVersion(for: system.homebase.publicKey) == 2)
            #expect(m.sessionCounts.initiated == 1 && m.sessionCounts.sealed == 1)
            #expect(m.sessionCounts.opened >= 3, "\(m.sessionCounts)")
            #expect(m.dropCounts.isEmpty, "\(m.dropCounts)")
            // A second chat reuses the session: no new handshake.
            let again = await system.handset.chat("And about the sea")
            #expect(again.answer.result.providerKind == .sibling && again.answer.result.fallback == nil)
            #expect(m.sessionCounts.initiated == 1 && m.sessionCounts.sealed == 2)
        }
    }

    @Test("a guest streams through a v2 session")
    func guestStreamsOverASession() async throws {
        try await IntegrationSystem.with(tokensPerSecond: 200) { system in
            let dir = StateDirectory(explicit: temporaryDirectory("guest"), tool: "guest")
            _ = try DeviceSession.initialize(directory: dir, relayURL: system.relay.url, name: "integ-guest")
            let guest = try DeviceSession(directory: dir, tool: "guest", http: .unavailable,
                                          options: DeviceSession.Options())
            defer { guest.stop() }
            #expect(await guest.connect(timeout: .seconds(5)))
            let host = system.homebase.publicKey
            _ = try await guest.guest.join(host: host, name: "integ-guest", messenger: guest.messenger)
            let registry = try GuestRegistry(state: system.homebase.state)
            #expect(await eventually(.seconds(5)) { (try? registry.currentRecord(for: guest.publicKey)) != nil })
            try registry.grant(guest: guest.publicKey, models: .all, expiresAt: nil, nowMs: Posix.wallClockMs)
            #expect(await eventually(.seconds(5)) { guest.guest.model(on: host, requested: nil) != nil })

            try guest.settings.setModelSource(.external)
            try guest.settings.setExternalRuntime(.ollama)
            let model = try #require(guest.guest.model(on: host, requested: "qwen2.5:7b"))
            try guest.settings.setExternalSelection(ExternalSelection(tag: model, host: .joined(host)))
            let prompt = "What do lighthouses do at night"
            let answer = await guest.chat(ChatRequest(messages: [.user(prompt)])) { _ in }
            #expect(answer.result.providerKind == .crossAccount && answer.result.fallback == nil)
            #expect(answer.envelope == 2)
            #expect(answer.result.text == IntegrationOllama.expectedText(prompt))

            let m = try #require(guest.messenger as? RelayMessenger)
            // The signed grant (and advert) said v2: the guest made a session on the contact channel.
            #expect(m.envelopeVersion(for: host) == 2)
            #expect(m.sessionCounts.initiated == 1 && m.sessionCounts.sealed >= 1)
            #expect(m.sessionCounts.opened >= 3, "\(m.sessionCounts)")
            #expect(m.dropCounts.isEmpty, "\(m.dropCounts)")
        }
    }
}
