internal import CCurl
internal import CCurlShim
import Foundation
import Synchronization

/// `curl_global_init` for the whole process, run once before the first handle is made (libcurl requires it
/// before any other thread uses libcurl; a global `let` initializer runs exactly once, thread-safely).
private let curlGlobalInit: Void = {
    let code = curl_global_init(Int(CURL_GLOBAL_ALL))
    precondition(code == CURLE_OK, "curl_global_init failed: \(code.rawValue)")
}()

/// The `CURLM *`, Sendable because only the loop thread calls into it (and the deinit, once that thread ended).
private struct MultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

/// One `curl_multi` handle driven by one dedicated thread through libcurl's socket interface
/// (`CurlSocketEvents`): `curl_multi_socket_action` for each ready socket and for libcurl's timer,
/// `curl_multi_info_read`, then `epoll_wait` until the next socket event, deadline or wake-up.
///
/// Other threads never touch a transfer's easy handle. They post work (start, cancel, resume) to the
/// mutex-guarded inbox and write the loop's eventfd, which ends the wait at once: a cancel takes effect within
/// milliseconds, where an xferinfo-callback abort waits up to a second on an idle connection
/// (platform-notes.md §2). The multi handle's connection cache gives keep-alive reuse across requests.
final class CurlMultiLoop: Sendable {
    private struct Inbox {
        var started: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var resumed: [CurlTransfer] = []
        var shuttingDown = false
    }

    /// Longest wait with nothing scheduled; only a backstop, wake-ups and libcurl's own timer end it sooner.
    private static let maxPollMilliseconds: Int32 = 1000

    private let multi: MultiHandle
    /// The sockets and timer libcurl asked for; declared after `multi`, and alive until the deinit's cleanup
    /// (which may still call its callbacks) returns.
    private let events = CurlSocketEvents()
    private let inbox = Mutex(Inbox())
    /// The loop thread's `pthread_self()`, once it runs: work it posts to itself (a handler letting go of its
    /// transfer, a delivery resuming one) needs no wake-up through the eventfd, only another pass.
    private let loopThread = Atomic<UInt>(0)
    /// The loop thread posted work to itself during the pass: the next wait must not sleep.
    private let selfWakePending = Atomic<Bool>(false)
    /// Wake-ups asked of the loop thread from other threads; those made while one is pending share its eventfd
    /// write (`CurlSocketEvents.wakeWrites`).
    let wakeupsSent = Atomic<Int>(0)
    /// Passes of the loop so far (tests bound them: a paused transfer's socket must not keep it spinning).
    let passes = Atomic<Int>(0)
    /// Paced reads that held their socket out of the set rather than pausing the transfer (tests count them).
    let socketHolds = Atomic<Int>(0)
    /// Cancels posted to the inbox (tests count them).
    let cancelsPosted = Atomic<Int>(0)
    /// Holds ended (the socket returned to the set, or left with its transfer) (tests count them).
    let holdReleases = Atomic<Int>(0)
    /// Easy handles reused from the pool so far (tests count them).
    let handlesReused = Atomic<Int>(0)
    private let maxConnections: Int

    /// - Parameter maxConnections: idle connections kept for reuse (CURLMOPT_MAXCONNECTS).
    init(maxConnections: Int) {
        _ = curlGlobalInit
        guard let raw = curl_multi_init() else {
            fatalError("curl_multi_init failed: out of memory")
        }
        self.multi = MultiHandle(raw: raw)
        self.maxConnections = max(1, maxConnections)
        self.events.attach(to: raw)
        // Ignoring the code: MAXCONNECTS takes any non-negative long, and a failure only costs reuse.
        _ = ccurl_multi_setopt_long(raw, CURLMOPT_MAXCONNECTS, max(1, maxConnections))
        let thread = Thread { [self] in
            Posix.nameCurrentThread("homebase.http")
            self.run()
        }
        thread.name = "homebase.http"
        thread.start()
    }

    deinit {
        // Last reference: the loop thread has exited (it holds one while it runs), so no easy handle remains.
        curl_multi_cleanup(self.multi.raw)
    }

    // MARK: Any thread

    /// Queues `transfer` to start; fails it with `cancelled` if the loop is shutting down (cannot happen
    /// through `HTTPClient`, which shuts the loop down only from its deinit).
    func start(_ transfer: CurlTransfer) {
        let accepted = self.inbox.withLock { inbox in
            guard !inbox.shuttingDown else { return false }
            inbox.started.append(transfer)
            return true
        }
        if accepted {
            self.wake()
        } else {
            transfer.cancelRequested.store(true, ordering: .relaxed)
            transfer.finish(error: .cancelled)  // never reached the loop thread, so this thread may finish it
        }
    }

