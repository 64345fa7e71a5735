import Glibc
import Testing

@testable import HomebaseTransport

/// `CurlSocketEvents` is what libcurl's socket and timer callbacks write to; these drive it as libcurl would,
/// with a socket pair standing in for a connection.
@Suite(.timeLimit(.minutes(1)))
struct CurlSocketEventsTests {
    /// A connected pair of non-blocking stream sockets; closed by `close`.
    struct Pair {
        let ours: Int32
        let peer: Int32
        init() throws {
            var fds: [Int32] = [0, 0]
            let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
            try #require(rc == 0)
            (self.ours, self.peer) = (fds[0], fds[1])
        }
        func close() {
            _ = Glibc.close(self.ours)
            _ = Glibc.close(self.peer)
        }
        /// One byte from the peer, for `ours` to read.
        func poke() {
            var byte: UInt8 = 7
            #expect(write(self.peer, &byte, 1) == 1)
        }
    }

    func masks(_ events: CurlSocketEvents, fd: Int32) -> [Int32] {
        events.ready.filter { $0.fd == fd }.map(\.mask)
    }

    @Test func aWatchedSocketIsReportedWithLibcurlsBits() throws {
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        events.wait(timeoutMs: 0)
        #expect(self.masks(events, fd: pair.ours).isEmpty)  // nothing to read yet
        pair.poke()
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn])
        // Level-triggered: unread bytes are reported again.
        events.wait(timeoutMs: 0)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn])
        // A change of interest replaces the old one (the socket is writable, and still readable).
        events.watch(pair.ours, what: CurlSocketEvents.pollIn | CurlSocketEvents.pollOut)
        events.wait(timeoutMs: 0)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn | CurlSocketEvents.selectOut])
        events.watch(pair.ours, what: CurlSocketEvents.pollOut)
        events.wait(timeoutMs: 0)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectOut])
    }

    /// Wake-ups asked for before the wait takes one share its write; the wait that takes it lets the next one
    /// write again, and that one ends the next wait at once.
    @Test func wakeUpsPendingShareOneWrite() throws {
        let events = CurlSocketEvents()
        for _ in 0..<3 { events.wake() }
        #expect(events.wakeWrites.load(ordering: .relaxed) == 1)
        let clock = ContinuousClock()
        var took = clock.measure { events.wait(timeoutMs: 5000) }
        #expect(took < .seconds(2))
        events.wait(timeoutMs: 0)  // consumed: nothing left
        events.wake()
        #expect(events.wakeWrites.load(ordering: .relaxed) == 2)
        took = clock.measure { events.wait(timeoutMs: 5000) }
        #expect(took < .seconds(2))
        // Taken: a wait now sleeps its timeout.
        took = clock.measure { events.wait(timeoutMs: 50) }
        #expect(took >= .milliseconds(40))
    }

    @Test func aRemovedSocketIsNoLongerReported() throws {
        // What a paused transfer relies on: libcurl removes its socket, and bytes waiting on it wake nobody.
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        pair.poke()
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)
        let start = ContinuousClock.now
        events.wait(timeoutMs: 50)
        #expect(events.ready.isEmpty)
        #expect(ContinuousClock.now - start >= .milliseconds(40))
        // Watched again (a resume): reported at once.
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn])
        // Removing twice, or a socket never added, is harmless.
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)
        events.watch(12345, what: CurlSocketEvents.pollRemove)
    }

    @Test func eachChangeOfInterestIsOneSystemCall() throws {
        // A paced transfer's socket leaves the set and comes back on every read: one epoll_ctl each way.
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)  // add
        events.watch(pair.ours, what: CurlSocketEvents.pollIn | CurlSocketEvents.pollOut)  // modify
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)  // delete
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)  // not in the set: nothing to do
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)  // add again
        #expect(events.controlCalls == 4)
        pair.poke()
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn])
    }

    @Test func aHeldSocketIsSilentUntilReleasedWithLibcurlsLatestWish() throws {
        // Read pacing holds a plain HTTP/1 socket out of the set; libcurl, unaware, may change its wish meanwhile.
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        pair.poke()
        events.hold(pair.ours)
        #expect(events.isHeld(pair.ours))
        events.wait(timeoutMs: 30)
        #expect(events.ready.isEmpty)  // bytes wait in the kernel
        events.watch(pair.ours, what: CurlSocketEvents.pollIn | CurlSocketEvents.pollOut)
        events.wait(timeoutMs: 30)
        #expect(events.ready.isEmpty)  // still held
        let calls = events.controlCalls
        events.release(pair.ours)
        #expect(events.controlCalls == calls + 1)  // one epoll_ctl back in
        events.wait(timeoutMs: 0)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn | CurlSocketEvents.selectOut])
        events.release(pair.ours)  // not held: nothing
        #expect(events.controlCalls == calls + 1)
    }

    @Test func libcurlLettingGoOfAHeldSocketEndsTheHold() throws {
        // The transfer ended while paced: libcurl's REMOVE ends the hold, so a release after it adds nothing,
        // and the connection's next transfer (libcurl asks again) is watched at once, not held.
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        events.hold(pair.ours)
        events.watch(pair.ours, what: CurlSocketEvents.pollRemove)
        #expect(!events.isHeld(pair.ours))
        events.release(pair.ours)
        pair.poke()
        events.wait(timeoutMs: 30)
        #expect(events.ready.isEmpty)  // not watched: libcurl let it go
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: pair.ours) == [CurlSocketEvents.selectIn])
    }

    @Test func eachEasyHandlesSocketIsKnownUntilForgotten() throws {
        let events = CurlSocketEvents()
        let pair = try Pair()
        defer { pair.close() }
        let easy = UnsafeMutableRawPointer(bitPattern: 0x1000)!
        let other = UnsafeMutableRawPointer(bitPattern: 0x2000)!
        #expect(events.socket(of: easy) == nil)
        events.watch(pair.ours, what: CurlSocketEvents.pollIn, easy: easy)
        events.watch(pair.peer, what: CurlSocketEvents.pollOut, easy: other)
        #expect(events.socket(of: easy) == pair.ours)
        #expect(events.socket(of: other) == pair.peer)
        events.watch(pair.peer, what: CurlSocketEvents.pollRemove, easy: other)
        #expect(events.socket(of: other) == nil)
        events.forget(easy)  // the handle left the multi handle; its address may come back as another's
        #expect(events.socket(of: easy) == nil)
    }

    @Test func aClosedAndReusedDescriptorIsWatchedAfresh() throws {
        // libcurl closes a socket (the kernel drops it from the set) and may get the same number back for a new
        // one; its first `watch` must add it, not fail on a registration that is gone.
        let events = CurlSocketEvents()
        let first = try Pair()
        events.watch(first.ours, what: CurlSocketEvents.pollIn)
        let number = first.ours
        first.close()
        let second = try Pair()
        defer { second.close() }
        #expect(second.ours == number || second.peer == number)
        let reused = second.ours == number ? second.ours : second.peer
        let other = reused == second.ours ? second.peer : second.ours
        events.watch(reused, what: CurlSocketEvents.pollIn)
        var byte: UInt8 = 7
        #expect(write(other, &byte, 1) == 1)
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: reused) == [CurlSocketEvents.selectIn])
    }

    @Test func aHangUpIsReportedAsReadable() throws {
        // libcurl learns of a closed connection by reading it.
        let events = CurlSocketEvents()
        let pair = try Pair()
        events.watch(pair.ours, what: CurlSocketEvents.pollIn)
        _ = Glibc.close(pair.peer)
        events.wait(timeoutMs: 1000)
        #expect(self.masks(events, fd: pair.ours).first.map { $0 & CurlSocketEvents.selectIn != 0 } == true)
        _ = Glibc.close(pair.ours)
    }

    @Test func aWakeUpEndsTheWaitAndIsConsumed() async throws {
        let events = CurlSocketEvents()
        let waker = Task.detached {
            try await Task.sleep(for: .milliseconds(30))
            events.wake()
        }
        let start = ContinuousClock.now
        events.wait(timeoutMs: 5000)
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(events.ready.isEmpty)  // the eventfd is not a socket to hand to libcurl
        try await waker.value
        // Consumed: the next wait sleeps its full timeout.
        let again = ContinuousClock.now
        events.wait(timeoutMs: 40)
        #expect(ContinuousClock.now - again >= .milliseconds(30))
    }

    @Test func theTimerFollowsLibcurlsRequests() {
        let events = CurlSocketEvents()
        #expect(events.timerDeadlineNs == nil)
        events.setTimer(milliseconds: 0, now: 1_000)
        #expect(events.timerDeadlineNs == 1_000)  // due on this very pass
        events.setTimer(milliseconds: 25, now: 1_000)
        #expect(events.timerDeadlineNs == 1_000 + 25_000_000)
        events.setTimer(milliseconds: -1, now: 1_000)
        #expect(events.timerDeadlineNs == nil)  // deleted
        events.setTimer(milliseconds: Int.max, now: 0)
        #expect(events.timerDeadlineNs == UInt64(Int32.max) * 1_000_000)  // clamped, no overflow
    }
}
