import Foundation
import HomebaseCore

/// An advert whose signature the caller has already checked (with HomebaseCrypto, over the exact bytes
/// received). Holding one is the proof: the store takes no other kind.
public struct VerifiedAdvert: Sendable, Hashable, Codable {
    public var host: PublicKey
    public var seq: UInt64
    /// The signed `issued_at`; freshness is judged from it, never from arrival time.
    public var issuedAtMs: UInt64
    public var runtimeVersion: String?
    public var models: [AdvertPayload.Model]

    public init(host: PublicKey, seq: UInt64, issuedAtMs: UInt64, runtimeVersion: String? = nil,
                models: [AdvertPayload.Model]) {
        self.host = host
        self.seq = seq
        self.issuedAtMs = issuedAtMs
        self.runtimeVersion = runtimeVersion
        self.models = models
    }

    enum CodingKeys: String, CodingKey {
        case host, seq, models
        case issuedAtMs = "issued_at_ms"
        case runtimeVersion = "runtime_version"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let hex = try c.decode(String.self, forKey: .host)
        guard let host = PublicKey(hex: hex) else {
            throw DecodingError.dataCorruptedError(forKey: .host, in: c, debugDescription: "host is not 64 hex")
        }
        self.host = host
        self.seq = try c.decode(UInt64.self, forKey: .seq)
        self.issuedAtMs = try c.decode(UInt64.self, forKey: .issuedAtMs)
        self.runtimeVersion = try c.decodeIfPresent(String.self, forKey: .runtimeVersion)
        self.models = try c.decode([AdvertPayload.Model.Stored].self, forKey: .models).map(\.model)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(self.host.hex, forKey: .host)
        try c.encode(self.seq, forKey: .seq)
        try c.encode(self.issuedAtMs, forKey: .issuedAtMs)
        try c.encodeIfPresent(self.runtimeVersion, forKey: .runtimeVersion)
        try c.encode(self.models, forKey: .models)
    }
}

/// Turns a received advert (`payload` bytes and detached `sig`) into a `VerifiedAdvert`, or `nil` when
/// the signature or the payload is bad. Implemented with HomebaseCrypto by the service layer.
public protocol AdvertVerifier: Sendable {
    func verifiedAdvert(payload: [UInt8], signature: [UInt8]) -> VerifiedAdvert?
}

/// The last advert from this account's own Homebase (design.md §R5), device-only.
///
/// Fresh means non-empty and issued less than 10 minutes ago: an advert exactly 10:00 old is stale.
/// The window exists so a handset whose Homebase went to sleep falls back before the 10 s accept
/// timeout instead of eating it on every send.
public struct ExternalModelsAdvertStore: Sendable {
    public enum Key {
        public static let ownAdvert = "advert.own"
    }

    /// Spec value (design.md §R5): an advert younger than this is fresh.
    public static let freshnessWindowMs: UInt64 = 10 * 60 * 1000

    public let backend: any SettingsBackend

    public init(backend: any SettingsBackend) {
        self.backend = backend
    }

    /// The stored advert, fresh or not.
    public var advert: VerifiedAdvert? {
        self.backend.decodedJSON(VerifiedAdvert.self, forKey: Key.ownAdvert)
    }

    /// Stores `advert` unless it is a replay: from the same host, a `seq` not greater than the stored
    /// one is ignored. A different host replaces the stored advert (the caller has checked that the
    /// host belongs to the account roster; a re-pair changes the Homebase).
    ///
    /// - Returns: whether it was stored.
    @discardableResult
    public func accept(_ advert: VerifiedAdvert) throws -> Bool {
        if let stored = self.advert, stored.host == advert.host, advert.seq <= stored.seq {
            return false
        }
        try self.backend.setJSON(advert, forKey: Key.ownAdvert)
        return true
    }

    /// Verifies and stores a received advert; a bad signature or payload is dropped.
    @discardableResult
    public func receive(payload: [UInt8], signature: [UInt8], verifier: any AdvertVerifier) throws -> Bool {
        guard let advert = verifier.verifiedAdvert(payload: payload, signature: signature) else { return false }
        return try self.accept(advert)
    }

    /// Forgets the advert (unpairing).
    public func clear() throws {
        try self.backend.removeValue(forKey: Key.ownAdvert)
    }

    /// The stored advert when it is fresh at `nowMs`, else `nil`.
    public func freshAdvert(nowMs: UInt64) -> VerifiedAdvert? {
        guard let advert = self.advert, Self.isFresh(advert, nowMs: nowMs) else { return nil }
        return advert
    }

    /// Non-empty and `now − issuedAt < 10 min`.
    ///
    /// An advert issued in the future (clock skew) counts as age zero, unless it claims to be more than a
    /// whole window ahead: such a stamp would stay "fresh" for as long as it lies, so it is stale.
    public static func isFresh(_ advert: VerifiedAdvert, nowMs: UInt64) -> Bool {
        guard !advert.models.isEmpty else { return false }
        return Freshness.isFresh(stampMs: advert.issuedAtMs, nowMs: nowMs, windowMs: Self.freshnessWindowMs)
    }
}

/// The freshness rule shared by adverts and joined Homebases.
enum Freshness {
    /// `now − stamp < window`, with future stamps up to one window ahead treated as age zero.
    static func isFresh(stampMs: UInt64, nowMs: UInt64, windowMs: UInt64) -> Bool {
        if stampMs > nowMs {
            return stampMs - nowMs <= windowMs
        }
        return nowMs - stampMs < windowMs
    }
}