    /// Aborts `transfer` (it fails with `cancelled`); harmless if it already ended.
    func cancel(_ transfer: CurlTransfer) {
        // A consumer letting go of a transfer that has ended (from inside its ending, or later: the Homebase's
        // stream stops its request once the answer is done): nothing left to abort, and posting it would cost
        // the loop a pass of its own, and a wake-up from another thread. One that ends meanwhile is posted,
        // and the loop finds it gone.
        if transfer.hasFinished.load(ordering: .acquiring) { return }
        self.cancelsPosted.add(1, ordering: .relaxed)
        transfer.cancelRequested.store(true, ordering: .relaxed)
        self.inbox.withLock { $0.cancelled.append(transfer) }
        self.wake()
    }

    /// Resumes `transfer` after the consumer drained its buffer.
    func resume(_ transfer: CurlTransfer) {
        self.inbox.withLock { $0.resumed.append(transfer) }
        self.wake()
    }

    /// The client is gone: the thread ends once the transfers still running (streams being read) are done.
    func shutdown() {
        self.inbox.withLock { $0.shuttingDown = true }
        self.wake()
    }

    private func wake() {
        if UInt(pthread_self()) == self.loopThread.load(ordering: .relaxed) {
            self.selfWakePending.store(true, ordering: .relaxed)
            return
        }
        self.wakeupsSent.add(1, ordering: .relaxed)
        self.events.wake()
    }

    // MARK: Loop thread

