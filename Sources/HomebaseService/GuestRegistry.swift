import HomebaseCore
import HomebaseCrypto
import HomebaseStore
import Synchronization

/// Why a guest operation was refused.
public enum GuestRegistryError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownGuest(PublicKey)
    /// The key is this Homebase or one of its account's devices: siblings need no grant.
    case notAGuest(PublicKey)
    /// A grant must name at least one model (or `*`).
    case noModels
    /// `expires_at` is not in the future.
    case alreadyExpired
    /// A limit override below 1.
    case invalidLimit

    public var description: String {
        switch self {
        case .unknownGuest(let pk): "no guest \(pk.hex) is known; it must join first, or be granted"
        case .notAGuest(let pk): "\(pk.hex) is this Homebase or one of its account's devices, not a guest"
        case .noModels: "a grant needs at least one model, or all models"
        case .alreadyExpired: "the grant's expiry is not in the future"
        case .invalidLimit: "limits must be at least 1"
        }
    }
}

/// The guests of this Homebase (Protocol/messages.md §5), persisted in the state database (migration
/// namespace "guests") and shared by the daemon and the CLI, each with its own connection.
///
/// The owner's operations (`grant`, `revoke`, `setLimits`) write the guest's row and an outbox row in one
/// transaction and bump `state_version`; the running daemon notices the bump, reloads, and sends what the
/// outbox says (`contact.grant` then an advert, or `contact.revoke`), deleting each row once the relay took it.
/// So the CLI never needs a relay connection, and a grant made while the daemon is down is sent on its start.
///
/// An in-memory snapshot answers `isContact` (on every inbound envelope) and the advert recipients; the
/// grant check for each request reads the row afresh (`currentRecord`), so an owner's change made by another
/// process is in force for the very next request.
///
/// Bounds: pending joins are capped (`maxPending`, the oldest pending is evicted), so a stranger cannot grow
/// the table; granted and revoked rows exist only by the owner's action. Names are cut to `maxNameBytes`.
public final class GuestRegistry: Sendable {
    /// Migration steps of namespace "guests". Append only.
    static let migrations = [
        """
        CREATE TABLE guests(
            pk TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            name TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            joined_at INTEGER,
            grant_payload BLOB,
            grant_sig BLOB,
            revoked_at INTEGER,
            max_concurrent INTEGER,
            requests_per_minute INTEGER,
            tokens_per_day INTEGER) WITHOUT ROWID;
        CREATE INDEX guests_by_state ON guests(state, created_at);
        CREATE TABLE guest_usage(
            pk TEXT NOT NULL,
            day INTEGER NOT NULL,
            requests INTEGER NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            PRIMARY KEY(pk, day)) WITHOUT ROWID;
        CREATE TABLE guest_outbox(
            id INTEGER PRIMARY KEY,
            pk TEXT NOT NULL,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        """
    ]

    /// One owner's action waiting to be sent by the daemon.
    public struct OutboxItem: Equatable, Sendable {
        public enum Kind: String, Sendable {
            /// `contact.grant` (the guest's current grant) then an advert.
            case grant
            /// `contact.revoke {reason}`, after the guest's in-flight requests are stopped.
            case revoke
        }

        public var id: Int64
        public var guest: PublicKey
        public var kind: Kind
        public var reason: String
    }

    /// What a `contact.join` did.
    public enum JoinOutcome: Equatable, Sendable {
        /// A new pending guest (`evicted`: the oldest pending guest dropped to make room), or a pending guest's
        /// repeated join (`isNew` false).
        case pending(isNew: Bool, evicted: PublicKey?)
        /// Already granted (an invitation now accepted, or a reinstalled guest): re-send grant and advert.
        case granted(GuestRecord)
        case revoked
    }

    public static let defaultMaxPending = 64
    public static let maxNameBytes = 64
    static let dayMs: UInt64 = 86_400_000

    public let state: HomebaseState
    public let maxPending: Int
    private var database: Database { self.state.database }
    private let snapshot = Mutex<[PublicKey: GuestRecord]>([:])

    /// Opens the guest tables of `state`'s database (creating them if needed) and loads the snapshot.
    public init(state: HomebaseState, maxPending: Int = GuestRegistry.defaultMaxPending) throws {
        precondition(maxPending >= 1, "maxPending must be positive")
        self.state = state
        self.maxPending = maxPending
        try state.database.migrate(namespace: "guests", steps: Self.migrations)
        try self.reload()
    }

