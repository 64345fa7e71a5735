@testable import ConformanceKit
import Foundation
import HomebaseCore
import HomebaseStore
import HomebaseTransport
import RelayService
import Testing

/// `conformance relay` against our relay (every check passes) and against a deliberately broken one
/// (tools/bench/py_relay.py: login and live forwarding only), which must fail with the right checks named.
@Suite(.serialized) struct RelayChecksTests {
    static func smallLimits() -> RelayLimits {
        var l = RelayLimits()
        l.maxPayloadBytes = 4_096
        l.mailboxMaxFrames = 25
        l.authDeadlineMs = 500
        l.sendFramesPerSecond = 20
        l.sendFramesBurst = 60
        return l
    }

    static func options(_ url: String) -> RelayCheckOptions {
        var o = RelayCheckOptions(url: url)
        o.authDeadline = .milliseconds(500)
        o.mailboxFrames = 25
        o.rateBurstFrames = 200
        o.expectRateLimit = true
        return o
    }

    static func run(_ o: RelayCheckOptions) async -> Report {
        let runner = CheckRunner(emit: nil)
        await runner.run(RelayChecks.checks(o))
        return runner.report
    }

    @Test(.timeLimit(.minutes(1)))
    func ourRelayPassesEveryCheck() async throws {
        let relay = try InProcessRelay(limits: Self.smallLimits(), admission: Admission(tokens: ["sesame"]))
        defer { relay.stop() }
        var o = Self.options(relay.url)
        o.httpBase = relay.httpBase
        o.token = "sesame"
        let report = await Self.run(o)
        #expect(report.failedNames == [], "\(report.results.filter { $0.status != "pass" }.map(\.line))")
        #expect(report.skipped == 0)
        #expect(report.result(named: "admission-token-required")?.status == "pass")
        #expect(report.passed >= 25)
    }

    @Test(.timeLimit(.minutes(1)))
    func rateLimitIsASkipUnlessExpected() async throws {
        var limits = Self.smallLimits()
        limits.sendFramesBurst = 100_000
        let relay = try InProcessRelay(limits: limits)
        defer { relay.stop() }
        var o = Self.options(relay.url)
        o.expectRateLimit = false
        let check = RelayChecks.checks(o).first { $0.name == "receipt-5-rate-limited" }!
        let outcome = try await check.run()
        guard case .skip(let why) = outcome else { Issue.record("expected a skip, got \(outcome)"); return }
        #expect(why.contains("no RECEIPT 5"))
    }

    @Test(.timeLimit(.minutes(1)))
    func commandLinePrintsOneLinePerCheckAndTheSummaryLast() async throws {
        let relay = try InProcessRelay(limits: Self.smallLimits())
        defer { relay.stop() }
        let lines = LineSink()
        let code = await ConformanceCommand.run(
            ["relay", relay.url, "--auth-deadline-ms", "500", "--mailbox-frames", "25", "--rate-burst", "200",
             "--expect-rate-limit"], output: lines.append)
        let all = lines.lines
        #expect(code == 0, "\(all)")
        #expect(all.last == "\(all.count - 1 - 2) passed, 0 failed, 2 skipped")  // healthz, metrics without --http
        #expect(all.dropLast().allSatisfy { $0.hasPrefix("PASS ") || $0.hasPrefix("SKIP ") })
    }

    // MARK: The deliberately broken relay

    static func python() -> String? {
        let env = ProcessInfo.processInfo.environment
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        for candidate in [env["HOMEBASE_PYTHON"], root + "/.venv/bin/python", "/work/main/.venv/bin/python"] {
            if let c = candidate, FileManager.default.isExecutableFile(atPath: c) { return c }
        }
        return nil
    }

