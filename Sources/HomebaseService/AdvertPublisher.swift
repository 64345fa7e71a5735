import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Synchronization

/// Builds, signs and sends the Homebase's advert (Protocol/messages.md §3).
///
/// Sibling rules: on start and on every change of what is advertised (stored sends, so a sibling that is
/// offline gets it on reconnect), as a heartbeat (live: a missed beat is replaced by the next), and at once in
/// answer to `advert.request` (live). Guests (`guests`: granted, unexpired) get adverts on events only —
/// start, change, their grant, their `advert.request` — never a heartbeat (design.md §R5: cross-account adverts
/// are event-driven, judged against a 24-hour window).
///
/// Every advert has a fresh `seq`, persisted before use, so `seq` strictly increases across restarts, and
/// `issued_at` = now, which is what receivers judge freshness by.
public final class AdvertPublisher: Sendable {
    /// Why an advert is sent.
    public enum Trigger: Sendable, Equatable {
        case start
        case change
        case heartbeat
        case request(from: PublicKey, channel: Channel)
        /// A guest was just granted (or re-joined while granted): a stored advert to it alone, on contact.
        case granted(PublicKey)
    }

    /// What the advert says, to tell a real change from a status update that changes nothing advertised.
    private struct Content: Equatable {
        var version: String
        var models: [AdvertPayload.Model]
    }

    private let identity: SigningSecretKey
    private let state: HomebaseState
    private let runtime: any RuntimeStatusSource
    private let messenger: any PeerMessenger
    private let siblings: @Sendable () -> [PublicKey]
    private let guests: @Sendable () -> [PublicKey]
    private let clock: ServiceClock
    private let logger: Logger
    /// The content of the last advert sent on start or change; also serialises building and sending, so a
    /// larger `seq` never carries older content than a smaller one.
    private let lastContent = Mutex<Content?>(nil)

    /// - Parameters:
    ///   - siblings: the roster's other devices, read at every send.
    ///   - guests: granted, unexpired guests, read at every start or change, for event-driven adverts on the
    ///     contact channel.
    public init(identity: SigningSecretKey, state: HomebaseState, runtime: any RuntimeStatusSource,
                messenger: any PeerMessenger, siblings: @escaping @Sendable () -> [PublicKey],
                guests: @escaping @Sendable () -> [PublicKey] = { [] }, clock: ServiceClock = .system,
                logger: Logger = .discard()) {
        self.identity = identity
        self.state = state
        self.runtime = runtime
        self.messenger = messenger
        self.siblings = siblings
        self.guests = guests
        self.clock = clock
        self.logger = logger
    }

    /// The payload for `status`: its advertised models (none unless verified and available).
    public static func payload(host: PublicKey, status: RuntimeStatus, seq: UInt64, nowMs: UInt64,
                               envelopes: [Int] = [1]) -> AdvertPayload {
        let models = status.advertisedModels.map { m in
            var model = m.advertised
            model.contextSource = m.contextLength == nil ? nil : (m.contextServed ? "served" : "default")
            return model
        }
        return AdvertPayload(host: host, seq: seq, issuedAt: nowMs,
                             runtime: AdvertPayload.Runtime(kind: status.kind.rawValue, version: status.version ?? ""),
                             models: models,
                             envelopes: EnvelopeVersions.field(envelopes))
    }

    /// Signs `payload` with context `homebase-advert-v1`.
    public func sign(_ payload: AdvertPayload) -> SignedBlob {
        let bytes = SignedPayloadJSON.encode(payload)
        return SignedBlob(payload: bytes, signature: self.identity.sign(bytes, context: SignatureContext.advert))
    }

    /// Sends the advert for the current status to every sibling (and guest): the daemon calls it once at start.
    public func publishOnStart() {
        self.publish(.start, status: self.runtime.current)
    }

    /// A runtime status change: sends only if what the advert says changed (models, loaded flags, version,
    /// availability — an unavailable runtime advertises no models).
    public func runtimeChanged(_ status: RuntimeStatus) {
        self.publish(.change, status: status)
    }

    /// The periodic beat to siblings.
    public func heartbeat() {
        self.publish(.heartbeat, status: self.runtime.current)
    }

    /// Answers `advert.request` from `peer` at once. The caller has checked the peer may ask.
    public func answerRequest(from peer: PublicKey, channel: Channel) {
        self.publish(.request(from: peer, channel: channel), status: self.runtime.current)
    }

    /// Sends `guest` a stored advert on the contact channel, after its `contact.grant`.
    public func sendToGuest(_ guest: PublicKey) {
        self.publish(.granted(guest), status: self.runtime.current)
    }

    /// Builds one advert and sends it as `trigger` says. Returns the payload sent, or nil if nothing was sent.
    @discardableResult
    public func publish(_ trigger: Trigger, status: RuntimeStatus) -> AdvertPayload? {
        self.lastContent.withLock { last -> AdvertPayload? in
            let content = Content(
                version: status.version ?? "",
                models: Self.payload(host: self.identity.publicKey, status: status, seq: 0, nowMs: 0).models)
            if trigger == .change, content == last { return nil }

            struct Recipient {
                var peer: PublicKey
                var channel: Channel
                var store: Bool
            }
            var recipients: [Recipient] = []
            switch trigger {
            case .start, .change:
                recipients = self.siblings().map { Recipient(peer: $0, channel: .sibling, store: true) }
                recipients += self.guests().map { Recipient(peer: $0, channel: .contact, store: true) }
            case .heartbeat:
                recipients = self.siblings().map { Recipient(peer: $0, channel: .sibling, store: false) }
            case .request(let peer, let channel):
                recipients = [Recipient(peer: peer, channel: channel, store: false)]
            case .granted(let guest):
                recipients = [Recipient(peer: guest, channel: .contact, store: true)]
            }
            recipients.removeAll { $0.peer == self.identity.publicKey }
            if trigger == .start || trigger == .change { last = content }
            // Nobody to tell (a Homebase not yet paired): spend no seq, write nothing.
            guard !recipients.isEmpty else { return nil }

            let seq: UInt64
            do {
                seq = try self.state.nextAdvertSeq()
            } catch {
                self.logger.error("advert seq unavailable", metadata: ["error": "\(error)"])
                return nil
            }
            let payload = Self.payload(host: self.identity.publicKey, status: status, seq: seq,
                                       nowMs: self.clock.nowMs(), envelopes: self.messenger.envelopeVersions)
            let blob = self.sign(payload)
            for r in recipients {
                self.messenger.send(.advert(blob), to: r.peer, channel: r.channel, store: r.store)
            }
            self.logger.debug("advert sent", metadata: [
                "seq": "\(seq)", "models": "\(payload.models.count)", "recipients": "\(recipients.count)",
            ])
            return payload
        }
    }
}
