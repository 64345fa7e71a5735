import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseNode

/// Frames queued on another thread are written by that thread (inside a batch of work, the HTTP loop's pass, at the
/// batch's end), without waking the link's I/O thread; from many threads at once they still arrive whole and in
/// each thread's order.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RelayLinkDirectWriteTests {
    /// A started link that records what it receives.
    final class Peer: Sendable {
        final class Record: Sendable {
            let delivered = Mutex<[[UInt8]]>([])
            let connected = DispatchSemaphore(value: 0)
            /// The link, for ACKs sent from the handler (as `RelayMessenger` does).
            let link = Mutex<RelayLink?>(nil)
        }

        let key = SigningSecretKey.generate()
        let link: RelayLink
        let record = Record()

        init(_ relay: LocalRelay, acks: Bool = false) {
            let record = self.record
            self.link = RelayLink(url: relay.url, key: self.key) { event in
                switch event {
                case .connected: record.connected.signal()
                case .frames(let frames):
                    for case .deliver(_, let id, let payload) in frames {
                        record.delivered.withLock { $0.append(Array(payload)) }
                        if acks { record.link.withLock { $0 }?.enqueue(.ack(deliveryID: id)) }
                    }
                default: break
                }
            }
            self.record.link.withLock { $0 = self.link }
            self.link.start()
        }

        /// Stops the link and lets go of it: the record holds the link, whose handler holds the record, and that
        /// cycle would keep both (and the link's buffers) alive after the test.
        func stop() {
            self.link.stop()
            self.record.link.withLock { $0 = nil }
        }

        func waitConnected() throws {
            guard self.record.connected.wait(timeout: .now() + 5) == .success else { throw MessengerTestError("no connection") }
        }

        /// Waits until `count` payloads arrived; returns them.
        func waitDelivered(_ count: Int) throws -> [[UInt8]] {
            let deadline = Posix.monotonicMs + 10_000
            while Posix.monotonicMs < deadline {
                let got = self.record.delivered.withLock { $0 }
                if got.count >= count { return got }
                usleep(2_000)
            }
            throw MessengerTestError("only \(self.record.delivered.withLock { $0.count }) of \(count) delivered")
        }
    }

    /// A relay and two connected peers (`b` ACKing what it receives when `acks`); all stop after `body`.
    static func withPeers(acks: Bool = false, _ body: (Peer, Peer) throws -> Void) throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let a = Peer(relay), b = Peer(relay, acks: acks)
        defer { a.stop(); b.stop() }
        try a.waitConnected()
        try b.waitConnected()
        try body(a, b)
    }

    @Test func framesQueuedInABatchAreWrittenByTheBatchingThread() throws {
        try Self.withPeers { a, b in
            usleep(50_000)  // the I/O thread settles in poll(2)
            let wakesBefore = a.link.wakesWritten.load(ordering: .relaxed)
            DeferredWakes.batch {
                for i in 0..<20 {
                    a.link.enqueue(.send(sendID: 0, recipient: b.key.publicKey, flags: 0, payload: [UInt8(i)][...]))
                }
            }
            let got = try b.waitDelivered(20)
            #expect(got == (0..<20).map { [UInt8($0)] })
            #expect(a.link.directWrites.load(ordering: .relaxed) == 1)
            // Without the direct write, the batch's end would have written one wake byte.
            #expect(a.link.wakesWritten.load(ordering: .relaxed) == wakesBefore)
        }
    }

    @Test func repliesToReceivedFramesAreWrittenWithoutAWake() throws {
        try Self.withPeers(acks: true) { a, b in
            for i in 0..<5 {
                a.link.enqueue(.send(sendID: 0, recipient: b.key.publicKey, flags: SendFlags.store, payload: [UInt8(i)][...]))
            }
            let got = try b.waitDelivered(5)
            #expect(got.count == 5)
            usleep(50_000)
            // B's I/O thread handled the deliveries in a batch and wrote its ACKs at its end, itself.
            #expect(b.link.directWrites.load(ordering: .relaxed) >= 1)
            #expect(b.link.wakesWritten.load(ordering: .relaxed) == 0)
        }
    }

    @Test func aFrameQueuedOutsideABatchIsWrittenByTheQueuingThread() throws {
        try Self.withPeers { a, b in
            // Written before enqueue returns, with no wake-up of the I/O thread (the Homebase's accepts, sent
            // from the inference server's executor, each woke it). Should the I/O thread hold the socket at that
            // instant (a keepalive check), the frame goes by a wake instead: try again, a few times.
            var direct = false
            for i in 0..<3 where !direct {
                usleep(50_000)  // the I/O thread settles in poll(2)
                let (wakes, writes) = (a.link.wakesWritten.load(ordering: .relaxed), a.link.directWrites.load(ordering: .relaxed))
                a.link.enqueue(.send(sendID: 0, recipient: b.key.publicKey, flags: 0, payload: [UInt8(i)][...]))
                let wroteDirectly = a.link.directWrites.load(ordering: .relaxed) == writes + 1
                #expect(wroteDirectly != (a.link.wakesWritten.load(ordering: .relaxed) == wakes + 1))
                direct = wroteDirectly
            }
            #expect(direct)
            let got = try b.waitDelivered(1)
            #expect(got.first == [0])
        }
    }

    @Test func manyThreadsBatchingAtOnceKeepEachThreadsOrder() throws {
        try Self.withPeers { a, b in
            let threads = 4, batches = 50, perBatch = 5
            let group = DispatchGroup()
            for t in 0..<threads {
                group.enter()
                Thread {
                    for batch in 0..<batches {
                        DeferredWakes.batch {
                            for i in 0..<perBatch {
                                let n = batch * perBatch + i
                                // A send id asks for a RECEIPT: the I/O thread reads while the batches write.
                                a.link.enqueue(.send(sendID: UInt32(t * 10_000 + n + 1), recipient: b.key.publicKey,
                                                     flags: 0, payload: [UInt8(t), UInt8(n >> 8), UInt8(n & 0xFF)][...]))
                            }
                        }
                    }
                    group.leave()
                }.start()
            }
            group.wait()
            let total = threads * batches * perBatch
            let got = try b.waitDelivered(total)
            #expect(got.count == total)
            for t in 0..<threads {
                let mine = got.filter { $0[0] == UInt8(t) }.map { Int($0[1]) << 8 | Int($0[2]) }
                #expect(mine == Array(0..<(batches * perBatch)))
            }
            #expect(a.link.directWrites.load(ordering: .relaxed) > 0)
        }
    }
}