    // MARK: Snapshot (daemon)

    /// Re-reads every guest into the snapshot (after another process changed the database).
    public func reload() throws {
        let records = try self.database.withConnection { try Self.readAll($0) }
        self.snapshot.withLock { $0 = Dictionary(records.map { ($0.publicKey, $0) }, uniquingKeysWith: { a, _ in a }) }
    }

    /// True for every guest in the registry, whatever its state: a pending or revoked guest may use the contact
    /// channel, so it gets `not_granted` rather than silence.
    public func isContact(_ key: PublicKey) -> Bool {
        self.snapshot.withLock { $0[key] != nil }
    }

    /// True for a granted guest only: pending and revoked guests make no v2 sessions (envelope.md §7.7 rule 8a).
    public func isGranted(_ key: PublicKey) -> Bool {
        self.snapshot.withLock { $0[key]?.state == .granted }
    }

    /// The guest as of the last reload.
    public func record(for key: PublicKey) -> GuestRecord? {
        self.snapshot.withLock { $0[key] }
    }

    /// The guest as stored now (another process may have changed it since the last reload).
    public func currentRecord(for key: PublicKey) throws -> GuestRecord? {
        try self.database.withConnection { try Self.read(key, $0) }
    }

    /// Guests to send event-driven adverts to: granted, grant not expired at `nowMs`, in key order.
    public func advertRecipients(nowMs: UInt64) -> [PublicKey] {
        self.snapshot.withLock { s in s.values.filter { $0.isServable(nowMs: nowMs) }.map(\.publicKey) }.sorted()
    }

    // MARK: Owner's operations (CLI)

    /// Grants `guest` the use of `models` until `expiresAt` (nil: no expiry): signs a `GrantPayload` with the
    /// device key (context `homebase-grant-v1`), stores it, sets the state to granted (also after a revocation)
    /// and queues `contact.grant` then an advert for the daemon to send.
    ///
    /// A key that never joined may be granted: that is an invitation. The daemon sends the grant at once
    /// (the guest, not knowing the host yet, may drop it) and again when the guest's `contact.join` arrives.
    /// - Returns: what the daemon will send, in order (stored sends on the contact channel).
    @discardableResult
    public func grant(guest: PublicKey, models: GrantPayload.GrantedModels, expiresAt: UInt64?, nowMs: UInt64)
        throws -> (grant: GuestGrant, messages: [GuestOutboundMessage])
    {
        if case .only(let tags) = models, tags.isEmpty { throw GuestRegistryError.noModels }
        if let expiresAt, expiresAt <= nowMs { throw GuestRegistryError.alreadyExpired }
        let identity = try self.state.deviceKey()
        try self.refuseSibling(guest, identity: identity.publicKey)
        var tags = models
        if case .only(let list) = models {
            // Stable, duplicate-free list: what the guest sees is what the owner typed, once each.
            var seen = Set<String>()
            tags = .only(list.filter { seen.insert($0).inserted })
        }
        // The Homebase's messenger speaks v2 (envelope.md §7.8): the guest learns it from the grant too.
        let payload = GrantPayload(host: identity.publicKey, guest: guest, models: tags, issuedAt: nowMs,
                                   expiresAt: expiresAt, envelopes: EnvelopeVersions.field(EnvelopeVersions.supported))
        let bytes = SignedPayloadJSON.encode(payload)
        let grant = GuestGrant(blob: SignedBlob(payload: bytes, signature: identity.sign(bytes, context: SignatureContext.grant)),
                               payload: payload)
        try self.database.transaction { c in
            try c.execute(
                """
                INSERT INTO guests(pk, state, name, created_at, grant_payload, grant_sig)
                VALUES (?, 'granted', '', ?, ?, ?)
                ON CONFLICT(pk) DO UPDATE SET state = 'granted', grant_payload = excluded.grant_payload,
                    grant_sig = excluded.grant_sig, revoked_at = NULL
                """,
                [.text(guest.hex), .integer(Int64(clamping: nowMs)), .blob(grant.blob.payload),
                 .blob(grant.blob.signature)])
            // A grant supersedes whatever was still queued for this guest.
            try c.execute("DELETE FROM guest_outbox WHERE pk = ?", [.text(guest.hex)])
            try Self.enqueue(guest, .grant, reason: "", nowMs: nowMs, c)
            try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
        }
        try self.reload()
        return (grant, [.grant(grant.blob), .advert])
    }

