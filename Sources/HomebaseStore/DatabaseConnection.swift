internal import CSQLite

/// One open `sqlite3` handle and its prepared-statement cache.
///
/// Not thread-safe and deliberately not `Sendable`: it is only ever reached through `Database`, whose
/// `Mutex` serialises every call. A `DatabaseConnection` passed to a `Database.transaction` or
/// `Database.withConnection` body is valid only inside that body; do not store it.
public final class DatabaseConnection {
    private let handle: OpaquePointer
    /// Prepared statements keyed by their SQL text. Bounded (style §8): past the capacity an entry is
    /// finalized to make room, so ad-hoc SQL cannot grow it without limit.
    private var statements: [String: OpaquePointer] = [:]
    private let statementCacheCapacity: Int
    /// The `PRAGMA synchronous` last set on this connection; nil when unknown (never set, or a set failed).
    var synchronous: Database.Synchronous?

    init(handle: OpaquePointer, statementCacheCapacity: Int) {
        self.handle = handle
        self.statementCacheCapacity = max(1, statementCacheCapacity)
    }

    deinit {
        // sqlite3_close_v2 would defer the close while statements are alive; finalize them first so the
        // file descriptors are released now. Return codes ignored on purpose: finalize only repeats the
        // statement's last error, and close_v2 with no live statements cannot fail in a way we could act on
        // from a deinit.
        for statement in self.statements.values {
            sqlite3_finalize(statement)
        }
        sqlite3_close_v2(self.handle)
    }

    // MARK: Public API

    /// Runs one statement, discarding any rows.
    public func execute(_ sql: String, _ parameters: [SQLValue] = []) throws {
        _ = try self.run(sql, parameters, collect: false)
    }

    /// Runs one statement and returns all its rows.
    public func query(_ sql: String, _ parameters: [SQLValue] = []) throws -> [Row] {
        try self.run(sql, parameters, collect: true)
    }

    /// Runs several `;`-separated statements without parameters (schema scripts). Not cached.
    public func executeScript(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>? = nil
        let rc = sqlite3_exec(self.handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? self.lastErrorMessage
            sqlite3_free(errorMessage)
            throw StoreError.sqlite(function: "sqlite3_exec", code: rc, message: message)
        }
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE (not counting trigger side effects).
    public var changes: Int { Int(sqlite3_changes(self.handle)) }

    /// The rowid of the most recent successful INSERT on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(self.handle) }

    /// True while a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(self.handle) == 0 }

    // MARK: Transactions (used by Database)

    func begin() throws { try self.execute("BEGIN IMMEDIATE") }

    /// Sets `PRAGMA synchronous` unless it is known to be `level` already. Only outside a transaction (SQLite
    /// refuses it inside one); a failure leaves the level unknown, so the next call sets it again.
    func setSynchronous(_ level: Database.Synchronous) throws {
        guard self.synchronous != level else { return }
        self.synchronous = nil
        try self.executeScript("PRAGMA synchronous=\(level.rawValue)")
        self.synchronous = level
    }
    func commit() throws { try self.execute("COMMIT") }

    /// Rolls back if a transaction is still open. SQLite rolls back by itself after some errors
    /// (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM), so "no transaction is active" is expected here; any other
    /// failure is ignored on purpose because the caller is already propagating the error that caused
    /// the rollback, which is the one worth reporting.
    func rollbackIfActive() {
        guard self.isInTransaction else { return }
        _ = try? self.execute("ROLLBACK")
    }

    // MARK: Statements

    private func run(_ sql: String, _ parameters: [SQLValue], collect: Bool) throws -> [Row] {
        let statement = try self.prepared(sql)
        defer {
            // reset repeats the last step's error code, which run() has already thrown; ignoring it is safe.
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        let expected = Int(sqlite3_bind_parameter_count(statement))
        guard expected == parameters.count else {
            throw StoreError.sqlite(
                function: "sqlite3_bind",
                code: SQLITE_RANGE,
                message: "statement has \(expected) parameters, \(parameters.count) given"
            )
        }
        for (i, value) in parameters.enumerated() {
            try self.bind(value, at: Int32(i + 1), in: statement)
        }
        var rows: [Row] = []
        var names: [String]? = nil
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw self.error("sqlite3_step", rc) }
            guard collect else { continue }
            let count = sqlite3_column_count(statement)
            if names == nil {
                names = (0..<count).map { sqlite3_column_name(statement, $0).map { String(cString: $0) } ?? "" }
            }
            let values = (0..<count).map { self.column($0, of: statement) }
            rows.append(Row(columnNames: names!, values: values))
        }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let cached = self.statements[sql] { return cached }
        var statement: OpaquePointer? = nil
        // The tail points into the C string SQLite compiled, so it is read inside withCString: a String passed
        // straight to the C parameter becomes a temporary copy, freed as soon as the call returns.
        let (rc, trailing) = sql.withCString { text -> (Int32, Bool) in
            var tail: UnsafePointer<CChar>? = nil
            let rc = sqlite3_prepare_v3(self.handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, &tail)
            let trailing = tail.map { !String(cString: $0).allSatisfy { $0.isWhitespace || $0 == ";" } } ?? false
            return (rc, trailing)
        }
        guard rc == SQLITE_OK else {
            sqlite3_finalize(statement)
            throw self.error("sqlite3_prepare_v3", rc)
        }
        guard let statement else {
            // An empty string or a comment compiles to no statement at all.
            throw StoreError.sqlite(function: "sqlite3_prepare_v3", code: SQLITE_MISUSE, message: "no statement in SQL")
        }
        if trailing {
            sqlite3_finalize(statement)
            throw StoreError.sqlite(
                function: "sqlite3_prepare_v3",
                code: SQLITE_MISUSE,
                message: "more than one statement; use executeScript"
            )
        }
        if self.statements.count >= self.statementCacheCapacity, let victim = self.statements.first {
            sqlite3_finalize(victim.value)
            self.statements.removeValue(forKey: victim.key)
        }
        self.statements[sql] = statement
        return statement
    }

