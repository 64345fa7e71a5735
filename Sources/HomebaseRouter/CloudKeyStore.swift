import Foundation

/// A cloud provider the user can bring a key for.
public enum CloudProvider: String, Sendable, CaseIterable {
    case openai
    case anthropic

    /// The legacy single-key slot every consumer reads (design.md §R3).
    public var slot: String {
        switch self {
        case .openai: return "openai.api_key"
        case .anthropic: return "anthropic.api_key"
        }
    }

    /// Where the ring lives: a JSON array of strings under `<slot>.list`.
    public var listSlot: String { self.slot + ".list" }

    /// Parses the command-line spelling: `openai`, or `claude` / `anthropic`.
    public init?(argument: String) {
        switch argument.lowercased() {
        case "openai": self = .openai
        case "claude", "anthropic": self = .anthropic
        default: return nil
        }
    }
}

/// Key rings for bring-your-own cloud keys, exactly as design.md §R3.
///
/// - Keys are trimmed and never empty; duplicates are dropped (first wins, order kept).
/// - The first key is active and mirrored into the legacy single slot, which is all consumers read.
/// - An empty ring deletes both slots.
/// - A legacy single key with no list reads as a one-element ring (no migration step).
///
/// Lives in the secrets backend (the Keychain stand-in): device-only, never synced.
public struct CloudKeyStore: Sendable {
    public let backend: any SecretsBackend

    public init(backend: any SecretsBackend) {
        self.backend = backend
    }

    /// The ring, active key first.
    ///
    /// A list that is missing or not a JSON string array falls back to the legacy slot, so a damaged
    /// list never hides the key that is actually in use.
    public func list(_ provider: CloudProvider) -> [String] {
        if let ring = self.backend.decodedJSON([String].self, forKey: provider.listSlot) {
            return Self.normalized(ring)
        }
        if let legacy = self.backend.string(forKey: provider.slot)?.nonBlank {
            return [legacy]
        }
        return []
    }

    /// The key a provider sends, read from the legacy slot at call time.
    public func activeKey(_ provider: CloudProvider) -> String? {
        self.backend.string(forKey: provider.slot)?.nonBlank
    }

    /// Whether an OpenAI key is on file (the legacy slot; design.md §R3).
    public func hasBYOKey() -> Bool { self.activeKey(.openai) != nil }

    /// Whether an Anthropic key is on file (the legacy slot; design.md §R3).
    public func hasAnthropicKey() -> Bool { self.activeKey(.anthropic) != nil }

    /// Whether the route for `provider` has a key.
    public func hasKey(_ provider: CloudProvider) -> Bool { self.activeKey(provider) != nil }

    /// A closure that reads the active key per request, for a provider's `apiKeyProvider`.
    public func apiKeyProvider(_ provider: CloudProvider) -> @Sendable () -> String? {
        let store = self
        return { store.activeKey(provider) }
    }

    /// Appends a key to the end of the ring (the first key added becomes active).
    ///
    /// - Returns: `false` when the key is blank or already on the ring; nothing changes then.
    @discardableResult
    public func add(_ key: String, to provider: CloudProvider) throws -> Bool {
        guard let key = key.nonBlank else { return false }
        var ring = self.list(provider)
        guard !ring.contains(key) else { return false }
        ring.append(key)
        try self.save(ring, for: provider)
        return true
    }

    /// Removes the key at `index`; removing the last key deletes both slots.
    ///
    /// - Returns: `false` when `index` is out of range.
    @discardableResult
    public func remove(at index: Int, from provider: CloudProvider) throws -> Bool {
        var ring = self.list(provider)
        guard ring.indices.contains(index) else { return false }
        ring.remove(at: index)
        try self.save(ring, for: provider)
        return true
    }

    /// Moves the key at `from` to position `to`; moving a key to the front makes it the active key.
    ///
    /// - Returns: `false` when either index is out of range.
    @discardableResult
    public func move(from: Int, to: Int, in provider: CloudProvider) throws -> Bool {
        var ring = self.list(provider)
        guard ring.indices.contains(from), ring.indices.contains(to) else { return false }
        let key = ring.remove(at: from)
        ring.insert(key, at: to)
        try self.save(ring, for: provider)
        return true
    }

    /// Replaces the whole ring (normalised first).
    public func setRing(_ keys: [String], for provider: CloudProvider) throws {
        try self.save(Self.normalized(keys), for: provider)
    }

    /// The ring masked for display, in order.
    public func maskedList(_ provider: CloudProvider) -> [String] {
        self.list(provider).map(Self.mask)
    }

    /// Masks a key for display: a conventional prefix stays legible, the secret never does.
    ///
    /// `sk-ant-api03-…` → `sk-ant-•••••`, `sk-proj-…` → `sk-proj-•••••`, `sk-…` → `sk-•••••`, anything
    /// else → `•••••`. The mask has a fixed length, so it does not reveal the key's length either.
    public static func mask(_ key: String) -> String {
        let key = key.trimmed
        for prefix in Self.legiblePrefixes where key.hasPrefix(prefix) && key.count > prefix.count {
            return prefix + Self.maskDots
        }
        return Self.maskDots
    }

    /// Longest first, so `sk-ant-` wins over `sk-`.
    static let legiblePrefixes = ["sk-ant-", "sk-proj-", "sk-"]
    static let maskDots = "•••••"

    /// Trims, drops blanks and drops later duplicates, keeping order.
    static func normalized(_ keys: [String]) -> [String] {
        var seen = Set<String>()
        var ring: [String] = []
        for key in keys {
            guard let key = key.nonBlank, seen.insert(key).inserted else { continue }
            ring.append(key)
        }
        return ring
    }

    private func save(_ ring: [String], for provider: CloudProvider) throws {
        guard let first = ring.first else {
            try self.backend.removeValue(forKey: provider.listSlot)
            try self.backend.removeValue(forKey: provider.slot)
            return
        }
        try self.backend.setJSON(ring, forKey: provider.listSlot)
        try self.backend.set(first, forKey: provider.slot)
    }
}
