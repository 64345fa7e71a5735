internal import CCurl
internal import CCurlShim
internal import CLinux
import Glibc
import Synchronization

/// libcurl's socket interface for one multi handle (CURLMOPT_SOCKETFUNCTION and CURLMOPT_TIMERFUNCTION): the
/// sockets libcurl asks to have watched sit in an epoll set, and its one timer is a deadline the loop waits for.
///
/// Why not `curl_multi_perform` and `curl_multi_poll`: those visit every transfer on every pass, and poll every
/// transfer's socket. With 64 answers streaming and their reads paced, a pass finds bytes on a handful of them,
/// so most of that work was for transfers with nothing to do. With this interface libcurl runs only the
/// transfers whose socket is ready or whose timer is due, and a socket is handed to the kernel once, not on
/// every wait. A paused transfer's socket leaves the set (libcurl asks for that itself).
///
/// Loop thread only (libcurl calls the callbacks from inside the multi calls the loop makes), except `wake()`.
final class CurlSocketEvents: @unchecked Sendable {
    /// What `curl_multi_socket_action` is told about one socket: the fd and its CURL_CSELECT_* bits.
    struct Ready {
        var fd: Int32
        var mask: Int32
    }

    /// Events taken from the kernel per wait; more stay pending for the next one (level-triggered).
    private static let capacity = 256
    /// Marks the eventfd in epoll data; sockets carry their fd (non-negative, so never this value).
    private static let wakeData = UInt64.max

    private let epollFD: Int32
    private let wakeFD: Int32
    private let events: UnsafeMutablePointer<epoll_event>
    /// The sockets the last wait found ready, with libcurl's bits, for the next pass to hand over.
    private(set) var ready: [Ready] = []
    /// When libcurl wants `curl_multi_socket_action(CURL_SOCKET_TIMEOUT)` (monotonic ns); nil: no timer.
    var timerDeadlineNs: UInt64?
    /// What libcurl asked to watch, per socket (epoll bits), held or not. A socket is in the epoll set when it
    /// is here and not held (`inSet`), so a change of interest is one `epoll_ctl` of the right kind.
    private var interest: [Int32: UInt32] = [:]
    /// Sockets held out of the set by `hold` (read pacing) whatever libcurl asks, until `release`.
    private var held = Set<Int32>()
    /// The socket libcurl last asked to watch for each easy handle (libcurl's ACTIVESOCKET is not set while a
    /// transfer runs).
    private var sockets: [UnsafeMutableRawPointer: Int32] = [:]
    /// `epoll_ctl` calls made so far (tests count them).
    private(set) var controlCalls = 0
    /// A wake-up was written to the eventfd and `wait` has not taken it yet: later ones need no write of their
    /// own. Starts posted from other threads while the loop is busy came to about ten writes per wait.
    private let wakePending = Atomic<Bool>(false)
    /// Writes to the eventfd so far (tests count them).
    let wakeWrites = Atomic<Int>(0)