    /// ACKs are fire-and-forget and delivery at-least-once (relay.md §5): a fleet's other edge may count a frame
    /// its ACK has not yet deleted. store-and-forward reads the count again for a while; an ACK never applied
    /// still fails it.
    @Test(.timeLimit(.minutes(1)))
    func storeAndForwardWaitsForALateAckButNotForAnIgnoredOne() async throws {
        for (delayMs, expected) in [(300, CheckOutcome.pass),
                                    (nil, .fail("after ACK of 1 of 3, READY.stored is 3, expected 2"))] {
            let relay = try InProcessRelay(limits: Self.smallLimits()) { LateAckMailbox($0, delayMs: delayMs) }
            defer { relay.stop() }
            #expect(try RelayChecks.storeAndForward(Self.options(relay.url)) == expected, "ACKs after \(delayMs ?? -1) ms")
        }
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: Self.python() != nil, "needs a Python with websockets and PyNaCl"))
    func brokenRelayFailsTheRightChecks() async throws {
        let relay = try await PyRelay(python: Self.python()!)
        defer { relay.stop() }
        var o = Self.options(relay.url)
        o.authDeadline = .seconds(1)
        o.rateBurstFrames = 200
        let report = await Self.run(o)
        let failed = Set(report.failedNames)
        // No store, no receipts 1/3/4/5/6, no frame validation after login.
        for name in ["receipt-1-stored", "store-and-forward", "store-to-online-recipient", "receipt-3-mailbox-full",
                     "receipt-4-payload-too-large", "receipt-5-rate-limited", "receipt-6-bad-flags"] {
            #expect(failed.contains(name), "\(name) should fail: \(report.result(named: name)?.line ?? "-")")
        }
        // What it does implement passes.
        for name in ["challenge", "auth-good", "auth-bad-signature", "forward-live-authenticated-sender",
                     "receipt-0-delivered", "receipt-2-offline", "replacement-4001"] {
            #expect(report.result(named: name)?.status == "pass", "\(report.result(named: name)?.line ?? name)")
        }
        #expect(report.exitCode == 1)
    }
}

final class LineSink: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { self.lock.withLock { self.stored } }
    func append(_ line: String) { self.lock.withLock { self.stored.append(line) } }
}

/// A mailbox that applies ACKs `delayMs` after it reads them, on another thread, or never (nil). One lock
/// serializes every call to the real mailbox, as the relay's single mailbox worker does.
final class LateAckMailbox: Mailbox, @unchecked Sendable {
    private let inner: any Mailbox
    private let delayMs: Int?
    private let lock = NSLock()

    init(_ inner: any Mailbox, delayMs: Int?) {
        self.inner = inner
        self.delayMs = delayMs
    }

    func acknowledge(recipient: PublicKey, deliveryID: UInt64) throws -> Bool {
        try self.acknowledgeBatch([(recipient, deliveryID)])
        return self.delayMs != nil
    }

    func acknowledgeBatch(_ acks: [(recipient: PublicKey, deliveryID: UInt64)]) throws {
        guard let delayMs = self.delayMs else { return }
        let inner = self.inner, lock = self.lock, ids = acks.map { ($0.recipient, $0.deliveryID) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delayMs)) {
            lock.withLock {
                for (recipient, id) in ids { _ = try? inner.acknowledge(recipient: recipient, deliveryID: id) }
            }
        }
    }

    func enqueue(recipient: PublicKey, sender: PublicKey, payload: [UInt8], nowMs: UInt64) throws
        -> MailboxEnqueueResult
    {
        try self.lock.withLock { try self.inner.enqueue(recipient: recipient, sender: sender, payload: payload, nowMs: nowMs) }
    }
    func enqueueBatch(_ items: [MailboxItem], nowMs: UInt64) throws -> [MailboxEnqueueResult] {
        try self.lock.withLock { try self.inner.enqueueBatch(items, nowMs: nowMs) }
    }
    func pending(recipient: PublicKey, after: UInt64, limit: Int, nowMs: UInt64) throws -> [StoredFrame] {
        try self.lock.withLock { try self.inner.pending(recipient: recipient, after: after, limit: limit, nowMs: nowMs) }
    }
    func pendingCount(recipient: PublicKey, nowMs: UInt64) throws -> Int {
        try self.lock.withLock { try self.inner.pendingCount(recipient: recipient, nowMs: nowMs) }
    }
    func depth(recipient: PublicKey) throws -> (frames: Int, bytes: Int) {
        try self.lock.withLock { try self.inner.depth(recipient: recipient) }
    }
    func expire(nowMs: UInt64) throws -> Int { try self.lock.withLock { try self.inner.expire(nowMs: nowMs) } }
    func totalDepth() throws -> (frames: Int, bytes: Int, mailboxes: Int) {
        try self.lock.withLock { try self.inner.totalDepth() }
    }
}
