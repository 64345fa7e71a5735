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
            a.send(.inferCancel(id: "\(i)"), to: b.publicKey, channel: .syncDelta, store: false, onReceipt: nil)
        }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 2_000)
        #expect(abs(seen[0] - seen[seen.count - 1]) < 1_024, "the handler ran \(seen[0] - seen[seen.count - 1]) bytes deeper")
    }
}
