import HomebaseCore
import HomebaseCrypto
import Synchronization

/// The host's half of the conversation cache (Protocol/messages.md §5): per (guest, conversation id), the
/// message list last served — the request's messages plus the assistant's answer — so a guest's follow-up can
/// send only its new messages.
///
/// A follow-up names the prefix it builds on with `base_count` and `base_digest`; the cached list must have
/// exactly `base_count` messages and that digest, or the answer is `cache_miss` (the guest then retries once
/// with the whole conversation). Memory only: a restart empties it, which costs one retry per conversation.
///
/// Bounded: entries per guest, bytes per guest, bytes in all, and a time to live since last use; the least
/// recently used entry goes first. Content is held, never logged.
public final class ConversationCache: Sendable {
    public struct Limits: Sendable, Equatable {
        /// A guest juggles a few chats; older ones restart in full after one `cache_miss`.
        public var entriesPerGuest: Int
        /// So one guest cannot push every other guest's conversations out.
        public var maxBytesPerGuest: Int
        public var maxBytes: Int
        /// Since last use. A chat idle for an hour costs one retry with the whole conversation.
        public var ttlMs: UInt64
        /// Longer conversation ids are not cached (the request is still served).
        public var maxIDBytes: Int

        public init(entriesPerGuest: Int = 16, maxBytesPerGuest: Int = 8 << 20, maxBytes: Int = 32 << 20,
                    ttlMs: UInt64 = 3_600_000, maxIDBytes: Int = 128) {
            precondition(entriesPerGuest >= 1 && maxBytesPerGuest >= 1 && maxBytes >= 1, "cache limits out of range")
            self.entriesPerGuest = entriesPerGuest
            self.maxBytesPerGuest = maxBytesPerGuest
            self.maxBytes = maxBytes
            self.ttlMs = ttlMs
            self.maxIDBytes = maxIDBytes
        }
    }

    /// What to serve for a request.
    public enum Resolution: Equatable, Sendable {
        /// Serve these messages (the cached prefix plus the request's, or the request's alone).
        case serve([ChatMessage])
        /// The prefix is not held (evicted, expired, never seen, or different): answer `cache_miss`.
        case miss
    }

    struct Key: Hashable {
        var guest: PublicKey
        var id: String
    }

    struct Entry {
        var messages: [ChatMessage]
        var digest: String
        var bytes: Int
        var lastUsedMs: UInt64
        /// Orders entries used in the same millisecond.
        var tick: UInt64
    }

    struct State {
        var entries: [Key: Entry] = [:]
        var bytes = 0
        var bytesPerGuest: [PublicKey: Int] = [:]
        var tick: UInt64 = 0
    }

    public let limits: Limits
    private let state = Mutex(State())

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes a list costs: its text plus a fixed overhead per message for the structure around it.
    static func cost(_ messages: [ChatMessage]) -> Int {
        messages.reduce(0) { $0 + $1.role.utf8.count + $1.content.utf8.count + 64 }
    }

    static func digest(_ messages: some Collection<ChatMessage>) -> String {
        ConversationDigest.compute(messages: messages.map { (role: $0.role, content: $0.content) })
    }

    /// The messages to serve for `messages` sent by `guest` under `conversation` (nil: no cache involved).
    public func resolve(guest: PublicKey, conversation: ConversationRef?, messages: [ChatMessage], nowMs: UInt64)
        -> Resolution
    {
        guard let conversation, conversation.baseCount != nil || conversation.baseDigest != nil else {
            return .serve(messages)
        }
        // Both base fields, or it cannot be a valid follow-up: a miss makes the guest resend in full.
        guard let count = conversation.baseCount, let digest = conversation.baseDigest else { return .miss }
        return self.state.withLock { s -> Resolution in
            self.expire(&s, nowMs: nowMs)
            let key = Key(guest: guest, id: conversation.id)
            guard var entry = s.entries[key], entry.messages.count == count, entry.digest == digest.lowercased()
            else { return .miss }
            s.tick += 1
            entry.lastUsedMs = nowMs
            entry.tick = s.tick
            s.entries[key] = entry
            return .serve(entry.messages + messages)
        }
    }

    /// Records what `guest`'s conversation `id` holds after a served request (its messages and the answer).
    /// Too large an entry, or too long an id, is not kept (and any older entry under the id is dropped).
    public func store(guest: PublicKey, id: String, messages: [ChatMessage], nowMs: UInt64) {
        let key = Key(guest: guest, id: id)
        let bytes = Self.cost(messages) + id.utf8.count
        let fits = id.utf8.count <= self.limits.maxIDBytes && bytes <= self.limits.maxBytesPerGuest
            && bytes <= self.limits.maxBytes
        // Hash outside the lock: it reads the whole conversation.
        let digest = fits ? Self.digest(messages) : ""
        self.state.withLock { s in
            self.remove(key, &s)
            guard fits else { return }
            self.expire(&s, nowMs: nowMs)
            s.tick += 1
            s.entries[key] = Entry(messages: messages, digest: digest, bytes: bytes, lastUsedMs: nowMs, tick: s.tick)
            s.bytes += bytes
            s.bytesPerGuest[guest, default: 0] += bytes
            // Per guest first (its own oldest go), then overall.
            while self.count(of: guest, s) > self.limits.entriesPerGuest
                || s.bytesPerGuest[guest, default: 0] > self.limits.maxBytesPerGuest
            {
                guard let oldest = self.leastRecentlyUsed(s, guest: guest) else { break }
                self.remove(oldest, &s)
            }
            while s.bytes > self.limits.maxBytes, let oldest = self.leastRecentlyUsed(s, guest: nil) {
                self.remove(oldest, &s)
            }
        }
    }

    /// Forgets every conversation of `guest` (revoked, or left).
    public func removeAll(guest: PublicKey) {
        self.state.withLock { s in
            for key in s.entries.keys where key.guest == guest { self.remove(key, &s) }
        }
    }

    /// Conversations held for `guest`.
    public func count(guest: PublicKey) -> Int {
        self.state.withLock { self.count(of: guest, $0) }
    }

    /// Whether `guest`'s conversation `id` is held (expired entries count until the next access prunes them).
    public func contains(guest: PublicKey, id: String) -> Bool {
        self.state.withLock { $0.entries[Key(guest: guest, id: id)] != nil }
    }

    /// Bytes held in all.
    public var totalBytes: Int { self.state.withLock { $0.bytes } }

    // MARK: Internals (called with the lock held)

    private func count(of guest: PublicKey, _ s: State) -> Int {
        s.entries.keys.reduce(0) { $0 + ($1.guest == guest ? 1 : 0) }
    }

    private func leastRecentlyUsed(_ s: State, guest: PublicKey?) -> Key? {
        s.entries.filter { guest == nil || $0.key.guest == guest }.min { $0.value.tick < $1.value.tick }?.key
    }

    private func remove(_ key: Key, _ s: inout State) {
        guard let entry = s.entries.removeValue(forKey: key) else { return }
        s.bytes -= entry.bytes
        let left = s.bytesPerGuest[key.guest, default: 0] - entry.bytes
        s.bytesPerGuest[key.guest] = left > 0 ? left : nil
    }

    private func expire(_ s: inout State, nowMs: UInt64) {
        let stale = s.entries.filter { nowMs >= $0.value.lastUsedMs &+ self.limits.ttlMs }.map(\.key)
        for key in stale { self.remove(key, &s) }
    }
}
