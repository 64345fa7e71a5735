import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore

/// The state every handset or guest device keeps in its 0600 database: its identity and its relay.
/// (The Homebase keeps the same facts in `HomebaseState`, with its account key and roster.)
public final class NodeState: Sendable {
    public let database: Database
    public let kv: KeyValueStore

    static let seedKey = "node.identity.seed"
    static let relayKey = "node.relay_url"
    static let nameKey = "node.name"
    static let tokenKey = "node.relay_token"

    public init(path: String) throws {
        self.database = try Database(path: path)
        self.kv = try KeyValueStore(database: self.database)
    }

    public var isInitialized: Bool { (try? self.kv.data(Self.seedKey)) != nil }

    /// Creates the identity once; later calls keep it and update the relay URL and name.
    @discardableResult
    public func initialize(relayURL: String, name: String) throws -> PublicKey {
        guard RelayURL(relayURL) != nil else { throw CLIError("'\(relayURL)' is not a ws:// or wss:// URL") }
        if try self.kv.data(Self.seedKey) == nil {
            try self.kv.setData(SigningSecretKey.generate().seedBytes(), forKey: Self.seedKey)
        }
        try self.kv.setString(relayURL, forKey: Self.relayKey)
        try self.kv.setString(name, forKey: Self.nameKey)
        return try self.identity().publicKey
    }

    public func identity() throws -> SigningSecretKey {
        guard let seed = try self.kv.data(Self.seedKey) else { throw CLIError("this device has no identity; run init") }
        return try SigningSecretKey(seed: seed)
    }

    public func relayURL() throws -> String {
        guard let u = try self.kv.string(Self.relayKey) else { throw CLIError("no relay configured; run init --relay URL") }
        return u
    }

    public func setRelayURL(_ url: String) throws { try self.kv.setString(url, forKey: Self.relayKey) }

    public var name: String { (try? self.kv.string(Self.nameKey)) ?? "device" }

    /// An optional relay access token (admission), sent as `Authorization: Bearer`.
    public var relayToken: String? { try? self.kv.string(Self.tokenKey) }
    public func setRelayToken(_ token: String?) throws {
        if let token { try self.kv.setString(token, forKey: Self.tokenKey) } else { _ = try self.kv.remove(Self.tokenKey) }
    }
}
