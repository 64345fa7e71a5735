/// Everything that can go wrong in the store layer.
///
/// None of these reach the wire directly: a service that cannot store a frame durably must not send
/// RECEIPT status 1 (protocol-v1 §2), and one that cannot record a message id must drop the message
/// (protocol-v1 §3) rather than risk accepting a replay.
public enum StoreError: Error, Equatable, Sendable {
    /// A SQLite call failed. `function` names the C function (or PRAGMA), `code` is the extended result
    /// code (for example 2067 `SQLITE_CONSTRAINT_UNIQUE`), `message` is `sqlite3_errmsg` at the time.
    case sqlite(function: String, code: Int32, message: String)
    /// A file system call on the database file failed (`open`, `fchmod`, `chmod`); `errno` is from libc.
    case file(operation: String, path: String, errno: Int32)
    /// The connection did not enter WAL mode (for example on a file system without shared memory), so
    /// concurrent readers and writers (daemon + CLI) would block each other.
    case journalModeNotWAL(actual: String)
    /// The database holds a newer schema for `namespace` than this binary knows: a newer version wrote it.
    case schemaTooNew(namespace: String, stored: Int, known: Int)
    /// A row has no column with this name or index.
    case columnNotFound(String)
    /// A column holds a different SQLite type from the one asked for.
    case typeMismatch(column: String, expected: String, actual: String)
    /// A stored row violates an invariant we write ourselves (for example a sender that is not 32 bytes).
    case corruptRow(table: String, reason: String)
}
