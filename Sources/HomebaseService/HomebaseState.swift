import FoundationEssentials
import HomebaseCore
import HomebaseCrypto
import HomebaseStore

/// Why the Homebase's state cannot be used.
public enum HomebaseStateError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `homebase init` has not run on this state directory.
    case notInitialized
    /// A stored value does not have its expected shape (a damaged or foreign file).
    case corrupt(String)

    public var description: String {
        switch self {
        case .notInitialized: "this Homebase is not initialised; run `homebase init --relay URL` first"
        case .corrupt(let what): "the state database is damaged: \(what)"
        }
    }
}

/// The account roster as stored: the exact signed bytes (sent as they are) and their parsed form.
public struct StoredRoster: Equatable, Sendable {
    public var blob: SignedBlob
    public var payload: RosterPayload
    public var version: UInt64 { self.payload.version }

    public init(blob: SignedBlob, payload: RosterPayload) {
        self.blob = blob
        self.payload = payload
    }
}

/// Everything the Homebase persists, over one `Database` (namespace "homebase"), shared by the daemon and the
/// CLI subcommands: each process opens its own `Database` on the same WAL file.
///
/// Every write bumps the `state_version` counter, so a running daemon notices a CLI's change by polling one
/// integer (`stateVersion()`) instead of re-reading everything.
public final class HomebaseState: Sendable {
    /// Migration steps of namespace "homebase". Append only.
    static let migrations = [
        """
        CREATE TABLE homebase_counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE homebase_roster(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            version INTEGER NOT NULL,
            payload BLOB NOT NULL,
            sig BLOB NOT NULL);
        CREATE TABLE homebase_pairing_codes(
            id INTEGER PRIMARY KEY,
            secret_hash BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            used_at INTEGER,
            used_by TEXT);
        CREATE INDEX homebase_pairing_codes_expiry ON homebase_pairing_codes(expires_at);
        """
    ]

    enum Key {
        static let deviceSeed = "homebase.identity.device_seed"
        static let accountSeed = "homebase.identity.account_seed"
        static let settings = "homebase.settings"
    }

    enum Counter {
        static let stateVersion = "state_version"
        static let advertSeq = "advert_seq"
    }

    public let database: Database
    public let keyValues: KeyValueStore

    public init(database: Database) throws {
        self.database = database
        self.keyValues = try KeyValueStore(database: database)
        try database.migrate(namespace: "homebase", steps: Self.migrations)
    }

    /// Opens (creating if needed) the state database at `path`.
    public convenience init(path: String) throws {
        try self.init(database: Database(path: path))
    }

    // MARK: Identity

    /// True once `initialize` has created the device key.
    public var isInitialized: Bool {
        get throws { try self.keyValues.data(Key.deviceSeed) != nil }
    }

    /// Creates the device key, the account key and the first roster (this Homebase alone) unless they exist,
    /// and writes `settings`. Running it again keeps the keys and the roster and only replaces the settings.
    /// - Returns: the device public key.
    @discardableResult
    public func initialize(settings: HomebaseSettings, nowMs: UInt64) throws -> PublicKey {
        let device: SigningSecretKey
        if let seed = try self.keyValues.data(Key.deviceSeed) {
            device = try Self.key(fromSeed: seed, "device seed")
        } else {
            device = SigningSecretKey.generate()
            try self.keyValues.setData(device.seedBytes(), forKey: Key.deviceSeed)
        }
        if try self.keyValues.data(Key.accountSeed) == nil, try self.currentRoster() == nil {
            // The Homebase that creates the account holds its key: it is the one device that signs rosters.
            let account = SigningSecretKey.generate()
            try self.keyValues.setData(account.seedBytes(), forKey: Key.accountSeed)
            let payload = RosterPayload(account: account.publicKey, version: 1, devices: [
                RosterPayload.Device(pk: device.publicKey.hex, name: settings.deviceName, role: "homebase",
                                     addedAt: nowMs, envelopes: EnvelopeVersions.field(EnvelopeVersions.supported)),
            ])
            try self.database.transaction { connection in
                try Self.writeRoster(Self.sign(payload, with: account), connection)
                try Self.bump(Counter.stateVersion, connection)
            }
        }
        try self.setSettings(settings)
        return device.publicKey
    }

