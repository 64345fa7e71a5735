import HomebaseCore
import Synchronization

/// Envelope `message_id`s already accepted, per sender: replay protection (protocol-v1 §3).
///
/// Bounded two ways. The caller calls `prune(olderThanMs:)` with `now - window`, where the window is the
/// oldest `sent_at` it accepts at all (the store lifetime); after that the table holds only ids a
/// replay could still use. A flood of fresh messages is bounded by `maxRows`: past it the oldest rows
/// are deleted first.
///
/// Forgetting an id must not turn a replay into a "new" message, so the store keeps a floor: after
/// `prune(olderThanMs: t)` or a cap eviction of rows up to `sent_at = s`, any message with
/// `sentAtMs < floor` (t, or s + 1) is reported as not new. That may also refuse a genuine but very old
/// message, which the caller's window check would refuse anyway.
///
/// The row count for the cap is kept in memory: counted at the first batch, then followed by this store's own
/// inserts and deletes (a trigger keeping it in a row wrote a third page, and ran an UPDATE, on every commit).
/// Another connection to the same file (a second process) may add or delete rows unseen: when SQLite's
/// `data_version` says another connection committed since the count was taken, a batch counts again.
public final class SeenMessageStore: Sendable {
    /// Migration steps of namespace "seen". Append only.
    static let migrations = [
        """
        CREATE TABLE seen_messages(
            sender BLOB NOT NULL,
            message_id BLOB NOT NULL,
            sent_at_ms INTEGER NOT NULL,
            PRIMARY KEY (sender, message_id)
        ) WITHOUT ROWID;
        CREATE INDEX seen_messages_by_sent_at ON seen_messages(sent_at_ms);
        CREATE TABLE seen_state(
            id INTEGER PRIMARY KEY CHECK (id = 0),
            row_count INTEGER NOT NULL,
            floor_ms INTEGER NOT NULL
        );
        INSERT INTO seen_state(id, row_count, floor_ms) VALUES (0, 0, 0);
        CREATE TRIGGER seen_messages_inserted AFTER INSERT ON seen_messages BEGIN
            UPDATE seen_state SET row_count = row_count + 1 WHERE id = 0;
        END;
        CREATE TRIGGER seen_messages_deleted AFTER DELETE ON seen_messages BEGIN
            UPDATE seen_state SET row_count = row_count - 1 WHERE id = 0;
        END;
        """,
        // A counter `sync()` committed, when a synced commit was how it synced (SQLite skips rewriting a row with
        // itself, so it had to write something). Dropped by the next step.
        "ALTER TABLE seen_state ADD COLUMN syncs INTEGER NOT NULL DEFAULT 0;",
        // The count is kept in memory (see the type's docs), not by triggers on every insert and delete; `sync()`
        // syncs the WAL file itself, and no longer commits a counter.
        """
        DROP TRIGGER seen_messages_inserted;
        DROP TRIGGER seen_messages_deleted;
        ALTER TABLE seen_state DROP COLUMN row_count;
        ALTER TABLE seen_state DROP COLUMN syncs;
        """,
        // An id recorded for a message whose effect its handler has not confirmed yet (`InboundLedger`): 0 until
        // `markSettled`. Every id recorded before is settled.
        "ALTER TABLE seen_messages ADD COLUMN settled INTEGER NOT NULL DEFAULT 1;",
    ]

    /// Default hard cap: 1,000,000 rows of about 70 bytes each, some 100 MB at worst.
    public static let defaultMaxRows = 1_000_000
    /// Rows deleted per transaction by `prune`, so a large prune never holds the write lock for long.
    static let pruneBatch = 5_000

    public let maxRows: Int
    private let database: Database
    /// Whether every batch's commit is synced (`insertIfNew`), or only `sync()` makes them durable.
    public let syncsEveryCommit: Bool
    /// A batch was committed without a sync since the last `sync()`.
    private let unsynced = Atomic<Bool>(false)
    /// Rows in `seen_messages` as this store knows them (see the type's docs), and the connection's
    /// `data_version` when it last counted or changed them; nil until the first batch counts them. Held across
    /// each transaction that changes the table, so it follows the commits exactly.
    private let knownRows = Mutex<KnownRows?>(nil)

    private struct KnownRows: Sendable {
        var rows: Int64
        var dataVersion: Int64
    }

