import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport

/// What `conformance homebase` is told about the host under test.
public struct HomebaseCheckOptions: Sendable {
    /// The host's device key (what `homebase status` prints).
    public var host: PublicKey
    /// The relay the host is on; `token`, `caFile`, `insecureSkipVerify` as for `conformance relay`.
    public var relayURL: String
    public var token: String?
    public var caFile: String?
    public var insecureSkipVerify = false
    /// Where the guest key is kept (`guest.key`: the 32-byte seed in hex, mode 0600); nil: a fresh key per run.
    public var stateDirectory: String?
    /// How long to wait for `contact.grant` after `contact.join`.
    public var waitGrant: Duration = .seconds(120)
    /// The model for the inference checks; nil: the first completion-capable model of the advert in the grant.
    public var model: String?
    /// Revokes the guest (`--revoke-cmd` runs a shell command); nil skips the revoke checks.
    public var revoke: (@Sendable () async throws -> Void)?
    /// `--revoke-cmd CMD`: run with /bin/sh -c, `{guest}` replaced by the guest key (issue 39: the key need not
    /// be known in advance). Used when `revoke` is nil.
    public var revokeCommand: String?
    /// The `contact.join` display name.
    public var guestName = "conformance"
    /// Where the operator's instructions go (the command line: stderr).
    public var notice: @Sendable (String) -> Void = { _ in }
    /// Called once the join is sent, with the guest key (tests grant from here).
    public var onWaitingForGrant: (@Sendable (PublicKey) async -> Void)?
    /// Whether the guest speaks protocol v2 (`--v1-only` clears it): a v2 guest uses a session for inference
    /// when the host advertises v2; a v1-only guest checks that the host still serves v1 peers.
    public var speaksV2 = true
    /// Set: run the hostile suite (`HostileHomebaseChecks`) instead of the protocol checks.
    public var hostile: HostileOptions?

    public init(host: PublicKey, relayURL: String) {
        self.host = host
        self.relayURL = relayURL
    }

    var relayOptions: RelayCheckOptions {
        var o = RelayCheckOptions(url: self.relayURL)
        o.token = self.token
        o.caFile = self.caFile
        o.insecureSkipVerify = self.insecureSkipVerify
        return o
    }
}

/// `conformance homebase PUBKEY --relay URL`: acts as a guest against any Homebase, using only the protocol, and
/// checks the host's side of Protocol/messages.md §2, §3 and §5. The checks run in this order and build on each
/// other (no grant: everything after is skipped):
///
/// - `grant-signature`: `contact.grant` arrives (after `contact.join`) and its `sig` verifies over the exact
///   payload bytes with context `homebase-grant-v1` by the host key.
/// - `grant-payload`: `v` 1, `host` the host, `guest` us, `issued_at` after 2020 and at most 5 minutes ahead,
///   `expires_at` (if any) in the future, `models` `"*"` or a non-empty list.
/// - `advert-after-grant`: an `advert` follows the grant within 10 s.
/// - `advert-signature`: its `sig` verifies over the exact payload bytes with context `homebase-advert-v1`.
/// - `advert-payload`: `v` 1, `host` the host, `seq` > 0, `issued_at` within 5 minutes of our clock.
/// - `advert-request`: `advert.request` is answered within 5 s by a valid advert with a greater `seq` than any
///   before it.
/// - `session-handshake` (v2 guest, host advertising v2 in its signed grant or advert): a v2 initiation is
///   answered within 5 s by a response that completes the Noise IK handshake (Protocol/envelope.md §7); the
///   inference checks after it then run on that session. Skipped for a v1-only guest or a v1-only host.
/// - `inference-ordering`: `infer.accept` first, `infer.chunk` seq 0…n-1, one `infer.done` with `chunks` n and
///   `finish_reason` stop or length, nothing for that id in the 1 s after.
///   `infer.queued` may come between the accept and the first chunk, each with a `position` ≥ 1 lower than the
///   last; a chunk with `reasoning` has an empty `text`.
/// - `queue-told`: two requests at once for one model (`queuePrompts`, asking for long answers); one that was
///   still waiting 1 s after its accept (its first chunk after the other's end, and that more than 1 s after its
///   accept) was told so by `infer.queued` within 1 s of its accept. A host whose runtime served both at once,
///   or answered so fast that nothing waited a second, makes it skip.
/// - `reasoning-apart` (a granted model with the `thinking` capability): its answer carries reasoning only in
///   chunks' `reasoning` (their `text` empty), at least one such chunk, and ordering holds; skipped without one.
/// - `model-unavailable`: a model no host has ends in `infer.error model_unavailable`; when the grant is a list
///   the tag is also outside it, so `not_granted` is accepted too (the host checks the grant first).
/// - `cache-miss`: an incremental request for an unknown conversation ends in `infer.error cache_miss`.
/// - `incremental-served`: a full request with `conversation.id`, then a follow-up with `base_count` = its
///   messages + the answer and the matching `base_digest`, is served (accept … done).
/// - `cancel-stops-stream`: `infer.cancel` right after the first chunk; frames read within 300 ms of the cancel
///   are in flight and tolerated, any `infer.*` for that id read from 300 ms to 1.5 s after it fails. If the
///   answer ended before the cancel could matter (done before the cancel, or within the grace) it is skipped.
/// - `replay-not-served-twice`: the exact sealed SEND payload of a request is sent again at once and after the
///   done; exactly one `infer.accept` and one terminal message arrive for the id.
/// - `inference-envelopes`: a v2 guest of a v2 host received the inference answers on the session and no v1
///   inference message (a downgrade); a v1-only guest received them in v1 (the host did not send v2 to a peer
///   that never advertised it).
/// - `contact-revoke` (with a revoke command): `contact.revoke` arrives within 5 s of the command finishing.
/// - `not-granted-after-revoke`: the next request ends in `infer.error not_granted` with no accept.
///
/// A request answered `busy` before any accept is retried (new id) up to 3 times, 1 s apart.
public enum HomebaseChecks {
    /// Names of every check, in order.
    public static let names = [
        "grant-signature", "grant-payload", "advert-after-grant", "advert-signature", "advert-payload",
        "advert-request", "session-handshake", "inference-ordering", "queue-told", "reasoning-apart",
        "model-unavailable", "cache-miss",
        "incremental-served", "cancel-stops-stream", "replay-not-served-twice", "inference-envelopes",
        "contact-revoke", "not-granted-after-revoke",
    ]

