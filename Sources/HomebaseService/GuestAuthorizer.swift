import Dispatch
import HomebaseCore
import Synchronization

/// Who may run a model on this Homebase, on both channels: siblings on sync_delta (any model), guests on
/// contact by their grant (Protocol/messages.md §5), with per-guest limits, usage accounting and the
/// conversation cache.
///
/// For a contact request, checked against the registry row as stored at that moment:
/// - not in the registry: no answer at all (`ignore`);
/// - pending, revoked, no grant, grant expired, or model outside the grant: `not_granted`;
/// - granted: per-guest limits (`prepare`), each over-limit answer is `busy` with a message naming the limit —
///   requests at once (streaming or queued), requests in the last 60 s, tokens today (UTC; the guest's client
///   falls back on-device, and the allowance returns at midnight UTC);
/// - then the conversation cache: a follow-up whose prefix is not held gets `cache_miss`.
/// Usage (requests, prompt and completion tokens from the runtime's `usage`) is added per guest and day once
/// `infer.done` was sent (written in the background, in order, moments later: `usageWritten()`); an answer the
/// guest cut short (cancel, gone) counts the pieces streamed until then as completion tokens, so cancelling just
/// before the end does not read answers free; failed requests and requests stopped by the host cost nothing.
public final class GuestAuthorizer: InferenceAuthorizer {
    private struct Activity {
        /// Admitted requests not yet ended.
        var active = 0
        /// When requests passed the limits, within the last minute.
        var recent: [UInt64] = []
    }

    private static let minuteMs: UInt64 = 60_000

    public let registry: GuestRegistry
    public let cache: ConversationCache
    private let siblings: SiblingInferenceAuthorizer
    private let clock: ServiceClock
    private let logger: Logger
    private let activity = Mutex<[PublicKey: Activity]>([:])
    /// Usage rows are written here, in order, off the caller's thread: `ended` runs under the inference server's
    /// lock on an I/O thread, where a commit would hold up every stream. (Tests suspend it to hold writes back.)
    let usageWriter = DispatchQueue(label: "homebase.guest-usage")
    /// Guests whose `contact.leave` is being handled: their requests get no answer from now on, though their row
    /// is removed only once their streams are stopped and their usage written (`ContactService`).
    private let leaving = Mutex<Set<PublicKey>>([])

    public init(directory: PeerDirectory, registry: GuestRegistry, cache: ConversationCache = ConversationCache(),
                clock: ServiceClock = .system, logger: Logger = .discard()) {
        self.siblings = SiblingInferenceAuthorizer(directory: directory)
        self.registry = registry
        self.cache = cache
        self.clock = clock
        self.logger = logger
    }

    public func authorize(sender: PublicKey, channel: Channel, model: String) -> InferenceAuthorization {
        guard channel == .contact else { return self.siblings.authorize(sender: sender, channel: channel, model: model) }
        if self.leaving.withLock({ $0.contains(sender) }) { return .ignore }
        let record: GuestRecord?
        do {
            // The row as stored now: an owner's revoke from the CLI counts before the daemon's next reload.
            record = try self.registry.currentRecord(for: sender)
        } catch {
            self.logger.error("cannot read the guest registry", metadata: ["error": "\(error)"])
            record = self.registry.record(for: sender)
        }
        guard let record else { return .ignore }
        let nowMs = self.clock.nowMs()
        guard record.isServable(nowMs: nowMs), let grant = record.grant, grant.models.allows(model) else {
            self.logger.info("guest request not granted",
                             metadata: ["guest": sender.short, "state": record.state.rawValue])
            return .deny(.notGranted)
        }
        return .allow
    }

