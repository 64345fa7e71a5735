#if os(Linux)
internal import CLinux
import Glibc
import Synchronization

/// Something registered with an `EventLoop` that reacts to epoll readiness. Loop-confined.
protocol EventLoopSource: AnyObject {
    /// Handles the epoll event bits for this source's descriptor.
    func handleEvents(_ events: UInt32)
    /// The loop is shutting down: close without waiting for anything.
    func loopIsClosing()
}

/// A single-threaded, edge-triggered epoll event loop for servers.
///
/// Every descriptor is registered once (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET for connections) and
/// never modified, so the hot path costs one epoll_wait per batch and no epoll_ctl. An eventfd wakes
/// the loop for `execute(_:)` and `stop()`. Timers live in a min-heap that sets epoll_wait's timeout.
///
/// Confinement: `run()` owns the thread that calls it. Listeners, connections, timers and delegates are
/// touched only on that thread (or, before `run()` starts, on the thread that will call it).
///
/// `@unchecked Sendable` because the only members used from other threads are `stop()` and
/// `execute(_:)` (a Mutex-guarded queue, an Atomic flag and an eventfd write, all thread-safe) and the
/// read-only `inEventLoop`; every other member is loop-confined by contract and checked with `assert`
/// in debug builds.
public final class EventLoop: @unchecked Sendable {
    /// Bytes read per recv() into the one buffer all connections share (connections hold none).
    public static let readBufferBytes = 64 * 1024
    /// Events fetched per epoll_wait.
    static let maxEventsPerWait = 256
    /// Marks the eventfd in epoll data; real registrations have a non-zero token in the high half.
    private static let wakeData: UInt64 = 0

    private let epollFD: Int32
    private let wakeFD: Int32
    /// Shared read buffer: valid only during a `connectionReadable` callback.
    let readBuffer: UnsafeMutableRawBufferPointer
    private let events: UnsafeMutablePointer<epoll_event>

    /// Work from `execute`; nil once `run()` has returned (later work is dropped, not kept forever).
    private let inbox = Mutex<[@Sendable () -> Void]?>([])
    private let stopRequested = Atomic<Bool>(false)
    /// pthread_self() of the running thread, 0 before `run()`.
    private let runningThread = Atomic<UInt>(0)

    /// Registrations indexed by descriptor; the token detects events for a descriptor that was closed
    /// and reused within one epoll_wait batch.
    private var slots: [Slot] = []
    private var nextToken: UInt32 = 1
    private var timers = TimerHeap()
    /// Loop-local work to run after the current callback returns (close notifications, resumed reads):
    /// it keeps delegates from being re-entered from inside `write` or `close`.
    private var deferred: [() -> Void] = []
    /// Work put off to the next iteration, which then polls without blocking: a source that used its turn's
    /// budget (reads, accepts) resumes there, after every other ready source has had its turn.
    private var nextIteration: [() -> Void] = []
    private var nextConnectionID: UInt64 = 1
    private var flushHandler: (() -> Void)?
    /// Registered sources (connections and listeners).
    private(set) var registeredCount = 0
    /// Before blocking in epoll_wait, poll without blocking for this long (0: never). On a VM an idle vCPU
    /// takes up to a millisecond to wake, which sets the round trip's tail; spinning keeps the vCPU awake
    /// for the next frame at the price of the CPU spent spinning. Set before `run()`.
    public var busyPollNs: UInt64 = 0

    private struct Slot {
        var source: EventLoopSource?
        var token: UInt32 = 0
    }