    init() {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        // Out of descriptors at start-up: nothing an HTTP client can do without them.
        precondition(epollFD >= 0 && wakeFD >= 0, "epoll_create1/eventfd failed: \(Posix.describe(errno: Posix.errno))")
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.wakeData))
        precondition(epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0, "epoll_ctl(eventfd) failed")
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        self.events = .allocate(capacity: Self.capacity)
    }

    deinit {
        Posix.closeDescriptor(self.wakeFD)
        Posix.closeDescriptor(self.epollFD)
        self.events.deallocate()
    }

    /// Installs the callbacks on `multi`. `self` must outlive the multi handle's last call (the loop owns both
    /// and cleans the multi handle up first).
    func attach(to multi: UnsafeMutableRawPointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        // Ignoring the codes: these options exist in every libcurl since 7.16, and fail only for a bad handle.
        _ = ccurl_multi_setopt_socket_cb(multi, curlSocketCallback)
        _ = ccurl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        _ = ccurl_multi_setopt_timer_cb(multi, curlTimerCallback)
        _ = ccurl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
    }

    /// Ends the current (or next) `wait` at once. Any thread. The caller posts its work before calling this, and
    /// the loop takes posted work after the wait that consumed the wake-up, so a wake-up skipped because one
    /// is pending is covered by it.
    func wake() {
        if self.wakePending.exchange(true, ordering: .acquiringAndReleasing) { return }
        self.wakeWrites.add(1, ordering: .relaxed)
        var one: UInt64 = 1
        // Fails (EAGAIN) only if the counter would overflow, and then a wake-up is pending anyway.
        _ = Glibc.write(self.wakeFD, &one, 8)
    }

    /// The socket callback: libcurl wants `fd` watched for `what` (CURL_POLL_IN, OUT, INOUT) or no more (REMOVE).
    func watch(_ fd: Int32, what: Int32, easy: UnsafeMutableRawPointer? = nil) {
        let wasInSet = self.inSet(fd)
        guard what != Self.pollRemove else {
            if let easy, self.sockets[easy] == fd { self.sockets[easy] = nil }
            // libcurl is done with the socket (its transfer ended, or it is about to close it): a hold ends too.
            self.interest[fd] = nil
            self.held.remove(fd)
            // Fails with EBADF/ENOENT when libcurl already closed the socket (the kernel then dropped it): fine.
            if wasInSet { _ = self.control(EPOLL_CTL_DEL, fd, nil) }
            return
        }
        var bits: UInt32 = 0
        if what & Self.pollIn != 0 { bits |= EPOLLIN.rawValue }
        if what & Self.pollOut != 0 { bits |= EPOLLOUT.rawValue }
        self.interest[fd] = bits
        if let easy { self.sockets[easy] = fd }
        if !self.held.contains(fd) { self.register(fd, bits, adding: !wasInSet) }
    }

    /// The socket `easy`'s transfer is using, as libcurl last told the socket callback; nil if none.
    func socket(of easy: UnsafeMutableRawPointer) -> Int32? { self.sockets[easy] }

    /// An easy handle left the multi handle (or is about to be cleaned up): forget its socket.
    func forget(_ easy: UnsafeMutableRawPointer) { self.sockets[easy] = nil }

    /// Keeps `fd` out of the set until `release(fd)`, whatever libcurl asks meanwhile: read pacing for a plain
    /// HTTP/1 connection, which costs one `epoll_ctl` each way, where `curl_easy_pause` costs that and libcurl's
    /// own bookkeeping both ways, and a timer run of the transfer on resuming. Bytes wait in the kernel.
    func hold(_ fd: Int32) {
        let wasInSet = self.inSet(fd)
        guard self.held.insert(fd).inserted else { return }
        if wasInSet { _ = self.control(EPOLL_CTL_DEL, fd, nil) }
    }

    /// Ends `hold(fd)`: the socket is watched again for what libcurl last asked (if it still asks anything).
    func release(_ fd: Int32) {
        guard self.held.remove(fd) != nil, let bits = self.interest[fd] else { return }
        self.register(fd, bits, adding: true)
    }

    /// Whether `fd` is held out of the set (libcurl's REMOVE ends a hold).
    func isHeld(_ fd: Int32) -> Bool { self.held.contains(fd) }

    /// Whether `fd` is in the epoll set: libcurl watches it and no hold keeps it out.
    private func inSet(_ fd: Int32) -> Bool { self.interest[fd] != nil && !self.held.contains(fd) }

    /// Puts `fd` in the set (`adding`) or changes its bits there.
    private func register(_ fd: Int32, _ bits: UInt32, adding: Bool) {
        var event = epoll_event(events: bits, data: epoll_data_t(u64: UInt64(UInt32(bitPattern: fd))))
        // Level-triggered, as libcurl expects: a socket with unread bytes is reported again on the next wait.
        // The other operation is the fallback for a set that changed behind our back: a socket closed without
        // a REMOVE (the kernel dropped it, and its number may be a new socket's now), or one already in it.
        if adding {
            if self.control(EPOLL_CTL_ADD, fd, &event) == EEXIST {
                _ = self.control(EPOLL_CTL_MOD, fd, &event)
            }
        } else if self.control(EPOLL_CTL_MOD, fd, &event) == ENOENT {
            _ = self.control(EPOLL_CTL_ADD, fd, &event)
        }
    }

    /// One `epoll_ctl`; returns 0 or its errno.
    private func control(_ operation: Int32, _ fd: Int32, _ event: UnsafeMutablePointer<epoll_event>?) -> Int32 {
        self.controlCalls += 1
        return epoll_ctl(self.epollFD, operation, fd, event) == 0 ? 0 : Posix.errno
    }

    /// The timer callback: run the timeout action in `milliseconds` (0: on this very pass), or never (-1).
    func setTimer(milliseconds: Int, now: UInt64) {
        if milliseconds < 0 {
            self.timerDeadlineNs = nil
        } else {
            self.timerDeadlineNs = now + UInt64(min(milliseconds, Int(Int32.max))) * 1_000_000
        }
    }

    /// Waits up to `timeoutMs` (0: just looks) for sockets, the timer's own deadline being the caller's to fold
    /// in; fills `ready`. A wake-up ends the wait and is consumed here.
    func wait(timeoutMs: Int32) {
        self.ready.removeAll(keepingCapacity: true)
        let count = epoll_wait(self.epollFD, self.events, Int32(Self.capacity), timeoutMs)
        guard count > 0 else { return }  // 0: timed out; -1: EINTR (our descriptor cannot be broken otherwise)
        for index in 0..<Int(count) {
            let event = self.events[index]
            if event.data.u64 == Self.wakeData {
                var counter: UInt64 = 0
                _ = Glibc.read(self.wakeFD, &counter, 8)  // EAGAIN: already reset
                // Cleared after the read: a wake-up from here on writes again, and the pass after this wait
                // takes whatever was posted before it.
                self.wakePending.store(false, ordering: .releasing)
                continue
            }
            var mask: Int32 = 0
            // A hang-up or error is news libcurl finds by reading: report it as readable too.
            if event.events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { mask |= Self.selectIn }
            if event.events & EPOLLOUT.rawValue != 0 { mask |= Self.selectOut }
            if event.events & EPOLLERR.rawValue != 0 { mask |= Self.selectErr }
            self.ready.append(Ready(fd: Int32(truncatingIfNeeded: event.data.u64), mask: mask))
        }
    }

    // curl.h's values (macros Swift does not import reliably); fixed by libcurl's ABI.
    static let pollIn: Int32 = 1  // CURL_POLL_IN
    static let pollOut: Int32 = 2  // CURL_POLL_OUT
    static let pollRemove: Int32 = 4  // CURL_POLL_REMOVE
    static let selectIn: Int32 = 1  // CURL_CSELECT_IN
    static let selectOut: Int32 = 2  // CURL_CSELECT_OUT
    static let selectErr: Int32 = 4  // CURL_CSELECT_ERR
    /// CURL_SOCKET_TIMEOUT: "no socket, run what the timer is for".
    static let socketTimeout: Int32 = -1
}

// Capture-free, so they convert to C function pointers; the events object comes back through the user pointer.
private let curlSocketCallback: ccurl_socket_cb = { easy, fd, what, clientp, _ in
    Unmanaged<CurlSocketEvents>.fromOpaque(clientp!).takeUnretainedValue().watch(fd, what: what, easy: easy)
    return 0
}

private let curlTimerCallback: ccurl_timer_cb = { _, timeoutMs, clientp in
    Unmanaged<CurlSocketEvents>.fromOpaque(clientp!).takeUnretainedValue()
        .setTimer(milliseconds: Int(timeoutMs), now: Posix.monotonicNs)
    return 0
}