    private func bind(_ value: SQLValue, at index: Int32, in statement: OpaquePointer) throws {
        let rc: Int32
        switch value {
        case .integer(let x):
            rc = sqlite3_bind_int64(statement, index, x)
        case .real(let x):
            rc = sqlite3_bind_double(statement, index, x)
        case .null:
            rc = sqlite3_bind_null(statement, index)
        case .text(var s):
            rc = s.withUTF8 { utf8 -> Int32 in
                guard let base = utf8.baseAddress, utf8.count > 0 else {
                    return csqlite_bind_text_transient(statement, index, "", 0)
                }
                guard utf8.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
                return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                    csqlite_bind_text_transient(statement, index, $0, Int32(utf8.count))
                }
            }
        case .blob(let bytes):
            if bytes.isEmpty {
                // A zero-length blob through bind_blob would be bound from a nil pointer, which SQLite
                // stores as NULL; zeroblob(0) keeps it an empty BLOB.
                rc = sqlite3_bind_zeroblob(statement, index, 0)
            } else if bytes.count > Int(Int32.max) {
                rc = SQLITE_TOOBIG
            } else {
                rc = bytes.withUnsafeBytes {
                    csqlite_bind_blob_transient(statement, index, $0.baseAddress, Int32($0.count))
                }
            }
        }
        guard rc == SQLITE_OK else { throw self.error("sqlite3_bind", rc) }
    }

    private func column(_ i: Int32, of statement: OpaquePointer) -> SQLValue {
        switch sqlite3_column_type(statement, i) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(statement, i))
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(statement, i))
        case SQLITE_TEXT:
            // column_text before column_bytes, as the SQLite docs require, so the length is of the UTF-8 form.
            guard let text = sqlite3_column_text(statement, i) else { return .text("") }
            let count = Int(sqlite3_column_bytes(statement, i))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let pointer = sqlite3_column_blob(statement, i)
            let count = Int(sqlite3_column_bytes(statement, i))
            guard let pointer, count > 0 else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: pointer, count: count)))
        default:
            return .null
        }
    }

    private var lastErrorMessage: String { String(cString: sqlite3_errmsg(self.handle)) }

    private func error(_ function: String, _ code: Int32) -> StoreError {
        // SQLITE_TOOBIG/RANGE set here by us have no matching errmsg; use the library's text for the code.
        let message = code == sqlite3_extended_errcode(self.handle)
            ? self.lastErrorMessage : String(cString: sqlite3_errstr(code))
        return .sqlite(function: function, code: code, message: message)
    }
}
