import HomebaseCore
import HomebaseCrypto
import Testing
@testable import HomebaseService

@Suite struct ConversationCacheTests {
    static let guest = testKey(0x31)
    static let held: [ChatMessage] = [ChatMessage(role: "user", content: "hi"),
                                      ChatMessage(role: "assistant", content: "Hello")]
    static let new = [ChatMessage(role: "user", content: "more")]

    static func ref(_ id: String, _ messages: [ChatMessage]) -> ConversationRef {
        ConversationRef(id: id, baseCount: messages.count,
                        baseDigest: ConversationDigest.compute(messages: messages.map { ($0.role, $0.content) }))
    }

    @Test func aFollowUpOnTheHeldPrefixIsServedWhole() {
        let cache = ConversationCache()
        cache.store(guest: Self.guest, id: "c", messages: Self.held, nowMs: 0)
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", Self.held), messages: Self.new, nowMs: 1)
                == .serve(Self.held + Self.new))
        // Upper-case hex is the same digest.
        var upper = Self.ref("c", Self.held)
        upper.baseDigest = upper.baseDigest?.uppercased()
        #expect(cache.resolve(guest: Self.guest, conversation: upper, messages: Self.new, nowMs: 1)
                == .serve(Self.held + Self.new))
    }

    @Test func anythingButAnExactMatchIsAMiss() {
        let cache = ConversationCache()
        cache.store(guest: Self.guest, id: "c", messages: Self.held, nowMs: 0)
        let other = [ChatMessage(role: "user", content: "hi"), ChatMessage(role: "assistant", content: "Hellp")]
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", other), messages: Self.new, nowMs: 1)
                == .miss)
        // Right digest of a shorter prefix, or a count that does not match: miss.
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", [Self.held[0]]), messages: Self.new,
                              nowMs: 1) == .miss)
        var wrongCount = Self.ref("c", Self.held)
        wrongCount.baseCount = 1
        #expect(cache.resolve(guest: Self.guest, conversation: wrongCount, messages: Self.new, nowMs: 1) == .miss)
        // Another guest, another id, half the base fields: miss.
        #expect(cache.resolve(guest: testKey(0x32), conversation: Self.ref("c", Self.held), messages: Self.new,
                              nowMs: 1) == .miss)
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("d", Self.held), messages: Self.new,
                              nowMs: 1) == .miss)
        #expect(cache.resolve(guest: Self.guest, conversation: ConversationRef(id: "c", baseCount: 2),
                              messages: Self.new, nowMs: 1) == .miss)
        // No base fields: served as sent, cache or not.
        #expect(cache.resolve(guest: Self.guest, conversation: ConversationRef(id: "z"), messages: Self.new, nowMs: 1)
                == .serve(Self.new))
        #expect(cache.resolve(guest: Self.guest, conversation: nil, messages: Self.new, nowMs: 1) == .serve(Self.new))
    }

    @Test func entriesExpireAfterTheirTimeToLive() {
        let cache = ConversationCache(limits: .init(ttlMs: 1_000))
        cache.store(guest: Self.guest, id: "c", messages: Self.held, nowMs: 0)
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", Self.held), messages: Self.new,
                              nowMs: 999) != .miss)
        // Use refreshed it: 999 + 1000 is the new deadline.
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", Self.held), messages: Self.new,
                              nowMs: 1_998) != .miss)
        #expect(cache.resolve(guest: Self.guest, conversation: Self.ref("c", Self.held), messages: Self.new,
                              nowMs: 2_998) == .miss)
        #expect(cache.totalBytes == 0)
    }

    @Test func perGuestEntriesGoLeastRecentlyUsedFirst() {
        let cache = ConversationCache(limits: .init(entriesPerGuest: 2))
        cache.store(guest: Self.guest, id: "a", messages: Self.held, nowMs: 0)
        cache.store(guest: Self.guest, id: "b", messages: Self.held, nowMs: 0)
        _ = cache.resolve(guest: Self.guest, conversation: Self.ref("a", Self.held), messages: Self.new, nowMs: 0)
        cache.store(guest: Self.guest, id: "c", messages: Self.held, nowMs: 0)
        #expect(cache.contains(guest: Self.guest, id: "a"))
        #expect(!cache.contains(guest: Self.guest, id: "b"))
        #expect(cache.contains(guest: Self.guest, id: "c"))
        // Another guest's entries are not touched by this guest's bound.
        cache.store(guest: testKey(0x32), id: "x", messages: Self.held, nowMs: 0)
        #expect(cache.count(guest: Self.guest) == 2)
        #expect(cache.count(guest: testKey(0x32)) == 1)
    }

    @Test func bytesAreBoundedPerGuestAndInAll() {
        let big = [ChatMessage(role: "user", content: String(repeating: "x", count: 1_000))]
        let cost = ConversationCache.cost(big) + 1
        let cache = ConversationCache(limits: .init(maxBytesPerGuest: cost * 2, maxBytes: cost * 3))
        cache.store(guest: Self.guest, id: "a", messages: big, nowMs: 0)
        cache.store(guest: Self.guest, id: "b", messages: big, nowMs: 0)
        cache.store(guest: Self.guest, id: "c", messages: big, nowMs: 0)
        #expect(cache.count(guest: Self.guest) == 2)
        #expect(!cache.contains(guest: Self.guest, id: "a"))
        cache.store(guest: testKey(0x32), id: "d", messages: big, nowMs: 0)
        cache.store(guest: testKey(0x33), id: "e", messages: big, nowMs: 0)
        #expect(cache.totalBytes <= cost * 3)
        #expect(!cache.contains(guest: Self.guest, id: "b"))
        #expect(cache.contains(guest: testKey(0x33), id: "e"))
        // Too large for any bound, or too long an id: not kept, and an older entry under that id is dropped.
        let huge = [ChatMessage(role: "user", content: String(repeating: "y", count: cost * 4))]
        cache.store(guest: testKey(0x33), id: "e", messages: huge, nowMs: 0)
        #expect(!cache.contains(guest: testKey(0x33), id: "e"))
        cache.store(guest: testKey(0x33), id: String(repeating: "i", count: 129), messages: Self.held, nowMs: 0)
        #expect(cache.count(guest: testKey(0x33)) == 0)
    }

    @Test func removingAGuestForgetsOnlyItsConversations() {
        let cache = ConversationCache()
        cache.store(guest: Self.guest, id: "a", messages: Self.held, nowMs: 0)
        cache.store(guest: testKey(0x32), id: "a", messages: Self.held, nowMs: 0)
        cache.removeAll(guest: Self.guest)
        #expect(cache.count(guest: Self.guest) == 0)
        #expect(cache.count(guest: testKey(0x32)) == 1)
        #expect(cache.totalBytes == ConversationCache.cost(Self.held) + 1)
    }
}
