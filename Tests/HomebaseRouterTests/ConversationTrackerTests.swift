import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import Synchronization
import Testing
@testable import HomebaseRouter

@Suite struct ConversationTrackerTests {
    static let host = Fixture.friend
    static let turn1: [ChatMessage] = [.user("hi")]
    static let turn2: [ChatMessage] = turn1 + [.assistant("hello"), .user("how are you?")]

    static func tracker() -> ConversationTracker {
        let n = Mutex(0)
        return ConversationTracker(capacityPerHost: 2) {
            n.withLock { value in
                value += 1
                return "conv-\(value)"
            }
        }
    }

    @Test func anUnknownConversationGoesWholeUnderANewID() {
        let tracker = Self.tracker()
        let plan = tracker.plan(host: Self.host, messages: Self.turn1)
        #expect(plan.messages == Self.turn1)
        #expect(plan.conversation == ConversationRef(id: "conv-1"))
        #expect(!plan.isIncremental)
    }

    @Test func aServedTurnMakesTheNextIncremental() {
        let tracker = Self.tracker()
        tracker.recordServed(host: Self.host, conversationID: "conv-1", held: Self.turn1 + [.assistant("hello")])
        let plan = tracker.plan(host: Self.host, messages: Self.turn2)
        #expect(plan.messages == [.user("how are you?")])
        #expect(plan.conversation.id == "conv-1")
        #expect(plan.conversation.baseCount == 2)
        let prefix = [(role: "user", content: "hi"), (role: "assistant", content: "hello")]
        #expect(plan.conversation.baseDigest == ConversationDigest.compute(messages: prefix))
        #expect(plan.fullMessages == Self.turn2)
    }

    @Test func anEditedHistoryDoesNotMatch() {
        let tracker = Self.tracker()
        tracker.recordServed(host: Self.host, conversationID: "conv-1", held: Self.turn1 + [.assistant("hello")])
        let edited: [ChatMessage] = [.user("hi"), .assistant("HELLO"), .user("how are you?")]
        #expect(!tracker.plan(host: Self.host, messages: edited).isIncremental)
    }

    @Test func theSameListWithNothingNewGoesWhole() {
        let tracker = Self.tracker()
        let held = Self.turn1 + [.assistant("hello")]
        tracker.recordServed(host: Self.host, conversationID: "conv-1", held: held)
        #expect(!tracker.plan(host: Self.host, messages: held).isIncremental)
    }

    @Test func conversationsAreKeptPerHost() {
        let tracker = Self.tracker()
        tracker.recordServed(host: Self.host, conversationID: "conv-1", held: Self.turn1 + [.assistant("hello")])
        #expect(!tracker.plan(host: Fixture.otherFriend, messages: Self.turn2).isIncremental)
    }

    @Test func forgetAndCapacity() {
        let tracker = Self.tracker()
        tracker.recordServed(host: Self.host, conversationID: "a", held: [.user("1")])
        tracker.recordServed(host: Self.host, conversationID: "b", held: [.user("2")])
        tracker.recordServed(host: Self.host, conversationID: "c", held: [.user("3")])
        #expect(tracker.count(for: Self.host) == 2)
        // "a" was least recently used and is gone.
        #expect(!tracker.plan(host: Self.host, messages: [.user("1"), .user("x")]).isIncremental)
        tracker.forget(host: Self.host, conversationID: "c")
        #expect(!tracker.plan(host: Self.host, messages: [.user("3"), .user("x")]).isIncremental)
        #expect(tracker.plan(host: Self.host, messages: [.user("2"), .user("x")]).isIncremental)
    }

    @Test func theLongestHeldPrefixWins() {
        let tracker = Self.tracker()
        tracker.recordServed(host: Self.host, conversationID: "short", held: [.user("a")])
        tracker.recordServed(host: Self.host, conversationID: "long", held: [.user("a"), .assistant("b")])
        let plan = tracker.plan(host: Self.host, messages: [.user("a"), .assistant("b"), .user("c")])
        #expect(plan.conversation.id == "long")
        #expect(plan.messages == [.user("c")])
    }
}