    /// This Homebase's device key (its address on the relay; it signs adverts and grants).
    public func deviceKey() throws -> SigningSecretKey {
        guard let seed = try self.keyValues.data(Key.deviceSeed) else { throw HomebaseStateError.notInitialized }
        return try Self.key(fromSeed: seed, "device seed")
    }

    /// The account key, or nil when this Homebase joined an account it did not create (not in v1).
    public func accountKey() throws -> SigningSecretKey? {
        try self.keyValues.data(Key.accountSeed).map { try Self.key(fromSeed: $0, "account seed") }
    }

    // MARK: Settings

    public func settings() throws -> HomebaseSettings {
        guard let json = try self.keyValues.string(Key.settings) else { throw HomebaseStateError.notInitialized }
        do {
            return try JSONDecoder().decode(HomebaseSettings.self, from: Data(json.utf8))
        } catch {
            throw HomebaseStateError.corrupt("settings are not valid JSON")
        }
    }

    public func setSettings(_ settings: HomebaseSettings) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = String(decoding: try encoder.encode(settings), as: UTF8.self)
        try self.keyValues.setString(json, forKey: Key.settings)
        // After the write: a poller that sees the new version is guaranteed to read the new value.
        try self.bumpStateVersion()
    }

    // MARK: Roster

    /// The current signed roster, or nil before `initialize`.
    public func currentRoster() throws -> StoredRoster? {
        try self.database.withConnection { try Self.readRoster($0) }
    }

    // MARK: Counters

    /// Bumped by every write; a daemon re-reads settings and the roster when it changes.
    public func stateVersion() throws -> UInt64 {
        try self.database.withConnection { try Self.counter(Counter.stateVersion, $0) }
    }

    /// Bumps `state_version` for writes made outside this type's methods.
    public func bumpStateVersion() throws {
        _ = try self.database.transaction { try Self.bump(Counter.stateVersion, $0) }
    }

    /// The next advert `seq`: persisted before it is used, so it strictly increases across restarts.
    public func nextAdvertSeq() throws -> UInt64 {
        try self.database.transaction { try Self.bump(Counter.advertSeq, $0) }
    }

    // MARK: Helpers shared with the extensions

    static func key(fromSeed seed: [UInt8], _ what: String) throws -> SigningSecretKey {
        do { return try SigningSecretKey(seed: seed) } catch { throw HomebaseStateError.corrupt(what) }
    }

    static func sign(_ payload: RosterPayload, with account: SigningSecretKey) -> StoredRoster {
        let bytes = SignedPayloadJSON.encode(payload)
        let blob = SignedBlob(payload: bytes, signature: account.sign(bytes, context: SignatureContext.roster))
        return StoredRoster(blob: blob, payload: payload)
    }

    static func readRoster(_ connection: DatabaseConnection) throws -> StoredRoster? {
        guard let row = try connection.query("SELECT payload, sig FROM homebase_roster WHERE id = 1").first else {
            return nil
        }
        let blob = SignedBlob(payload: try row.blob(0), signature: try row.blob(1))
        guard let payload = SignedPayloadJSON.decode(RosterPayload.self, from: blob.payload) else {
            throw HomebaseStateError.corrupt("the stored roster does not parse")
        }
        return StoredRoster(blob: blob, payload: payload)
    }

    static func writeRoster(_ roster: StoredRoster, _ connection: DatabaseConnection) throws {
        try connection.execute(
            """
            INSERT INTO homebase_roster(id, version, payload, sig) VALUES (1, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET version = excluded.version, payload = excluded.payload, sig = excluded.sig
            """,
            [.integer(Int64(clamping: roster.version)), .blob(roster.blob.payload), .blob(roster.blob.signature)])
    }

    static func counter(_ name: String, _ connection: DatabaseConnection) throws -> UInt64 {
        let rows = try connection.query("SELECT value FROM homebase_counters WHERE name = ?", [.text(name)])
        return try rows.first.map { UInt64(clamping: try $0.int64(0)) } ?? 0
    }

    @discardableResult
    static func bump(_ name: String, _ connection: DatabaseConnection) throws -> UInt64 {
        let rows = try connection.query(
            """
            INSERT INTO homebase_counters(name, value) VALUES (?, 1)
            ON CONFLICT(name) DO UPDATE SET value = value + 1
            RETURNING value
            """,
            [.text(name)])
        guard let value = try rows.first?.int64(0), value > 0 else {
            throw HomebaseStateError.corrupt("counter \(name)")
        }
        return UInt64(value)
    }
}
