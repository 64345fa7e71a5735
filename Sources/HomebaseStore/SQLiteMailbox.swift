import HomebaseCore

/// The relay mailbox in SQLite (protocol-v1 §2): durable on return from `enqueue` when the `Database`
/// uses `synchronous = .full`.
///
/// `delivery_id INTEGER PRIMARY KEY AUTOINCREMENT` makes ids non-zero, increasing and never reused, even
/// after the newest frame is acknowledged or the relay restarts. Per-recipient counts live in
/// `mailbox_depth`, kept exact by triggers in the same transaction as each insert and delete, so
/// `enqueue` reads one row instead of scanning the mailbox.
public final class SQLiteMailbox: Mailbox {
    /// Migration steps of namespace "mailbox". Append only.
    static let migrations = [
        """
        CREATE TABLE mailbox_frames(
            delivery_id INTEGER PRIMARY KEY AUTOINCREMENT,
            recipient BLOB NOT NULL,
            sender BLOB NOT NULL,
            payload BLOB NOT NULL,
            payload_bytes INTEGER NOT NULL,
            stored_at_ms INTEGER NOT NULL,
            expires_at_ms INTEGER NOT NULL
        );
        CREATE INDEX mailbox_frames_by_recipient ON mailbox_frames(recipient, delivery_id);
        CREATE INDEX mailbox_frames_by_expiry ON mailbox_frames(expires_at_ms);
        CREATE TABLE mailbox_depth(
            recipient BLOB PRIMARY KEY,
            frames INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TRIGGER mailbox_frames_inserted AFTER INSERT ON mailbox_frames BEGIN
            INSERT INTO mailbox_depth(recipient, frames, bytes) VALUES (NEW.recipient, 1, NEW.payload_bytes)
            ON CONFLICT(recipient) DO UPDATE SET frames = frames + 1, bytes = bytes + NEW.payload_bytes;
        END;
        CREATE TRIGGER mailbox_frames_deleted AFTER DELETE ON mailbox_frames BEGIN
            UPDATE mailbox_depth SET frames = frames - 1, bytes = bytes - OLD.payload_bytes
                WHERE recipient = OLD.recipient;
            DELETE FROM mailbox_depth WHERE recipient = OLD.recipient AND frames <= 0;
        END;
        """
    ]

    /// Frames deleted per transaction by `expire`, so a large sweep never holds the write lock for long.
    static let expireBatch = 1_000

    public let limits: MailboxLimits
    private let database: Database

    public init(database: Database, limits: MailboxLimits = MailboxLimits()) throws {
        self.database = database
        self.limits = limits
        try database.migrate(namespace: "mailbox", steps: Self.migrations)
    }

