import HomebaseCore
import HomebaseTransport
import Synchronization

/// An in-memory stand-in for the relay and the envelope layer, for tests of node logic without sockets.
///
/// It follows the relay's forwarding table (Protocol/relay.md §4): a message to a connected peer is delivered
/// (receipt 0); to a disconnected peer it is stored when `store` (receipt 1, delivered on reconnect, in order)
/// or refused (receipt 2). It applies the entitlement rule with each recipient's `RelationLookup`, and it can
/// drop or hold messages to simulate faults. Messages are not encrypted: the crypto is tested elsewhere.
///
/// The hub holds its messengers weakly (each messenger holds the hub): a messenger nobody holds any more is gone,
/// and its peer offline, as a device that left the relay.
public final class LoopbackMessengerHub: Sendable {
    private struct Endpoint {
        weak var messenger: LoopbackMessenger?
    }

    private struct State {
        var endpoints: [PublicKey: Endpoint] = [:]
        var mailboxes: [PublicKey: [InboundMessage]] = [:]
        /// Messages whose `type` is in this set are silently dropped (never delivered, receipt 0).
        var blackholedTypes: Set<String> = []
        var sentLog: [(from: PublicKey, to: PublicKey, type: String)] = []
    }

    private let state = Mutex(State())
    let clock: @Sendable () -> UInt64

    public init(clock: @escaping @Sendable () -> UInt64 = { 0 }) {
        self.clock = clock
    }

    /// A messenger for `publicKey`, connected at once. `relation` answers the entitlement rule for its inbound.
    public func messenger(for publicKey: PublicKey, relation: @escaping RelationLookup) -> LoopbackMessenger {
        let m = LoopbackMessenger(publicKey: publicKey, hub: self, relation: relation)
        self.state.withLock { $0.endpoints[publicKey] = Endpoint(messenger: m) }
        m.setConnected(true, stored: 0)
        return m
    }

    /// Disconnects `publicKey` (it stays registered; `reconnect` brings it back with its stored messages).
    public func disconnect(_ publicKey: PublicKey) {
        let m = self.state.withLock { $0.endpoints[publicKey]?.messenger }
        m?.setConnected(false, stored: 0)
    }

    public func reconnect(_ publicKey: PublicKey) {
        let (m, stored) = self.state.withLock { s -> (LoopbackMessenger?, [InboundMessage]) in
            let stored = s.mailboxes.removeValue(forKey: publicKey) ?? []
            return (s.endpoints[publicKey]?.messenger, stored)
        }
        guard let m else { return }
        m.setConnected(true, stored: stored.count)
        for msg in stored { m.deliver(msg) }
    }

    /// Messages of these types vanish in transit (for watchdog tests).
    public func blackhole(types: Set<String>) {
        self.state.withLock { $0.blackholedTypes = types }
    }

    /// Every message handed to the hub so far, as (from, to, type).
    public var sent: [(from: PublicKey, to: PublicKey, type: String)] { self.state.withLock { $0.sentLog } }

    func route(_ message: Message, from sender: PublicKey, to recipient: PublicKey, channel: Channel, store: Bool)
        -> SendOutcome
    {
        let now = self.clock()
        var id = [UInt8](repeating: 0, count: 16)
        let n = self.state.withLock { s -> Int in
            s.sentLog.append((sender, recipient, message.type))
            return s.sentLog.count
        }
        withUnsafeBytes(of: UInt64(n).bigEndian) { id.replaceSubrange(8..<16, with: $0) }
        let inbound = InboundMessage(sender: sender, channel: channel, message: message, sentAtMs: now, messageID: id)
        enum Route { case live(LoopbackMessenger), stored, offline, vanished }
        let route: Route = self.state.withLock { s in
            if s.blackholedTypes.contains(message.type) { return .vanished }
            if let m = s.endpoints[recipient]?.messenger, m.isConnected { return .live(m) }
            if store {
                s.mailboxes[recipient, default: []].append(inbound)
                return .stored
            }
            return .offline
        }
        switch route {
        case .live(let m):
            m.deliver(inbound)
            return .receipt(.delivered)
        case .stored: return .receipt(.stored)
        case .offline: return .receipt(.recipientOffline)
        case .vanished: return .receipt(.delivered)
        }
    }
}

/// One endpoint of a `LoopbackMessengerHub`.
public final class LoopbackMessenger: PeerMessenger {
    public let publicKey: PublicKey
    public let inbound: InboundMessages
    public let events: AsyncStream<MessengerEvent>
    private let inboundContinuation: AsyncStream<InboundMessage>.Continuation
    private let eventsContinuation: AsyncStream<MessengerEvent>.Continuation
    private let hub: LoopbackMessengerHub
    private let relation: RelationLookup
    private let connected = Atomic<Bool>(false)
    private let inlineHandler = CallbackSlot<InboundMessage, Bool>()

    init(publicKey: PublicKey, hub: LoopbackMessengerHub, relation: @escaping RelationLookup) {
        self.publicKey = publicKey
        self.hub = hub
        self.relation = relation
        let (stream, continuation) = AsyncStream<InboundMessage>.makeStream()
        (self.inbound, self.inboundContinuation) = (InboundMessages(stream), continuation)
        (self.events, self.eventsContinuation) = AsyncStream.makeStream()
    }

    /// A messenger nobody holds any more ends its streams, as `RelayMessenger.stop()` does: a task still reading
    /// them finishes instead of waiting for good.
    deinit {
        self.inboundContinuation.finish()
        self.eventsContinuation.finish()
    }

    public var isConnected: Bool { self.connected.load(ordering: .acquiring) }

    func setConnected(_ value: Bool, stored: Int) {
        self.connected.store(value, ordering: .releasing)
        self.eventsContinuation.yield(value ? .connected(stored: stored) : .disconnected(closeCode: nil))
    }

    public func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                     onReceipt: (@Sendable (SendOutcome) -> Void)?) {
        let outcome = self.isConnected
            ? self.hub.route(message, from: self.publicKey, to: peer, channel: channel, store: store)
            : .notConnected
        onReceipt?(outcome)
    }

    func deliver(_ message: InboundMessage) {
        let receiver = EnvelopeReceiver(selfKey: self.publicKey)
        guard (try? receiver.checkEntitlement(channel: message.channel, messageType: message.message.type,
                                               relation: self.relation(message.sender))) != nil else { return }
        // On the sender's thread, as the relay link's thread would: the handler runs inside the sender's `send`.
        if let inline = self.inlineHandler.current, inline(message) { return }
        self.inboundContinuation.yield(message)
    }

    public func setInlineHandler(_ handler: (@Sendable (InboundMessage) -> Bool)?) {
        self.inlineHandler.set(handler)
    }

    /// Whether a handler takes messages where they arrive: a message delivered before one is set waits on
    /// `inbound`, behind any delivered inline after, so a test that cares about order waits for this first.
    public var hasInlineHandler: Bool { self.inlineHandler.current != nil }
}
