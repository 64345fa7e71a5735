/// Small named values that must survive restarts: settings, key rings, identity seeds.
///
/// Lives in table `kv(key TEXT PRIMARY KEY, value BLOB, updated_at INTEGER)` of a `Database`, which is why
/// that file is mode 0600. Strings are stored as TEXT and bytes as BLOB; reading one as the other throws
/// `StoreError.typeMismatch`. Thread-safe through the `Database`.
public final class KeyValueStore: Sendable {
    /// Migration steps of namespace "kv". Append only.
    static let migrations = [
        """
        CREATE TABLE kv(key TEXT PRIMARY KEY, value BLOB NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
        """
    ]

    private let database: Database
    private let clock: @Sendable () -> UInt64

    /// - Parameter clock: milliseconds since the epoch for `updated_at`; the wall clock when `nil`.
    public init(database: Database, clock: (@Sendable () -> UInt64)? = nil) throws {
        self.database = database
        self.clock = clock ?? { wallClockMs() }
        try database.migrate(namespace: "kv", steps: Self.migrations)
    }

    public func string(_ key: String) throws -> String? {
        try self.value(key).map { row in try row.string(0) }
    }

    public func setString(_ value: String, forKey key: String) throws {
        try self.set(.text(value), key)
    }

    public func data(_ key: String) throws -> [UInt8]? {
        try self.value(key).map { row in try row.blob(0) }
    }

    public func setData(_ value: [UInt8], forKey key: String) throws {
        try self.set(.blob(value), key)
    }

    /// Removes `key`; returns false if it was not there.
    @discardableResult
    public func remove(_ key: String) throws -> Bool {
        try self.database.withConnection { connection in try Self.remove(key, connection) }
    }

    static func remove(_ key: String, _ connection: DatabaseConnection) throws -> Bool {
        try connection.execute("DELETE FROM kv WHERE key = ?", [.text(key)])
        return connection.changes > 0
    }

    /// Runs `body` in one write transaction (`Database.transaction`, `BEGIN IMMEDIATE`): reads and writes through
    /// the `Transaction` it is given are atomic against every other connection to the file, in any process.
    /// Do not use this store itself inside `body` (the database lock is not recursive).
    public func transaction<T: Sendable>(_ body: (Transaction) throws -> T) throws -> T {
        try self.database.transaction { connection in
            try body(Transaction(connection: connection, clock: self.clock))
        }
    }

    /// The store's operations on the connection of a running transaction; valid only inside its body.
    public struct Transaction {
        let connection: DatabaseConnection
        let clock: @Sendable () -> UInt64

        public func string(_ key: String) throws -> String? {
            try KeyValueStore.value(key, self.connection).map { row in try row.string(0) }
        }

        public func data(_ key: String) throws -> [UInt8]? {
            try KeyValueStore.value(key, self.connection).map { row in try row.blob(0) }
        }

        public func set(_ value: SQLValue, _ key: String) throws {
            try KeyValueStore.set(value, key, nowMs: self.clock(), self.connection)
        }

        @discardableResult
        public func remove(_ key: String) throws -> Bool { try KeyValueStore.remove(key, self.connection) }

        public func keys(withPrefix prefix: String) throws -> [String] {
            try KeyValueStore.keys(withPrefix: prefix, self.connection)
        }
    }

    /// The time `key` was last written, in ms since the epoch, or nil if absent.
    public func updatedAtMs(_ key: String) throws -> UInt64? {
        let rows = try self.database.query("SELECT updated_at FROM kv WHERE key = ?", [.text(key)])
        return try rows.first.map { try UInt64(stored: $0.int64(0), table: "kv", column: "updated_at") }
    }

    /// Keys starting with `prefix` (all keys for ""), in byte order.
    ///
    /// Uses the primary key as a range (`prefix <= key < successor(prefix)`), so it reads only matching
    /// rows. Unbounded in count, which is safe because only our own modules write keys, each a handful.
    public func keys(withPrefix prefix: String) throws -> [String] {
        try self.database.withConnection { connection in try Self.keys(withPrefix: prefix, connection) }
    }

    static func keys(withPrefix prefix: String, _ connection: DatabaseConnection) throws -> [String] {
        let rows: [Row]
        if let upper = Self.successor(of: prefix) {
            rows = try connection.query(
                "SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key",
                [.text(prefix), .text(upper)]
            )
        } else {
            rows = try connection.query("SELECT key FROM kv WHERE key >= ? ORDER BY key", [.text(prefix)])
        }
        return try rows.map { try $0.string(0) }
    }

    private func value(_ key: String) throws -> Row? {
        try self.database.withConnection { connection in try Self.value(key, connection) }
    }

    static func value(_ key: String, _ connection: DatabaseConnection) throws -> Row? {
        try connection.query("SELECT value FROM kv WHERE key = ?", [.text(key)]).first
    }

    private func set(_ value: SQLValue, _ key: String) throws {
        let now = self.clock()
        try self.database.withConnection { connection in try Self.set(value, key, nowMs: now, connection) }
    }

    static func set(_ value: SQLValue, _ key: String, nowMs: UInt64, _ connection: DatabaseConnection) throws {
        try connection.execute(
            """
            INSERT INTO kv(key, value, updated_at) VALUES (?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
            """,
            [.text(key), value, .integer(Int64(storing: nowMs))]
        )
    }

    /// The smallest string greater than every string that starts with `prefix`, or nil if there is none
    /// (empty prefix, or all U+10FFFF). TEXT keys compare by memcmp on UTF-8, and UTF-8 byte order is code
    /// point order, so incrementing the last scalar that can be incremented gives the exclusive bound.
    static func successor(of prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var next = last.value + 1
            if next == 0xD800 { next = 0xE000 }  // skip the surrogate range, which has no scalars
            if let scalar = Unicode.Scalar(next) {
                scalars.append(scalar)
                var result = String.UnicodeScalarView()
                result.append(contentsOf: scalars)
                return String(result)
            }
        }
        return nil
    }
}