    /// Revokes `guest` (granted or pending): in force for its very next request; the daemon stops its
    /// streams in progress and sends `contact.revoke {reason}`.
    /// - Throws: `unknownGuest` if the key is not in the registry.
    @discardableResult
    public func revoke(guest: PublicKey, nowMs: UInt64, reason: String = "revoked by the host")
        throws -> [GuestOutboundMessage]
    {
        try self.database.transaction { c in
            try c.execute("UPDATE guests SET state = 'revoked', revoked_at = ? WHERE pk = ?",
                          [.integer(Int64(clamping: nowMs)), .text(guest.hex)])
            guard c.changes == 1 else { throw GuestRegistryError.unknownGuest(guest) }
            try c.execute("DELETE FROM guest_outbox WHERE pk = ?", [.text(guest.hex)])
            try Self.enqueue(guest, .revoke, reason: reason, nowMs: nowMs, c)
            try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
        }
        try self.reload()
        return [.revoke(reason: reason)]
    }

    /// Overrides some of `guest`'s limits (nil fields: back to the default).
    public func setLimits(guest: PublicKey, _ limits: GuestLimitOverride) throws {
        for value in [limits.maxConcurrent, limits.requestsPerMinute, limits.tokensPerDay] {
            if let value, value < 1 { throw GuestRegistryError.invalidLimit }
        }
        try self.database.transaction { c in
            try c.execute(
                "UPDATE guests SET max_concurrent = ?, requests_per_minute = ?, tokens_per_day = ? WHERE pk = ?",
                [Self.optional(limits.maxConcurrent), Self.optional(limits.requestsPerMinute),
                 Self.optional(limits.tokensPerDay), .text(guest.hex)])
            guard c.changes == 1 else { throw GuestRegistryError.unknownGuest(guest) }
            try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
        }
        try self.reload()
    }

    /// Every known guest for `homebase guests`, read from the database: granted first, then pending, then
    /// revoked, each oldest first.
    public func guests(nowMs: UInt64) throws -> [GuestSummary] {
        let day = Int64(clamping: nowMs / Self.dayMs)
        return try self.database.withConnection { c in
            let order: [GuestState: Int] = [.granted: 0, .pending: 1, .revoked: 2]
            let records = try Self.readAll(c).sorted {
                (order[$0.state]!, $0.createdAtMs, $0.publicKey) < (order[$1.state]!, $1.createdAtMs, $1.publicKey)
            }
            return try records.map { r in
                GuestSummary(record: r, nowMs: nowMs, usage: try Self.usage(r.publicKey, day: nil, c),
                             usageToday: try Self.usage(r.publicKey, day: day, c))
            }
        }
    }

    /// `guest`'s usage on each UTC day it used anything (day = ms since epoch / 86 400 000), oldest first.
    public func dailyUsage(guest: PublicKey) throws -> [(day: UInt64, usage: GuestUsage)] {
        try self.database.query(
            "SELECT day, requests, prompt_tokens, completion_tokens FROM guest_usage WHERE pk = ? ORDER BY day",
            [.text(guest.hex)]
        ).map { row in
            (UInt64(clamping: try row.int64(0)),
             GuestUsage(requests: Int(try row.int64(1)), promptTokens: Int(try row.int64(2)),
                        completionTokens: Int(try row.int64(3))))
        }
    }

    /// `guest`'s usage on the UTC day of `nowMs` (what the daily token limit counts).
    public func usageToday(guest: PublicKey, nowMs: UInt64) throws -> GuestUsage {
        try self.database.withConnection { try Self.usage(guest, day: Int64(clamping: nowMs / Self.dayMs), $0) }
    }

    // MARK: Daemon's operations