    private func run() {
        self.loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        let multi = self.multi.raw
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        // As many idle handles as idle connections: a burst's handles serve the next burst.
        let handles = CurlHandlePool(capacity: self.maxConnections)

        func remove(_ easy: UnsafeMutableRawPointer) -> CurlTransfer? {
            guard let transfer = active.removeValue(forKey: easy) else { return nil }
            _ = curl_multi_remove_handle(multi, easy)  // cannot fail for a handle we added
            // The handle's address may be the next handle's: its socket is not that one's.
            self.events.forget(easy)
            // libcurl told the socket callback it is done with the socket (which ended any hold); if it
            // keeps the socket watched (another transfer on it), it must not stay held by this one.
            self.releaseHold(transfer)
            return transfer
        }

        while true {
            self.passes.add(1, ordering: .relaxed)
            let work = self.inbox.withLock { inbox in
                defer {
                    inbox.started = []
                    inbox.cancelled = []
                    inbox.resumed = []
                }
                return inbox
            }
            // The client is gone and nothing runs: no one can start another transfer, so the thread may end.
            if work.shuttingDown && work.started.isEmpty && active.isEmpty {
                return
            }
            var now = Posix.monotonicNs
            var nextDeadline: UInt64?
            var unpaced = false
            // Wake-ups of other threads asked for during the pass happen once, at its end; the relay link's is
            // the frames the handlers queued, which this thread then writes itself when it can.
            DeferredWakes.batch {
                for transfer in work.started {
                    if transfer.cancelRequested.load(ordering: .relaxed) {
                        transfer.finish(error: .cancelled)
                        continue
                    }
                    do throws(HTTPClientError) {
                        let easy = try transfer.makeEasyHandle(pool: handles)
                        let code = curl_multi_add_handle(multi, easy)
                        guard code == CURLM_OK else {
                            let message = String(cString: curl_multi_strerror(code))
                            transfer.finish(error: .transport(code: Int32(code.rawValue), message: message))
                            continue
                        }
                        active[easy] = transfer
                    } catch {
                        transfer.finish(error: error)
                    }
                }
                if !work.started.isEmpty { self.handlesReused.store(handles.reused, ordering: .relaxed) }
                for transfer in work.cancelled {
                    guard let easy = transfer.easy, active[easy] != nil else { continue }
                    // Already draining (a consumer may let go more than once: the Homebase's stream and the
                    // engine's handler both do): the drain's deadline bounds it; aborting it would close the
                    // connection it exists to keep.
                    if transfer.drainDeadlineNs != nil { continue }
                    if let pacing = transfer.request.bodyPacing, pacing.isFinished {
                        // The consumer had the whole answer: read the rest (the chunked terminator) so the
                        // connection can be reused, for at most the grace; the deadline check below aborts it after.
                        transfer.drainDeadlineNs = Posix.monotonicNs + Posix.nanoseconds(pacing.drainGrace)
                        self.releaseHold(transfer)
                        if transfer.pacedUntilNs != nil || transfer.isPaused {
                            transfer.pacedUntilNs = nil
                            transfer.isPaused = false
                            _ = curl_easy_pause(easy, 0)  // CURLPAUSE_CONT
                        }
                        continue
                    }
                    remove(easy)?.finish(error: .cancelled)
                }
                for transfer in work.resumed {
                    guard let easy = transfer.easy, active[easy] != nil, transfer.isPaused else { continue }
                    transfer.isPaused = false
                    transfer.pacedUntilNs = nil  // CONT below lifts a pacing pause too, and so a hold
                    self.releaseHold(transfer)
                    transfer.lastActivityNs = Posix.monotonicNs
                    // May call the write callback right here with the held-back bytes (and pause again).
                    _ = curl_easy_pause(easy, 0)  // 0 is CURLPAUSE_CONT, a macro Swift does not import
                }

                // libcurl runs the transfers of the sockets whose pacing tick came, of those the last wait
                // found ready, then those its timer is due for (new transfers, resumed ones, its own
                // timeouts). Errors surface per transfer through info_read.
                var running: Int32 = 0
                for socket in self.dueHolds(in: active, now: Posix.monotonicNs) {
                    _ = curl_multi_socket_action(multi, socket, CurlSocketEvents.selectIn, &running)
                }
                for ready in self.events.ready {
                    _ = curl_multi_socket_action(multi, ready.fd, ready.mask, &running)
                }
                if let due = self.events.timerDeadlineNs, due <= Posix.monotonicNs {
                    self.events.timerDeadlineNs = nil  // the action may set the next one
                    _ = curl_multi_socket_action(multi, CurlSocketEvents.socketTimeout, 0, &running)
                }
                var queued: Int32 = 0
                while let message = curl_multi_info_read(multi, &queued) {
                    guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                    // Read before removal: the message dies with curl_multi_remove_handle.
                    let code = message.pointee.data.result
                    remove(easy)?.finish(curlCode: code)
                }

                now = Posix.monotonicNs
                for (easy, transfer) in active {
                    if transfer.sawBytes {
                        transfer.sawBytes = false
                        transfer.lastActivityNs = now
                    }
                    if let deadline = transfer.drainDeadlineNs {
                        if deadline <= now {
                            remove(easy)?.finish(error: .cancelled)
                        } else if nextDeadline.map({ deadline < $0 }) ?? true {
                            nextDeadline = deadline
                        }
                        continue
                    }
                    // One wake-up of the consumer for everything this pass delivered (a pushed consumer
                    // may start pacing right here, so the pause below follows its first text at once). Bytes
                    // libcurl read during a hold wait for the tick.
                    if !transfer.isHeldUntilTick, transfer.flushDelivery() {
                        self.resume(transfer)
                    }
                    if let interval = transfer.pacingIntervalNs {
                        self.pace(transfer, easy: easy, interval: interval, now: now, unpaced: &unpaced)
                        if let until = transfer.pacedUntilNs, nextDeadline.map({ until < $0 }) ?? true {
                            nextDeadline = until
                        }
                    }
                    guard let idle = transfer.idleTimeoutNs, !transfer.isPaused, transfer.pacedUntilNs == nil else {
                        continue
                    }
                    let deadline = transfer.lastActivityNs + idle
                    if deadline <= now {
                        transfer.fail(.timedOut)
                        remove(easy)?.finish(error: .timedOut)
                    } else if nextDeadline.map({ deadline < $0 }) ?? true {
                        nextDeadline = deadline
                    }
                }
            }
            var timeout = Self.maxPollMilliseconds
            // Read (and cleared) every pass, so a flag set in a pass that waits without sleeping anyway does
            // not make the next one skip its sleep too.
            let selfWoken = self.selfWakePending.exchange(false, ordering: .relaxed)
            if unpaced || selfWoken {
                // Reading resumed, or the pass posted work to this thread's inbox: another pass at once.
                timeout = 0
            } else {
                if let nextDeadline {
                    timeout = min(timeout, Posix.millisecondsUntil(nextDeadline))
                }
                if let timer = self.events.timerDeadlineNs {
                    timeout = min(timeout, Posix.millisecondsUntil(timer))
                }
            }
            self.events.wait(timeoutMs: timeout)
        }
    }

