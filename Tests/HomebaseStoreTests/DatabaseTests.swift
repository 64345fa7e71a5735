import Foundation
import Testing
@testable import HomebaseStore

@Suite struct DatabaseTests {
    @Test func valuesRoundTripWithTheirTypes() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let blob: [UInt8] = [0, 1, 0xFF, 0]
        try db.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?)",
            [.integer(Int64.min), .real(1.5), .text("héllo\u{0}x"), .blob(blob), .null]
        )
        let row = try #require(try db.query("SELECT i, r, s, b, n FROM t").first)
        #expect(try row.int64(0) == Int64.min)
        #expect(try row.double("r") == 1.5)
        #expect(try row.string("s") == "héllo\u{0}x")
        #expect(try row.blob(3) == blob)
        #expect(try row.isNull("n"))
        #expect(row["missing"] == nil)
        #expect(row.columnNames == ["i", "r", "s", "b", "n"])
    }

    @Test func emptyBlobAndEmptyTextStayEmptyNotNull() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(b BLOB NOT NULL, s TEXT NOT NULL)")
        try db.execute("INSERT INTO t VALUES (?, ?)", [.blob([]), .text("")])
        let row = try #require(try db.query("SELECT b, s, typeof(b) FROM t").first)
        #expect(try row.blob(0) == [])
        #expect(try row.string(1) == "")
        #expect(try row.string(2) == "blob")
    }

    @Test func typedAccessorsRejectTheWrongType() throws {
        let db = try Database(path: ":memory:")
        let row = try #require(try db.query("SELECT 'x' AS s, 7 AS i").first)
        #expect(throws: StoreError.typeMismatch(column: "s", expected: "INTEGER", actual: "TEXT")) {
            try row.int64("s")
        }
        #expect(throws: StoreError.columnNotFound("#5")) { try row.blob(5) }
        #expect(throws: StoreError.columnNotFound("nope")) { try row.string("nope") }
        #expect(try row.double("i") == 7)
    }

    /// `syncWAL` syncs the -wal file, with nothing to do in memory or before anything was written, and says
    /// which file it could not sync.
    @Test func syncWALSyncsTheWALFileOrSaysWhichFailed() throws {
        try Database(path: ":memory:").syncWAL()
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let db = try Database(path: path)
        try db.syncWAL()
        try db.execute("CREATE TABLE t(x)")
        try db.execute("INSERT INTO t VALUES (1)")
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try db.syncWAL()
        // Unreadable (mode 0): the error names the file and the step. (Root reads it anyway: nothing to check.)
        guard getuid() != 0 else { return }
        #expect(chmod(path + "-wal", 0) == 0)
        defer { _ = chmod(path + "-wal", 0o600) }
        #expect(throws: StoreError.file(operation: "open", path: path + "-wal", errno: EACCES)) { try db.syncWAL() }
    }

    @Test func badSQLIsAStoreErrorNotATrap() throws {
        let db = try Database(path: ":memory:")
        let error = try #require(throws: StoreError.self) { try db.execute("SELEKT 1") }
        guard case .sqlite(let function, let code, let message) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(function == "sqlite3_prepare_v3")
        #expect(code == 1)  // SQLITE_ERROR
        #expect(message.contains("syntax error"))
    }

    @Test func constraintViolationCarriesTheExtendedCode() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(k TEXT PRIMARY KEY)")
        try db.execute("INSERT INTO t VALUES ('a')")
        let error = try #require(throws: StoreError.self) { try db.execute("INSERT INTO t VALUES ('a')") }
        guard case .sqlite(let function, let code, _) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(function == "sqlite3_step")
        #expect(code == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
        // The statement is reset after the failure and can run again.
        try db.execute("INSERT INTO t VALUES ('b')")
    }

    @Test func wrongParameterCountAndMultipleStatementsAreRefused() throws {
        let db = try Database(path: ":memory:")
        let rangeError = StoreError.sqlite(
            function: "sqlite3_bind", code: 25, message: "statement has 1 parameters, 0 given")  // SQLITE_RANGE
        #expect(throws: rangeError) {
            try db.query("SELECT ?")
        }
        #expect(throws: StoreError.self) { try db.execute("SELECT 1; SELECT 2") }
        #expect(throws: StoreError.self) { try db.execute("-- only a comment") }
        try db.execute("SELECT 1;  ")
    }

    /// Whether anything follows the first statement is read while the SQL's C string is alive. It was once read
    /// through SQLite's tail pointer after the call returned, from the temporary C copy of the String already
    /// freed: a heap-use-after-free that `tools/test --sanitize address` reports here.
    @Test func textAfterTheStatementIsReadFromTheLiveSQL() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x TEXT)")
        let long = String(repeating: "x", count: 200)
        for tail in ["", ";", " ; ;\n\t", ";   ;"] {
            try db.execute("INSERT INTO t VALUES ('\(long)')" + tail)
        }
        for tail in ["; SELECT 2", ";x", " junk"] {
            #expect(throws: StoreError.self) { try db.execute("INSERT INTO t VALUES ('\(long)')" + tail) }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 4)
    }

    @Test func transactionRollsBackOnThrow() throws {
        struct Boom: Error {}
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x INTEGER)")
        #expect(throws: Boom.self) {
            try db.transaction { c in
                try c.execute("INSERT INTO t VALUES (1)")
                #expect(c.isInTransaction)
                throw Boom()
            }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
        let n = try db.transaction { c in
            try c.execute("INSERT INTO t VALUES (2)")
            return c.changes
        }
        #expect(n == 1)
        #expect(try db.query("SELECT x FROM t").map { try $0.int64(0) } == [2])
        // The connection is usable (not stuck in a transaction) after both.
        try db.withConnection { #expect(!$0.isInTransaction) }
    }

    /// A transaction under another `synchronous` runs under it, and the connection's own setting (2: FULL) is
    /// back for any other use after it, whether the body committed or threw: no other commit may lose its fsync.
    @Test func aTransactionsOwnSynchronousIsSetBackBeforeAnyOtherUse() throws {
        struct Boom: Error {}
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.file("state.db"))
        func setting(_ c: DatabaseConnection) throws -> Int64? { try c.query("PRAGMA synchronous").first?.int64(0) }
        try db.execute("CREATE TABLE t(x INTEGER)")
        #expect(db.synchronous == .full)
        #expect(try db.withConnection { try setting($0) } == 2)
        let inside = try db.transaction(synchronous: .normal) { c -> Int64? in
            try c.execute("INSERT INTO t VALUES (1)")
            return try setting(c)
        }
        #expect(inside == 1)
        #expect(try db.withConnection { try setting($0) } == 2)
        #expect(throws: Boom.self) {
            try db.transaction(synchronous: .normal) { c in
                try c.execute("INSERT INTO t VALUES (2)")
                #expect(try setting(c) == 1)  // set again, not only the first time
                throw Boom()
            }
        }
        #expect(try db.withConnection { try setting($0) } == 2)
        _ = try db.transaction(synchronous: .normal) { _ in }
        #expect(try db.transaction { try setting($0) } == 2)
        _ = try db.transaction(synchronous: .normal) { _ in }
        try db.execute("INSERT INTO t VALUES (3)")
        #expect(try db.query("PRAGMA synchronous").first?.int64(0) == 2)
        #expect(try db.query("SELECT x FROM t").map { try $0.int64(0) } == [1, 3])
    }

    @Test func sqlErrorInsideATransactionRollsBackEarlierWrites() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x INTEGER NOT NULL)")
        #expect(throws: StoreError.self) {
            try db.transaction { c in
                try c.execute("INSERT INTO t VALUES (1)")
                try c.execute("INSERT INTO t VALUES (NULL)")
            }
        }
        #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
    }

    @Test func migrationsRunOncePerNamespaceAndAppendOnly() throws {
        let db = try Database(path: ":memory:")
        try db.migrate(namespace: "a", steps: ["CREATE TABLE a1(x)"])
        try db.migrate(namespace: "a", steps: ["CREATE TABLE a1(x)"])  // already applied: no "table exists"
        try db.migrate(namespace: "b", steps: ["CREATE TABLE b1(x); CREATE TABLE b2(x)"])
        try db.migrate(namespace: "a", steps: ["CREATE TABLE a1(x)", "ALTER TABLE a1 ADD COLUMN y"])
        #expect(try db.schemaVersion(namespace: "a") == 2)
        #expect(try db.schemaVersion(namespace: "b") == 1)
        #expect(try db.schemaVersion(namespace: "c") == 0)
        try db.execute("INSERT INTO a1(x, y) VALUES (1, 2)")
        #expect(throws: StoreError.schemaTooNew(namespace: "a", stored: 2, known: 1)) {
            try db.migrate(namespace: "a", steps: ["CREATE TABLE a1(x)"])
        }
    }

    @Test func failedMigrationStepLeavesNoTrace() throws {
        let db = try Database(path: ":memory:")
        #expect(throws: StoreError.self) {
            try db.migrate(namespace: "a", steps: ["CREATE TABLE a1(x)", "NOT SQL"])
        }
        #expect(try db.schemaVersion(namespace: "a") == 0)
        #expect(try db.query("SELECT name FROM sqlite_master WHERE name = 'a1'").isEmpty)
    }

    @Test func foreignKeysAreEnforced() throws {
        let db = try Database(path: ":memory:")
        try db.executeScript("CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(p INTEGER REFERENCES p(id))")
        #expect(throws: StoreError.self) { try db.execute("INSERT INTO c VALUES (42)") }
    }

    @Test func fileIsCreatedWithMode0600AndInWALMode() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let db = try Database(path: path)
        try db.execute("CREATE TABLE t(x)")
        try db.execute("INSERT INTO t VALUES (1)")
        #expect(fileMode(path) == 0o600)
        #expect(fileMode(path + "-wal") == 0o600)
        #expect(fileMode(path + "-shm") == 0o600)
        #expect(try db.query("PRAGMA journal_mode").first?.string(0) == "wal")
        #expect(try db.query("PRAGMA synchronous").first?.int64(0) == 2)  // FULL
        #expect(try db.query("PRAGMA foreign_keys").first?.int64(0) == 1)
        #expect(try db.query("PRAGMA busy_timeout").first?.int64(0) == 5_000)
    }

    @Test func existingLooseFilesAreTightenedTo0600() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            let db = try Database(path: path, options: .init(synchronous: .normal))
            try db.execute("CREATE TABLE t(x)")
            #expect(try db.query("PRAGMA synchronous").first?.int64(0) == 1)  // NORMAL
        }
        #expect(chmod(path, 0o644) == 0)
        let created = FileManager.default.createFile(
            atPath: path + "-wal", contents: nil, attributes: [.posixPermissions: 0o666])
        #expect(created)
        #expect(fileMode(path) == 0o644)
        let db = try Database(path: path)
        #expect(fileMode(path) == 0o600)
        #expect(fileMode(path + "-wal") == 0o600)
        withExtendedLifetime(db) {}  // the last connection to close deletes the -wal file
    }

    @Test func unopenablePathIsAFileError() throws {
        let error = try #require(throws: StoreError.self) { try Database(path: "/nonexistent-dir/x/state.db") }
        #expect(error == .file(operation: "open", path: "/nonexistent-dir/x/state.db", errno: ENOENT))
    }

    @Test func dataSurvivesCloseAndReopen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(x)")
            try db.execute("INSERT INTO t VALUES (?)", [.blob([1, 2, 3])])
        }
        let db = try Database(path: path)
        #expect(try db.query("SELECT x FROM t").first?.blob(0) == [1, 2, 3])
    }

    @Test func twoConnectionsOnOneFileSeeEachOthersWrites() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let daemon = try Database(path: path)
        let cli = try Database(path: path)
        try daemon.execute("CREATE TABLE t(x)")
        try cli.execute("INSERT INTO t VALUES ('from cli')")
        try daemon.transaction { try $0.execute("INSERT INTO t VALUES ('from daemon')") }
        let seen = try daemon.query("SELECT x FROM t ORDER BY rowid").map { try $0.string(0) }
        #expect(seen == ["from cli", "from daemon"])
        #expect(try cli.query("SELECT count(*) FROM t").first?.int64(0) == 2)
    }

    @Test func aWriterWaitsForAnotherConnectionsTransactionInsteadOfFailing() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let first = try Database(path: path)
        let second = try Database(path: path)
        try first.execute("CREATE TABLE t(x)")
        let entered = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        // `first` holds the write lock for ~200 ms; `second`'s write must wait (busy_timeout), then succeed.
        DispatchQueue.global().async {
            try? first.transaction { c in
                try c.execute("INSERT INTO t VALUES (1)")
                entered.signal()
                usleep(200_000)
            }
            done.signal()
        }
        entered.wait()
        try second.execute("INSERT INTO t VALUES (2)")
        done.wait()
        #expect(try second.query("SELECT x FROM t ORDER BY rowid").map { try $0.int64(0) } == [1, 2])
    }

    @Test func zeroBusyTimeoutGivesSQLiteBusy() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let first = try Database(path: path)
        let second = try Database(path: path, options: .init(busyTimeoutMs: 0))
        try first.execute("CREATE TABLE t(x)")
        try first.transaction { _ in
            let error = try #require(throws: StoreError.self) { try second.execute("INSERT INTO t VALUES (1)") }
            guard case .sqlite(_, let code, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(code & 0xFF == 5)  // SQLITE_BUSY
        }
    }

    @Test func oneDatabaseServesManyThreads() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x INTEGER)")
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<100 {
                try! db.transaction { try $0.execute("INSERT INTO t VALUES (?)", [.integer(Int64(thread * 1000 + i))]) }
                _ = try! db.query("SELECT count(*) FROM t")
            }
        }
        #expect(try db.query("SELECT count(DISTINCT x) FROM t").first?.int64(0) == 800)
    }

    @Test func statementCacheIsBoundedAndStillCorrect() throws {
        let db = try Database(path: ":memory:", options: .init(statementCacheCapacity: 2))
        for i in 0..<10 {
            #expect(try db.query("SELECT \(i)").first?.int64(0) == Int64(i))
            #expect(try db.query("SELECT ? + 1", [.integer(Int64(i))]).first?.int64(0) == Int64(i + 1))
        }
    }

    @Test func uncommittedWritesAreVisibleToASecondConnectionOnlyAfterCommit() throws {
        // Stands in for the relay's kill -9 test (which belongs to RelayService): what a second
        // connection reads is exactly what is on disk, committed, while the first is still open.
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        let writer = try Database(path: path)
        try writer.execute("CREATE TABLE t(x)")
        try writer.execute("INSERT INTO t VALUES (1)")
        let reader = try Database(path: path)
        #expect(try reader.query("SELECT count(*) FROM t").first?.int64(0) == 1)
    }
}