    /// Records a `contact.join` from `guest` (the daemon has rate-limited it).
    ///
    /// Committed without an fsync (`.normal`), like usage: a join lost to a power cut is sent again by its guest,
    /// while a flood of joins from fresh keys, each committed with an fsync, held every other inbound message of
    /// the daemon up (issue 23: 30 joins, half a second). The replay ids' sync each second covers it.
    public func recordJoin(guest: PublicKey, name: String, nowMs: UInt64) throws -> JoinOutcome {
        let name = Self.sanitised(name)
        let (outcome, record) = try self.database.transaction(synchronous: .normal) { c -> (JoinOutcome, GuestRecord?) in
            if let existing = try Self.read(guest, c) {
                switch existing.state {
                case .revoked:
                    return (.revoked, existing)
                case .pending, .granted:
                    try c.execute("UPDATE guests SET name = ?, joined_at = coalesce(joined_at, ?) WHERE pk = ?",
                                  [.text(name), .integer(Int64(clamping: nowMs)), .text(guest.hex)])
                    try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
                    let updated = try Self.read(guest, c) ?? existing
                    return (existing.state == .granted ? .granted(updated) : .pending(isNew: false, evicted: nil), updated)
                }
            }
            var evicted: PublicKey?
            let pending = try c.query("SELECT count(*) FROM guests WHERE state = 'pending'")
            if Int(try pending.first?.int64(0) ?? 0) >= self.maxPending {
                let oldest = try c.query(
                    "SELECT pk FROM guests WHERE state = 'pending' ORDER BY created_at, pk LIMIT 1")
                if let pk = try oldest.first?.string(0) {
                    try c.execute("DELETE FROM guests WHERE pk = ?", [.text(pk)])
                    evicted = PublicKey(hex: pk)
                }
            }
            try c.execute(
                "INSERT INTO guests(pk, state, name, created_at, joined_at) VALUES (?, 'pending', ?, ?, ?)",
                [.text(guest.hex), .text(name), .integer(Int64(clamping: nowMs)), .integer(Int64(clamping: nowMs))])
            try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
            return (.pending(isNew: true, evicted: evicted), try Self.read(guest, c))
        }
        // Only this guest's row (and an evicted one) changed: the snapshot follows without reading every guest
        // again, which each of a flood of joins did (the daemon's state poll still picks up other processes').
        self.snapshot.withLock { s in
            if case .pending(_, let evicted?) = outcome { s[evicted] = nil }
            if let record { s[guest] = record }
        }
        return outcome
    }

    /// Forgets `guest` entirely (`contact.leave`): its row, usage and queued messages. It is a stranger again.
    /// - Returns: false if it was not known.
    @discardableResult
    public func remove(guest: PublicKey) throws -> Bool {
        let removed = try self.database.transaction { c -> Bool in
            try c.execute("DELETE FROM guests WHERE pk = ?", [.text(guest.hex)])
            guard c.changes == 1 else { return false }
            try c.execute("DELETE FROM guest_usage WHERE pk = ?", [.text(guest.hex)])
            try c.execute("DELETE FROM guest_outbox WHERE pk = ?", [.text(guest.hex)])
            try HomebaseState.bump(HomebaseState.Counter.stateVersion, c)
            return true
        }
        try self.reload()
        return removed
    }

    /// Adds one served request's usage to `guest`'s day. Does not bump `state_version`: only the daemon writes
    /// usage, and nothing needs reloading for it.
    ///
    /// Committed without an fsync (`.normal`): it survives a crash of the process at once, and power loss from
    /// the next synced commit, checkpoint or sync of the WAL on (the replay ids' sync each second covers it,
    /// `SeenMessageStore.sync`: every guest request records one).
    /// Meanwhile the database's lock is held for the write alone, not an fsync, so the inference server's
    /// reads of the registry on its I/O threads do not wait for the disk.
    public func recordUsage(guest: PublicKey, usage: Usage, nowMs: UInt64) throws {
        try self.database.transaction(synchronous: .normal) { c in try c.execute(
            """
            INSERT INTO guest_usage(pk, day, requests, prompt_tokens, completion_tokens) VALUES (?, ?, 1, ?, ?)
            ON CONFLICT(pk, day) DO UPDATE SET requests = requests + 1,
                prompt_tokens = prompt_tokens + excluded.prompt_tokens,
                completion_tokens = completion_tokens + excluded.completion_tokens
            """,
            [.text(guest.hex), .integer(Int64(clamping: nowMs / Self.dayMs)),
             .integer(Int64(max(0, usage.promptTokens))), .integer(Int64(max(0, usage.completionTokens)))]) }
    }

    /// The owner's actions not yet handed to the relay, oldest first.
    public func pendingOutbox() throws -> [OutboxItem] {
        try self.database.query("SELECT id, pk, kind, reason FROM guest_outbox ORDER BY id").compactMap { row in
            guard let guest = PublicKey(hex: try row.string(1)), let kind = OutboxItem.Kind(rawValue: try row.string(2))
            else { return nil }
            return OutboxItem(id: try row.int64(0), guest: guest, kind: kind, reason: try row.string(3))
        }
    }

