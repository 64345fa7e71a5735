import Dispatch
import Foundation
import HomebaseCore
import Synchronization

/// How a request on the bus ended.
public enum FleetBusReply: Sendable {
    case reply([UInt8])
    /// Nobody subscribes to the subject (the server said so at once: NATS "no responders").
    case noResponders
    case timedOut
    case failed(String)
}

/// Request/reply over one NATS connection without a thread per request: every request gets a reply subject
/// under this process's inbox (`_HB.<random>.<n>`), one wildcard subscription receives every reply, and a sweep
/// thread ends the requests whose time is up. Completions run on nats.c's delivery thread or the sweep thread.
public final class FleetBus: @unchecked Sendable {
    public let nats: NatsConnection
    private let inbox: String
    private var inboxSubscription: NatsSubscription?
    private let state = Mutex(State())
    private let stopped = Mutex(false)
    private let sweeper = DispatchSemaphore(value: 0)
    public let latencies = FleetLatencies()

    struct Pending {
        var startNs: UInt64
        var kind: FleetLatencies.Kind
        var completion: @Sendable (FleetBusReply) -> Void
    }

    struct State {
        var next: UInt64 = 0
        var pending: [UInt64: Pending] = [:]
        /// Deadlines in the order requests were made, per timeout: each queue is sorted by construction.
        var deadlines: [UInt64: [(id: UInt64, atNs: UInt64)]] = [:]
        var heads: [UInt64: Int] = [:]
    }

    public init(nats: NatsConnection) throws {
        self.nats = nats
        var random = SystemRandomNumberGenerator()
        self.inbox = "_HB." + String(random.next() as UInt64, radix: 36) + "."
        self.inboxSubscription = try nats.subscribe(self.inbox + "*") { [weak self] m in self?.replied(m) }
        let t = Thread { [weak self] in self?.sweepLoop() }
        t.name = "fleet-bus-sweep"
        t.start()
    }

    /// Publishes `data` to `subject` and calls `completion` exactly once with the reply, no responders, or a
    /// time-out after `timeoutMs`.
    public func request(_ subject: String, _ data: [UInt8], kind: FleetLatencies.Kind, timeoutMs: UInt64,
                        _ completion: @escaping @Sendable (FleetBusReply) -> Void)
    {
        let now = Self.monotonicNs()
        let id = self.state.withLock { s -> UInt64 in
            s.next += 1
            s.pending[s.next] = Pending(startNs: now, kind: kind, completion: completion)
            s.deadlines[timeoutMs, default: []].append((s.next, now + timeoutMs * 1_000_000))
            return s.next
        }
        do {
            try self.nats.publish(subject, reply: self.inbox + String(id), data)
        } catch {
            if let p = self.state.withLock({ $0.pending.removeValue(forKey: id) }) {
                p.completion(.failed("\(error)"))
            }
        }
    }

    /// `request`, waiting for the outcome (for the mailbox worker's thread, never the event loop).
    public func requestSync(_ subject: String, _ data: [UInt8], kind: FleetLatencies.Kind, timeoutMs: UInt64)
        -> FleetBusReply
    {
        let box = ReplyBox()
        self.request(subject, data, kind: kind, timeoutMs: timeoutMs) { box.set($0) }
        return box.wait()
    }

    /// Requests several at once and waits for all (pipelined: one round trip for the lot, not one each).
    public func requestAll(_ requests: [(subject: String, data: [UInt8])], kind: FleetLatencies.Kind,
                           timeoutMs: UInt64) -> [FleetBusReply]
    {
        let boxes = requests.map { _ in ReplyBox() }
        for (i, r) in requests.enumerated() {
            let box = boxes[i]
            self.request(r.subject, r.data, kind: kind, timeoutMs: timeoutMs) { box.set($0) }
        }
        return boxes.map { $0.wait() }
    }

    /// Publishes without waiting for anything.
    public func publish(_ subject: String, reply: String? = nil, _ data: [UInt8]) throws {
        try self.nats.publish(subject, reply: reply, data)
    }

    public func stop() {
        self.stopped.withLock { $0 = true }
        self.sweeper.signal()
        self.inboxSubscription?.cancel()
        self.nats.close()
        // Whoever still waits hears that it is over.
        let left = self.state.withLock { s -> [Pending] in
            defer { s.pending.removeAll() }
            return Array(s.pending.values)
        }
        for p in left { p.completion(.failed("the relay is stopping")) }
    }

