import HomebaseCore
import HomebaseNode
import Synchronization

/// One event an in-flight relay inference reacts to.
enum RelayInferenceEvent: Sendable {
    /// An `infer.*` answer from the host for this request's id.
    case frame(Message)
    /// The relay's receipt for the `infer.request`.
    case receipt(SendOutcome)
    /// The relay connection dropped.
    case relayLost
    /// A watchdog deadline may have passed; the machine decides with the clock.
    case timer
}

/// The single consumer of a messenger's `inbound` and `events` streams (each allows one consumer): it routes
/// `infer.accept/chunk/done/error` by request id to the in-flight request and hands every other message to
/// the node's `otherMessages` handler (adverts, grants, rosters, …).
///
/// An answer frame is delivered only when its sender and channel match the ones the request went to; frames
/// for an id that is not in flight (a request that already finished or failed) are dropped, which is how
/// late frames after a fallback disappear. A relay disconnect is reported to every in-flight request.
public final class InferenceResponseRouter: Sendable {
    struct Registration {
        var host: PublicKey
        var channel: Channel
        var sink: AsyncStream<RelayInferenceEvent>.Continuation
    }

    struct State {
        var registrations: [String: Registration] = [:]
        var otherMessages: (@Sendable (InboundMessage) -> Void)?
        var events: (@Sendable (MessengerEvent) -> Void)?
        var frameObserver: (@Sendable (InboundMessage) -> Void)?
        var tasks: [Task<Void, Never>] = []
        var droppedFrames = 0
    }

    public let messenger: any PeerMessenger
    private let state = Mutex(State())

    /// Starts consuming `messenger.inbound` and `messenger.events` at once; `stop()` ends that, and so does
    /// releasing the router (its tasks hold it weakly: they wait on streams of the messenger it holds, and a
    /// strong hold would keep router, messenger and tasks alive for good once their owner let go). Takes the
    /// messenger's inline path for every message that is not an inference answer.
    ///
    /// - Parameters:
    ///   - otherMessages: receives every message that is not an inference answer, in arrival order, on the
    ///     messenger's receiving thread (see `routeInline`).
    ///   - events: receives every connection event after in-flight requests have been told of a disconnect.
    public init(messenger: any PeerMessenger, otherMessages: (@Sendable (InboundMessage) -> Void)? = nil,
                events: (@Sendable (MessengerEvent) -> Void)? = nil) {
        self.messenger = messenger
        self.state.withLock {
            $0.otherMessages = otherMessages
            $0.events = events
        }
        let inbound = messenger.inbound
        let connection = messenger.events
        let inboundTask = Task { [weak self] in
            for await message in inbound { self?.route(message) }
        }
        let eventsTask = Task { [weak self] in
            for await event in connection { self?.handle(event) }
        }
        self.state.withLock { $0.tasks = [inboundTask, eventsTask] }
        messenger.setInlineHandler { [weak self] inbound in self?.routeInline(inbound) ?? false }
    }

    deinit { self.stop() }

    /// Sets the handler for messages that are not inference answers (replacing any earlier one).
    public func setOtherMessagesHandler(_ handler: @escaping @Sendable (InboundMessage) -> Void) {
        self.state.withLock { $0.otherMessages = handler }
    }

    /// Sets the handler for connection events (replacing any earlier one).
    public func setEventsHandler(_ handler: @escaping @Sendable (MessengerEvent) -> Void) {
        self.state.withLock { $0.events = handler }
    }

    /// Sets an observer called for every inbound message before it is routed (replacing any earlier one).
    public func setFrameObserver(_ observer: @escaping @Sendable (InboundMessage) -> Void) {
        self.state.withLock { $0.frameObserver = observer }
    }

    /// Installs a frame observer that refreshes `store`'s `lastHeardMs` for every contact-channel frame: any
    /// inbound frame from a joined host proves it alive (design.md §R5). Unknown senders are ignored by the store.
    public func refreshingHostAlive(in store: any JoinedHomebaseStore, clock: WallClock) {
        self.setFrameObserver { message in
            guard message.channel == .contact else { return }
            // A failed write only delays freshness; the next frame tries again.
            try? store.noteHostAlive(message.sender, atMs: clock.nowMs)
        }
    }

    /// Inference answer frames dropped so far: unknown id, wrong sender or wrong channel.
    public var droppedFrames: Int { self.state.withLock { $0.droppedFrames } }

    /// Stops consuming the messenger's streams. In-flight requests are told the relay is lost.
    public func stop() {
        let (tasks, sinks) = self.state.withLock { s in
            defer {
                s.tasks = []
                s.registrations = [:]
            }
            return (s.tasks, s.registrations.values.map(\.sink))
        }
        for task in tasks { task.cancel() }
        for sink in sinks { sink.yield(.relayLost) }
    }

    // MARK: In-flight requests

    /// Routes answers for `id` from `host` on `channel` to `sink` until `unregister(id:)`.
    func register(id: String, host: PublicKey, channel: Channel, sink: AsyncStream<RelayInferenceEvent>.Continuation) {
        self.state.withLock { $0.registrations[id] = Registration(host: host, channel: channel, sink: sink) }
    }

    func unregister(id: String) {
        self.state.withLock { _ = $0.registrations.removeValue(forKey: id) }
    }

    // MARK: Routing

    /// A message that is not an inference answer is observed and handed to the node here, on the messenger's
    /// receiving thread, before the relay hears its ACK; an answer returns false and goes through `inbound`.
    ///
    /// The messenger records a message's id as seen before passing it on, so one left queued for the consumer
    /// task when a command ends (found by tools/soak: a grant arriving as `guest status` exits) was lost for
    /// good, its redelivery dropped as a replay. Handled here, it is done when the relay link's thread is, and
    /// stopping the link waits for that. The node's handlers are short and synchronous (store writes).
    func routeInline(_ inbound: InboundMessage) -> Bool {
        guard Self.answerID(inbound.message) == nil else { return false }
        let (observer, handler) = self.state.withLock { ($0.frameObserver, $0.otherMessages) }
        observer?(inbound)
        handler?(inbound)
        return true
    }

    func route(_ inbound: InboundMessage) {
        let observer = self.state.withLock { $0.frameObserver }
        observer?(inbound)
        guard let id = Self.answerID(inbound.message) else {
            let handler = self.state.withLock { $0.otherMessages }
            handler?(inbound)
            return
        }
        let sink = self.state.withLock { s -> AsyncStream<RelayInferenceEvent>.Continuation? in
            guard let registration = s.registrations[id], registration.host == inbound.sender,
                registration.channel == inbound.channel
            else {
                s.droppedFrames += 1
                return nil
            }
            return registration.sink
        }
        sink?.yield(.frame(inbound.message))
    }

    func handle(_ event: MessengerEvent) {
        let (sinks, handler) = self.state.withLock { s in
            (s.registrations.values.map(\.sink), s.events)
        }
        if case .disconnected = event {
            for sink in sinks { sink.yield(.relayLost) }
        }
        handler?(event)
    }

    /// The request id of an inference answer, or `nil` for any other message.
    static func answerID(_ message: Message) -> String? {
        switch message {
        case .inferAccept(let m): m.id
        case .inferQueued(let m): m.id
        case .inferChunk(let m): m.id
        case .inferDone(let m): m.id
        case .inferError(let m): m.id
        default: nil
        }
    }
}
