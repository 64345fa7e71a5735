internal import CSQLite
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One SQLite connection to a state database, safe to share between threads.
///
/// Every call goes through a `Mutex`, so one `Database` can serve several threads of a service; calls
/// are serialised, not concurrent. Separate processes (a daemon and a CLI subcommand) open their own
/// `Database` on the same file: WAL mode lets readers run beside one writer, and `busyTimeoutMs` makes
/// a writer wait for another process's write transaction instead of failing with SQLITE_BUSY.
///
/// Do not call a `Database` method from inside a `transaction` or `withConnection` body on the same
/// instance: the lock is not recursive. Use the `DatabaseConnection` passed to the body instead.
public final class Database: Sendable {
    /// How hard SQLite syncs on commit (`PRAGMA synchronous`).
    public enum Synchronous: String, Sendable {
        /// fsync on every commit: a commit that returned survives power loss. Needed before RECEIPT 1.
        case full = "FULL"
        /// fsync only at checkpoints: a commit survives a crash of the process (kill -9) but the last
        /// few may be lost on power loss. Faster; acceptable for caches, not for the relay mailbox.
        case normal = "NORMAL"
    }

    /// Connection settings.
    public struct Options: Sendable, Equatable {
        public var synchronous: Synchronous
        /// How long a statement waits for another connection's lock before failing with SQLITE_BUSY.
        /// Five seconds covers any write transaction we run; a CLI and a daemon share one file.
        public var busyTimeoutMs: Int32
        /// Prepared statements kept per connection. Our modules use a few dozen distinct statements.
        public var statementCacheCapacity: Int

        public init(synchronous: Synchronous = .full, busyTimeoutMs: Int32 = 5_000, statementCacheCapacity: Int = 128)
        {
            self.synchronous = synchronous
            self.busyTimeoutMs = busyTimeoutMs
            self.statementCacheCapacity = statementCacheCapacity
        }
    }

    /// Permissions of the database file and its -wal/-shm companions: it holds identity seeds and keys.
    public static let fileMode: mode_t = 0o600

    /// The path given to `init`; `":memory:"` for a private in-memory database.
    public let path: String
    /// The connection's own `PRAGMA synchronous`, which `transaction(synchronous:_:)` restores.
    public let synchronous: Synchronous
    private let connection: Mutex<DatabaseConnection>

