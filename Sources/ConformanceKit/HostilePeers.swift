import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

/// One key's connection to the host under test over a `RawWebSocket`: seals whatever plaintext a check wants
/// (valid or not, with any header), and opens everything the host sends back, whatever it is, so a check can
/// count replies a stranger should never get. Used as a stranger (fresh key) and, with a reader thread
/// (`GuestLine`), as the granted guest.
class HostPeer: @unchecked Sendable {
    /// One message from the host.
    struct Reply {
        var message: Message
        var channel: Channel
        var at: ContinuousClock.Instant
    }

    let ws: RawWebSocket
    let key: SigningSecretKey
    let host: PublicKey
    private let e2e: SymmetricKey
    private let receiver: EnvelopeReceiver
    private let sendLock = NSLock()
    private var nextSendID: UInt32 = 1

    init(url: RelayURL, token: String?, key: SigningSecretKey = .generate(), host: PublicKey) throws {
        guard let e2e = try? E2E.deriveKey(selfSecret: key, peer: host) else {
            throw CheckFailure("no end-to-end key for host \(host.hex) (not a valid Ed25519 point)")
        }
        self.key = key
        self.host = host
        self.e2e = e2e
        self.receiver = EnvelopeReceiver(selfKey: key.publicKey)
        self.ws = try RawWebSocket.loggedIn(url, token: token, key: key)
    }

    var publicKey: PublicKey { self.key.publicKey }
    var maxPayload: Int { Int(self.ws.maxPayload) }

    /// Largest plaintext whose envelope fits max_payload (padding and the 130 bytes of header and tag included).
    var plaintextBudget: Int { (self.maxPayload - EnvelopeHeader.byteCount - EnvelopeHeader.tagByteCount) / 256 * 256 }

    /// Seals `plaintext` for the host under this key's end-to-end key; the header fields may be forged.
    func seal(_ plaintext: [UInt8], channel: Channel, sender: PublicKey? = nil, recipient: PublicKey? = nil,
              sentAtMs: UInt64? = nil, version: UInt8 = EnvelopeHeader.version) -> [UInt8] {
        let header = EnvelopeHeader(version: version, channel: channel, sender: sender ?? self.publicKey,
                                    recipient: recipient ?? self.host, messageID: SecureRandom.bytes(16),
                                    sentAtMs: sentAtMs ?? Posix.wallClockMs, nonce: SecureRandom.bytes(24))
        return EnvelopeSealer.sealEncoded(header: header, unpaddedPlaintext: plaintext, key: self.e2e)
    }

    /// Sends envelope bytes as they are, live or stored; returns the SEND's id. Thread-safe.
    @discardableResult
    func sendEnvelope(_ envelope: [UInt8], store: Bool = false) throws -> UInt32 {
        try self.sendLock.withLock {
            let id = self.nextSendID
            self.nextSendID &+= 1
            try self.ws.send(.send(sendID: id, recipient: self.host, flags: store ? SendFlags.store : 0,
                                   payload: envelope[...]))
            return id
        }
    }

    /// The RECEIPT status of SEND `id` (other frames are skipped); nil when none came within `timeout`.
    func awaitReceipt(_ id: UInt32, timeout: Duration) -> ReceiptStatus? {
        let deadline = ContinuousClock.now + timeout
        while let event = try? self.ws.next(timeout: max(.zero, deadline - .now)) {
            if case .frame(.receipt(id, let status)) = event { return status }
            if case .frame = event { continue }
            return nil
        }
        return nil
    }

    func send(_ message: Message, channel: Channel, store: Bool = false) throws {
        try self.sendEnvelope(self.seal(message.jsonBytes(), channel: channel), store: store)
    }

    func send(json plaintext: [UInt8], channel: Channel, store: Bool = false) throws {
        try self.sendEnvelope(self.seal(plaintext, channel: channel), store: store)
    }

    /// Acknowledges a stored delivery. Thread-safe.
    func ack(_ deliveryID: UInt64) {
        guard deliveryID != 0 else { return }
        self.sendLock.withLock { _ = try? self.ws.send(.ack(deliveryID: deliveryID)) }
    }

    /// Opens what the host sent, as any receiver would but treating the host as sibling and contact (so a
    /// stranger still sees what it was sent); nil for anything that does not open.
    func open(_ payload: ArraySlice<UInt8>, sender: PublicKey) -> Reply? {
        guard sender == self.host else { return nil }
        let e2e = self.e2e
        let opened = self.receiver.open(payload, deliveredBy: sender, nowMs: Posix.wallClockMs, key: { _ in e2e },
                                        relation: { _ in SenderRelation(isSibling: true, isContact: true) })
        guard case .success(let envelope) = opened else { return nil }
        return Reply(message: envelope.message, channel: envelope.header.channel, at: .now)
    }

