import Dispatch
import Foundation
import HomebaseCore
import Testing
@testable import HomebaseStore

@Suite struct SeenMessageStoreTests {
    let alice = key(0xA1)
    let bob = key(0xB0)
    let t0: UInt64 = 1_700_000_000_000

    private func id(_ n: UInt8) -> [UInt8] { [UInt8](repeating: n, count: 16) }

    @Test func aReplayIsDetectedPerSender() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"))
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        // A replay with a changed sent_at is still a replay: the key is (sender, message_id).
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 5))
        // The same id from another sender is a different message.
        #expect(try seen.insertIfNew(sender: self.bob, messageID: self.id(1), sentAtMs: self.t0))
        #expect(try seen.count() == 2)
    }

    @Test func aBatchAnswersInOrderInOneCommit() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"), maxRows: 3)
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(9), sentAtMs: self.t0))
        typealias E = SeenMessageStore.Entry
        let answers = try seen.insertIfNew([
            E(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1),
            E(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1),  // repeat inside the batch
            E(sender: self.alice, messageID: self.id(9), sentAtMs: self.t0),      // seen before the batch
            E(sender: self.bob, messageID: self.id(1), sentAtMs: self.t0 + 2),
            E(sender: self.bob, messageID: self.id(2), sentAtMs: self.t0 + 3),   // over the cap: evicts the oldest
        ])
        #expect(answers == [true, false, false, true, true])
        #expect(try seen.count() == 3)
        // The eviction raised the floor past alice's first id, so its replay is still refused.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(9), sentAtMs: self.t0))
        #expect(try seen.insertIfNew([]) == [])
    }

    /// The state row is read once per batch: what the batch itself changes (the count, the floor an eviction
    /// raises) must hold for the entries after it in the same batch.
    @Test func anEvictionInsideABatchRaisesTheFloorForTheRestOfIt() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"), maxRows: 2)
        typealias E = SeenMessageStore.Entry
        let answers = try seen.insertIfNew([
            E(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1),
            E(sender: self.alice, messageID: self.id(2), sentAtMs: self.t0 + 2),
            E(sender: self.alice, messageID: self.id(3), sentAtMs: self.t0 + 3),  // evicts id 1: floor t0 + 2
            E(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1),  // forgotten, but below the floor
            E(sender: self.bob, messageID: self.id(4), sentAtMs: self.t0 + 1),    // new, but below the floor
            E(sender: self.bob, messageID: self.id(5), sentAtMs: self.t0 + 4),    // evicts id 2: floor t0 + 3
        ])
        #expect(answers == [true, true, true, false, false, true])
        #expect(try seen.count() == 2)
        #expect(try seen.floorMs() == self.t0 + 3)
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(2), sentAtMs: self.t0 + 2))
    }

    @Test func pruneDeletesOldIdsAndRaisesTheFloor() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"))
        for i in 0..<10 {
            let id = self.id(UInt8(i))
            #expect(try seen.insertIfNew(sender: self.alice, messageID: id, sentAtMs: self.t0 + UInt64(i)))
        }
        #expect(try seen.prune(olderThanMs: self.t0 + 4) == 4)
        #expect(try seen.count() == 6)
        #expect(try seen.floorMs() == self.t0 + 4)
        // A pruned id is forgotten, but a replay of it is below the floor and still refused.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(0), sentAtMs: self.t0))
        // Ids kept are still detected; new ones at or above the floor are accepted.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(4), sentAtMs: self.t0 + 4))
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(99), sentAtMs: self.t0 + 4))
        // The floor never moves back.
        #expect(try seen.prune(olderThanMs: self.t0) == 0)
        #expect(try seen.floorMs() == self.t0 + 4)
    }

    @Test func pruneWorksPastOneBatch() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"))
        let n = SeenMessageStore.pruneBatch + 3
        for i in 0..<n {
            let bytes = withUnsafeBytes(of: UInt32(i).bigEndian) { Array($0) }
            #expect(try seen.insertIfNew(sender: self.alice, messageID: bytes, sentAtMs: self.t0))
        }
        #expect(try seen.prune(olderThanMs: self.t0 + 1) == n)
        #expect(try seen.count() == 0)
    }

    @Test func hardCapEvictsOldestFirstAndRefusesWhatItForgot() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"), maxRows: 3)
        for i in 0..<5 {
            let id = self.id(UInt8(i))
            #expect(try seen.insertIfNew(sender: self.alice, messageID: id, sentAtMs: self.t0 + UInt64(i)))
        }
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 2)
        // Ids 0 and 1 were evicted; replaying them is refused by the floor, not accepted as new.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(0), sentAtMs: self.t0))
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1))
        // Kept ids are still replays.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(4), sentAtMs: self.t0 + 4))
        #expect(try seen.count() == 3)
    }

    @Test func stateSurvivesReopen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            let seen = try SeenMessageStore(database: Database(path: path))
            #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
            try seen.prune(olderThanMs: self.t0 - 10)
        }
        let seen = try SeenMessageStore(database: Database(path: path))
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        #expect(try seen.floorMs() == self.t0 - 10)
        #expect(try seen.count() == 1)
    }

    /// Without a sync per commit: the answers are the same, the ids are written at once (a process that
    /// restarts, here a second connection opening the file, still refuses the replay), and `sync()` syncs once
    /// per batch of unsynced commits.
    @Test func unsyncedCommitsAreWrittenAndSyncedOnDemand() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let database = try Database(path: path)
        let seen = try SeenMessageStore(database: database, syncsEveryCommit: false)
        #expect(!seen.hasUnsyncedIDs)
        #expect(try !seen.sync())
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        #expect(seen.hasUnsyncedIDs)
        let other = try Database(path: path)
        let restarted = try SeenMessageStore(database: other)
        #expect(try !restarted.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        // The sync is an fdatasync of the WAL, not a commit, and it does not wait for the database: another
        // thread holding it (a batch in progress) does not hold the sync up.
        func dataVersion() throws -> Int64? { try other.query("PRAGMA data_version").first?.int64(0) }
        let before = try dataVersion()
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // Held for at most 2 s: a sync that waited for it would take that long, not hang.
        Thread {
            _ = try? database.withConnection { _ in
                holding.signal()
                _ = release.wait(timeout: .now() + 2)
            }
        }.start()
        holding.wait()
        let clock = ContinuousClock()
        var synced = false
        let took = clock.measure { synced = (try? seen.sync()) ?? false }
        release.signal()
        #expect(synced)
        #expect(took < .seconds(1))
        #expect(try dataVersion() == before)
        #expect(!seen.hasUnsyncedIDs)
        #expect(try !seen.sync())
        // A batch of replays only records nothing, so there is nothing to sync.
        #expect(try seen.insertIfNew([SeenMessageStore.Entry(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0)])
            == [false])
        #expect(!seen.hasUnsyncedIDs)
        #expect(try seen.count() == 1)
    }

    /// The count for the cap is the store's own, taken from the table when it starts: a database from before
    /// (its rows counted by triggers) loses the triggers and the stored count, and its rows still count.
    @Test func theCountIsTakenAtStartAndNoTriggerWritesIt() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            let old = try Database(path: path)
            try old.migrate(namespace: "seen", steps: Array(SeenMessageStore.migrations.prefix(2)))
            for i in 0..<3 {
                try old.execute("INSERT INTO seen_messages(sender, message_id, sent_at_ms) VALUES (?, ?, ?)",
                                [.blob(self.alice.bytes), .blob(self.id(UInt8(i))), .integer(Int64(self.t0) + Int64(i))])
            }
        }
        let database = try Database(path: path)
        let seen = try SeenMessageStore(database: database, maxRows: 3)
        #expect(try database.query("SELECT name FROM sqlite_master WHERE type = 'trigger'").isEmpty)
        #expect(try database.query("SELECT name FROM pragma_table_info('seen_state') ORDER BY cid")
            .map { try $0.string(0) } == ["id", "floor_ms"])
        #expect(try seen.count() == 3)
        // Three rows already: a fourth evicts the oldest.
        #expect(try seen.insertIfNew(sender: self.bob, messageID: self.id(9), sentAtMs: self.t0 + 9))
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 1)
        // Pruned rows leave the count: two fit again before the next eviction.
        #expect(try seen.prune(olderThanMs: self.t0 + 3) == 2)
        #expect(try seen.insertIfNew(sender: self.bob, messageID: self.id(10), sentAtMs: self.t0 + 10))
        #expect(try seen.insertIfNew(sender: self.bob, messageID: self.id(11), sentAtMs: self.t0 + 11))
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 3)
        #expect(try seen.insertIfNew(sender: self.bob, messageID: self.id(12), sentAtMs: self.t0 + 12))
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 10)
    }

    /// Rows another connection adds or deletes (a second process on the file) are counted again before the
    /// next batch: the cap holds, and nothing is evicted early.
    @Test func anotherConnectionsChangesAreCounted() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let seen = try SeenMessageStore(database: Database(path: path), maxRows: 3)
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0 + 1))
        let other = try Database(path: path)
        for i in 2...3 {
            try other.execute("INSERT INTO seen_messages(sender, message_id, sent_at_ms) VALUES (?, ?, ?)",
                              [.blob(self.bob.bytes), .blob(self.id(UInt8(i))), .integer(Int64(self.t0) + Int64(i))])
        }
        // Three rows now: the fourth evicts the oldest.
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(4), sentAtMs: self.t0 + 4))
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 2)
        // Two deleted elsewhere: two more fit without an eviction.
        try other.execute("DELETE FROM seen_messages WHERE sender = ?", [.blob(self.bob.bytes)])
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(5), sentAtMs: self.t0 + 5))
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(6), sentAtMs: self.t0 + 6))
        #expect(try seen.count() == 3)
        #expect(try seen.floorMs() == self.t0 + 2)
    }

    @Test func absurdTimestampsDoNotTrap() throws {
        let seen = try SeenMessageStore(database: Database(path: ":memory:"), maxRows: 1)
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: UInt64.max))
        #expect(try seen.insertIfNew(sender: self.alice, messageID: self.id(2), sentAtMs: UInt64.max))
        #expect(try seen.floorMs() == UInt64(Int64.max))
        #expect(try seen.prune(olderThanMs: UInt64.max) == 0)
    }

    /// An id recorded unsettled (its effect to be confirmed: `InboundLedger`) answers `.unsettled` when its message
    /// comes again, across a reopen (a kill -9 before the daemon committed the effect), until `markSettled`;
    /// then it is a replay like any other.
    @Test func anUnsettledIdIsToldApartFromAReplayUntilSettled() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        typealias E = SeenMessageStore.Entry
        let join = E(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0, settled: false)
        do {
            let seen = try SeenMessageStore(database: Database(path: path), syncsEveryCommit: false)
            #expect(try seen.record([join, E(sender: self.bob, messageID: self.id(2), sentAtMs: self.t0)])
                    == [.fresh, .fresh])
            #expect(seen.hasUnsyncedIDs)
        }
        let seen = try SeenMessageStore(database: Database(path: path), syncsEveryCommit: false)
        #expect(try seen.record([join]) == [.unsettled])
        #expect(try seen.record([E(sender: self.bob, messageID: self.id(2), sentAtMs: self.t0, settled: false)])
                == [.settled])
        // The old API says what it always said: not new.
        #expect(try !seen.insertIfNew(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0))
        try seen.sync()
        try seen.markSettled([join])
        #expect(seen.hasUnsyncedIDs)
        #expect(try seen.record([join]) == [.settled])
        // An id pruned meanwhile is left alone; one below the floor is a replay.
        try seen.markSettled([E(sender: self.bob, messageID: self.id(9), sentAtMs: self.t0)])
        try seen.prune(olderThanMs: self.t0 + 1)
        #expect(try seen.record([E(sender: self.alice, messageID: self.id(3), sentAtMs: self.t0, settled: false)])
                == [.settled])
    }

    /// Ids recorded before the `settled` column existed are settled: a replay of one is still refused.
    @Test func idsFromBeforeTheSettledColumnAreSettled() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            let db = try Database(path: path)
            try db.migrate(namespace: "seen", steps: Array(SeenMessageStore.migrations.dropLast()))
            try db.withConnection { c in
                try c.execute("INSERT INTO seen_messages(sender, message_id, sent_at_ms) VALUES (?, ?, ?)",
                              [.blob(self.alice.bytes), .blob(self.id(1)), .integer(Int64(self.t0))])
            }
        }
        let seen = try SeenMessageStore(database: Database(path: path))
        #expect(try seen.record([.init(sender: self.alice, messageID: self.id(1), sentAtMs: self.t0, settled: false)])
                == [.settled])
    }
}