    /// Opens (creating if needed) the database at `path`, or a private in-memory one for `":memory:"`.
    ///
    /// A file is created with mode 0600 before SQLite sees it, and an existing one (with its -wal and -shm
    /// files) is set to 0600, so a key ring is never readable by other users, not even briefly.
    /// - Throws: `StoreError.file` if the file cannot be created or chmod-ed, `StoreError.sqlite` if SQLite
    ///   cannot open it, `StoreError.journalModeNotWAL` if WAL mode is unavailable.
    public init(path: String, options: Options = Options()) throws {
        // We serialise calls ourselves (SQLITE_OPEN_NOMUTEX), which is only sound if the library was built
        // thread-safe at all; Debian's is (SQLITE_THREADSAFE=1).
        precondition(sqlite3_threadsafe() != 0, "libsqlite3 was built single-threaded")
        let isMemory = path == ":memory:"
        if !isMemory {
            try Self.prepareFile(path)
        }
        var raw: OpaquePointer? = nil
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &raw, flags, nil)
        guard rc == SQLITE_OK, let handle = raw else {
            let message = raw.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            // A handle is returned even on failure and must be closed.
            sqlite3_close_v2(raw)
            throw StoreError.sqlite(function: "sqlite3_open_v2", code: rc, message: message)
        }
        sqlite3_extended_result_codes(handle, 1)
        // From here the connection's deinit closes the handle if a step below throws.
        let connection = DatabaseConnection(handle: handle, statementCacheCapacity: options.statementCacheCapacity)
        let busy = sqlite3_busy_timeout(handle, options.busyTimeoutMs)
        guard busy == SQLITE_OK else {
            throw StoreError.sqlite(function: "sqlite3_busy_timeout", code: busy, message: "cannot set busy timeout")
        }
        if !isMemory {
            let mode = try connection.query("PRAGMA journal_mode=WAL").first?.string(0) ?? ""
            guard mode.lowercased() == "wal" else { throw StoreError.journalModeNotWAL(actual: mode) }
            // SQLite creates -wal and -shm with the main file's mode; this catches ones left by an older run.
            try Self.restrictCompanions(of: path)
        }
        try connection.setSynchronous(options.synchronous)
        try connection.executeScript("PRAGMA foreign_keys=ON;")
        self.path = path
        self.synchronous = options.synchronous
        self.connection = Mutex(connection)
    }

    // MARK: Statements

    /// Runs one statement, discarding any rows.
    public func execute(_ sql: String, _ parameters: [SQLValue] = []) throws {
        try self.locked { try $0.execute(sql, parameters) }
    }

    /// Runs one statement and returns all its rows.
    public func query(_ sql: String, _ parameters: [SQLValue] = []) throws -> [Row] {
        try self.locked { try $0.query(sql, parameters) }
    }

    /// Runs several `;`-separated statements without parameters.
    public func executeScript(_ sql: String) throws {
        try self.locked { try $0.executeScript(sql) }
    }

    /// Runs `body` holding the lock, without a transaction (for reads that need several statements, or
    /// `changes` / `lastInsertRowID` right after a statement).
    public func withConnection<T: Sendable>(_ body: (DatabaseConnection) throws -> T) throws -> T {
        try self.locked { connection throws -> T in try body(connection) }
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`): committed when it returns, rolled back when it
    /// throws (the error is rethrown). IMMEDIATE takes the write lock up front, so two processes writing at
    /// once wait on `busyTimeoutMs` at BEGIN instead of deadlocking on a read-to-write upgrade.
    public func transaction<T: Sendable>(_ body: (DatabaseConnection) throws -> T) throws -> T {
        try self.transaction(synchronous: self.synchronous, body)
    }

    /// `transaction`, committed under `synchronous` rather than the connection's own setting. `.normal` spares
    /// the commit its fsync: it survives a crash of the process, and becomes durable against power loss with
    /// `syncWAL`, the next synced commit that writes a page (the WAL is synced as a whole), or the next
    /// checkpoint. The level is left as it is afterwards: every other use of the connection sets its own level
    /// first (`locked`, and `transaction`), so nothing else ever commits under the lesser one, and a run of such
    /// transactions (the replay set's, one per inbound batch) costs no PRAGMA each.
    public func transaction<T: Sendable>(
        synchronous: Synchronous, _ body: (DatabaseConnection) throws -> T
    ) throws -> T {
        try self.connection.withLock { connection throws -> T in
            try connection.setSynchronous(synchronous)
            do {
                try connection.begin()
                let value = try body(connection)
                try connection.commit()
                return value
            } catch {
                connection.rollbackIfActive()
                throw error
            }
        }
    }

    /// Makes every commit so far durable against power loss, without holding the connection: one fdatasync(2)
    /// of the -wal file, where commits under `.normal` wait for their sync. Other threads go on using the
    /// database meanwhile; a synced commit held the lock through its fsync, so anything arriving then (a
    /// request on a Homebase with a slow disk) waited for the disk too. Commits a checkpoint already moved into
    /// the main file were synced by it. Nothing to do for `:memory:`, or before anything was written.
    public func syncWAL() throws {
        guard self.path != ":memory:" else { return }
        let wal = self.path + "-wal"
        let fd = open(wal, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw StoreError.file(operation: "open", path: wal, errno: errno)
        }
        defer { close(fd) }
        guard fdatasync(fd) == 0 else { throw StoreError.file(operation: "fdatasync", path: wal, errno: errno) }
    }

    /// Runs `body` on the connection under the lock, at the connection's own `synchronous` level.
    private func locked<T: Sendable>(_ body: (DatabaseConnection) throws -> T) throws -> T {
        try self.connection.withLock { connection throws -> T in
            try connection.setSynchronous(self.synchronous)
            return try body(connection)
        }
    }

    // MARK: Migrations

    /// Brings the tables of `namespace` up to `steps.count`, running each step not yet applied, in order,
    /// in one transaction.
    ///
    /// Each module owns a namespace ("kv", "mailbox", "seen", "relay", …) and only ever appends steps, so
    /// modules add their tables without touching each other's. Versions live in
    /// `schema_versions(namespace, version)`. A step may hold several statements.
    /// - Throws: `StoreError.schemaTooNew` if the file was written by a binary with more steps.
    public func migrate(namespace: String, steps: [String]) throws {
        try self.transaction { connection in
            try connection.executeScript(
                "CREATE TABLE IF NOT EXISTS schema_versions(namespace TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            let stored = try Self.version(namespace, connection)
            guard stored <= steps.count else {
                throw StoreError.schemaTooNew(namespace: namespace, stored: stored, known: steps.count)
            }
            guard stored < steps.count else { return }
            for step in steps[stored...] {
                try connection.executeScript(step)
            }
            try connection.execute(
                """
                INSERT INTO schema_versions(namespace, version) VALUES (?, ?)
                ON CONFLICT(namespace) DO UPDATE SET version = excluded.version
                """,
                [.text(namespace), .integer(Int64(steps.count))]
            )
        }
    }

    /// The number of migration steps applied for `namespace` (0 if none).
    public func schemaVersion(namespace: String) throws -> Int {
        try self.withConnection { connection in
            let exists = try connection.query(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_versions'"
            )
            return exists.isEmpty ? 0 : try Self.version(namespace, connection)
        }
    }

    private static func version(_ namespace: String, _ connection: DatabaseConnection) throws -> Int {
        let rows = try connection.query("SELECT version FROM schema_versions WHERE namespace = ?", [.text(namespace)])
        return try rows.first.map { Int(try $0.int64(0)) } ?? 0
    }

    // MARK: File permissions

    private static func prepareFile(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, Self.fileMode)
        guard fd >= 0 else { throw StoreError.file(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        // open(2)'s mode applies only when it creates the file; fchmod also tightens an existing one.
        guard fchmod(fd, Self.fileMode) == 0 else {
            throw StoreError.file(operation: "fchmod", path: path, errno: errno)
        }
        try Self.restrictCompanions(of: path)
    }

    private static func restrictCompanions(of path: String) throws {
        for suffix in ["-wal", "-shm"] {
            let companion = path + suffix
            if chmod(companion, Self.fileMode) != 0 && errno != ENOENT {
                throw StoreError.file(operation: "chmod", path: companion, errno: errno)
            }
        }
    }
}
