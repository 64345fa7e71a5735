import Foundation
import HomebaseCore
import Testing
@testable import HomebaseStore

/// Enqueue+acknowledge throughput on a file database, printed rather than asserted (machines differ).
/// Off by default; run with `HOMEBASE_STORE_BENCH=1 swift test --filter MailboxBenchmarkTests`.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["HOMEBASE_STORE_BENCH"] != nil))
struct MailboxBenchmarkTests {
    @Test(arguments: [Database.Synchronous.full, .normal])
    func enqueueAndAcknowledgeRate(synchronous: Database.Synchronous) throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.file("bench.db"), options: .init(synchronous: synchronous))
        let box = try SQLiteMailbox(database: db)
        let recipient = key(1)
        let sender = key(2)
        let payload = [UInt8](repeating: 0xAB, count: 1_024)
        let n = 2_000
        let clock = ContinuousClock()
        let elapsed = try clock.measure {
            for i in 0..<n {
                let result = try box.enqueue(recipient: recipient, sender: sender, payload: payload, nowMs: UInt64(i))
                guard case .stored(let id) = result else {
                    Issue.record("not stored")
                    return
                }
                #expect(try box.acknowledge(recipient: recipient, deliveryID: id))
            }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = Int(Double(n) / seconds)
        print("synchronous=\(synchronous.rawValue): \(n) enqueue+ack (1 KiB) in \(elapsed), \(rate)/s")
    }
}
