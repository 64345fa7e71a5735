import Dispatch
import HomebaseCore
import Synchronization
import Testing
@testable import HomebaseStore

/// The behaviour every `Mailbox` backend shares (protocol-v1 §2), run against each of them.
@Suite struct MailboxBehaviourTests {
    enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case memory, sqliteMemory, sqliteFile
        var testDescription: String { self.rawValue }

        /// Returns the mailbox and anything that must outlive it (the temp directory).
        func make(_ limits: MailboxLimits = MailboxLimits()) throws -> (any Mailbox, AnyObject?) {
            switch self {
            case .memory:
                return (MemoryMailbox(limits: limits), nil)
            case .sqliteMemory:
                return (try SQLiteMailbox(database: Database(path: ":memory:"), limits: limits), nil)
            case .sqliteFile:
                let dir = try TemporaryDirectory()
                let db = try Database(path: dir.file("relay.db"), options: .init(synchronous: .normal))
                return (try SQLiteMailbox(database: db, limits: limits), dir)
            }
        }
    }

    let alice = key(0xA1)
    let bob = key(0xB0)
    let carol = key(0xC0)
    let t0: UInt64 = 1_700_000_000_000

    private struct NotStored: Error { let result: MailboxEnqueueResult }

    private func offer(_ box: any Mailbox, _ recipient: PublicKey, _ payload: [UInt8], at nowMs: UInt64) throws
        -> MailboxEnqueueResult
    {
        try box.enqueue(recipient: recipient, sender: self.alice, payload: payload, nowMs: nowMs)
    }

    /// Enqueues from alice and returns the delivery id; throws if the frame was not stored.
    private func put(_ box: any Mailbox, _ recipient: PublicKey, _ payload: [UInt8], at nowMs: UInt64) throws
        -> UInt64
    {
        let result = try self.offer(box, recipient, payload, at: nowMs)
        guard case .stored(let id) = result else { throw NotStored(result: result) }
        return id
    }

    private func pendingIDs(
        _ box: any Mailbox, _ recipient: PublicKey, after: UInt64 = 0, limit: Int = 100, at nowMs: UInt64
    ) throws -> [UInt64] {
        try box.pending(recipient: recipient, after: after, limit: limit, nowMs: nowMs).map(\.deliveryID)
    }

    /// ACKs handled together (the relay's worker batches a run of them into one write) delete exactly what the
    /// same ACKs one by one would: the recipient's own ids, not another's, not unknown or impossible ones.
    @Test(arguments: Backend.allCases)
    func aBatchOfAcknowledgementsDeletesWhatEachWould(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        let bobs = try (0..<5).map { try self.put(box, self.bob, [UInt8($0)], at: self.t0) }
        let carols = try (0..<2).map { try self.put(box, self.carol, [UInt8($0)], at: self.t0) }
        try box.acknowledgeBatch([(self.bob, bobs[0]), (self.bob, bobs[3]), (self.bob, carols[0]), (self.carol, carols[1]),
                                  (self.bob, 0), (self.bob, UInt64.max), (self.bob, bobs[0])])
        #expect(try self.pendingIDs(box, self.bob, at: self.t0) == [bobs[1], bobs[2], bobs[4]])
        #expect(try self.pendingIDs(box, self.carol, at: self.t0) == [carols[0]])
    }

    @Test(arguments: Backend.allCases)
    func framesComeBackOldestFirstWithNonZeroIncreasingIDs(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        var issued: [UInt64] = []
        for i in 0..<5 {
            let recipient = i % 2 == 0 ? self.bob : self.carol
            issued.append(try self.put(box, recipient, [UInt8(i)], at: self.t0 + UInt64(i)))
        }
        #expect(issued.allSatisfy { $0 > 0 })
        #expect(issued == issued.sorted() && Set(issued).count == 5)
        let forBob = try box.pending(recipient: self.bob, after: 0, limit: 100, nowMs: self.t0 + 10)
        #expect(forBob.map(\.deliveryID) == [issued[0], issued[2], issued[4]])
        #expect(forBob.map(\.payload) == [[0], [2], [4]])
        #expect(forBob[0].sender == self.alice)
        #expect(forBob[0].storedAtMs == self.t0)
        #expect(forBob[0].expiresAtMs == self.t0 + MailboxLimits().lifetimeMs)
        #expect(try self.pendingIDs(box, self.carol, limit: 100, at: self.t0) == [issued[1], issued[3]])
    }

    @Test(arguments: Backend.allCases)
    func pendingHonoursAfterAndLimit(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        let ids = try (0..<6).map { _ in try self.put(box, self.bob, [1], at: self.t0) }
        #expect(try self.pendingIDs(box, self.bob, limit: 2, at: self.t0) == Array(ids[0..<2]))
        #expect(try self.pendingIDs(box, self.bob, after: ids[1], limit: 3, at: self.t0) == Array(ids[2..<5]))
        #expect(try box.pending(recipient: self.bob, after: ids[5], limit: 3, nowMs: self.t0).isEmpty)
        #expect(try box.pending(recipient: self.bob, after: 0, limit: 0, nowMs: self.t0).isEmpty)
        #expect(try box.pending(recipient: self.bob, after: 0, limit: -1, nowMs: self.t0).isEmpty)
        #expect(try box.pending(recipient: self.bob, after: UInt64.max, limit: 3, nowMs: self.t0).isEmpty)
        #expect(try box.pending(recipient: self.carol, after: 0, limit: 3, nowMs: self.t0).isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func acknowledgeDeletesOnceAndOnlyForItsRecipient(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        let a = try self.put(box, self.bob, [1, 2, 3], at: self.t0)
        let b = try self.put(box, self.bob, [4], at: self.t0)
        #expect(try !box.acknowledge(recipient: self.carol, deliveryID: a))  // another recipient's id
        #expect(try !box.acknowledge(recipient: self.bob, deliveryID: 0))
        #expect(try !box.acknowledge(recipient: self.bob, deliveryID: 9_999))
        #expect(try !box.acknowledge(recipient: self.bob, deliveryID: UInt64.max))
        #expect(try box.acknowledge(recipient: self.bob, deliveryID: a))
        #expect(try !box.acknowledge(recipient: self.bob, deliveryID: a))  // double ACK
        #expect(try self.pendingIDs(box, self.bob, limit: 10, at: self.t0) == [b])
        #expect(try box.depth(recipient: self.bob) == (1, 1))
        #expect(try box.acknowledge(recipient: self.bob, deliveryID: b))
        #expect(try box.depth(recipient: self.bob) == (0, 0))
        #expect(try box.totalDepth() == (0, 0, 0))
    }

    @Test(arguments: Backend.allCases)
    func idsAreNeverReusedAfterTheNewestIsAcknowledged(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        let a = try self.put(box, self.bob, [1], at: self.t0)
        #expect(try box.acknowledge(recipient: self.bob, deliveryID: a))
        let b = try self.put(box, self.bob, [1], at: self.t0)
        #expect(b > a)
    }

    @Test(arguments: Backend.allCases)
    func frameLimitIsFullExactlyAtTheBoundary(backend: Backend) throws {
        let (box, keep) = try backend.make(MailboxLimits(maxFrames: 3, maxBytes: 1_000))
        defer { withExtendedLifetime(keep) {} }
        for _ in 0..<3 {
            _ = try self.put(box, self.bob, [1], at: self.t0)
        }
        #expect(try self.offer(box, self.bob, [1], at: self.t0) == .mailboxFull)
        #expect(try self.offer(box, self.bob, [], at: self.t0) == .mailboxFull)
        #expect(try box.depth(recipient: self.bob) == (3, 3))
        // Other mailboxes are independent; an ACK makes room again.
        _ = try self.put(box, self.carol, [1], at: self.t0)
        let first = try #require(try box.pending(recipient: self.bob, after: 0, limit: 1, nowMs: self.t0).first)
        #expect(try box.acknowledge(recipient: self.bob, deliveryID: first.deliveryID))
        _ = try self.put(box, self.bob, [1], at: self.t0)
        #expect(try box.totalDepth() == (4, 4, 2))
    }

    @Test(arguments: Backend.allCases)
    func byteLimitIsFullExactlyAtTheBoundary(backend: Backend) throws {
        let (box, keep) = try backend.make(MailboxLimits(maxFrames: 100, maxBytes: 10))
        defer { withExtendedLifetime(keep) {} }
        _ = try self.put(box, self.bob, [UInt8](repeating: 7, count: 6), at: self.t0)
        #expect(try self.offer(box, self.bob, [UInt8](repeating: 7, count: 5), at: self.t0) == .mailboxFull)
        _ = try self.put(box, self.bob, [UInt8](repeating: 7, count: 4), at: self.t0)
        #expect(try box.depth(recipient: self.bob) == (2, 10))
        #expect(try self.offer(box, self.bob, [1], at: self.t0) == .mailboxFull)
        // Zero bytes still fit a mailbox at exactly maxBytes.
        _ = try self.put(box, self.bob, [], at: self.t0)
        // A single payload over maxBytes never fits.
        #expect(try self.offer(box, self.carol, [UInt8](repeating: 0, count: 11), at: self.t0) == .mailboxFull)
        #expect(try box.depth(recipient: self.carol) == (0, 0))
    }

    @Test(arguments: Backend.allCases)
    func expiredFramesAreHiddenThenDeleted(backend: Backend) throws {
        let limits = MailboxLimits(lifetimeMs: 1_000)
        let (box, keep) = try backend.make(limits)
        defer { withExtendedLifetime(keep) {} }
        let old = try self.put(box, self.bob, [1], at: self.t0)
        let young = try self.put(box, self.bob, [2, 2], at: self.t0 + 500)
        _ = try self.put(box, self.carol, [3], at: self.t0 + 100)
        #expect(try self.pendingIDs(box, self.bob, limit: 10, at: self.t0 + 999) == [old, young])
        // Expired at exactly storedAt + lifetime.
        #expect(try self.pendingIDs(box, self.bob, limit: 10, at: self.t0 + 1_000) == [young])
        #expect(try box.depth(recipient: self.bob) == (2, 3))  // not yet swept
        #expect(try box.expire(nowMs: self.t0 + 1_000) == 1)
        #expect(try box.depth(recipient: self.bob) == (1, 2))
        #expect(try box.expire(nowMs: self.t0 + 1_000) == 0)
        #expect(try box.expire(nowMs: self.t0 + 10_000) == 2)
        #expect(try box.totalDepth() == (0, 0, 0))
    }

    @Test(arguments: Backend.allCases)
    func expiredFramesDoNotKeepAMailboxFull(backend: Backend) throws {
        let (box, keep) = try backend.make(MailboxLimits(maxFrames: 2, maxBytes: 100, lifetimeMs: 1_000))
        defer { withExtendedLifetime(keep) {} }
        _ = try self.put(box, self.bob, [1], at: self.t0)
        let kept = try self.put(box, self.bob, [2], at: self.t0 + 600)
        #expect(try self.offer(box, self.bob, [3], at: self.t0 + 999) == .mailboxFull)
        let fresh = try self.put(box, self.bob, [3], at: self.t0 + 1_000)
        #expect(try self.pendingIDs(box, self.bob, limit: 10, at: self.t0 + 1_000) == [kept, fresh])
        #expect(try box.depth(recipient: self.bob) == (2, 2))
    }

    @Test(arguments: Backend.allCases)
    func absurdTimesSaturateInsteadOfTrapping(backend: Backend) throws {
        let (box, keep) = try backend.make(MailboxLimits(lifetimeMs: UInt64.max))
        defer { withExtendedLifetime(keep) {} }
        _ = try self.put(box, self.bob, [1], at: UInt64.max)
        let frame = try #require(try box.pending(recipient: self.bob, after: 0, limit: 1, nowMs: 0).first)
        #expect(frame.storedAtMs == UInt64(Int64.max))
        #expect(frame.expiresAtMs == UInt64(Int64.max))
        #expect(try box.expire(nowMs: UInt64.max) == 1)
    }

    @Test(arguments: Backend.allCases)
    func concurrentEnqueuesGetDistinctIDs(backend: Backend) throws {
        let (box, keep) = try backend.make()
        defer { withExtendedLifetime(keep) {} }
        let senders = (0..<4).map { key(UInt8($0)) }
        let results = Mutex<[UInt64]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { i in
            for _ in 0..<50 {
                let result = try! box.enqueue(recipient: self.bob, sender: senders[i], payload: [1], nowMs: self.t0)
                if case .stored(let id) = result {
                    results.withLock { $0.append(id) }
                }
            }
        }
        let ids = results.withLock { $0 }
        #expect(Set(ids).count == 200)
        #expect(try self.pendingIDs(box, self.bob, limit: 1_000, at: self.t0) == ids.sorted())
    }

    @Test(arguments: Backend.allCases)
    func batchEnqueueKeepsOrderAndAppliesLimitsItemByItem(backend: Backend) throws {
        var limits = MailboxLimits()
        limits.maxFrames = 2
        let (box, keep) = try backend.make(limits)
        defer { withExtendedLifetime(keep) {} }
        let items = [
            MailboxItem(recipient: self.bob, sender: self.alice, payload: [1]),
            MailboxItem(recipient: self.carol, sender: self.alice, payload: [2]),
            MailboxItem(recipient: self.bob, sender: self.alice, payload: [3]),
            MailboxItem(recipient: self.bob, sender: self.alice, payload: [4]),
        ]
        let results = try box.enqueueBatch(items, nowMs: self.t0)
        #expect(results.count == 4)
        guard case .stored(let a) = results[0], case .stored(let b) = results[1], case .stored(let c) = results[2]
        else { Issue.record("\(results)"); return }
        #expect(a < b && b < c)
        #expect(results[3] == .mailboxFull)
        #expect(try box.pending(recipient: self.bob, after: 0, limit: 10, nowMs: self.t0).map(\.payload) == [[1], [3]])
        #expect(try box.pendingCount(recipient: self.bob, nowMs: self.t0) == 2)
        #expect(try box.enqueueBatch([], nowMs: self.t0).isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func pendingCountExcludesExpiredFrames(backend: Backend) throws {
        var limits = MailboxLimits()
        limits.lifetimeMs = 1_000
        let (box, keep) = try backend.make(limits)
        defer { withExtendedLifetime(keep) {} }
        _ = try self.put(box, self.bob, [1], at: self.t0)
        _ = try self.put(box, self.bob, [2], at: self.t0 + 500)
        #expect(try box.pendingCount(recipient: self.bob, nowMs: self.t0 + 999) == 2)
        #expect(try box.pendingCount(recipient: self.bob, nowMs: self.t0 + 1_000) == 1)
        #expect(try box.pendingCount(recipient: self.carol, nowMs: self.t0) == 0)
    }
}
