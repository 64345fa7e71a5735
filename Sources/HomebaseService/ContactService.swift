import HomebaseCore
import HomebaseNode
import Synchronization

/// The host side of the contact channel (Protocol/messages.md §5), except `infer.*` (the inference server
/// with `GuestAuthorizer`): inbound `contact.join`, `contact.leave` and `advert.request` from guests, and the
/// delivery of the owner's grants and revocations queued in the registry's outbox.
///
/// - `contact.join` from a stranger: a pending guest (the registry caps pending guests; joins from strangers,
///   pending and revoked guests share a global rate limit, beyond which they are dropped unanswered).
///   From a granted guest (an accepted invitation, or a reinstalled guest): the grant and an advert again.
///   From a revoked guest: `contact.revoke` again (live), so a reinstalled guest learns where it stands.
/// - `contact.leave`: the guest is forgotten (row, usage, conversations) and its requests stopped.
/// - `advert.request` from a granted guest with an unexpired grant: an advert at once (live); else nothing.
/// - Outbox: `grant` → `contact.grant` then an advert, both stored; `revoke` → the guest's requests are stopped
///   (each gets `infer.error not_granted`), its conversations dropped, then `contact.revoke {reason}` stored.
///   A row is deleted once the relay took its messages; one that could not be sent is retried on the next
///   `deliverPending`.
public final class ContactService: Sendable {
    public struct Limits: Sendable, Equatable {
        /// `contact.join` per minute from keys that are not granted guests, all together.
        public var joinsPerMinute: Int

        public init(joinsPerMinute: Int = 30) {
            precondition(joinsPerMinute >= 1, "joinsPerMinute must be positive")
            self.joinsPerMinute = joinsPerMinute
        }
    }

    public let registry: GuestRegistry
    public let authorizer: GuestAuthorizer
    private let messenger: any PeerMessenger
    private let adverts: AdvertPublisher
    private let inference: InferenceServer
    private let clock: ServiceClock
    private let logger: Logger
    private let joinBucket: Mutex<TokenBucket>
    /// Outbox rows being sent now, so overlapping deliveries do not send one twice.
    private let inFlight = Mutex<Set<Int64>>([])

    public init(registry: GuestRegistry, authorizer: GuestAuthorizer, messenger: any PeerMessenger,
                adverts: AdvertPublisher, inference: InferenceServer, limits: Limits = Limits(),
                clock: ServiceClock = .system, logger: Logger = .discard()) {
        self.registry = registry
        self.authorizer = authorizer
        self.messenger = messenger
        self.adverts = adverts
        self.inference = inference
        self.clock = clock
        self.logger = logger
        let perMinute = Double(limits.joinsPerMinute)
        self.joinBucket = Mutex(TokenBucket(ratePerSecond: perMinute / 60, capacity: perMinute,
                                                  nowMs: clock.monotonicMs()))
    }

    // MARK: Owner's operations, in the daemon's process

    /// `GuestRegistry.grant`, then sends at once.
    @discardableResult
    public func grant(guest: PublicKey, models: GrantPayload.GrantedModels, expiresAt: UInt64?) async throws
        -> GuestGrant
    {
        let (grant, _) = try self.registry.grant(guest: guest, models: models, expiresAt: expiresAt,
                                                 nowMs: self.clock.nowMs())
        await self.deliverPending()
        return grant
    }

    /// `GuestRegistry.revoke`, then stops the guest's requests and sends `contact.revoke` at once (if a delivery
    /// running concurrently holds the outbox row, that one sends it).
    public func revoke(guest: PublicKey, reason: String = "revoked by the host") async throws {
        try self.registry.revoke(guest: guest, nowMs: self.clock.nowMs(), reason: reason)
        // Stop its streams now, even if a delivery already in progress holds the outbox row.
        self.inference.cancelAll(from: guest, error: .notGranted)
        self.authorizer.forget(guest: guest)
        await self.deliverPending()
    }

    // MARK: Inbound

    /// One inbound contact-channel message other than `infer.*`. Returns whether its effect is committed or its
    /// refusal final (`PeerMessenger.settle`); false when the registry could not be written, so the message comes
    /// again. Either message may come again after a crash before it was settled: a join of a known guest and
    /// the leave of a guest already gone change nothing.
    @discardableResult
    public func handle(_ inbound: InboundMessage) async -> Bool {
        let sender = inbound.sender
        switch inbound.message {
        case .contactJoin(let name):
            return await self.join(from: sender, name: name)
        case .contactLeave:
            // Streams first: one that has just finished still records its usage (written in the background: it
            // is waited for), which the removal then deletes with the guest, instead of leaving a row for a guest
            // who is gone.
            guard self.registry.record(for: sender) != nil else { return true }
            // No request of its is admitted from here on (they arrive on the relay link's thread meanwhile); the
            // mark goes with the rest of its state (`forget`) however this ends.
            self.authorizer.startLeaving(guest: sender)
            defer { self.authorizer.forget(guest: sender) }
            self.inference.cancelAll(from: sender)
            await self.authorizer.usageWritten()
            do {
                guard try self.registry.remove(guest: sender) else { return true }
            } catch {
                self.logger.error("cannot remove a guest", metadata: ["guest": sender.short, "error": "\(error)"])
                return false
            }
            self.logger.info("guest left", metadata: ["guest": sender.short])
        case .advertRequest:
            guard self.registry.record(for: sender)?.isServable(nowMs: self.clock.nowMs()) == true else { return true }
            self.adverts.answerRequest(from: sender, channel: .contact)
        default:
            // contact.grant / contact.revoke are host → guest; anything else has no meaning here.
            break
        }
        return true
    }

