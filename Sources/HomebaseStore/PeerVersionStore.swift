import HomebaseCore

/// The highest envelope version each peer has advertised or spoken (Protocol/envelope.md §7.8), kept across
/// restarts: a device that forgot it would send inference in v1 until the peer's next advert arrived, which a
/// relay that drops adverts could stretch into a downgrade. A record only goes up.
public final class PeerVersionStore: Sendable {
    /// Migration steps of namespace "peer_envelopes". Append only.
    static let migrations = [
        """
        CREATE TABLE peer_envelopes(
            pk BLOB PRIMARY KEY,
            version INTEGER NOT NULL
        ) WITHOUT ROWID;
        """,
    ]

    private let database: Database

    public init(database: Database) throws {
        self.database = database
        try database.migrate(namespace: "peer_envelopes", steps: Self.migrations)
    }

    /// Every record, for the messenger to start from.
    public func all() throws -> [(PublicKey, UInt8)] {
        try self.database.query("SELECT pk, version FROM peer_envelopes").compactMap { row in
            guard let pk = PublicKey(bytes: try row.blob(0)[...]) else { return nil }
            return (pk, UInt8(clamping: try row.int64(1)))
        }
    }

    /// Raises `peer`'s record to `version`; a lower one changes nothing.
    public func raise(_ peer: PublicKey, to version: UInt8) throws {
        try self.database.execute(
            """
            INSERT INTO peer_envelopes(pk, version) VALUES (?, ?)
            ON CONFLICT(pk) DO UPDATE SET version = max(version, excluded.version)
            """, [.blob(peer.bytes), .integer(Int64(version))])
    }
}
