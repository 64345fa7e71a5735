import HomebaseCore
import HomebaseCrypto
import HomebaseDevice
import HomebaseRouter
import Synchronization
import Testing

@Suite struct RelationBoxTests {
    @Test func aLookupRunsNoDeeperAfterManyQuestions() {
        let box = RelationBox()
        let key = SigningSecretKey.generate().publicKey
        #expect(box.relation(key) == .stranger)  // nothing set yet
        let depths = Mutex<[Int]>([])
        box.set { _ in
            let depth = stackDepthMarker()
            depths.withLock { $0.append(depth) }
            return .sibling
        }
        // A device asks for every envelope it receives. Each question used to wrap the lookup in two more
        // reabstraction thunks (see `CallbackSlot`), so a long-running device's checks sank ever deeper.
        for _ in 0..<2_000 {
            #expect(box.relation(key) == .sibling)
        }
        let seen = depths.withLock { $0 }
        #expect(abs(seen[0] - seen[seen.count - 1]) < 1_024, "the lookup ran \(seen[0] - seen[seen.count - 1]) bytes deeper")
    }
}