    /// Whether outbox row `id` is still there (another delivery may have completed it meanwhile).
    public func outboxContains(id: Int64) throws -> Bool {
        try !self.database.query("SELECT 1 FROM guest_outbox WHERE id = ?", [.integer(id)]).isEmpty
    }

    /// Drops an outbox row once its messages were handed to the relay.
    public func completeOutbox(id: Int64) throws {
        try self.database.execute("DELETE FROM guest_outbox WHERE id = ?", [.integer(id)])
    }

    // MARK: Rows

    private func refuseSibling(_ guest: PublicKey, identity: PublicKey) throws {
        if guest == identity { throw GuestRegistryError.notAGuest(guest) }
        if let roster = try self.state.currentRoster(), roster.payload.devicePublicKeys.contains(guest) {
            throw GuestRegistryError.notAGuest(guest)
        }
    }

    /// A peer-chosen name, made safe to store and print: control characters dropped, at most `maxNameBytes`
    /// of UTF-8 (cut on a character boundary).
    static func sanitised(_ name: String) -> String {
        var out = ""
        var bytes = 0
        for ch in name where !ch.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            let n = ch.utf8.count
            if bytes + n > Self.maxNameBytes { break }
            out.append(ch)
            bytes += n
        }
        return out
    }

    private static func optional(_ value: Int?) -> SQLValue {
        value.map { .integer(Int64($0)) } ?? .null
    }

    private static func enqueue(_ guest: PublicKey, _ kind: OutboxItem.Kind, reason: String, nowMs: UInt64,
                                _ c: DatabaseConnection) throws {
        try c.execute("INSERT INTO guest_outbox(pk, kind, reason, created_at) VALUES (?, ?, ?, ?)",
                      [.text(guest.hex), .text(kind.rawValue), .text(reason), .integer(Int64(clamping: nowMs))])
    }

    private static let columns = """
        pk, state, name, created_at, joined_at, grant_payload, grant_sig, revoked_at, max_concurrent,
        requests_per_minute, tokens_per_day
        """

    static func readAll(_ c: DatabaseConnection) throws -> [GuestRecord] {
        try c.query("SELECT \(Self.columns) FROM guests").map(Self.record(from:))
    }

    static func read(_ guest: PublicKey, _ c: DatabaseConnection) throws -> GuestRecord? {
        try c.query("SELECT \(Self.columns) FROM guests WHERE pk = ?", [.text(guest.hex)]).first.map(Self.record(from:))
    }

    private static func record(from row: Row) throws -> GuestRecord {
        guard let pk = PublicKey(hex: try row.string(0)) else { throw HomebaseStateError.corrupt("a guest's key") }
        guard let state = GuestState(rawValue: try row.string(1)) else {
            throw HomebaseStateError.corrupt("a guest's state")
        }
        var grant: GuestGrant?
        if !(try row.isNull(5)) {
            let blob = SignedBlob(payload: try row.blob(5), signature: try row.blob(6))
            guard let payload = SignedPayloadJSON.decode(GrantPayload.self, from: blob.payload) else {
                throw HomebaseStateError.corrupt("a stored grant does not parse")
            }
            grant = GuestGrant(blob: blob, payload: payload)
        }
        func optionalU64(_ i: Int) throws -> UInt64? { try row.isNull(i) ? nil : UInt64(clamping: try row.int64(i)) }
        func optionalInt(_ i: Int) throws -> Int? { try row.isNull(i) ? nil : Int(try row.int64(i)) }
        return GuestRecord(
            publicKey: pk, state: state, name: try row.string(2), createdAtMs: UInt64(clamping: try row.int64(3)),
            joinedAtMs: try optionalU64(4), grant: grant, revokedAtMs: try optionalU64(7),
            limitOverride: GuestLimitOverride(maxConcurrent: try optionalInt(8), requestsPerMinute: try optionalInt(9),
                                              tokensPerDay: try optionalInt(10)))
    }

    private static func usage(_ guest: PublicKey, day: Int64?, _ c: DatabaseConnection) throws -> GuestUsage {
        let filter = day == nil ? "" : " AND day = ?"
        let rows = try c.query(
            """
            SELECT coalesce(sum(requests), 0), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0)
            FROM guest_usage WHERE pk = ?\(filter)
            """,
            [.text(guest.hex)] + (day.map { [.integer($0)] } ?? []))
        guard let row = rows.first else { return GuestUsage() }
        return GuestUsage(requests: Int(try row.int64(0)), promptTokens: Int(try row.int64(1)),
                          completionTokens: Int(try row.int64(2)))
    }
}
