import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Testing

/// The relay binary, killed with SIGKILL while it holds stored frames, loses none of them (Protocol/relay.md §5).
@Suite(.timeLimit(.minutes(1)), .serialized) struct RelayDurabilityTests {
    /// The relay of the build running this test (next to the test bundle), so a sanitized build runs its own.
    static let binary = Bundle.main.bundleURL.appendingPathComponent("relay").path

    /// Starts `relay` on a free port over `data`; returns the process and its port.
    func start(data: String, port: UInt16 = 0) throws -> (Process, UInt16) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["--listen", "127.0.0.1:\(port)", "--data", data, "--durability", "full"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        // The first line is "relay listening on 127.0.0.1:PORT".
        var line = [UInt8]()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let b = out.fileHandleForReading.readData(ofLength: 1)
            if b.isEmpty || b.first == UInt8(ascii: "\n") { break }
            line += b
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let bound = text.split(separator: ":").last.flatMap({ UInt16($0) }) else {
            p.terminate()
            throw TestFailure("relay did not report its port: '\(text)'")
        }
        return (p, bound)
    }

    @Test func storedFramesSurviveKill9() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            Issue.record("\(Self.binary) is missing; build the package first (tools/test does)")
            return
        }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("relay-k9-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        var (relay, port) = try start(data: data)
        defer {
            kill(relay.processIdentifier, SIGKILL)
            relay.waitUntilExit()  // Foundation releases a Process only once waitUntilExit saw it end
        }
        let url = "ws://127.0.0.1:\(port)/v1/relay"
        let recipient = SigningSecretKey.generate()
        let sender = try TestClient(url: url)
        let count = 25
        for i in 1...count {
            try sender.send(UInt32(i), to: recipient.publicKey, store: true, payload: Array("durable-\(i)".utf8))
            #expect(try sender.receipt() == (UInt32(i), .stored))
        }
        // RECEIPT 1 was sent only after the write was durable: SIGKILL now, with no chance to flush anything.
        kill(relay.processIdentifier, SIGKILL)
        relay.waitUntilExit()
        (relay, port) = try start(data: data, port: port)
        let b = try TestClient(url: url, key: recipient)
        #expect(b.ready?.stored == UInt32(count))
        var previous: UInt64 = 0
        for i in 1...count {
            guard case .deliver(let s, let id, let p) = try b.next() else { throw TestFailure("no DELIVER \(i)") }
            #expect(s == sender.pk && id > previous && Array(p) == Array("durable-\(i)".utf8))
            previous = id
        }
    }
}
