import HomebaseCore
import HomebaseCrypto
import HomebaseStore

/// One pairing code as stored: only a hash of its secret, so the database never holds a usable code.
public struct PairingCodeRecord: Equatable, Sendable {
    public var id: Int64
    public var secretHash: [UInt8]
    public var createdAtMs: UInt64
    public var expiresAtMs: UInt64
    public var usedAtMs: UInt64?
    /// The device that used it.
    public var usedBy: PublicKey?

    public func isOpen(nowMs: UInt64) -> Bool { self.usedAtMs == nil && nowMs < self.expiresAtMs }
}

extension HomebaseState {
    /// Used and expired codes are kept this long so a late `pair.request` learns `used` or `expired` rather
    /// than `invalid_code`; older rows are deleted.
    static let pairingCodeRetentionMs: UInt64 = 24 * 60 * 60 * 1000

    /// Codes not yet used and not yet expired.
    public func openPairingCodeCount(nowMs: UInt64) throws -> Int {
        let rows = try self.database.query(
            "SELECT count(*) FROM homebase_pairing_codes WHERE used_at IS NULL AND expires_at > ?",
            [.integer(Int64(clamping: nowMs))])
        return Int(try rows.first?.int64(0) ?? 0)
    }

    /// Stores a new code unless `maxOpen` codes are already open; prunes rows past retention.
    /// - Returns: false when the limit was reached (nothing stored).
    func insertPairingCode(secretHash: [UInt8], createdAtMs: UInt64, expiresAtMs: UInt64, maxOpen: Int) throws
        -> Bool
    {
        try self.database.transaction { connection in
            try Self.prunePairingCodes(nowMs: createdAtMs, connection)
            let open = try connection.query(
                "SELECT count(*) FROM homebase_pairing_codes WHERE used_at IS NULL AND expires_at > ?",
                [.integer(Int64(clamping: createdAtMs))])
            guard Int(try open.first?.int64(0) ?? 0) < maxOpen else { return false }
            try connection.execute(
                "INSERT INTO homebase_pairing_codes(secret_hash, created_at, expires_at) VALUES (?, ?, ?)",
                [.blob(secretHash), .integer(Int64(clamping: createdAtMs)), .integer(Int64(clamping: expiresAtMs))])
            try Self.bump(Counter.stateVersion, connection)
            return true
        }
    }

    /// Every code still within retention, open or not.
    func pairingCodes() throws -> [PairingCodeRecord] {
        try self.database.query(
            "SELECT id, secret_hash, created_at, expires_at, used_at, used_by FROM homebase_pairing_codes ORDER BY id"
        ).map { row in
            PairingCodeRecord(
                id: try row.int64(0), secretHash: try row.blob(1),
                createdAtMs: UInt64(clamping: try row.int64(2)), expiresAtMs: UInt64(clamping: try row.int64(3)),
                usedAtMs: try row.isNull(4) ? nil : UInt64(clamping: try row.int64(4)),
                usedBy: try row.isNull(5) ? nil : PublicKey(hex: try row.string(5)))
        }
    }

    /// Marks code `id` used by `device` and adds the device to the roster (role handset) with version + 1,
    /// signed by `account`, in one transaction.
    /// - Returns: the new roster, or nil if the code was used meanwhile (another process won the race).
    func redeemPairingCode(id: Int64, device: PublicKey, name: String, nowMs: UInt64, account: SigningSecretKey)
        throws -> StoredRoster?
    {
        try self.database.transaction { connection -> StoredRoster? in
            try connection.execute(
                "UPDATE homebase_pairing_codes SET used_at = ?, used_by = ? WHERE id = ? AND used_at IS NULL",
                [.integer(Int64(clamping: nowMs)), .text(device.hex), .integer(id)])
            guard connection.changes == 1 else { return nil }
            guard let current = try Self.readRoster(connection) else { throw HomebaseStateError.notInitialized }
            guard current.payload.account == account.publicKey.hex else {
                throw HomebaseStateError.corrupt("the roster is not signed by this Homebase's account key")
            }
            var payload = current.payload
            payload.version = current.version + 1
            if let i = payload.devices.firstIndex(where: { PublicKey(hex: $0.pk) == device }) {
                // Pairing again (say, after a reinstall kept the key): keep the entry, take the new name.
                payload.devices[i].name = name
            } else {
                payload.devices.append(RosterPayload.Device(pk: device.hex, name: name, role: "handset",
                                                            addedAt: nowMs))
            }
            let roster = Self.sign(payload, with: account)
            try Self.writeRoster(roster, connection)
            try Self.bump(Counter.stateVersion, connection)
            return roster
        }
    }

    static func prunePairingCodes(nowMs: UInt64, _ connection: DatabaseConnection) throws {
        let horizon = nowMs > Self.pairingCodeRetentionMs ? nowMs - Self.pairingCodeRetentionMs : 0
        try connection.execute("DELETE FROM homebase_pairing_codes WHERE expires_at < ?",
                               [.integer(Int64(clamping: horizon))])
    }
}
