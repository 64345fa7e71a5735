import Foundation
import HomebaseCore
import HomebaseStore

/// A `JoinedHomebaseStore` in the state database (namespace `guest`), so a guest remembers the Homebases
/// it joined across runs.
///
/// Reads never throw (the router has no error path): a row that cannot be decoded is skipped, as if absent.
public struct SQLiteJoinedHomebaseStore: JoinedHomebaseStore {
    /// Migration steps of namespace "guest". Append only.
    static let migrations = [
        """
        CREATE TABLE joined_homebases(
            host BLOB PRIMARY KEY,
            name TEXT,
            state TEXT NOT NULL,
            models TEXT NOT NULL,
            last_heard_ms INTEGER NOT NULL
        ) WITHOUT ROWID;
        """
    ]

    public let database: Database

    public init(database: Database) throws {
        self.database = database
        try database.migrate(namespace: "guest", steps: Self.migrations)
    }

    static let columns = "host, name, state, models, last_heard_ms"

    public func record(for host: PublicKey) -> JoinedHomebase? {
        let rows = try? self.database.query(
            "SELECT \(Self.columns) FROM joined_homebases WHERE host = ?", [.blob(host.bytes)])
        return rows?.first.flatMap(Self.decode)
    }

    public func all() -> [JoinedHomebase] {
        let rows = (try? self.database.query("SELECT \(Self.columns) FROM joined_homebases ORDER BY host")) ?? []
        return rows.compactMap(Self.decode)
    }

    public func upsert(_ record: JoinedHomebase) throws {
        let models = String(decoding: try JSONEncoder().encode(record.models), as: UTF8.self)
        try self.database.execute(
            """
            INSERT INTO joined_homebases(\(Self.columns)) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(host) DO UPDATE SET name = excluded.name, state = excluded.state,
                models = excluded.models, last_heard_ms = excluded.last_heard_ms
            """,
            [.blob(record.host.bytes), record.name.map(SQLValue.text) ?? .null, .text(record.state.rawValue),
             .text(models), .integer(Int64(clamping: record.lastHeardMs))])
    }

    public func noteHostAlive(_ host: PublicKey, atMs: UInt64) throws {
        // Never moves the clock backwards (frames can arrive out of order); unknown hosts match no row.
        let stamp = Int64(clamping: atMs)
        try self.database.execute(
            "UPDATE joined_homebases SET last_heard_ms = ? WHERE host = ? AND last_heard_ms < ?",
            [.integer(stamp), .blob(host.bytes), .integer(stamp)])
    }

    public func remove(_ host: PublicKey) throws {
        try self.database.execute("DELETE FROM joined_homebases WHERE host = ?", [.blob(host.bytes)])
    }

    static func decode(_ row: Row) -> JoinedHomebase? {
        guard let hostBytes = try? row.blob(0), let host = PublicKey(bytes: hostBytes),
            let stateText = try? row.string(2), let state = JoinState(rawValue: stateText),
            let modelsText = try? row.string(3),
            let stored = try? JSONDecoder().decode([AdvertPayload.Model.Stored].self, from: Data(modelsText.utf8)),
            let heard = try? row.int64(4), heard >= 0
        else { return nil }
        let name = (try? row.isNull(1)) == false ? try? row.string(1) : nil
        return JoinedHomebase(host: host, name: name, state: state, models: stored.map(\.model), lastHeardMs: UInt64(heard))
    }
}