    /// `handle`'s `contact.join`: false only when the join could not be recorded.
    private func join(from sender: PublicKey, name: String) async -> Bool {
        let known = self.registry.record(for: sender)
        if known?.state != .granted {
            // A rate: the monotonic clock, so a wall clock set back does not shut joins out for as long.
            let nowMs = self.clock.monotonicMs()
            guard self.joinBucket.withLock({ $0.take(1, nowMs: nowMs) }) else {
                // A refusal, final, as before: dropped unanswered (a flood is not kept to be handled later).
                self.logger.debug("contact.join rate-limited", metadata: ["peer": sender.short])
                return true
            }
        }
        let outcome: GuestRegistry.JoinOutcome
        do {
            outcome = try self.registry.recordJoin(guest: sender, name: name, nowMs: self.clock.nowMs())
        } catch {
            self.logger.error("cannot record a join", metadata: ["peer": sender.short, "error": "\(error)"])
            return false
        }
        switch outcome {
        case .pending(let isNew, let evicted):
            if isNew {
                self.logger.info("guest asks to join", metadata: ["guest": sender.short])
            }
            if let evicted { self.logger.info("oldest pending guest dropped", metadata: ["guest": evicted.short]) }
        case .granted(let record):
            guard let grant = record.grant else { return true }
            self.messenger.send(.contactGrant(grant.blob), to: sender, channel: .contact, store: true)
            self.adverts.sendToGuest(sender)
            self.logger.info("granted guest joined; grant sent again", metadata: ["guest": sender.short])
        case .revoked:
            self.messenger.send(.contactRevoke(reason: "revoked by the host"), to: sender, channel: .contact,
                                store: false)
        }
        return true
    }

    // MARK: Outbox

    /// Sends the owner's queued grants and revocations (made by the CLI or in this process). Cheap when the
    /// outbox is empty; the daemon calls it on start and on every state poll.
    public func deliverPending() async {
        let items: [GuestRegistry.OutboxItem]
        do {
            items = try self.registry.pendingOutbox()
        } catch {
            self.logger.error("cannot read the guest outbox", metadata: ["error": "\(error)"])
            return
        }
        for item in items {
            guard self.inFlight.withLock({ $0.insert(item.id).inserted }) else { continue }
            // A delivery that overlapped ours may have sent and deleted this row after we listed it.
            guard (try? self.registry.outboxContains(id: item.id)) == true else {
                self.inFlight.withLock { _ = $0.remove(item.id) }
                continue
            }
            switch item.kind {
            case .grant:
                // The grant in force now (a later revoke would have replaced this row).
                guard let record = try? self.registry.currentRecord(for: item.guest), record.state == .granted,
                    let grant = record.grant
                else {
                    self.complete(item)
                    continue
                }
                let outcome = await self.messenger.sendAndWait(.contactGrant(grant.blob), to: item.guest,
                                                               channel: .contact, store: true)
                if outcome.isFailure {
                    self.retryLater(item)
                    continue
                }
                self.adverts.sendToGuest(item.guest)
                self.logger.info("grant sent", metadata: ["guest": item.guest.short])
            case .revoke:
                // Stop its streams before anything else: the revocation is in force now.
                let stopped = self.inference.cancelAll(from: item.guest, error: .notGranted)
                self.authorizer.forget(guest: item.guest)
                let outcome = await self.messenger.sendAndWait(.contactRevoke(reason: item.reason), to: item.guest,
                                                               channel: .contact, store: true)
                if outcome.isFailure {
                    self.retryLater(item)
                    continue
                }
                self.logger.info("guest revoked", metadata: ["guest": item.guest.short, "stopped": "\(stopped)"])
            }
            self.complete(item)
        }
    }

    private func complete(_ item: GuestRegistry.OutboxItem) {
        do {
            try self.registry.completeOutbox(id: item.id)
        } catch {
            self.logger.error("cannot update the guest outbox", metadata: ["error": "\(error)"])
        }
        self.inFlight.withLock { _ = $0.remove(item.id) }
    }

    private func retryLater(_ item: GuestRegistry.OutboxItem) {
        self.logger.info("guest message not sent; will retry", metadata: ["guest": item.guest.short])
        self.inFlight.withLock { _ = $0.remove(item.id) }
    }
}
