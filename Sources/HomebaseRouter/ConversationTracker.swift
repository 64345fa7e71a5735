import HomebaseCore
import HomebaseCrypto
import Synchronization

/// The guest's half of the conversation cache (Protocol/messages.md §5): per host, which conversation
/// prefixes the host holds, so a follow-up sends only the new messages.
///
/// After a served request the host holds the messages it was given plus the answer it produced. When the
/// next request's message list starts with such a held prefix of `k` messages (and adds at least one), only
/// the rest is sent, with `conversation {id, base_count: k, base_digest}`. The conversation id is therefore
/// stable for a chat session: a session's message list only grows, so each turn finds the previous one.
///
/// Only counts and digests are kept, never message text. Entries are bounded per host (least recently
/// used goes first).
public final class ConversationTracker: Sendable {
    /// What to send for one request.
    public struct Plan: Sendable, Equatable {
        public var conversationID: String
        /// The messages to put on the wire: all of them, or only those after the held prefix.
        public var messages: [ChatMessage]
        public var conversation: ConversationRef
        /// The whole conversation, for the one retry after `cache_miss` and for recording what the host holds.
        public var fullMessages: [ChatMessage]

        /// True when only new messages are sent.
        public var isIncremental: Bool { self.conversation.baseCount != nil }
    }

    struct Entry {
        var id: String
        var count: Int
        var digest: String
        var lastUsed: UInt64
    }

    struct State {
        var entries: [PublicKey: [Entry]] = [:]
        var tick: UInt64 = 0
    }

    /// Spec-free bound: a guest juggles a handful of chats per host; older ones simply restart in full.
    public let capacityPerHost: Int
    private let newID: @Sendable () -> String
    private let state = Mutex(State())

    public init(capacityPerHost: Int = 32, newID: @escaping @Sendable () -> String = { SecureRandom.uuidString() }) {
        precondition(capacityPerHost > 0, "capacityPerHost must be positive")
        self.capacityPerHost = capacityPerHost
        self.newID = newID
    }

    /// The plan for sending `messages` to `host`: incremental on the longest held prefix, else the whole
    /// conversation under a new conversation id.
    public func plan(host: PublicKey, messages: [ChatMessage]) -> Plan {
        let candidates = self.state.withLock { s in
            (s.entries[host] ?? []).filter { $0.count < messages.count }.sorted { $0.count > $1.count }
        }
        for entry in candidates where Self.digest(messages[..<entry.count]) == entry.digest {
            self.touch(host: host, id: entry.id)
            return Plan(
                conversationID: entry.id, messages: Array(messages[entry.count...]),
                conversation: ConversationRef(id: entry.id, baseCount: entry.count, baseDigest: entry.digest),
                fullMessages: messages)
        }
        return self.fullPlan(conversationID: self.newID(), messages: messages)
    }

    /// The whole conversation under `conversationID`, with no `base_*` fields.
    public func fullPlan(conversationID: String, messages: [ChatMessage]) -> Plan {
        Plan(conversationID: conversationID, messages: messages, conversation: ConversationRef(id: conversationID),
             fullMessages: messages)
    }

    /// Records that `host` now holds `held` under `conversationID` (the request's whole conversation plus
    /// the answer).
    public func recordServed(host: PublicKey, conversationID: String, held: [ChatMessage]) {
        let digest = Self.digest(held[...])
        self.state.withLock { s in
            s.tick += 1
            var list = (s.entries[host] ?? []).filter { $0.id != conversationID }
            list.append(Entry(id: conversationID, count: held.count, digest: digest, lastUsed: s.tick))
            if list.count > self.capacityPerHost {
                list.sort { $0.lastUsed > $1.lastUsed }
                list.removeLast(list.count - self.capacityPerHost)
            }
            s.entries[host] = list
        }
    }

    /// Forgets a conversation: after a `cache_miss` or a failure the host's copy is unknown.
    public func forget(host: PublicKey, conversationID: String) {
        self.state.withLock { s in
            s.entries[host]?.removeAll { $0.id == conversationID }
        }
    }

    /// How many conversations are remembered for `host`.
    public func count(for host: PublicKey) -> Int {
        self.state.withLock { $0.entries[host]?.count ?? 0 }
    }

    private func touch(host: PublicKey, id: String) {
        self.state.withLock { s in
            s.tick += 1
            let tick = s.tick
            guard let index = s.entries[host]?.firstIndex(where: { $0.id == id }) else { return }
            s.entries[host]?[index].lastUsed = tick
        }
    }

    static func digest(_ messages: ArraySlice<ChatMessage>) -> String {
        ConversationDigest.compute(messages: messages.map { (role: $0.role, content: $0.content) })
    }
}