    /// Creates the loop's epoll instance, eventfd and read buffer.
    /// - Throws: `TransportError.io` when the kernel refuses (descriptor limits).
    public init() throws(TransportError) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw .io(Posix.errno) }
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            let code = Posix.errno
            Posix.closeDescriptor(epollFD)
            throw .io(code)
        }
        var event = epoll_event(
            events: EPOLLIN.rawValue | EPOLLET.rawValue, data: epoll_data_t(u64: EventLoop.wakeData))
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0 else {
            let code = Posix.errno
            Posix.closeDescriptor(epollFD)
            Posix.closeDescriptor(wakeFD)
            throw .io(code)
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        self.readBuffer = .allocate(byteCount: EventLoop.readBufferBytes, alignment: 16)
        self.events = .allocate(capacity: EventLoop.maxEventsPerWait)
    }

    deinit {
        for slot in self.slots { slot.source?.loopIsClosing() }
        Posix.closeDescriptor(self.epollFD)
        Posix.closeDescriptor(self.wakeFD)
        self.readBuffer.deallocate()
        self.events.deallocate()
    }

    // MARK: Thread-safe entry points

    /// Asks `run()` to return after the current iteration. Thread-safe; idempotent.
    public func stop() {
        self.stopRequested.store(true, ordering: .sequentiallyConsistent)
        self.wake()
    }

    /// Runs `work` on the loop thread soon. Thread-safe. Work submitted after `run()` returned never runs, and is
    /// released at once.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        let wasEmpty = self.inbox.withLock { queue in
            queue?.append(work)
            return queue?.count == 1
        }
        // Only the first item since the last drain needs a wakeup: the loop reads the eventfd before it
        // takes the queue, so a later item either rides along or finds the queue empty and writes again.
        if wasEmpty { self.wake() }
    }

    /// True on the thread currently inside `run()`.
    public var inEventLoop: Bool {
        self.runningThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    private func wake() {
        var one: UInt64 = 1
        // EAGAIN means the counter is already non-zero, which is a pending wakeup: fine to ignore.
        _ = Glibc.write(self.wakeFD, &one, 8)
    }

    // MARK: Clocks

    /// Now, for handlers that work with `ContinuousClock` deadlines.
    public var now: ContinuousClock.Instant { .now }
    /// Monotonic milliseconds (CLOCK_MONOTONIC), the clock timers use.
    public var nowMs: UInt64 { Posix.monotonicMs }
    /// Wall-clock milliseconds since the Unix epoch, for timestamps only.
    public var wallClockMs: UInt64 { Posix.wallClockMs }

    // MARK: Loop-only API

    /// Calls `callback` on the loop after `delay` (monotonic clock, millisecond resolution from
    /// epoll_wait). Timers with equal deadlines fire in scheduling order. Loop-only.
    @discardableResult
    public func scheduleTimer(after delay: Duration, _ callback: @escaping () -> Void) -> TimerHandle {
        assert(self.isConfined, "scheduleTimer called off the event loop thread")
        return self.timers.schedule(deadlineNs: Posix.monotonicNs &+ Posix.nanoseconds(delay), callback)
    }

    /// Cancels a timer; a fired or already cancelled timer is ignored. Loop-only.
    public func cancelTimer(_ handle: TimerHandle) {
        assert(self.isConfined, "cancelTimer called off the event loop thread")
        self.timers.cancel(handle)
    }

    /// Live timers, for tests.
    var timerCount: Int { self.timers.count }

    /// Runs the loop on the calling thread until `stop()`. On return every listener and connection
    /// still open has been closed (delegates told), and pending `execute` work has run. The loop then lets go of
    /// every callback it holds (timers, the flush handler, sources): they typically capture the loop's owner,
    /// which holds the loop, and that cycle would keep a stopped server, its descriptors and its database alive.
    public func run() {
        self.runningThread.store(UInt(pthread_self()), ordering: .relaxed)
        defer { self.runningThread.store(0, ordering: .relaxed) }
        while !self.stopRequested.load(ordering: .relaxed) {
            self.runOnce()
        }
        self.drainInbox()
        for slot in self.slots { slot.source?.loopIsClosing() }
        self.runDeferred()
        let late = self.inbox.withLock { $0.take() }
        _ = consume late  // released outside the lock: a closure's captures may call `execute` as they go
        self.timers = TimerHeap()
        self.flushHandler = nil
        self.slots = []
        self.registeredCount = 0
    }

    private func runOnce() {
        // Taken before waiting: what they put off again runs in the iteration after this one.
        let resumed = self.nextIteration
        self.nextIteration = []
        var timeoutMs: Int32 = -1
        if !self.deferred.isEmpty || !resumed.isEmpty {
            timeoutMs = 0
        } else if let deadlineNs = self.timers.nextDeadlineNs() {
            let nowNs = Posix.monotonicNs
            timeoutMs = deadlineNs <= nowNs ? 0 : Int32(clamping: (deadlineNs - nowNs + 999_999) / 1_000_000)
        }
        var count: Int32 = 0
        if timeoutMs != 0, self.busyPollNs > 0 {
            let until = Posix.monotonicNs &+ self.busyPollNs
            repeat {
                count = epoll_wait(self.epollFD, self.events, Int32(EventLoop.maxEventsPerWait), 0)
            } while count == 0 && Posix.monotonicNs < until
        }
        if count == 0 {
            count = epoll_wait(self.epollFD, self.events, Int32(EventLoop.maxEventsPerWait), timeoutMs)
        }
        if count < 0 {
            let code = Posix.errno
            // EINTR is a signal; anything else means our epoll descriptor is broken, which is our bug.
            precondition(code == EINTR, "epoll_wait failed: \(Posix.describe(errno: code))")
            return
        }
        for index in 0..<Int(count) {
            let data = self.events[index].data.u64
            if data == EventLoop.wakeData {
                self.drainInbox()
                continue
            }
            let fd = Int(truncatingIfNeeded: data & 0xFFFF_FFFF)
            let token = UInt32(truncatingIfNeeded: data >> 32)
            guard fd < self.slots.count, self.slots[fd].token == token, let source = self.slots[fd].source
            else { continue }
            source.handleEvents(self.events[index].events)
            if !self.deferred.isEmpty { self.runDeferred() }
        }
        for work in resumed {
            work()
            if !self.deferred.isEmpty { self.runDeferred() }
        }
        self.runExpiredTimers()
        if !self.deferred.isEmpty { self.runDeferred() }
        if let flush = self.flushHandler {
            flush()
            if !self.deferred.isEmpty { self.runDeferred() }
        }
    }

    /// Called once per loop iteration, after every ready event, timer and `execute` item was handled and
    /// before the loop waits again: the place to flush output gathered during the iteration in one write per
    /// connection. Loop-only.
    public func setFlushHandler(_ handler: @escaping () -> Void) {
        self.flushHandler = handler
    }

    private func drainInbox() {
        var counter: UInt64 = 0
        // Reset the eventfd before taking the queue (see `execute`); EAGAIN just means it was zero.
        _ = Glibc.read(self.wakeFD, &counter, 8)
        let work = self.inbox.withLock { queue in
            let taken = queue ?? []
            queue?.removeAll()
            return taken
        }
        for item in work {
            item()
            if !self.deferred.isEmpty { self.runDeferred() }
        }
    }

    private func runExpiredTimers() {
        guard self.timers.count > 0 else { return }
        let nowNs = Posix.monotonicNs
        while let callback = self.timers.popExpired(nowNs: nowNs) {
            callback()
            if !self.deferred.isEmpty { self.runDeferred() }
        }
    }

    private func runDeferred() {
        while !self.deferred.isEmpty {
            let batch = self.deferred
            self.deferred = []
            for item in batch { item() }
        }
    }

    // MARK: Registration (loop-internal)

    /// True on the loop thread, or before the loop runs (setup on the thread that will run it).
    var isConfined: Bool {
        let running = self.runningThread.load(ordering: .relaxed)
        return running == 0 || running == UInt(pthread_self())
    }

    /// Queues loop-local work after the current callback (never re-entrant).
    func deferWork(_ work: @escaping () -> Void) {
        self.deferred.append(work)
    }

    /// Queues work for the loop's next iteration, after the sources ready then: a handler that used its turn's
    /// budget continues there, so one busy peer does not hold up the others. Loop-only.
    public func deferToNextIteration(_ work: @escaping () -> Void) {
        assert(self.isConfined, "deferToNextIteration called off the event loop thread")
        self.nextIteration.append(work)
    }

    func makeConnectionID() -> UInt64 {
        defer { self.nextConnectionID += 1 }
        return self.nextConnectionID
    }

    /// Registers `fd` edge-triggered for `events`; returns errno on failure.
    func register(_ fd: Int32, events: UInt32, source: EventLoopSource) -> Int32? {
        assert(self.isConfined, "register called off the event loop thread")
        let token = self.nextToken
        // Token 0 is reserved so that no registration's data equals `wakeData`.
        self.nextToken = self.nextToken == UInt32.max ? 1 : self.nextToken + 1
        var event = epoll_event(events: events, data: epoll_data_t(u64: UInt64(token) << 32 | UInt64(UInt32(fd))))
        guard epoll_ctl(self.epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else { return Posix.errno }
        let index = Int(fd)
        if index >= self.slots.count {
            self.slots.append(contentsOf: repeatElement(Slot(), count: index + 1 - self.slots.count))
        }
        self.slots[index] = Slot(source: source, token: token)
        self.registeredCount += 1
        return nil
    }

    /// Forgets `fd`'s source. The caller closes the descriptor, which removes it from epoll; we skip
    /// EPOLL_CTL_DEL to save a syscall per close (we never dup our sockets, so close is enough).
    func deregister(_ fd: Int32) {
        let index = Int(fd)
        guard index < self.slots.count, self.slots[index].source != nil else { return }
        self.slots[index] = Slot()
        self.registeredCount -= 1
    }
}
#endif
