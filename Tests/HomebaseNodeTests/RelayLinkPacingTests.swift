import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseNode

/// The link paces its SENDs under the limits the relay announced at the upgrade (Protocol/relay.md §6): a burst
/// queued at once past the relay's bucket waits and goes later, whole and in order, and the relay refuses none.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RelayLinkPacingTests {
    @Test func aBurstPastTheRelaysBucketWaitsAndArrivesInOrderWithNoneRefused() throws {
        let relay = try LocalRelay {
            $0.limits.sendFramesPerSecond = 20
            $0.limits.sendFramesBurst = 10
        }
        defer { relay.stop() }
        let receiver = RelayLinkDirectWriteTests.Peer(relay)
        defer { receiver.stop() }
        try receiver.waitConnected()
        let statuses = Mutex<[UInt32: ReceiptStatus]>([:])
        let connected = DispatchSemaphore(value: 0)
        let sender = RelayLink(url: relay.url, key: .generate()) { event in
            switch event {
            case .connected: connected.signal()
            case .frames(let frames):
                for case .receipt(let id, let status) in frames { statuses.withLock { $0[id] = status } }
            default: break
            }
        }
        sender.start()
        defer { sender.stop() }
        #expect(connected.wait(timeout: .now() + 5) == .success)

        // 5 go at once (half the burst of 10), the other 15 at 18 a second: some 0.8 s.
        let start = Posix.monotonicMs
        for i in 1...20 {
            let outcome = sender.enqueue(.send(sendID: UInt32(i), recipient: receiver.key.publicKey, flags: 0,
                                               payload: [UInt8(i)][...]))
            #expect(outcome == .queued)
        }
        // Paced once a write took the queue: at once from this thread, or from the link's thread when it held
        // the socket at that moment (then a moment later).
        let pacingDeadline = Posix.monotonicMs + 1_000
        while !sender.isPacing, Posix.monotonicMs < pacingDeadline { usleep(1_000) }
        #expect(sender.isPacing)
        let got = try receiver.waitDelivered(20)
        let elapsed = Posix.monotonicMs - start
        #expect(got.map { $0[0] } == (1...20).map { UInt8($0) })
        #expect(elapsed >= 700, "20 frames in \(elapsed) ms: not paced")
        // Every RECEIPT says delivered: none was refused for the rate.
        let deadline = Posix.monotonicMs + 5_000
        while statuses.withLock({ $0.count }) < 20, Posix.monotonicMs < deadline { usleep(5_000) }
        #expect(statuses.withLock { $0 }.values.allSatisfy { $0 == .delivered })
        #expect(statuses.withLock { $0.count } == 20)
        #expect(!sender.isPacing)
        #expect(sender.pacedWaits.load(ordering: .relaxed) >= 1)
    }
}