    /// The prompt of `cancel-stops-stream`: asks for a long answer, so a real model is still streaming when the
    /// cancel arrives (a runtime whose answers are short makes that check skip).
    public static let cancelPrompt =
        "Tell a long, detailed story about a lighthouse keeper and the sea, at least 1000 words."

    /// The prompts of `queue-told`, two (a guest's default limit of requests at once): long answers (up to 200
    /// tokens), so that on a runtime that runs one request at a time the second waits more than a second (the
    /// emulator's answers to them are 48 and 47 words).
    public static let queuePrompts = [
        "Name three mountains and say who first climbed each.",
        "Name three deserts and say how large each one is.",
    ]

    /// The seed file inside `--state`.
    public static let keyFileName = "guest.key"

    /// The guest key kept in `directory` (created with mode 0700, the key file 0600), or a fresh one when nil.
    public static func identity(stateDirectory directory: String?) throws -> SigningSecretKey {
        guard let directory else { return .generate() }
        let fm = FileManager.default
        let path = directory + "/" + Self.keyFileName
        if fm.fileExists(atPath: path) {
            let text = try String(contentsOfFile: path, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard let seed = Hex.decode(text), seed.count == SigningSecretKey.seedByteCount,
                  let key = try? SigningSecretKey(seed: seed)
            else { throw CheckFailure("\(path) does not hold a 32-byte seed in hex") }
            return key
        }
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true,
                               attributes: [.posixPermissions: 0o700])
        let key = SigningSecretKey.generate()
        guard fm.createFile(atPath: path, contents: Data((Hex.encode(key.seedBytes()) + "\n").utf8),
                            attributes: [.posixPermissions: 0o600])
        else { throw CheckFailure("cannot write \(path)") }
        return key
    }

    /// Marks a `--state` folder whose key ran as a v2 guest: a host records it at v2 and, by the downgrade rule
    /// (Protocol/envelope.md §7.8), drops v1 inference from it for good.
    static let spokeV2FileName = "spoke-v2"

    static func noteSpeaksV2(_ options: HomebaseCheckOptions) {
        guard options.speaksV2, let directory = options.stateDirectory else { return }
        FileManager.default.createFile(atPath: directory + "/" + Self.spokeV2FileName, contents: Data("v2\n".utf8))
    }

    /// The line for `--v1-only` with a `--state` key that already ran as a v2 guest; nil otherwise.
    static func downgradeProblem(_ options: HomebaseCheckOptions) -> String? {
        guard !options.speaksV2, let directory = options.stateDirectory,
              FileManager.default.fileExists(atPath: directory + "/" + Self.spokeV2FileName) else { return nil }
        return "the key in \(directory) ran as a v2 guest, and a host drops v1 inference from a key it saw speak v2 "
            + "(the downgrade rule, Protocol/envelope.md §7.8); run --v1-only with a fresh --state DIR (or none)"
    }

