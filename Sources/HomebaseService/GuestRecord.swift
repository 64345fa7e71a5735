import FoundationEssentials
import HomebaseCore

/// Where a guest stands with this Homebase (`homebase guests`).
public enum GuestState: String, Codable, Sendable, CaseIterable {
    /// Sent `contact.join`; the owner has not granted (or declined) yet. Its requests get `not_granted`.
    case pending
    /// Holds a grant (which may have expired: see `GuestGrant.isExpired`).
    case granted
    /// The owner revoked it. Kept, so its requests get `not_granted` rather than silence.
    case revoked
}

/// Per-guest limits on what a friend may spend of this Homebase. `nil` fields of an override take the default.
public struct GuestLimits: Codable, Equatable, Sendable {
    /// Requests of this guest streaming or queued at once; beyond: `busy`.
    public var maxConcurrent: Int
    /// Requests accepted for authorisation in any 60 s window; beyond: `busy`.
    public var requestsPerMinute: Int
    /// Prompt + completion tokens per UTC day; once used up: `busy` with a message saying so, until midnight UTC.
    public var tokensPerDay: Int

    /// A friend chatting is a couple of streams, a request every few seconds at most, and a few hundred
    /// thousand tokens a day; more than that is a script, and the owner can raise it per guest.
    public static let defaults = GuestLimits(maxConcurrent: 2, requestsPerMinute: 20, tokensPerDay: 200_000)

    public init(maxConcurrent: Int, requestsPerMinute: Int, tokensPerDay: Int) {
        self.maxConcurrent = maxConcurrent
        self.requestsPerMinute = requestsPerMinute
        self.tokensPerDay = tokensPerDay
    }

    enum CodingKeys: String, CodingKey {
        case maxConcurrent = "max_concurrent", requestsPerMinute = "requests_per_minute"
        case tokensPerDay = "tokens_per_day"
    }
}

/// An owner's override of some of a guest's limits (`nil`: the default applies).
public struct GuestLimitOverride: Equatable, Sendable {
    public var maxConcurrent: Int?
    public var requestsPerMinute: Int?
    public var tokensPerDay: Int?

    public init(maxConcurrent: Int? = nil, requestsPerMinute: Int? = nil, tokensPerDay: Int? = nil) {
        self.maxConcurrent = maxConcurrent
        self.requestsPerMinute = requestsPerMinute
        self.tokensPerDay = tokensPerDay
    }

    /// The limits in force: each field overridden or the default.
    public func applied(to defaults: GuestLimits) -> GuestLimits {
        GuestLimits(maxConcurrent: self.maxConcurrent ?? defaults.maxConcurrent,
                    requestsPerMinute: self.requestsPerMinute ?? defaults.requestsPerMinute,
                    tokensPerDay: self.tokensPerDay ?? defaults.tokensPerDay)
    }
}

/// A grant as stored: the exact signed bytes sent in `contact.grant` and their parsed form.
public struct GuestGrant: Equatable, Sendable {
    public var blob: SignedBlob
    public var payload: GrantPayload

    public init(blob: SignedBlob, payload: GrantPayload) {
        self.blob = blob
        self.payload = payload
    }

    public var models: GrantPayload.GrantedModels { self.payload.models }
    public var issuedAtMs: UInt64 { self.payload.issuedAt }
    public var expiresAtMs: UInt64? { self.payload.expiresAt }

    /// True from `expires_at` on (a grant without one never expires).
    public func isExpired(nowMs: UInt64) -> Bool {
        guard let expires = self.payload.expiresAt else { return false }
        return nowMs >= expires
    }
}

/// Tokens and requests a guest used (served requests only: `infer.done` sent).
public struct GuestUsage: Codable, Equatable, Sendable {
    public var requests: Int
    public var promptTokens: Int
    public var completionTokens: Int

    public init(requests: Int = 0, promptTokens: Int = 0, completionTokens: Int = 0) {
        self.requests = requests
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
    }

    public var totalTokens: Int { self.promptTokens + self.completionTokens }

    enum CodingKeys: String, CodingKey {
        case requests, promptTokens = "prompt_tokens", completionTokens = "completion_tokens"
    }
}

