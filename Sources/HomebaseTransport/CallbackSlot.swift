import Synchronization

/// One replaceable callback, read from any thread: a handler set once and called for every message.
///
/// Why not `Mutex<(@Sendable (Argument) -> Result)?>`: a Mutex keeps its value at the generic abstraction, and
/// `withLock`'s `inout` access to a function value reabstracts it on the way in and again on the write-back. Each
/// `withLock { $0 }` from code that knows the closure's concrete type therefore wraps the stored closure in two more
/// reabstraction thunks (80 to 500 bytes of stack, by build and type), and calling it runs the whole chain. A handler
/// read for each message got slower with every message: the Homebase's CPU per request rose by half over 20,000
/// requests, and its relay link would have overflowed its thread's stack some 100,000 requests on. Here the closure
/// sits inside a struct, whose layout does not change with the specialization: reads copy it, nothing is written
/// back.
public final class CallbackSlot<Argument, Result>: Sendable {
    private struct Stored: @unchecked Sendable {  // the closure is @Sendable: the wrapper adds no sharing
        let call: @Sendable (Argument) -> Result
    }

    private let slot = Mutex<Stored?>(nil)

    public init() {}

    /// Replaces the callback; nil clears it.
    public func set(_ callback: (@Sendable (Argument) -> Result)?) {
        let stored = callback.map(Stored.init)
        self.slot.withLock { $0 = stored }
    }

    /// The callback now, if one is set.
    public var current: (@Sendable (Argument) -> Result)? {
        self.slot.withLock { $0?.call }
    }
}