    /// What arrived from the host until `deadline` (read without blocking when it has passed), stored
    /// deliveries acknowledged; a relay close or error ends the reading.
    func drain(until deadline: ContinuousClock.Instant) -> [Reply] {
        var replies: [Reply] = []
        while true {
            guard let event = try? self.ws.next(timeout: max(.zero, deadline - .now)) else { return replies }
            switch event {
            case .frame(.deliver(let sender, let id, let payload)):
                if let r = self.open(payload, sender: sender) { replies.append(r) }
                self.ack(id)
            case .frame: continue
            default: return replies
            }
        }
    }

    func close() { self.ws.close() }
}

/// The granted guest: a `HostPeer` whose reader thread logs every message from the host, so checks and the
/// host probe (another thread) can wait on it while attacks are sent.
final class GuestLine: HostPeer, @unchecked Sendable {
    private let condition = NSCondition()
    private var replies: [Reply] = []
    private var failure: String?
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    override init(url: RelayURL, token: String?, key: SigningSecretKey, host: PublicKey) throws {
        try super.init(url: url, token: token, key: key, host: host)
        let thread = Thread { [self] in
            self.read()
            self.done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    private func read() {
        while !self.stopping.load(ordering: .relaxed) {
            let event: RawWebSocket.Event?
            do { event = try self.ws.next(timeout: .milliseconds(100)) } catch {
                self.fail("\(error)")
                return
            }
            switch event {
            case .none, .frame(.receipt): continue
            case .frame(.deliver(let sender, let id, let payload)):
                if let r = self.open(payload, sender: sender) {
                    self.condition.withLock {
                        self.replies.append(r)
                        self.condition.broadcast()
                    }
                }
                self.ack(id)
            case .some(let other):
                self.fail("the guest's connection ended: \(RelayAttack.describe(other))")
                return
            }
        }
    }

    private func fail(_ why: String) {
        self.condition.withLock {
            self.failure = why
            self.condition.broadcast()
        }
    }

    /// How many messages have arrived (an index for `wait` and `replies(from:)`).
    var count: Int { self.condition.withLock { self.replies.count } }

    func replies(from index: Int) -> [Reply] { self.condition.withLock { Array(self.replies[index...]) } }

    /// Waits until `condition` holds for the messages from `index` on; false after `timeout` (or if the
    /// connection failed).
    func wait(from index: Int, timeout: Duration, until condition: ([Reply]) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds)
                            + Double(timeout.components.attoseconds) / 1e18)
        return self.condition.withLock {
            while true {
                if condition(Array(self.replies[index...])) { return true }
                if self.failure != nil { return false }
                if !self.condition.wait(until: deadline) { return condition(Array(self.replies[index...])) }
            }
        }
    }

    var connectionFailure: String? { self.condition.withLock { self.failure } }

    override func close() {
        self.stopping.store(true, ordering: .relaxed)
        self.done.wait()
        super.close()
    }
}

/// Times the host's answer to the granted guest's `advert.request` (guest → relay → host → relay → guest): the
/// host's own responsiveness during an attack, where `LatencyProbe` times the relay alone.
final class HostProbe: RoundTripProbe, @unchecked Sendable {
    static let timeout: Duration = .seconds(2)

    private let line: GuestLine
    private let interval: Duration
    private let samples = Mutex<(rtts: [Duration], lost: Int)>(([], 0))
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(line: GuestLine, interval: Duration) {
        self.line = line
        self.interval = interval
        let thread = Thread { [self] in
            self.loop()
            self.done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    func take(reset: Bool) -> (stats: LatencyStats?, failure: String?) {
        let failure = self.line.connectionFailure
        return self.samples.withLock { s in
            defer { if reset { s = ([], 0) } }
            return (LatencyStats(s.rtts, lost: s.lost), failure)
        }
    }

    func stop() {
        self.stopping.store(true, ordering: .relaxed)
        self.done.wait()
    }

    private func loop() {
        var next = ContinuousClock.now
        while !self.stopping.load(ordering: .relaxed) {
            let start = self.line.count
            let started = ContinuousClock.now
            guard (try? self.line.send(.advertRequest, channel: .contact)) != nil else { return }
            let answered = self.line.wait(from: start, timeout: Self.timeout) { replies in
                replies.contains { if case .advert = $0.message { $0.channel == .contact } else { false } }
            }
            self.samples.withLock { s in
                if answered {
                    s.rtts.append(.now - started)
                } else {
                    s.rtts.append(Self.timeout)
                    s.lost += 1
                }
            }
            next = max(next + self.interval, .now)
            Thread.sleep(until: next)
        }
    }
}
