import Foundation
import Synchronization

/// One stored setting: text (most preferences) or bytes (opaque blobs).
public enum SettingValue: Sendable, Equatable {
    case string(String)
    case bytes([UInt8])
}

/// A flat key → value store: the stand-in for UserDefaults (settings) and the Keychain (secrets).
///
/// The router reads through this protocol on every call and never caches, so a backend must be cheap
/// to read. Reads never throw: a value that cannot be read is absent, and absence always routes
/// on-device (the router has no error path). Writes throw, so a command such as `key add` can tell the
/// user that nothing was saved.
///
/// Keep synced preferences and device-only secrets in distinct instances: the state DB backs both later,
/// under separate tables, so a device-only fact (a loopback endpoint, an API key) can never ride a sync.
public protocol SettingsBackend: SettingsAccess, Sendable {
    /// Runs `body` atomically against every other user of the same store, in this process or another: no one
    /// else writes between its reads and its writes (for the state database, one `BEGIN IMMEDIATE` transaction).
    /// What `body` throws undoes its writes and is rethrown. Inside `body`, use only the access it is given.
    func atomically<T: Sendable>(_ body: (any SettingsAccess) throws -> T) throws -> T
}

/// Reads and writes of a `SettingsBackend`, also inside one of its `atomically` bodies.
public protocol SettingsAccess {
    /// The stored value, or `nil` when absent or unreadable.
    func value(forKey key: String) -> SettingValue?
    /// Stores `value`, replacing any previous one.
    func setValue(_ value: SettingValue, forKey key: String) throws
    /// Removes the key; removing an absent key is not an error.
    func removeValue(forKey key: String) throws
    /// Every stored key that starts with `prefix`, sorted.
    func keys(withPrefix prefix: String) -> [String]
}

/// The Keychain stand-in is the same shape; a separate instance keeps secrets apart from preferences.
public typealias SecretsBackend = SettingsBackend

extension SettingsAccess {
    /// The value as text; bytes that are valid UTF-8 read as text too.
    public func string(forKey key: String) -> String? {
        switch self.value(forKey: key) {
        case .string(let s): return s
        case .bytes(let b): return String(validating: b, as: UTF8.self)
        case nil: return nil
        }
    }

    /// The value as bytes; text reads as its UTF-8 bytes.
    public func bytes(forKey key: String) -> [UInt8]? {
        switch self.value(forKey: key) {
        case .string(let s): return Array(s.utf8)
        case .bytes(let b): return b
        case nil: return nil
        }
    }

    public func set(_ string: String, forKey key: String) throws {
        try self.setValue(.string(string), forKey: key)
    }

    public func set(bytes: [UInt8], forKey key: String) throws {
        try self.setValue(.bytes(bytes), forKey: key)
    }

    /// Decodes a JSON-encoded record; malformed JSON reads as absent.
    package func decodedJSON<T: Decodable>(_ type: T.Type, forKey key: String) -> T? {
        guard let bytes = self.bytes(forKey: key) else { return nil }
        return try? JSONDecoder().decode(T.self, from: Data(bytes))
    }

    /// Stores a record as JSON text.
    package func setJSON<T: Encodable>(_ value: T, forKey key: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        try self.set(String(decoding: data, as: UTF8.self), forKey: key)
    }
}

/// A `SettingsBackend` held in memory, for tests and for processes with no state directory.
public final class InMemorySettingsBackend: SettingsBackend {
    private let storage: Mutex<[String: SettingValue]>

    public init(_ initial: [String: SettingValue] = [:]) {
        self.storage = Mutex(initial)
    }

    public func value(forKey key: String) -> SettingValue? {
        self.storage.withLock { $0[key] }
    }

    public func setValue(_ value: SettingValue, forKey key: String) {
        self.storage.withLock { $0[key] = value }
    }

    public func removeValue(forKey key: String) {
        self.storage.withLock { _ = $0.removeValue(forKey: key) }
    }

    public func keys(withPrefix prefix: String) -> [String] {
        self.storage.withLock { $0.keys.filter { $0.hasPrefix(prefix) }.sorted() }
    }

    /// Holds the store's lock for the whole body, so it is atomic against every other caller.
    public func atomically<T: Sendable>(_ body: (any SettingsAccess) throws -> T) throws -> T {
        try self.storage.withLock { storage throws -> T in
            let access = Transaction(storage)
            let value = try body(access)
            storage = access.storage
            return value
        }
    }

    /// The body's view: a copy, written back when the body returns.
    final class Transaction: SettingsAccess {
        var storage: [String: SettingValue]
        init(_ storage: [String: SettingValue]) { self.storage = storage }
        func value(forKey key: String) -> SettingValue? { self.storage[key] }
        func setValue(_ value: SettingValue, forKey key: String) { self.storage[key] = value }
        func removeValue(forKey key: String) { self.storage[key] = nil }
        func keys(withPrefix prefix: String) -> [String] { self.storage.keys.filter { $0.hasPrefix(prefix) }.sorted() }
    }

    /// Every stored pair, for tests that assert on the exact contents.
    public var snapshot: [String: SettingValue] {
        self.storage.withLock { $0 }
    }
}