    /// - Parameter syncsEveryCommit: false: batches commit without an fsync (`PRAGMA synchronous=NORMAL`
    ///   for that commit), and the owner calls `sync()` every second or so. Ids then survive any restart of
    ///   the process (a crash, kill -9: the WAL is written before `insertIfNew` returns); a power loss may
    ///   forget those of the last second, which only a relay replaying them at once could use. For a
    ///   Homebase whose requests arrive one by one, the fsync per request was the largest cost of receiving
    ///   one.
    public init(database: Database, maxRows: Int = SeenMessageStore.defaultMaxRows, syncsEveryCommit: Bool = true)
        throws
    {
        precondition(maxRows > 0, "the seen-message cap must be positive")
        self.database = database
        self.maxRows = maxRows
        self.syncsEveryCommit = syncsEveryCommit
        try database.migrate(namespace: "seen", steps: Self.migrations)
    }

    /// Records `messageID` from `sender`. Returns true the first time; false for a replay, or for a
    /// message older than the floor (see the type's docs), which the caller must drop either way.
    public func insertIfNew(sender: PublicKey, messageID: [UInt8], sentAtMs: UInt64) throws -> Bool {
        try self.insertIfNew([Entry(sender: sender, messageID: messageID, sentAtMs: sentAtMs)])[0]
    }

    /// One id to record.
    public struct Entry: Sendable {
        public var sender: PublicKey
        public var messageID: [UInt8]
        public var sentAtMs: UInt64
        /// False for a message whose effect is confirmed later (`markSettled`): until then a redelivery of it is
        /// `InboundLedger.Record.unsettled`, not a replay.
        public var settled: Bool
        public init(sender: PublicKey, messageID: [UInt8], sentAtMs: UInt64, settled: Bool = true) {
            self.sender = sender
            self.messageID = messageID
            self.sentAtMs = sentAtMs
            self.settled = settled
        }
    }

    /// Records several ids in one transaction (one commit, one fsync for a burst of messages), in order:
    /// each answer is what `insertIfNew` would have said at that point, so a repeat inside the batch is a
    /// replay. Nothing is recorded if it throws.
    public func insertIfNew(_ entries: [Entry]) throws -> [Bool] {
        try self.record(entries).map { $0 == .fresh }
    }

    /// `insertIfNew` that also tells a replay of a settled id from a redelivery of an unsettled one (whose
    /// effect was never confirmed: `InboundLedger`). An id below the floor is `.settled`.
    public func record(_ entries: [Entry]) throws -> [InboundLedger.Record] {
        guard !entries.isEmpty else { return [] }
        let maxRows = self.maxRows
        let synchronous = self.syncsEveryCommit ? self.database.synchronous : .normal
        // The count is taken as the batch commits: the lock is held across the transaction.
        let answers = try self.knownRows.withLock { knownRows in
            let (answers, known) = try self.database.transaction(synchronous: synchronous) { connection in
                let rows = try Self.rows(knownRows, connection)
                // The floor is read once per batch and kept up to date here as the batch raises it.
                var state = State(rowCount: rows.rows, floorMs: try Self.floorMs(connection))
                let answers = try entries.map { try Self.insert($0, maxRows: maxRows, state: &state, connection) }
                return (answers, KnownRows(rows: state.rowCount, dataVersion: rows.dataVersion))
            }
            knownRows = known
            return answers
        }
        if !self.syncsEveryCommit, answers.contains(.fresh) { self.unsynced.store(true, ordering: .releasing) }
        return answers
    }

    /// Marks recorded ids settled (their messages' effects are durable), in one commit, synced as batches are.
    /// An id not held (pruned meanwhile) is left as it is.
    public func markSettled(_ entries: [Entry]) throws {
        guard !entries.isEmpty else { return }
        let synchronous = self.syncsEveryCommit ? self.database.synchronous : .normal
        try self.database.transaction(synchronous: synchronous) { connection in
            for entry in entries {
                try connection.execute(
                    "UPDATE seen_messages SET settled = 1 WHERE sender = ? AND message_id = ? AND settled = 0",
                    [.blob(entry.sender.bytes), .blob(entry.messageID)])
            }
        }
        if !self.syncsEveryCommit { self.unsynced.store(true, ordering: .releasing) }
    }

    /// Ids were committed without a sync since the last `sync()`.
    public var hasUnsyncedIDs: Bool { self.unsynced.load(ordering: .acquiring) }

    /// Makes the ids recorded since the last call durable against power loss: one fdatasync of the WAL
    /// (`Database.syncWAL`), which holds every unsynced commit before it. It does not hold the database, so
    /// batches go on meanwhile. Nothing when there are none. Returns whether it synced.
    @discardableResult
    public func sync() throws -> Bool {
        guard self.unsynced.exchange(false, ordering: .acquiringAndReleasing) else { return false }
        do {
            try self.database.syncWAL()
        } catch {
            self.unsynced.store(true, ordering: .releasing)
            throw error
        }
        return true
    }

