import HomebaseCore

/// What became of one message handed to the relay.
public enum SendOutcome: Equatable, Sendable {
    /// The relay's RECEIPT.
    case receipt(ReceiptStatus)
    /// There was no relay connection to send on (treat like RECEIPT 2: the peer cannot be reached now).
    case notConnected

    /// True when the message did not and will not reach its recipient.
    public var isFailure: Bool {
        switch self {
        case .receipt(let s): s.isFailure
        case .notConnected: true
        }
    }
}

/// One message received from a peer, after every receiver rule of Protocol/envelope.md §5 passed.
public struct InboundMessage: Sendable, Equatable {
    public var sender: PublicKey
    public var channel: Channel
    public var message: Message
    public var sentAtMs: UInt64
    public var messageID: [UInt8]

    public init(sender: PublicKey, channel: Channel, message: Message, sentAtMs: UInt64, messageID: [UInt8]) {
        self.sender = sender
        self.channel = channel
        self.message = message
        self.sentAtMs = sentAtMs
        self.messageID = messageID
    }
}

/// Connection state changes of the messenger's relay link.
public enum MessengerEvent: Sendable, Equatable {
    /// Logged in to the relay; `stored` frames are about to be delivered.
    case connected(stored: Int)
    /// The relay connection ended (a reconnect follows unless the messenger was stopped).
    case disconnected(closeCode: UInt16?)
}

/// The seam between node logic (Homebase, handset, guest, conformance) and the relay: sealed messages to and
/// from peers by public key. The real implementation is `RelayMessenger`; tests use `LoopbackMessengerHub`.
///
/// Ordering: messages to one peer leave in the order `send` is called. Receipts are reported through the
/// callback, on an arbitrary thread.
public protocol PeerMessenger: AnyObject, Sendable {
    /// This device's public key.
    var publicKey: PublicKey { get }

    /// Seals `message` to `peer` on `channel` and hands it to the relay (with STORE when `store`).
    /// `onReceipt`, if given, is called once with the outcome.
    func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
              onReceipt: (@Sendable (SendOutcome) -> Void)?)

    /// Messages from peers that passed every receiver rule, in arrival order. One consumer.
    var inbound: InboundMessages { get }

    /// Connection events. One consumer.
    var events: AsyncStream<MessengerEvent> { get }

    /// True while logged in to the relay.
    var isConnected: Bool { get }

    /// True while sends wait for the relay's rate (`RelayLink.isPacing`): a sender that can merge what it sends
    /// holds it back rather than queue more frames.
    var isSendPaced: Bool { get }

    /// Gives accepted messages to `handler` first, on the thread that received them, in arrival order: one it
    /// returns true for is taken (it does not go to `inbound`). For a consumer whose work per message is short
    /// and synchronous (the inference server): a batch of requests is then handled where it arrived, and the
    /// replies sent meanwhile leave together. The handler must not wait for anything the receiving thread does.
    /// Nil gives every message to `inbound` again.
    func setInlineHandler(_ handler: (@Sendable (InboundMessage) -> Bool)?)

    /// The envelope versions this device speaks, for the `envelopes` field of what it signs (adverts, rosters,
    /// grants; Protocol/envelope.md §7.8).
    var envelopeVersions: [Int] { get }

    /// Records the envelope versions `peer` advertised in a payload the node verified (a roster entry).
    /// Adverts and grants are read by the messenger itself.
    func recordEnvelopeVersions(_ versions: [Int]?, of peer: PublicKey)

    /// The envelope version inference messages to and from `peer` use now (§7.8: the highest common one).
    func envelopeVersion(for peer: PublicKey) -> UInt8

    /// The handler of `message` (from `inbound`) is done with it. `durable`: its effect is committed, or its
    /// refusal final; false: it failed (a store error) and should come again. A messenger that acknowledges
    /// some stored frames only once settled (`RelayMessenger`'s `settledTypes`, `InboundLedger`) acknowledges
    /// them now; for any other message this does nothing.
    func settle(_ message: InboundMessage, durable: Bool)

    /// How long the relay took to answer the last SEND it receipted (ms, from the frame's hand-over to the link
    /// to its RECEIPT): the relay's round trip as the status page shows it. Nil before any.
    var relayRoundTripMs: UInt64? { get }
}

extension PeerMessenger {
    /// A messenger without a relay has no round trip to it.
    public var relayRoundTripMs: UInt64? { nil }

    /// A messenger without a rate to keep is never paced.
    public var isSendPaced: Bool { false }

    /// A messenger without sessions speaks v1 only.
    public var envelopeVersions: [Int] { [1] }

    public func recordEnvelopeVersions(_ versions: [Int]?, of peer: PublicKey) {}

    public func envelopeVersion(for peer: PublicKey) -> UInt8 { 1 }

    /// A messenger that acknowledges every frame as it hands it on has nothing to settle.
    public func settle(_ message: InboundMessage, durable: Bool) {}

    /// A messenger without an inline path gives every message to `inbound`.
    public func setInlineHandler(_ handler: (@Sendable (InboundMessage) -> Bool)?) {}

    /// Sends and waits for the relay's receipt.
    public func sendAndWait(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool) async
        -> SendOutcome
    {
        await withCheckedContinuation { continuation in
            self.send(message, to: peer, channel: channel, store: store) { outcome in
                continuation.resume(returning: outcome)
            }
        }
    }

    /// Sends without caring about the receipt.
    public func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool) {
        self.send(message, to: peer, channel: channel, store: store, onReceipt: nil)
    }
}

/// Who a sender is to this device, for the channel entitlement rule. Provided by the node (its roster and
/// contact list), read on every inbound envelope.
public typealias RelationLookup = @Sendable (PublicKey) -> SenderRelation
