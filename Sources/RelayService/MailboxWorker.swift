import Dispatch
import Foundation
import HomebaseCore
import HomebaseStore
import HomebaseTransport
import Synchronization

/// Runs the mailbox on its own thread so the event loop never waits for a disk write.
///
/// Jobs run in submission order. Consecutive enqueues are committed together in one transaction (group commit:
/// one fsync for every STORE frame that arrived while the previous commit was in progress), which keeps the
/// durability guarantee ("written durably before RECEIPT 1") at a fraction of the cost. Completions are handed
/// to `deliver`, which the relay points at its event loop.
final class MailboxWorker: Sendable {
    enum Job: Sendable {
        case enqueue(MailboxItem, completion: @Sendable (Result<MailboxEnqueueResult, any Error>) -> Void)
        case pending(PublicKey, after: UInt64, limit: Int, completion: @Sendable (Result<[StoredFrame], any Error>) -> Void)
        case pendingCount(PublicKey, completion: @Sendable (Result<Int, any Error>) -> Void)
        case acknowledge(PublicKey, deliveryID: UInt64)
        case expire(completion: @Sendable (Result<Int, any Error>) -> Void)
        case depth(completion: @Sendable (Result<(frames: Int, bytes: Int, mailboxes: Int), any Error>) -> Void)
        /// Runs after every job submitted before it: the caller knows everything before is durable.
        case barrier(completion: @Sendable () -> Void)
    }

    private struct Queue {
        var jobs: [Job] = []
        var stopped = false
    }

    /// Enqueues committed per transaction at most; bounds the latency of the first receipt in a batch.
    static let maxBatch = 256

    private let mailbox: any Mailbox
    private let clock: @Sendable () -> UInt64
    private let queue = Mutex(Queue())
    /// Counts submissions; extra signals only cause an extra look at an empty queue.
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    init(mailbox: any Mailbox, clock: @escaping @Sendable () -> UInt64) {
        self.mailbox = mailbox
        self.clock = clock
    }

    /// Starts the worker thread.
    func start() {
        let thread = Thread { [self] in
            Posix.nameCurrentThread("relay-mailbox")
            self.run()
        }
        thread.name = "relay-mailbox"
        thread.start()
    }

    func submit(_ job: Job) {
        let accepted = self.queue.withLock { q -> Bool in
            guard !q.stopped else { return false }
            q.jobs.append(job)
            return true
        }
        if accepted { self.wake.signal() }
    }

    /// Finishes every job already submitted, then stops the thread. Blocks until done.
    func stopAndDrain() {
        let alreadyStopped = self.queue.withLock { q -> Bool in
            defer { q.stopped = true }
            return q.stopped
        }
        guard !alreadyStopped else { return }
        self.wake.signal()
        self.done.wait()
    }

    private func run() {
        while true {
            let (jobs, stopped) = self.queue.withLock { q -> ([Job], Bool) in
                let jobs = q.jobs
                q.jobs.removeAll(keepingCapacity: true)
                return (jobs, q.stopped)
            }
            if jobs.isEmpty {
                if stopped { break }
                self.wake.wait()
                continue
            }
            self.process(jobs)
        }
        self.done.signal()
    }

    private func process(_ jobs: [Job]) {
        var i = 0
        while i < jobs.count {
            // Collect a run of consecutive enqueues into one commit.
            var batch: [(MailboxItem, @Sendable (Result<MailboxEnqueueResult, any Error>) -> Void)] = []
            while i < jobs.count, batch.count < Self.maxBatch, case .enqueue(let item, let completion) = jobs[i] {
                batch.append((item, completion))
                i += 1
            }
            if !batch.isEmpty {
                do {
                    let results = try self.mailbox.enqueueBatch(batch.map(\.0), nowMs: self.clock())
                    for (j, result) in results.enumerated() { batch[j].1(.success(result)) }
                } catch {
                    for (_, completion) in batch { completion(.failure(error)) }
                }
                continue
            }
            // A run of consecutive ACKs: one write, not synced (`Mailbox.acknowledgeBatch`).
            var acks: [(recipient: PublicKey, deliveryID: UInt64)] = []
            while i < jobs.count, case .acknowledge(let recipient, let deliveryID) = jobs[i] {
                acks.append((recipient, deliveryID))
                i += 1
            }
            if !acks.isEmpty {
                // An unknown id is not an error (relay.md §5); a failed delete is retried by redelivery.
                try? self.mailbox.acknowledgeBatch(acks)
                continue
            }
            let now = self.clock()
            switch jobs[i] {
            case .enqueue:
                preconditionFailure("enqueues are batched above")
            case .pending(let recipient, let after, let limit, let completion):
                completion(Result { try self.mailbox.pending(recipient: recipient, after: after, limit: limit, nowMs: now) })
            case .pendingCount(let recipient, let completion):
                completion(Result { try self.mailbox.pendingCount(recipient: recipient, nowMs: now) })
            case .acknowledge:
                preconditionFailure("acknowledgements are batched above")
            case .expire(let completion):
                completion(Result { try self.mailbox.expire(nowMs: now) })
            case .depth(let completion):
                completion(Result { try self.mailbox.totalDepth() })
            case .barrier(let completion):
                completion()
            }
            i += 1
        }
    }
}