    private static func insert(
        _ entry: Entry, maxRows: Int, state: inout State, _ connection: DatabaseConnection
    ) throws -> InboundLedger.Record {
        let sentAt = Int64(storing: entry.sentAtMs)
        guard sentAt >= state.floorMs else { return .settled }
        try connection.execute(
            "INSERT OR IGNORE INTO seen_messages(sender, message_id, sent_at_ms, settled) VALUES (?, ?, ?, ?)",
            [.blob(entry.sender.bytes), .blob(entry.messageID), .integer(sentAt), .integer(entry.settled ? 1 : 0)]
        )
        guard connection.changes > 0 else {
            // Read only for a repeat: a replay, or the redelivery of a message whose effect was never confirmed.
            let held = try connection.query(
                "SELECT settled FROM seen_messages WHERE sender = ? AND message_id = ?",
                [.blob(entry.sender.bytes), .blob(entry.messageID)])
            return try held.first?.int64(0) == 0 ? .unsettled : .settled
        }
        state.rowCount += 1
        let overflow = state.rowCount - Int64(maxRows)
        if overflow > 0 {
            let newest = try connection.query(
                "SELECT max(sent_at_ms) FROM (SELECT sent_at_ms FROM seen_messages ORDER BY sent_at_ms LIMIT ?)",
                [.integer(overflow)]
            )
            let evictedUpTo = try newest.first?.int64(0) ?? sentAt
            try connection.execute(
                """
                DELETE FROM seen_messages WHERE (sender, message_id) IN
                    (SELECT sender, message_id FROM seen_messages ORDER BY sent_at_ms LIMIT ?)
                """,
                [.integer(overflow)]
            )
            state.rowCount -= Int64(connection.changes)
            let floor = evictedUpTo == Int64.max ? Int64.max : evictedUpTo + 1
            try Self.raiseFloor(to: floor, connection)
            state.floorMs = max(state.floorMs, floor)
        }
        return .fresh
    }

    /// Deletes ids of messages sent before `olderThanMs` and raises the floor to it; returns how many.
    @discardableResult
    public func prune(olderThanMs: UInt64) throws -> Int {
        let cutoff = Int64(storing: olderThanMs)
        var total = 0
        while true {
            let deleted = try self.knownRows.withLock { knownRows in
                let (deleted, known) = try self.database.transaction { connection in
                    let rows = try Self.rows(knownRows, connection)
                    try connection.execute(
                        """
                        DELETE FROM seen_messages WHERE (sender, message_id) IN
                            (SELECT sender, message_id FROM seen_messages WHERE sent_at_ms < ? LIMIT ?)
                        """,
                        [.integer(cutoff), .integer(Int64(Self.pruneBatch))]
                    )
                    let deleted = connection.changes
                    try Self.raiseFloor(to: cutoff, connection)
                    return (deleted, KnownRows(rows: rows.rows - Int64(deleted), dataVersion: rows.dataVersion))
                }
                knownRows = known
                return deleted
            }
            total += deleted
            if deleted < Self.pruneBatch { return total }
        }
    }

    /// Messages with `sentAtMs` below this are refused by `insertIfNew` (their ids may have been forgotten).
    public func floorMs() throws -> UInt64 {
        try self.database.withConnection { connection in
            try UInt64(stored: Self.floorMs(connection), table: "seen_state", column: "floor_ms")
        }
    }

    /// Ids currently held (counted, not the store's own count).
    public func count() throws -> Int {
        try self.database.withConnection { Int(try Self.countRows($0)) }
    }

    private struct State: Sendable { var rowCount: Int64, floorMs: Int64 }

    private static func floorMs(_ connection: DatabaseConnection) throws -> Int64 {
        guard let row = try connection.query("SELECT floor_ms FROM seen_state WHERE id = 0").first else {
            throw StoreError.corruptRow(table: "seen_state", reason: "missing row")
        }
        return try row.int64(0)
    }

    private static func countRows(_ connection: DatabaseConnection) throws -> Int64 {
        try connection.query("SELECT count(*) FROM seen_messages").first?.int64(0) ?? 0
    }

    /// The rows as known, or counted now if never counted or another connection has committed since
    /// (`data_version`; this connection's own commits leave it as it is). Inside the caller's transaction.
    private static func rows(_ known: KnownRows?, _ connection: DatabaseConnection) throws -> KnownRows {
        let version = try connection.query("PRAGMA data_version").first?.int64(0) ?? 0
        if let known, known.dataVersion == version { return known }
        return KnownRows(rows: try Self.countRows(connection), dataVersion: version)
    }

    private static func raiseFloor(to floorMs: Int64, _ connection: DatabaseConnection) throws {
        try connection.execute("UPDATE seen_state SET floor_ms = max(floor_ms, ?) WHERE id = 0", [.integer(floorMs)])
    }
}