    /// Runs every check against the host, in order, recording into `runner`. The blocking relay I/O runs on a
    /// thread of its own so it never holds a cooperative thread.
    public static func run(_ options: HomebaseCheckOptions, into runner: CheckRunner) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                HomebaseCheckRun(options: options, runner: runner).run()
                done.resume()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Runs `command` with `/bin/sh -c` (its stdout sent to our stderr); throws unless it exits 0.
    public static func shell(_ command: String) async throws {
        // posix_spawn + waitpid rather than Foundation's Process: Process reported termination only once every
        // process holding one of its inherited descriptors had exited, so a command that restarts a relay in
        // the background (`kill -9 …; relay … &`) never "finished".
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try Self.spawnAndWait(command) })
            }
        }
        guard status == 0 else { throw CheckFailure("`\(command)` exited with status \(status)") }
    }

    /// Runs `/bin/sh -c command` with its stdout on our stderr (stdout stays the report); returns its exit status.
    static func spawnAndWait(_ command: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, 2, 1)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup(command), nil]
        defer { for p in argv { free(p) } }
        let rc = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ)
        guard rc == 0 else { throw CheckFailure("cannot run /bin/sh: errno \(rc)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw CheckFailure("waitpid failed: errno \(errno)") }
        }
        // WIFEXITED / WEXITSTATUS, spelled out (the C macros are not imported).
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

/// One run of the homebase checks: a guest session and what earlier checks learnt.
private final class HomebaseCheckRun {
    let options: HomebaseCheckOptions
    let runner: CheckRunner
    var session: HomebaseGuestSession!
    var grant: GrantPayload?
    var advertModels: [AdvertPayload.Model] = []
    /// The greatest `seq` of a valid advert so far.
    var maxAdvertSeq: UInt64 = 0
    /// Set once a check fails or cannot run in a way that makes the checks after it meaningless.
    var skipReason: String?

    /// Tolerance for `issued_at` against our clock.
    static let clockSkewMs: UInt64 = 5 * 60 * 1000
    /// 2020-01-01: an `issued_at` before it is not a wall-clock time in ms.
    static let earliestMs: UInt64 = 1_577_836_800_000
    static let cancelGrace: Duration = .milliseconds(300)
    static let cancelWindow: Duration = .milliseconds(1500)

    init(options: HomebaseCheckOptions, runner: CheckRunner) {
        self.options = options
        self.runner = runner
    }

    func run() {
        defer { self.session?.close() }
        if let problem = HomebaseChecks.downgradeProblem(self.options) {
            // Said at once, not as four failed inference checks two minutes later (issue 39).
            self.options.notice(problem)
            self.skipReason = problem
            self.runner.record("grant-signature", .fail(problem))
        }
        do {
            guard self.skipReason == nil else { throw CheckFailure(self.skipReason!) }
            let key = try HomebaseChecks.identity(stateDirectory: self.options.stateDirectory)
            HomebaseChecks.noteSpeaksV2(self.options)
            self.session = try HomebaseGuestSession(options: self.options.relayOptions, key: key,
                                                    host: self.options.host, speaksV2: self.options.speaksV2)
        } catch where self.skipReason == nil {
            self.skipReason = "no guest session: \(error)"
            self.runner.record("grant-signature", .fail("\(error)"))
        } catch {}
        if self.skipReason == nil { self.step("grant-signature", self.grantSignature) }
        self.step("grant-payload", self.grantPayload)
        self.step("advert-after-grant", self.advertAfterGrant)
        self.step("advert-signature", self.advertSignature)
        self.step("advert-payload", self.advertPayload)
        self.step("advert-request", self.advertRequest)
        self.step("session-handshake", self.sessionHandshake)
        self.step("inference-ordering", self.inferenceOrdering)
        self.step("queue-told", self.queueTold)
        self.step("reasoning-apart", self.reasoningApart)
        self.step("model-unavailable", self.modelUnavailable)
        self.step("cache-miss", self.cacheMiss)
        self.step("incremental-served", self.incrementalServed)
        self.step("cancel-stops-stream", self.cancelStopsStream)
        self.step("replay-not-served-twice", self.replayNotServedTwice)
        self.step("inference-envelopes", self.inferenceEnvelopes)
        if self.options.revoke == nil, self.options.revokeCommand == nil, self.skipReason == nil {
            self.runner.record("contact-revoke", .skip("no --revoke-cmd given"))
            self.runner.record("not-granted-after-revoke", .skip("no --revoke-cmd given"))
            return
        }
        self.step("contact-revoke", self.contactRevoke)
        self.step("not-granted-after-revoke", self.notGrantedAfterRevoke)
    }

    /// Runs one check unless an earlier one made it meaningless; a thrown error is a failure.
    private func step(_ name: String, _ body: () throws -> CheckOutcome) {
        if let reason = self.skipReason {
            self.runner.record(name, .skip(reason))
            return
        }
        var outcome: CheckOutcome
        do { outcome = try body() } catch { outcome = .fail("\(error)") }
        if case .fail(let reason) = outcome, let drops = self.session.dropSummary {
            outcome = .fail("\(reason) (envelopes from the host that broke receiver rules: \(drops))")
        }
        self.runner.record(name, outcome)
    }

    private var s: HomebaseGuestSession { self.session }

    private var now: UInt64 { Posix.wallClockMs }

    /// Calls an async closure from this (non-cooperative) thread and waits for it.
    private func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        let semaphore = DispatchSemaphore(value: 0)
        let box = ErrorBox()
        Task {
            do { try await body() } catch { box.error = error }
            semaphore.signal()
        }
        semaphore.wait()
        if let error = box.error { throw error }
    }

    // MARK: Envelope versions (envelope.md §7)

    private func sessionHandshake() throws -> CheckOutcome {
        guard self.s.speaksV2 else { return .skip("this guest speaks v1 only (--v1-only)") }
        guard self.s.hostVersion >= 2 else { return .skip("the host advertises envelope version 1 only") }
        try self.s.handshake()
        return .pass
    }

    private func inferenceEnvelopes() throws -> CheckOutcome {
        if let drops = self.s.dropSummary { return .fail("envelopes dropped: \(drops)") }
        let v2 = self.s.speaksV2 && self.s.hostVersion >= 2
        if v2 {
            guard self.s.sessionOpened > 0 else { return .fail("no inference answer arrived on the v2 session") }
            return .pass
        }
        guard self.s.sessionOpened == 0 else { return .fail("v2 messages reached a guest that did not advertise v2") }
        return self.s.speaksV2 ? .skip("the host advertises envelope version 1 only") : .pass
    }

    // MARK: Grant (§5)

    private var grantBlob: SignedBlob?

    private func grantSignature() throws -> CheckOutcome {
        let hex = self.s.publicKey.hex
        try self.s.send(.contactJoin(name: self.options.guestName), store: true)
        self.options.notice("conformance guest key: \(hex)")
        self.options.notice("waiting for a grant: run  homebase grant \(hex)")
        if let hook = self.options.onWaitingForGrant {
            let key = self.s.publicKey
            Task { await hook(key) }
        }
        let arrived = try self.s.pump(timeout: self.options.waitGrant) {
            !self.s.messages(ofType: MessageType.contactGrant).isEmpty
        }
        guard arrived, case .contactGrant(let blob) = self.s.messages(ofType: MessageType.contactGrant)[0].message else {
            self.skipReason = "no grant"
            return .fail("no contact.grant within \(self.options.waitGrant) of contact.join")
        }
        self.grantBlob = blob
        guard Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.grant,
                               publicKey: self.options.host)
        else {
            self.skipReason = "the grant is not validly signed"
            return .fail("sig does not verify over the payload bytes with context \(SignatureContext.grant)")
        }
        return .pass
    }

    private func grantPayload() throws -> CheckOutcome {
        guard let blob = self.grantBlob else { return .fail("no grant") }
        let payload: GrantPayload
        switch Self.decode(GrantPayload.self, blob.payload) {
        case .failure(let reason):
            self.skipReason = "the grant payload is invalid"
            return .fail(reason.text)
        case .success(let p): payload = p
        }
        self.grant = payload
        var problems: [String] = []
        if PublicKey(hex: payload.host) != self.options.host { problems.append("host is \(payload.host)") }
        if PublicKey(hex: payload.guest) != self.s.publicKey { problems.append("guest is \(payload.guest), not us") }
        if payload.issuedAt < Self.earliestMs || payload.issuedAt > self.now + Self.clockSkewMs {
            problems.append("issued_at \(payload.issuedAt) is not a plausible time")
        }
        if let expires = payload.expiresAt, expires <= self.now { problems.append("expires_at is in the past") }
        if case .only(let tags) = payload.models, tags.isEmpty { problems.append("models is an empty list") }
        if !problems.isEmpty { self.skipReason = "the grant payload is invalid" }
        return problems.isEmpty ? .pass : .fail(problems.joined(separator: "; "))
    }

    // MARK: Adverts (§3)

    private var firstAdvert: SignedBlob?

    private func advertAfterGrant() throws -> CheckOutcome {
        let start = self.s.log.firstIndex { $0.message.type == MessageType.contactGrant } ?? 0
        let arrived = try self.s.pump(timeout: .seconds(10)) {
            !self.s.messages(ofType: MessageType.advert, from: start).isEmpty
        }
        guard arrived, case .advert(let blob) = self.s.messages(ofType: MessageType.advert, from: start)[0].message
        else {
            self.skipReason = "no advert"
            return .fail("no advert within 10 s of the grant")
        }
        self.firstAdvert = blob
        return .pass
    }

    private func advertSignature() throws -> CheckOutcome {
        guard let blob = self.firstAdvert else { return .fail("no advert") }
        guard Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.advert,
                               publicKey: self.options.host)
        else {
            self.skipReason = "the advert is not validly signed"
            return .fail("sig does not verify over the payload bytes with context \(SignatureContext.advert)")
        }
        return .pass
    }

    private func advertPayload() throws -> CheckOutcome {
        guard let blob = self.firstAdvert else { return .fail("no advert") }
        switch self.validAdvert(blob) {
        case .failure(let reason):
            self.skipReason = "the advert is invalid"
            return .fail(reason.text)
        case .success(let payload):
            self.advertModels = payload.models
            self.maxAdvertSeq = max(self.maxAdvertSeq, payload.seq)
            return .pass
        }
    }

    /// Signature and payload rules of one advert.
    private func validAdvert(_ blob: SignedBlob) -> Result<AdvertPayload, Reason> {
        guard Signature.verify(blob.signature, message: blob.payload, context: SignatureContext.advert,
                               publicKey: self.options.host)
        else { return .failure(Reason("advert sig does not verify")) }
        let payload: AdvertPayload
        switch Self.decode(AdvertPayload.self, blob.payload) {
        case .failure(let r): return .failure(r)
        case .success(let p): payload = p
        }
        var problems: [String] = []
        if PublicKey(hex: payload.host) != self.options.host { problems.append("host is \(payload.host)") }
        if payload.seq == 0 { problems.append("seq is 0") }
        let now = self.now
        let skew = payload.issuedAt > now ? payload.issuedAt - now : now - payload.issuedAt
        if skew > Self.clockSkewMs { problems.append("issued_at is \(skew / 1000) s away from our clock") }
        return problems.isEmpty ? .success(payload) : .failure(Reason(problems.joined(separator: "; ")))
    }

    private func advertRequest() throws -> CheckOutcome {
        // Adverts still on their way (a host may send one per event) must not answer the request for it.
        try self.s.drain()
        for case .advert(let blob) in self.s.messages(ofType: MessageType.advert).map(\.message) {
            if case .success(let p) = self.validAdvert(blob) { self.maxAdvertSeq = max(self.maxAdvertSeq, p.seq) }
        }
        let before = self.maxAdvertSeq
        let start = self.s.log.count
        try self.s.send(.advertRequest, store: false)
        let arrived = try self.s.pump(timeout: .seconds(5)) {
            !self.s.messages(ofType: MessageType.advert, from: start).isEmpty
        }
        guard arrived, case .advert(let blob) = self.s.messages(ofType: MessageType.advert, from: start)[0].message
        else { return .fail("no advert within 5 s of advert.request") }
        switch self.validAdvert(blob) {
        case .failure(let r): return .fail(r.text)
        case .success(let p):
            self.maxAdvertSeq = max(self.maxAdvertSeq, p.seq)
            self.advertModels = p.models
            return p.seq > before ? .pass : .fail("advert seq \(p.seq) is not greater than the previous \(before)")
        }
    }

    // MARK: Inference (§2)

    /// The model the inference checks use.
    private func inferenceModel() -> Result<String, Reason> {
        if let model = self.options.model { return .success(model) }
        let granted = self.advertModels.filter { m in
            m.capabilities.contains("completion") && (self.grant?.models.allows(m.tag) ?? false)
        }
        guard let model = granted.first?.tag else {
            return .failure(Reason("the advert lists no completion-capable model inside the grant; pass --model"))
        }
        return .success(model)
    }

    private func request(model: String, prompt: String, maxTokens: Int? = 64,
                         conversation: ConversationRef? = nil) -> InferRequest {
        InferRequest(id: SecureRandom.uuidString(), model: model, messages: [ChatMessage(role: "user", content: prompt)],
                     options: InferOptions(maxTokens: maxTokens), conversation: conversation)
    }

    /// What one request produced.
    struct Exchange {
        var request: InferRequest
        var messages: [HomebaseGuestSession.Received]
        var terminal: Message? { self.messages.first { $0.message.isInferTerminal }?.message }
        var text: String {
            self.messages.compactMap { if case .inferChunk(let c) = $0.message { c.text } else { nil } }.joined()
        }
    }

    /// Sends `request` and reads until its terminal message and `linger` after it (accept within 10 s, the rest
    /// within 120 s). A `busy` refusal before any accept is retried with a new id. `payloadSent` receives the
    /// exact sealed bytes of the (last) attempt.
    private func exchange(_ request: InferRequest, linger: Duration = .seconds(1),
                          payloadSent: (([UInt8]) throws -> Void)? = nil) throws -> Exchange {
        var request = request
        for attempt in 1...4 {
            let start = self.s.log.count
            let payload = try self.s.send(.inferRequest(request), store: false)
            try payloadSent?(payload)
            let id = request.id
            let answered = try self.s.pump(timeout: .seconds(10)) { !self.s.inferMessages(id: id, from: start).isEmpty }
            guard answered else { throw CheckFailure("no infer.accept or infer.error within 10 s of the request") }
            try self.s.pump(timeout: .seconds(120)) {
                self.s.inferMessages(id: id, from: start).contains { $0.message.isInferTerminal }
            }
            let first = self.s.inferMessages(id: id, from: start)
            if attempt < 4, case .inferError(let e) = first.first?.message, e.code == InferErrorCode.busy.rawValue {
                Thread.sleep(forTimeInterval: 1)
                request.id = SecureRandom.uuidString()
                continue
            }
            guard first.contains(where: { $0.message.isInferTerminal }) else {
                throw CheckFailure("no infer.done or infer.error within 120 s (got \(first.map(\.message.brief)))")
            }
            try self.s.linger(linger)
            return Exchange(request: request, messages: self.s.inferMessages(id: id, from: start))
        }
        throw CheckFailure("the host stayed busy")
    }

    /// The ordering rules of §2 host rule 1–2 for a served request; nil when they hold.
    private static func orderingProblem(_ x: Exchange) -> String? {
        let ms = x.messages.map(\.message)
        guard let first = ms.first else { return "nothing arrived" }
        if case .inferError(let e) = first { return "answered infer.error \(e.code): \(e.message)" }
        guard case .inferAccept = first else { return "first message is \(first.brief), not infer.accept" }
        var expected = 0
        var lastPosition = Int.max
        for (i, m) in ms.enumerated().dropFirst() {
            switch m {
            case .inferQueued(let q):
                if expected > 0 { return "infer.queued after the first infer.chunk" }
                if q.position < 1 { return "infer.queued position \(q.position) below 1" }
                if q.position >= lastPosition { return "infer.queued position \(q.position) did not improve on \(lastPosition)" }
                lastPosition = q.position
            case .inferChunk(let c):
                guard c.seq == expected else { return "infer.chunk seq \(c.seq) where \(expected) was due" }
                if let r = c.reasoning, !r.isEmpty, !c.text.isEmpty {
                    return "infer.chunk seq \(c.seq) carries reasoning and text together"
                }
                expected += 1
            case .inferDone(let d):
                if d.chunks != expected { return "infer.done says chunks \(d.chunks) after \(expected) chunks" }
                if d.finishReason != "stop" && d.finishReason != "length" {
                    return "finish_reason \(d.finishReason) is neither stop nor length"
                }
                if i != ms.count - 1 { return "\(ms[i + 1].brief) arrived after infer.done" }
                return nil
            case .inferError(let e):
                return "infer.error \(e.code) after the accept: \(e.message)"
            case .inferAccept:
                return "a second infer.accept"
            default:
                return "unexpected \(m.type)"
            }
        }
        return "no infer.done"
    }

    private func withModel(_ body: (String) throws -> CheckOutcome) throws -> CheckOutcome {
        switch self.inferenceModel() {
        case .failure(let r): .skip(r.text)
        case .success(let model): try body(model)
        }
    }

    private func inferenceOrdering() throws -> CheckOutcome {
        try self.withModel { model in
            let x = try self.exchange(self.request(model: model, prompt: "Say hello in one short sentence."))
            return Self.orderingProblem(x).map { .fail($0) } ?? .pass
        }
    }


    /// Two requests at once; one still waiting for the other 1 s after its accept must have been told by then
    /// (messages.md host rule 7: a shorter wait need not be told).
    private func queueTold() throws -> CheckOutcome {
        try self.withModel { model in
            let requests = HomebaseChecks.queuePrompts.map { self.request(model: model, prompt: $0, maxTokens: 200) }
            let start = self.s.log.count
            for r in requests { try self.s.send(.inferRequest(r), store: false) }
            let ids = requests.map(\.id)
            let ended = try self.s.pump(timeout: .seconds(120)) {
                ids.allSatisfy { id in self.s.inferMessages(id: id, from: start).contains { $0.message.isInferTerminal } }
            }
            guard ended else { throw CheckFailure("the two requests did not both end within 120 s") }
            try self.s.linger(.milliseconds(500))
            let exchanges = requests.map { Exchange(request: $0, messages: self.s.inferMessages(id: $0.id, from: start)) }
            if exchanges.contains(where: { if case .inferError(let e) = $0.messages.first?.message { e.code == "busy" } else { false } }) {
                return .skip("the host refused one of two requests as busy")
            }
            for x in exchanges {
                if let problem = Self.orderingProblem(x) { return .fail(problem) }
            }
            return HomebaseChecks.queueToldOutcome(exchanges.map(\.messages))
        }
    }

    /// A granted thinking model's reasoning arrives apart from its answer.
    private func reasoningApart() throws -> CheckOutcome {
        let thinking = self.advertModels.first { m in
            ModelCapabilities.canThink(m.capabilities) && m.capabilities.contains("completion")
                && (self.grant?.models.allows(m.tag) ?? false)
        }
        guard let model = thinking?.tag else { return .skip("no granted model with the thinking capability") }
        let x = try self.exchange(self.request(model: model, prompt: "Is 17 a prime number?", maxTokens: 1024))
        if let problem = Self.orderingProblem(x) { return .fail(problem) }
        let chunks = x.messages.compactMap { if case .inferChunk(let c) = $0.message { c } else { nil } }
        guard chunks.contains(where: { !($0.reasoning ?? "").isEmpty }) else {
            return .fail("a thinking model answered without any chunk carrying reasoning")
        }
        return .pass
    }

    static func ms(_ d: Duration) -> Int {
        Int(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The request must end in `infer.error` with one of `codes` (an accept before it is allowed).
    private static func expectError(_ x: Exchange, _ codes: [String]) -> CheckOutcome {
        guard case .inferError(let e) = x.terminal else {
            return .fail("expected infer.error \(codes.joined(separator: " or ")), got \(x.messages.map(\.message.brief))")
        }
        guard codes.contains(e.code) else {
            return .fail("infer.error \(e.code) (\(e.message)), expected \(codes.joined(separator: " or "))")
        }
        if let after = x.messages.drop(while: { !$0.message.isInferTerminal }).dropFirst().first {
            return .fail("\(after.message.brief) arrived after infer.error")
        }
        return .pass
    }

    private func modelUnavailable() throws -> CheckOutcome {
        let tag = "conformance-no-such-model-\(SecureRandom.uuidString().prefix(8).lowercased()):0b"
        var codes = [InferErrorCode.modelUnavailable.rawValue]
        if case .only = self.grant?.models { codes.append(InferErrorCode.notGranted.rawValue) }
        let x = try self.exchange(self.request(model: tag, prompt: "Hello?"))
        return Self.expectError(x, codes)
    }

    private func cacheMiss() throws -> CheckOutcome {
        try self.withModel { model in
            let bogus = Hex.encode(SecureRandom.bytes(32))
            let ref = ConversationRef(id: SecureRandom.uuidString(), baseCount: 2, baseDigest: bogus)
            let x = try self.exchange(self.request(model: model, prompt: "And then?", conversation: ref))
            return Self.expectError(x, [InferErrorCode.cacheMiss.rawValue])
        }
    }

    private func incrementalServed() throws -> CheckOutcome {
        try self.withModel { model in
            let id = SecureRandom.uuidString()
            let first = try self.exchange(self.request(model: model, prompt: "Name a colour.",
                                                       conversation: ConversationRef(id: id)))
            if let problem = Self.orderingProblem(first) { return .fail("the full request: \(problem)") }
            let base = first.request.messages + [ChatMessage(role: "assistant", content: first.text)]
            let digest = ConversationDigest.compute(messages: base.map { (role: $0.role, content: $0.content) })
            let ref = ConversationRef(id: id, baseCount: base.count, baseDigest: digest)
            let second = try self.exchange(self.request(model: model, prompt: "And another one?", conversation: ref))
            if let problem = Self.orderingProblem(second) { return .fail("the incremental request: \(problem)") }
            return .pass
        }
    }

    private func cancelStopsStream() throws -> CheckOutcome {
        try self.withModel { model in
            var r = self.request(model: model, prompt: HomebaseChecks.cancelPrompt, maxTokens: 200)
            for attempt in 1...4 {
                let start = self.s.log.count
                try self.s.send(.inferRequest(r), store: false)
                let id = r.id
                let got = try self.s.pump(timeout: .seconds(100)) {
                    self.s.inferMessages(id: id, from: start).contains {
                        if case .inferChunk = $0.message { true } else { $0.message.isInferTerminal }
                    }
                }
                let early = self.s.inferMessages(id: id, from: start)
                if attempt < 4, case .inferError(let e) = early.first?.message, e.code == InferErrorCode.busy.rawValue {
                    Thread.sleep(forTimeInterval: 1)
                    r.id = SecureRandom.uuidString()
                    continue
                }
                guard got else { return .fail("no infer.chunk within 100 s") }
                if let t = early.first(where: { $0.message.isInferTerminal }) {
                    if case .inferError = t.message { return .fail("the request failed: \(t.message.brief)") }
                    return .skip("the answer ended before its first chunk could be cancelled")
                }
                try self.s.send(.inferCancel(id: id), store: false)
                let cancelledAt = ContinuousClock.now
                try self.s.linger(Self.cancelWindow)
                let after = self.s.inferMessages(id: id, from: start).filter { $0.at > cancelledAt }
                let late = after.filter { $0.at - cancelledAt > Self.cancelGrace }
                if !late.isEmpty {
                    return .fail("\(late.count) frame(s) for the id more than \(Self.cancelGrace) after infer.cancel, "
                                 + "last \(late.last!.message.brief)")
                }
                if after.contains(where: { if case .inferDone = $0.message { true } else { false } }) {
                    return .skip("the answer ended within \(Self.cancelGrace) of the cancel; cannot tell")
                }
                return .pass
            }
            return .fail("the host stayed busy")
        }
    }

    private func replayNotServedTwice() throws -> CheckOutcome {
        try self.withModel { model in
            var sealed: [UInt8] = []
            let x = try self.exchange(self.request(model: model, prompt: "Count to three."), linger: .zero) { payload in
                sealed = payload
                // The identical envelope again, at once: while the first copy is being served.
                try self.s.sendRaw(payload, store: false)
            }
            // And once more after the done.
            try self.s.sendRaw(sealed, store: false)
            try self.s.linger(.milliseconds(1500))
            let all = self.s.inferMessages(id: x.request.id)
            let accepts = all.filter { if case .inferAccept = $0.message { true } else { false } }.count
            let terminals = all.filter { $0.message.isInferTerminal }.count
            if accepts != 1 { return .fail("\(accepts) infer.accept for one request sent three times") }
            if terminals != 1 { return .fail("\(terminals) infer.done/infer.error for one request sent three times") }
            return Self.orderingProblem(Exchange(request: x.request, messages: all)).map { .fail($0) } ?? .pass
        }
    }

    // MARK: Revoke (§5)

    private func contactRevoke() throws -> CheckOutcome {
        let hex = self.s.publicKey.hex
        let command = self.options.revokeCommand.map { $0.replacingOccurrences(of: "{guest}", with: hex) }
        let shell: (@Sendable () async throws -> Void)? = command.map { c in { @Sendable in try await HomebaseChecks.shell(c) } }
        guard let revoke = self.options.revoke ?? shell else {
            return .skip("no --revoke-cmd given")
        }
        try self.s.drain(quiet: .milliseconds(200), limit: .seconds(1))
        let start = self.s.log.count
        do { try self.blocking(revoke) } catch {
            self.skipReason = "the revoke command failed"
            return .fail("the revoke command failed: \(error)")
        }
        let arrived = try self.s.pump(timeout: .seconds(5)) {
            !self.s.messages(ofType: MessageType.contactRevoke, from: start).isEmpty
        }
        return arrived ? .pass : .fail("no contact.revoke within 5 s of the revoke")
    }

    private func notGrantedAfterRevoke() throws -> CheckOutcome {
        let model = (try? self.inferenceModel().get()) ?? "conformance-any"
        let x = try self.exchange(self.request(model: model, prompt: "Still there?"))
        if let accept = x.messages.first, case .inferAccept = accept.message {
            return .fail("the request was accepted after the revoke (\(x.messages.map(\.message.brief)))")
        }
        return Self.expectError(x, [InferErrorCode.notGranted.rawValue])
    }

    // MARK: Helpers

    /// A signed payload parsed, with a reason when it is not one.
    static func decode<T: SignedPayload>(_ type: T.Type, _ bytes: [UInt8]) -> Result<T, Reason> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            return .failure(Reason("payload is not a JSON object"))
        }
        guard (object["v"] as? NSNumber)?.intValue == 1 else { return .failure(Reason("payload v is not 1")) }
        do { return .success(try JSONDecoder().decode(T.self, from: Data(bytes))) } catch {
            return .failure(Reason("payload lacks a field or has one of the wrong type: \(error)"))
        }
    }
}

