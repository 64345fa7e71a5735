import Foundation
import HomebaseCore
import HomebaseDevice
import HomebaseRouter
import HomebaseTransport
import RelayService
import Testing

/// Issue 23's known gap: a chunk the relay refused for its rate (RECEIPT 5) was lost silently. The relay now
/// announces its SEND limits at the upgrade, and the Homebase's link paces its SENDs under them, its streams
/// merging text while the link waits: against a relay taking 50 frames a second, several answers streamed at
/// once arrive whole, and the relay refuses none of the Homebase's frames.
@Suite("Chunks paced under the relay's announced rate", .serialized, .timeLimit(.minutes(1)))
struct PacedChunksTests {
    @Test("six answers at once through a relay at 50 SEND frames a second arrive whole")
    func concurrentAnswersUnderASlowRelay() async throws {
        var limits = RelayLimits()
        limits.sendFramesPerSecond = 50
        limits.sendFramesBurst = 50
        // 100 tokens/s: answers of 12-48 tokens take 0.1-0.5 s; read every 30 ms each stream would send up to
        // 33 chunks a second, six streams some 200: four times what the relay takes.
        try await IntegrationSystem.with(tokensPerSecond: 100, relayLimits: limits) { system in
            // Warm the stack: pairing and adverts spent some of the Homebase's budget already.
            try await Task.sleep(for: .milliseconds(200))
            let prompts = (0..<6).map { "Paced answer number \($0) about rivers, stones and the long way home" }
            let answers = await withTaskGroup(of: (String, ChatAnswer).self) { group in
                for prompt in prompts {
                    group.addTask { (prompt, await system.handset.chat(prompt).answer) }
                }
                var out: [(String, ChatAnswer)] = []
                for await a in group { out.append(a) }
                return out
            }
            for (prompt, answer) in answers {
                #expect(answer.result.fallback == nil, "fell back: \(String(describing: answer.result.fallback))")
                #expect(answer.result.providerKind == .sibling)
                #expect(answer.result.text == IntegrationOllama.expectedText(prompt))
            }
            let metrics = try relayMetrics(port: system.relay.port)
            #expect(metrics.contains("relay_frames_dropped_total{reason=\"rate_limited\"} 0"),
                    "\(metrics.split(separator: "\n").filter { $0.contains("dropped") })")
        }
    }

    /// `/metrics` of the relay on `port`.
    private func relayMetrics(port: UInt16) throws -> String {
        let stream = try TCPClientStream.connect(host: "127.0.0.1", port: port, timeout: .seconds(2))
        defer { stream.close() }
        try stream.send(Array("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".utf8), deadline: .now + .seconds(2))
        var all = [UInt8]()
        while true {
            let b = try stream.receive(maxBytes: 65536, timeout: .seconds(2))
            if b.isEmpty { break }
            all += b
        }
        return String(decoding: all, as: UTF8.self)
    }
}
