import HomebaseStore

/// A `SettingsBackend` in the state database's key-value table, so CLI settings and key rings survive
/// restarts in the 0600 state file.
///
/// Each instance owns the keys under its `namespace` prefix (for example `settings.` and `secrets.`), which
/// keeps synced preferences and device-only secrets apart in one table. Text is stored as TEXT and bytes as
/// BLOB, so a value reads back as the case it was written as. Reads never throw: an unreadable value is absent.
public struct SQLiteSettingsBackend: SettingsBackend {
    public let store: KeyValueStore
    /// Prefix of every stored key; callers never see it.
    public let namespace: String

    public init(store: KeyValueStore, namespace: String) {
        self.store = store
        self.namespace = namespace
    }

    public func value(forKey key: String) -> SettingValue? {
        let stored = self.namespace + key
        do {
            return try self.store.string(stored).map(SettingValue.string)
        } catch StoreError.typeMismatch {
            return (try? self.store.data(stored)).flatMap { $0 }.map(SettingValue.bytes)
        } catch {
            return nil
        }
    }

    public func setValue(_ value: SettingValue, forKey key: String) throws {
        switch value {
        case .string(let string): try self.store.setString(string, forKey: self.namespace + key)
        case .bytes(let bytes): try self.store.setData(bytes, forKey: self.namespace + key)
        }
    }

    public func removeValue(forKey key: String) throws {
        try self.store.remove(self.namespace + key)
    }

    public func keys(withPrefix prefix: String) -> [String] {
        let keys = (try? self.store.keys(withPrefix: self.namespace + prefix)) ?? []
        return keys.map { String($0.dropFirst(self.namespace.count)) }
    }

    /// One write transaction of the state database (`BEGIN IMMEDIATE`): another process's `atomically` waits at
    /// its start until this one commits.
    public func atomically<T: Sendable>(_ body: (any SettingsAccess) throws -> T) throws -> T {
        try self.store.transaction { kv in try body(Transaction(kv: kv, namespace: self.namespace)) }
    }

    struct Transaction: SettingsAccess {
        let kv: KeyValueStore.Transaction
        let namespace: String

        func value(forKey key: String) -> SettingValue? {
            let stored = self.namespace + key
            do {
                return try self.kv.string(stored).map(SettingValue.string)
            } catch StoreError.typeMismatch {
                return (try? self.kv.data(stored)).flatMap { $0 }.map(SettingValue.bytes)
            } catch {
                return nil
            }
        }

        func setValue(_ value: SettingValue, forKey key: String) throws {
            switch value {
            case .string(let string): try self.kv.set(.text(string), self.namespace + key)
            case .bytes(let bytes): try self.kv.set(.blob(bytes), self.namespace + key)
            }
        }

        func removeValue(forKey key: String) throws {
            try self.kv.remove(self.namespace + key)
        }

        func keys(withPrefix prefix: String) -> [String] {
            let keys = (try? self.kv.keys(withPrefix: self.namespace + prefix)) ?? []
            return keys.map { String($0.dropFirst(self.namespace.count)) }
        }
    }
}