/// A failure reason as an `Error`, for `Result`.
struct Reason: Error {
    let text: String
    init(_ text: String) { self.text = text }
}

private final class ErrorBox: @unchecked Sendable {
    var error: (any Error)?
}

extension HomebaseChecks {
    /// `queue-told`'s judgement of what requests sent at once received: one that was still waiting 1 s after its
    /// accept (its first chunk came after another request's end, and that end more than 1 s after its accept) must
    /// have had `infer.queued` within 1 s of its accept. Pass when one such request was told in time; skip when
    /// none waited that long (messages.md host rule 7 asks no word for a shorter wait).
    static func queueToldOutcome(_ exchanges: [[HomebaseGuestSession.Received]]) -> CheckOutcome {
        var waited = false
        var waitedLong = false
        for (i, messages) in exchanges.enumerated() {
            guard let accept = messages.first, case .inferAccept = accept.message,
                  let firstChunk = messages.first(where: { if case .inferChunk = $0.message { true } else { false } })
            else { continue }
            // The latest end of another request before this one's first chunk: it waited at least until then.
            let waitedFor = exchanges.indices.filter { $0 != i }
                .compactMap { exchanges[$0].first(where: { $0.message.isInferTerminal })?.at }
                .filter { $0 < firstChunk.at }.max()
            guard let waitedUntil = waitedFor else { continue }
            waited = true
            guard waitedUntil - accept.at > .seconds(1) else { continue }
            waitedLong = true
            guard let queued = messages.first(where: { if case .inferQueued = $0.message { true } else { false } }) else {
                return .fail("a request waited for another's end \(HomebaseCheckRun.ms(waitedUntil - accept.at)) ms after its accept "
                             + "(first chunk at \(HomebaseCheckRun.ms(firstChunk.at - accept.at)) ms) without infer.queued")
            }
            if queued.at - accept.at > .seconds(1) {
                return .fail("infer.queued came \(HomebaseCheckRun.ms(queued.at - accept.at)) ms after the accept (at most 1 s)")
            }
        }
        if waitedLong { return .pass }
        return .skip(waited ? "no request waited more than 1 s (the answers were too short to tell)"
                            : "the host's runtime served them at once: nothing waited")
    }
}