    public func prepare(_ request: InferRequest, from sender: PublicKey, channel: Channel) -> InferencePreparation {
        guard channel == .contact else { return .serve(request.messages, keepAnswer: false) }
        let nowMs = self.clock.nowMs()
        let limits = (self.registry.record(for: sender)?.limits) ?? .defaults
        let usedToday = (try? self.registry.usageToday(guest: sender, nowMs: nowMs).totalTokens) ?? 0
        let refusal = self.activity.withLock { all -> String? in
            var a = all[sender] ?? Activity()
            a.recent.removeAll { $0 &+ Self.minuteMs <= nowMs }
            defer { all[sender] = a }
            if a.active >= limits.maxConcurrent { return "more than \(limits.maxConcurrent) requests at once" }
            if a.recent.count >= limits.requestsPerMinute {
                return "more than \(limits.requestsPerMinute) requests a minute"
            }
            if usedToday >= limits.tokensPerDay {
                return "today's allowance of \(limits.tokensPerDay) tokens is used up (until 00:00 UTC)"
            }
            a.recent.append(nowMs)
            return nil
        }
        if let refusal {
            self.logger.info("guest over its limits", metadata: ["guest": sender.short, "limit": refusal])
            return .refuse(.busy, refusal)
        }
        switch self.cache.resolve(guest: sender, conversation: request.conversation, messages: request.messages,
                                  nowMs: nowMs) {
        case .miss:
            self.logger.debug("conversation cache miss", metadata: ["guest": sender.short])
            return .refuse(.cacheMiss, "the conversation is not cached; send it whole")
        case .serve(let messages):
            let keep = request.conversation.map { $0.id.utf8.count <= self.cache.limits.maxIDBytes } ?? false
            return .serve(messages, keepAnswer: keep)
        }
    }

    public func admitted(_ request: InferRequest, from sender: PublicKey, channel: Channel) {
        guard channel == .contact else { return }
        self.activity.withLock { $0[sender, default: Activity()].active += 1 }
    }

    public func ended(_ request: InferRequest, from sender: PublicKey, channel: Channel, outcome: InferenceOutcome) {
        guard channel == .contact else { return }
        self.activity.withLock { all in
            guard var a = all[sender] else { return }
            a.active = max(0, a.active - 1)
            // Forget idle guests, so the map holds only guests with recent traffic.
            all[sender] = a.active == 0 && a.recent.isEmpty ? nil : a
        }
        let answer: String?
        let usage: Usage
        switch outcome {
        case .done(let a, let u): (answer, usage) = (a, u)
        case .cut(let u): (answer, usage) = (nil, u)  // cut short: charged for what was streamed, not cached
        case .failed, .cancelled: return
        }
        let nowMs = self.clock.nowMs()
        let (registry, logger) = (self.registry, self.logger)
        self.usageWriter.async {
            do {
                try registry.recordUsage(guest: sender, usage: usage, nowMs: nowMs)
            } catch {
                logger.error("cannot record guest usage", metadata: ["guest": sender.short, "error": "\(error)"])
            }
        }
        if let id = request.conversation?.id, let answer {
            self.cache.store(guest: sender, id: id,
                             messages: request.messages + [ChatMessage(role: "assistant", content: answer)],
                             nowMs: nowMs)
        }
    }

    /// Returns once the usage of every answer ended so far is written: a guest's removal, which deletes its rows,
    /// waits for this, so no row is written back after it.
    public func usageWritten() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            self.usageWriter.async { done.resume() }
        }
    }

    /// From now on `guest`'s requests get no answer, until `forget(guest:)`: it is leaving (`contact.leave`).
    public func startLeaving(guest: PublicKey) {
        self.leaving.withLock { _ = $0.insert(guest) }
    }

    /// Forgets `guest`'s rate window, conversations and leaving mark (revoked or left). Its active count drops as its
    /// requests end.
    public func forget(guest: PublicKey) {
        self.cache.removeAll(guest: guest)
        self.leaving.withLock { _ = $0.remove(guest) }
        self.activity.withLock { all in
            guard var a = all[guest] else { return }
            a.recent = []
            all[guest] = a.active == 0 ? nil : a
        }
    }
}