    public var pendingRequests: Int { self.state.withLock { $0.pending.count } }

    private func replied(_ m: NatsMessage) {
        guard m.subject.hasPrefix(self.inbox), let id = UInt64(m.subject.dropFirst(self.inbox.count)) else { return }
        guard let p = self.state.withLock({ $0.pending.removeValue(forKey: id) }) else { return }  // late: timed out
        self.latencies.record(p.kind, ns: Self.monotonicNs() &- p.startNs)
        p.completion(m.isNoResponders ? .noResponders : .reply(m.data))
    }

    private func sweepLoop() {
        while !self.stopped.withLock({ $0 }) {
            _ = self.sweeper.wait(timeout: .now() + .milliseconds(20))
            let now = Self.monotonicNs()
            let expired = self.state.withLock { s -> [Pending] in
                var out: [Pending] = []
                for (timeout, queue) in s.deadlines {
                    var head = s.heads[timeout] ?? 0
                    while head < queue.count, queue[head].atNs <= now {
                        if let p = s.pending.removeValue(forKey: queue[head].id) { out.append(p) }
                        head += 1
                    }
                    if head == queue.count {
                        s.deadlines[timeout] = []
                        s.heads[timeout] = 0
                    } else if head > 4_096 {
                        s.deadlines[timeout] = Array(queue[head...])
                        s.heads[timeout] = 0
                    } else {
                        s.heads[timeout] = head
                    }
                }
                return out
            }
            for p in expired { p.completion(.timedOut) }
        }
    }

    static func monotonicNs() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// A one-shot reply handed to a waiting thread.
final class ReplyBox: @unchecked Sendable {
    private let value = Mutex<FleetBusReply?>(nil)
    private let semaphore = DispatchSemaphore(value: 0)
    func set(_ r: FleetBusReply) {
        self.value.withLock { $0 = r }
        self.semaphore.signal()
    }
    func wait() -> FleetBusReply {
        self.semaphore.wait()
        return self.value.withLock { $0! }
    }
}

/// Request latencies on the bus, by kind, as Prometheus histograms (`relay_fleet_request_seconds`).
public final class FleetLatencies: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// A live frame to another edge, until its status byte returned.
        case live
        /// A store notice to the recipient's edge.
        case storedNotice = "stored_notice"
        /// A publish to the stream, until JetStream acknowledged it (replicated).
        case jetStreamPublish = "js_publish"
        /// A stream API call: message get, delete, stream info.
        case jetStreamAPI = "js_api"
        /// A login's claim on its key, until the edge that held the key let go (or none held it).
        case claim
    }

    public static let boundsSeconds: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1]

    struct Histogram {
        var buckets = [UInt64](repeating: 0, count: FleetLatencies.boundsSeconds.count)
        var count: UInt64 = 0
        var sumNs: UInt64 = 0
    }

    private let histograms = Mutex([String: Histogram]())

    public init() {}

    func record(_ kind: Kind, ns: UInt64) {
        let seconds = Double(ns) / 1e9
        self.histograms.withLock { h in
            var x = h[kind.rawValue] ?? Histogram()
            x.count += 1
            x.sumNs &+= ns
            for (i, b) in Self.boundsSeconds.enumerated() where seconds <= b { x.buckets[i] += 1 }
            h[kind.rawValue] = x
        }
    }

    /// Prometheus text for every kind seen so far.
    public func render() -> String {
        let snapshot = self.histograms.withLock { $0 }
        var out = "# HELP relay_fleet_request_seconds Requests to other edges and to JetStream, until answered.\n"
        out += "# TYPE relay_fleet_request_seconds histogram\n"
        for kind in Kind.allCases {
            guard let h = snapshot[kind.rawValue] else { continue }
            for (i, b) in Self.boundsSeconds.enumerated() {
                out += "relay_fleet_request_seconds_bucket{kind=\"\(kind.rawValue)\",le=\"\(b)\"} \(h.buckets[i])\n"
            }
            out += "relay_fleet_request_seconds_bucket{kind=\"\(kind.rawValue)\",le=\"+Inf\"} \(h.count)\n"
            out += "relay_fleet_request_seconds_sum{kind=\"\(kind.rawValue)\"} \(Double(h.sumNs) / 1e9)\n"
            out += "relay_fleet_request_seconds_count{kind=\"\(kind.rawValue)\"} \(h.count)\n"
        }
        return out
    }
}