/// One guest as the registry holds it.
public struct GuestRecord: Equatable, Sendable {
    public var publicKey: PublicKey
    public var state: GuestState
    /// From `contact.join` (sanitised, bounded); empty for an invitation not yet accepted.
    public var name: String
    /// First seen (join or invitation).
    public var createdAtMs: UInt64
    /// When the guest's first `contact.join` arrived; nil for an invitation it has not accepted yet.
    public var joinedAtMs: UInt64?
    /// The latest grant, kept after a revocation for the record.
    public var grant: GuestGrant?
    public var revokedAtMs: UInt64?
    public var limitOverride: GuestLimitOverride

    public init(publicKey: PublicKey, state: GuestState, name: String, createdAtMs: UInt64, joinedAtMs: UInt64?,
                grant: GuestGrant?, revokedAtMs: UInt64?, limitOverride: GuestLimitOverride = GuestLimitOverride()) {
        self.publicKey = publicKey
        self.state = state
        self.name = name
        self.createdAtMs = createdAtMs
        self.joinedAtMs = joinedAtMs
        self.grant = grant
        self.revokedAtMs = revokedAtMs
        self.limitOverride = limitOverride
    }

    public var limits: GuestLimits { self.limitOverride.applied(to: .defaults) }

    /// Granted, with a grant that has not expired at `nowMs`: may be served (subject to the grant's models)
    /// and gets adverts.
    public func isServable(nowMs: UInt64) -> Bool {
        guard self.state == .granted, let grant = self.grant else { return false }
        return !grant.isExpired(nowMs: nowMs)
    }
}

/// One row of `homebase guests [--json]`: who, in what state, with what grant and how much used — never content.
public struct GuestSummary: Codable, Equatable, Sendable {
    public var pubkey: String
    public var name: String
    public var state: GuestState
    /// True for a granted guest whose grant's `expires_at` has passed (its state stays `granted`).
    public var expired: Bool
    /// `"*"` or the granted tags; nil without a grant.
    public var models: GrantPayload.GrantedModels?
    public var joinedAt: UInt64?
    public var issuedAt: UInt64?
    public var expiresAt: UInt64?
    public var revokedAt: UInt64?
    public var limits: GuestLimits
    /// All served requests.
    public var usage: GuestUsage
    /// Served today (UTC), which the daily token limit counts.
    public var usageToday: GuestUsage

    public init(record: GuestRecord, nowMs: UInt64, usage: GuestUsage, usageToday: GuestUsage) {
        self.pubkey = record.publicKey.hex
        self.name = record.name
        self.state = record.state
        self.expired = record.state == .granted && (record.grant?.isExpired(nowMs: nowMs) ?? false)
        self.models = record.grant?.models
        self.joinedAt = record.joinedAtMs
        self.issuedAt = record.grant?.issuedAtMs
        self.expiresAt = record.grant?.expiresAtMs
        self.revokedAt = record.revokedAtMs
        self.limits = record.limits
        self.usage = usage
        self.usageToday = usageToday
    }

    enum CodingKeys: String, CodingKey {
        case pubkey, name, state, expired, models, joinedAt = "joined_at", issuedAt = "issued_at"
        case expiresAt = "expires_at", revokedAt = "revoked_at", limits, usage, usageToday = "usage_today"
    }

    /// `homebase guests --json`: an array of these objects, keys sorted, absent values as `null`.
    public static func json(_ summaries: [GuestSummary]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding plain value types cannot fail.
        let data = (try? encoder.encode(summaries)) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(self.pubkey, forKey: .pubkey)
        try c.encode(self.name, forKey: .name)
        try c.encode(self.state, forKey: .state)
        try c.encode(self.expired, forKey: .expired)
        // Explicit nulls, so a script can rely on every key being there.
        try c.encode(self.models, forKey: .models)
        try c.encode(self.joinedAt, forKey: .joinedAt)
        try c.encode(self.issuedAt, forKey: .issuedAt)
        try c.encode(self.expiresAt, forKey: .expiresAt)
        try c.encode(self.revokedAt, forKey: .revokedAt)
        try c.encode(self.limits, forKey: .limits)
        try c.encode(self.usage, forKey: .usage)
        try c.encode(self.usageToday, forKey: .usageToday)
    }
}

/// A message the daemon sends to a guest on the contact channel because of an owner's action. All are stored
/// sends, so a guest that is offline gets them on reconnect.
public enum GuestOutboundMessage: Equatable, Sendable {
    /// `contact.grant` with these exact signed bytes.
    case grant(SignedBlob)
    /// A fresh advert, built and signed by the daemon's `AdvertPublisher` when it is sent.
    case advert
    /// `contact.revoke {reason}`.
    case revoke(reason: String)
}
