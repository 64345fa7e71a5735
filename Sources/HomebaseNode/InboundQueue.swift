import HomebaseCore
import Synchronization

/// Messages a messenger handed on and its consumer has not taken yet, counted, so the messenger can refuse what
/// does not fit *before* it records the message's replay id or acknowledges its frame (Protocol/relay.md §5).
///
/// An `AsyncStream` with a dropping buffer policy cannot do that: `yield` reports the drop only after the fact,
/// when the frame was already acknowledged and its id recorded, so the relay deleted it and a redelivery would be
/// refused as a replay. Here the producer reserves room first (`reserve`), and a message refused for want of
/// room is neither recorded nor acknowledged: a stored frame comes again on the next connection; a live one is
/// counted as dropped (`MessengerDrop.inboundFull`), and its sender's watchdog answers for it.
///
/// One producer (the link's thread) and one consumer (`messages`). The count never passes `capacity`: only the
/// producer raises it, and only after checking it.
public final class InboundQueue: Sendable {
    public let capacity: Int
    /// Handed on or reserved, not yet taken (shared with `messages`, which counts what the consumer takes).
    private let pending = InboundCount()
    private let continuation: AsyncStream<InboundMessage>.Continuation
    /// The consumer's side.
    public let messages: InboundMessages

    public init(capacity: Int) {
        precondition(capacity > 0, "an inbound queue needs room for a message")
        self.capacity = capacity
        let (stream, continuation) = AsyncStream<InboundMessage>.makeStream(bufferingPolicy: .unbounded)
        self.continuation = continuation
        self.messages = InboundMessages(stream, count: self.pending)
    }

    /// Messages waiting for the consumer (with the producer's reservations).
    public var count: Int { self.pending.value.withLock { $0 } }

    /// Reserves room for up to `wanted` messages and returns how many fit (0 when full). Each reserved place is
    /// given back by exactly one `yield` or `release`.
    public func reserve(_ wanted: Int) -> Int {
        self.pending.value.withLock { pending in
            let granted = max(0, min(wanted, self.capacity - pending))
            pending += granted
            return granted
        }
    }

    /// Gives back a reserved place that no message took (the message was handled inline, or dropped).
    public func release(_ count: Int = 1) {
        guard count > 0 else { return }
        self.pending.value.withLock { $0 -= count }
    }

    /// Hands a message on in a reserved place.
    public func yield(_ message: InboundMessage) {
        if case .terminated = self.continuation.yield(message) { self.release() }
    }

    /// Ends the consumer's sequence once it has taken what is waiting.
    public func finish() {
        self.continuation.finish()
    }
}

/// The count an `InboundQueue` and its `InboundMessages` share.
final class InboundCount: Sendable {
    let value = Mutex(0)
}

/// Messages from peers that passed every receiver rule, in arrival order, for one consumer. Taking one frees its
/// place in the messenger's `InboundQueue`.
public struct InboundMessages: AsyncSequence, Sendable {
    private let stream: AsyncStream<InboundMessage>
    private let count: InboundCount?

    /// Messages from `stream`, counted by no queue (test doubles and loopback messengers).
    public init(_ stream: AsyncStream<InboundMessage>) {
        self.stream = stream
        self.count = nil
    }

    fileprivate init(_ stream: AsyncStream<InboundMessage>, count: InboundCount) {
        self.stream = stream
        self.count = count
    }

    /// A sequence that never yields and never ends (test doubles that receive nothing).
    public static func none() -> InboundMessages {
        InboundMessages(AsyncStream { _ in })
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<InboundMessage>.Iterator
        let count: InboundCount?

        public mutating func next() async -> InboundMessage? {
            let message = await self.base.next()
            if message != nil { self.count?.value.withLock { $0 -= 1 } }
            return message
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.stream.makeAsyncIterator(), count: self.count)
    }
}