    public func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64) throws
        -> MailboxEnqueueResult
    {
        let limits = self.limits
        return try self.database.transaction { connection in
            try Self.enqueue(recipient: recipient, sender: sender, payload: payload, nowMs: nowMs, limits: limits,
                             connection: connection)
        }
    }

    public func enqueueBatch(_ items: [MailboxItem], nowMs: UInt64) throws -> [MailboxEnqueueResult] {
        guard !items.isEmpty else { return [] }
        let limits = self.limits
        // One transaction, so one fsync for the whole batch under synchronous=FULL: the relay's group commit.
        return try self.database.transaction { connection in
            try items.map { item in
                try Self.enqueue(recipient: item.recipient, sender: item.sender, payload: item.payload, nowMs: nowMs,
                                 limits: limits, connection: connection)
            }
        }
    }

    public func pendingCount(recipient: PublicKey, nowMs: UInt64) throws -> Int {
        let rows = try self.database.query(
            "SELECT count(*) FROM mailbox_frames WHERE recipient = ? AND expires_at_ms > ?",
            [.blob(recipient.bytes), .integer(Int64(storing: nowMs))]
        )
        return Int(try rows.first?.int64(0) ?? 0)
    }

    private static func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64,
                                limits: MailboxLimits, connection: DatabaseConnection) throws -> MailboxEnqueueResult
    {
        var depth = try Self.depth(recipient, connection)
        if !limits.admits(frames: depth.frames, bytes: depth.bytes, payloadBytes: payload.count) {
            // Only a full mailbox pays for sweeping its own expired frames (at most maxFrames rows through
            // the recipient index), so expired frames never keep a recipient full between sweeps.
            try connection.execute(
                "DELETE FROM mailbox_frames WHERE recipient = ? AND expires_at_ms <= ?",
                [.blob(recipient.bytes), .integer(Int64(storing: nowMs))]
            )
            guard connection.changes > 0 else { return .mailboxFull }
            depth = try Self.depth(recipient, connection)
            guard limits.admits(frames: depth.frames, bytes: depth.bytes, payloadBytes: payload.count) else {
                return .mailboxFull
            }
        }
        try connection.execute(
            """
            INSERT INTO mailbox_frames(recipient, sender, payload, payload_bytes, stored_at_ms, expires_at_ms)
            VALUES (?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(recipient.bytes), .blob(sender.bytes), .blob(payload), .integer(Int64(payload.count)),
                .integer(Int64(storing: nowMs)), .integer(Int64(storing: limits.expiry(storedAtMs: nowMs))),
            ]
        )
        return .stored(deliveryID: UInt64(connection.lastInsertRowID))
    }

    public func pending(recipient: PublicKey, after: UInt64, limit: Int, nowMs: UInt64) throws -> [StoredFrame] {
        guard limit > 0, after < UInt64(Int64.max) else { return [] }
        let rows = try self.database.query(
            """
            SELECT delivery_id, sender, payload, stored_at_ms, expires_at_ms FROM mailbox_frames
            WHERE recipient = ? AND delivery_id > ? AND expires_at_ms > ?
            ORDER BY delivery_id LIMIT ?
            """,
            [.blob(recipient.bytes), .integer(Int64(after)), .integer(Int64(storing: nowMs)), .integer(Int64(limit))]
        )
        return try rows.map { row in
            let senderBytes = try row.blob(1)
            guard let sender = PublicKey(bytes: senderBytes) else {
                throw StoreError.corruptRow(table: "mailbox_frames", reason: "sender of \(senderBytes.count) bytes")
            }
            return StoredFrame(
                deliveryID: try UInt64(stored: row.int64(0), table: "mailbox_frames", column: "delivery_id"),
                sender: sender,
                payload: try row.blob(2),
                storedAtMs: try UInt64(stored: row.int64(3), table: "mailbox_frames", column: "stored_at_ms"),
                expiresAtMs: try UInt64(stored: row.int64(4), table: "mailbox_frames", column: "expires_at_ms")
            )
        }
    }

    public func acknowledge(recipient: PublicKey, deliveryID: UInt64) throws -> Bool {
        // An id past Int64.max was never issued; clamping it would alias a real one.
        guard deliveryID > 0, deliveryID <= UInt64(Int64.max) else { return false }
        return try self.database.transaction { connection in
            try connection.execute(
                "DELETE FROM mailbox_frames WHERE delivery_id = ? AND recipient = ?",
                [.integer(Int64(deliveryID)), .blob(recipient.bytes)]
            )
            return connection.changes > 0
        }
    }

    public func acknowledgeBatch(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws {
        try self.database.transaction(synchronous: .normal) { connection in
            // An id past Int64.max was never issued; clamping it would alias a real one.
            for a in acks where a.deliveryID > 0 && a.deliveryID <= UInt64(Int64.max) {
                try connection.execute(
                    "DELETE FROM mailbox_frames WHERE delivery_id = ? AND recipient = ?",
                    [.integer(Int64(a.deliveryID)), .blob(a.recipient.bytes)]
                )
            }
        }
    }

    public func depth(recipient: PublicKey) throws -> (frames: Int, bytes: Int) {
        let depth = try self.database.withConnection { try Self.depth(recipient, $0) }
        return (depth.frames, depth.bytes)
    }

    public func expire(nowMs: UInt64) throws -> Int {
        var total = 0
        while true {
            let deleted = try self.database.transaction { connection in
                try connection.execute(
                    """
                    DELETE FROM mailbox_frames WHERE delivery_id IN
                        (SELECT delivery_id FROM mailbox_frames WHERE expires_at_ms <= ? LIMIT ?)
                    """,
                    [.integer(Int64(storing: nowMs)), .integer(Int64(Self.expireBatch))]
                )
                return connection.changes
            }
            total += deleted
            if deleted < Self.expireBatch { return total }
        }
    }

    public func totalDepth() throws -> (frames: Int, bytes: Int, mailboxes: Int) {
        // One row per non-empty mailbox, not per frame: cheap enough for a metrics scrape.
        let row = try self.database.query(
            "SELECT coalesce(sum(frames), 0), coalesce(sum(bytes), 0), count(*) FROM mailbox_depth"
        )
        guard let row = row.first else { return (0, 0, 0) }
        return (Int(try row.int64(0)), Int(try row.int64(1)), Int(try row.int64(2)))
    }

    private struct Depth: Sendable { var frames: Int, bytes: Int }

    private static func depth(_ recipient: PublicKey, _ connection: DatabaseConnection) throws -> Depth {
        let rows = try connection.query(
            "SELECT frames, bytes FROM mailbox_depth WHERE recipient = ?",
            [.blob(recipient.bytes)]
        )
        guard let row = rows.first else { return Depth(frames: 0, bytes: 0) }
        return Depth(frames: Int(try row.int64(0)), bytes: Int(try row.int64(1)))
    }
}