    /// The first grid tick after `now` (monotonic ns; the grid is multiples of `interval` since the clock's
    /// origin). Transfers paced alike resume together, so one wake-up of this thread (and one burst of work
    /// downstream) serves all of them, instead of one each at scattered times.
    static func nextTick(after now: UInt64, interval: UInt64) -> UInt64 {
        (now / interval + 1) * interval
    }

    /// When a transfer paused at `now` reads again: the first grid tick more than half an interval away
    /// (plus 2 ms for consumers' millisecond clocks). So consecutive deliveries are never closer than that,
    /// the first one after the unpaced first text included: a consumer that coalesces with a tolerance of
    /// half an interval (the Homebase) finds every read due, and never needs a timer of its own.
    static func resumeTick(after now: UInt64, interval: UInt64) -> UInt64 {
        Self.nextTick(after: now + min(interval / 2 + 2_000_000, interval), interval: interval)
    }

    /// The held sockets whose pacing tick has come (the transfers' `pacedUntilNs` is cleared), for the pass to
    /// read at once, still out of the set: if the read brings text, the socket stays out for the next interval
    /// without an `epoll_ctl` either way (`pace`); otherwise it returns to the set. Reading on the tick rather
    /// than putting the socket back and waiting for the kernel to report it saves two `epoll_ctl`s and a pass
    /// per paced read. A hold libcurl ended (it removed the socket) is over: nothing to read here.
    private func dueHolds(in active: [UnsafeMutableRawPointer: CurlTransfer], now: UInt64) -> [Int32] {
        var due: [Int32] = []
        for transfer in active.values {
            guard let socket = transfer.heldSocket, let until = transfer.pacedUntilNs, until <= now else { continue }
            transfer.pacedUntilNs = nil
            transfer.lastActivityNs = now  // paced time is not silence: the idle timeout counts from here
            if self.events.isHeld(socket) {
                due.append(socket)
            } else {
                transfer.heldSocket = nil
                self.holdReleases.add(1, ordering: .relaxed)
            }
        }
        return due
    }

    /// Read pacing (`HTTPRequest.bodyPacing`): after a delivery, stop reading the socket for `interval`, by a
    /// hold (plain HTTP/1: the socket out of the set; `dueHolds` reads it at the tick) or a pause (libcurl's
    /// CURLPAUSE_RECV; lifted here when the time is up, `unpaced` asking the loop for another pass at once). A
    /// hold whose tick's read brought nothing to deliver returns the socket to the set.
    private func pace(_ transfer: CurlTransfer, easy: UnsafeMutableRawPointer, interval: UInt64,
                      now: UInt64, unpaced: inout Bool) {
        if let until = transfer.pacedUntilNs {
            // A hold's tick is the next pass's to read (`dueHolds`); the loop's deadline makes that pass come.
            guard until <= now, transfer.heldSocket == nil else { return }
            transfer.pacedUntilNs = nil
            transfer.lastActivityNs = now  // paced time is not silence: the idle timeout counts from here
            if !transfer.isPaused {
                // May deliver what libcurl holds right here, which asks for the next pause.
                _ = curl_easy_pause(easy, 0)  // CURLPAUSE_CONT
                unpaced = true
            }
        }
        if transfer.wantsPacingPause {
            transfer.wantsPacingPause = false
            // A transfer the consumer paused (buffer full) stays paused until it resumes it.
            guard !transfer.isPaused, transfer.pacedUntilNs == nil else { return }
            if transfer.heldSocket != nil {
                // Read on its tick, still held: it stays out of the set for another interval.
                self.socketHolds.add(1, ordering: .relaxed)
            } else if transfer.mayHoldSocket, let socket = self.events.socket(of: easy) {
                // The socket is left unread: out of the set until the tick.
                self.events.hold(socket)
                transfer.heldSocket = socket
                self.socketHolds.add(1, ordering: .relaxed)
            } else {
                _ = curl_easy_pause(easy, 1)  // CURLPAUSE_RECV: the socket is left unread until CONT
            }
            transfer.pacedUntilNs = Self.resumeTick(after: now, interval: interval)
        } else if transfer.heldSocket != nil, transfer.pacedUntilNs == nil {
            // The tick's read brought nothing to deliver: the kernel reports the next bytes.
            self.releaseHold(transfer)
        }
    }

    /// Ends a pacing hold on `transfer`'s socket, if it has one.
    private func releaseHold(_ transfer: CurlTransfer) {
        guard let socket = transfer.heldSocket else { return }
        transfer.heldSocket = nil
        self.events.release(socket)
        self.holdReleases.add(1, ordering: .relaxed)
    }
}
