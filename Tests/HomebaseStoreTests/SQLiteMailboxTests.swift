import HomebaseCore
import Testing
@testable import HomebaseStore

/// What only the SQLite backend promises: durability and sharing a file between connections.
@Suite struct SQLiteMailboxTests {
    let alice = key(0xA1)
    let bob = key(0xB0)
    let t0: UInt64 = 1_700_000_000_000

    @Test func framesAndIDsSurviveCloseAndReopen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("relay.db")
        var last: UInt64 = 0
        do {
            let box = try SQLiteMailbox(database: Database(path: path))
            for i in 0..<3 {
                let payload = [UInt8(i)]
                let result = try box.enqueue(recipient: self.bob, sender: self.alice, payload: payload, nowMs: self.t0)
                guard case .stored(let id) = result else {
                    Issue.record("not stored")
                    return
                }
                last = id
            }
            #expect(try box.acknowledge(recipient: self.bob, deliveryID: last))
        }
        let box = try SQLiteMailbox(database: Database(path: path))
        #expect(try box.pending(recipient: self.bob, after: 0, limit: 10, nowMs: self.t0).map(\.payload) == [[0], [1]])
        #expect(try box.depth(recipient: self.bob) == (2, 2))
        // AUTOINCREMENT: the acknowledged newest id is not handed out again after a restart.
        let result = try box.enqueue(recipient: self.bob, sender: self.alice, payload: [9], nowMs: self.t0)
        guard case .stored(let next) = result else {
            Issue.record("not stored")
            return
        }
        #expect(next > last)
        #expect(fileMode(path) == 0o600)
    }

    @Test func aFrameIsReadableByASecondConnectionAsSoonAsEnqueueReturns() throws {
        // The relay's kill -9 test (RelayService) checks the process-level claim; here: a commit is on
        // disk for any other connection before enqueue returns, with the first connection never closed.
        let dir = try TemporaryDirectory()
        let path = dir.file("relay.db")
        let relay = try SQLiteMailbox(database: Database(path: path))
        let result = try relay.enqueue(recipient: self.bob, sender: self.alice, payload: [1, 2, 3], nowMs: self.t0)
        let other = try SQLiteMailbox(database: Database(path: path))
        let frames = try other.pending(recipient: self.bob, after: 0, limit: 10, nowMs: self.t0)
        #expect(result == .stored(deliveryID: frames.first?.deliveryID ?? 0))
        #expect(frames.map(\.payload) == [[1, 2, 3]])
        withExtendedLifetime(relay) {}
    }

    @Test func twoMailboxesOnOneFileShareDepthAndIDs() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("relay.db")
        let a = try SQLiteMailbox(database: Database(path: path), limits: MailboxLimits(maxFrames: 2))
        let b = try SQLiteMailbox(database: Database(path: path), limits: MailboxLimits(maxFrames: 2))
        _ = try a.enqueue(recipient: self.bob, sender: self.alice, payload: [1], nowMs: self.t0)
        _ = try b.enqueue(recipient: self.bob, sender: self.alice, payload: [2], nowMs: self.t0)
        #expect(try a.enqueue(recipient: self.bob, sender: self.alice, payload: [3], nowMs: self.t0) == .mailboxFull)
        let ids = try b.pending(recipient: self.bob, after: 0, limit: 10, nowMs: self.t0).map(\.deliveryID)
        #expect(ids.count == 2 && ids[0] < ids[1])
        #expect(try a.acknowledge(recipient: self.bob, deliveryID: ids[1]))
        #expect(try !b.acknowledge(recipient: self.bob, deliveryID: ids[1]))
        #expect(try b.depth(recipient: self.bob) == (1, 1))
    }

    @Test func corruptSenderIsReportedNotTrapped() throws {
        let db = try Database(path: ":memory:")
        let box = try SQLiteMailbox(database: db)
        _ = try box.enqueue(recipient: self.bob, sender: self.alice, payload: [1], nowMs: self.t0)
        try db.execute("UPDATE mailbox_frames SET sender = x'0102'")
        #expect(throws: StoreError.corruptRow(table: "mailbox_frames", reason: "sender of 2 bytes")) {
            try box.pending(recipient: self.bob, after: 0, limit: 10, nowMs: self.t0)
        }
    }

    @Test func expireSweepsMoreThanOneBatch() throws {
        let limits = MailboxLimits(maxFrames: 5_000, lifetimeMs: 1)
        let box = try SQLiteMailbox(database: Database(path: ":memory:"), limits: limits)
        let n = SQLiteMailbox.expireBatch * 2 + 7
        for i in 0..<n {
            _ = try box.enqueue(recipient: key(UInt8(i % 3)), sender: self.alice, payload: [1], nowMs: self.t0)
        }
        #expect(try box.totalDepth() == (n, n, 3))
        #expect(try box.expire(nowMs: self.t0 + 1) == n)
        #expect(try box.totalDepth() == (0, 0, 0))
    }

    @Test func enqueueUsesTheRecipientIndexAndDepthRowNotAScan() throws {
        let db = try Database(path: ":memory:")
        _ = try SQLiteMailbox(database: db)
        let plan = try db.query(
            """
            EXPLAIN QUERY PLAN SELECT delivery_id FROM mailbox_frames
            WHERE recipient = ? AND delivery_id > ? AND expires_at_ms > ? ORDER BY delivery_id LIMIT ?
            """,
            [.blob([1]), .integer(0), .integer(0), .integer(1)]
        ).map { try $0.string("detail") }
        #expect(plan.contains { $0.contains("mailbox_frames_by_recipient") }, "\(plan)")
        let depthPlan = try db.query(
            "EXPLAIN QUERY PLAN SELECT frames, bytes FROM mailbox_depth WHERE recipient = ?", [.blob([1])]
        ).map { try $0.string("detail") }
        #expect(depthPlan.allSatisfy { !$0.hasPrefix("SCAN") }, "\(depthPlan)")
    }
}
