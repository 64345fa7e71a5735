import HomebaseCore
import HomebaseCrypto
import Synchronization
import Testing
@testable import HomebaseNode

@Suite struct LoopbackMessengerTests {
    @Test func theInlineHandlerRunsNoDeeperAfterManyMessages() {
        let hub = LoopbackMessengerHub()
        let a = hub.messenger(for: SigningSecretKey.generate().publicKey) { _ in .sibling }
        let b = hub.messenger(for: SigningSecretKey.generate().publicKey) { _ in .sibling }
        let depths = Mutex<[Int]>([])
        b.setInlineHandler { _ in
            let depth = stackDepthMarker()
            depths.withLock { $0.append(depth) }
            return true
        }
        // Delivered on this thread, inside `send`. Each delivery's read of the handler used to wrap it in two more
        // reabstraction thunks (see `CallbackSlot`).
        for i in 0..<2_000 {
            a.send(.inferCancel(id: "\(i)"), to: b.publicKey, channel: .sibling, store: false, onReceipt: nil)
        }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 2_000)
        #expect(abs(seen[0] - seen[seen.count - 1]) < 1_024, "the handler ran \(seen[0] - seen[seen.count - 1]) bytes deeper")
    }

    /// A messenger nobody holds is gone: the hub holds it weakly (its peer is then offline) and its streams end,
    /// so a task reading them finishes. The hub held its messengers, each holding the hub, and a reader of
    /// `inbound` waited for good: every test's hub, messengers and readers lived until the process ended.
    @Test func aMessengerNobodyHoldsIsGoneAndEndsItsStreams() async {
        let hub = LoopbackMessengerHub()
        let a = hub.messenger(for: SigningSecretKey.generate().publicKey) { _ in .sibling }
        let bKey = SigningSecretKey.generate().publicKey
        weak var released: LoopbackMessenger?
        let reader: Task<Int, Never>
        do {
            let b = hub.messenger(for: bKey) { _ in .sibling }
            released = b
            let inbound = b.inbound
            reader = Task { await inbound.reduce(0) { count, _ in count + 1 } }
            #expect(await a.sendAndWait(.inferCancel(id: "1"), to: bKey, channel: .sibling, store: false)
                == .receipt(.delivered))
        }
        #expect(released == nil)
        guard released == nil else {
            reader.cancel()  // its stream would never end: fail, not hang
            return
        }
        #expect(await reader.value == 1)
        #expect(await a.sendAndWait(.inferCancel(id: "2"), to: bKey, channel: .sibling, store: false)
            == .receipt(.recipientOffline))
    }
}
