import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseStore
@testable import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseNode

#if canImport(Glibc)
import Glibc
#endif

/// A relay that takes bytes more slowly than they come must not make the link's backlog, and its memory, grow
/// without bound: past `Options.maxBacklogBytes` frames are refused, as when not connected, and taken again
/// once the backlog drains. Frames taken are all delivered, in order.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RelayLinkBacklogTests {
    /// A TCP proxy for one connection, whose client-to-server direction can be paused: the client's bytes then
    /// pile up in its own socket, as behind a slow uplink.
    final class PausableProxy: @unchecked Sendable {
        let port: UInt16
        private let listener: Int32
        private let paused = Atomic<Bool>(false)
        private let stopped = Atomic<Bool>(false)
        private let fds = Mutex<[Int32]>([])

        init(to target: UInt16) throws {
            let address = try #require(try SocketAddress.resolve(host: "127.0.0.1", port: 0, passive: true).first)
            let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
            try #require(fd >= 0)
            _ = Posix.setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            // Small receive buffers for the accepted socket (inherited): the backlog piles up on the client's side.
            _ = Posix.setSocketOption(fd, SOL_SOCKET, SO_RCVBUF, 4096)
            try #require(address.withSockAddr { bind(fd, $0, $1) } == 0 && listen(fd, 4) == 0)
            self.port = try #require(SocketAddress.local(of: fd)).port
            self.listener = fd
            Thread { self.serve(target: target) }.start()
        }

        func pause(_ value: Bool) { self.paused.store(value, ordering: .releasing) }

        func stop() {
            self.stopped.store(true, ordering: .releasing)
            shutdown(self.listener, Int32(SHUT_RDWR))
            close(self.listener)
            for fd in self.fds.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
        }

        private func serve(target: UInt16) {
            let client = accept(self.listener, nil, nil)
            guard client >= 0 else { return }
            guard let address = try? SocketAddress.resolve(host: "127.0.0.1", port: target, passive: false).first
            else { return }
            let server = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
            let connected = address.withSockAddr { connect(server, $0, $1) }
            guard connected == 0 else { return }
            self.fds.withLock { $0 = [client, server] }
            Thread { self.pump(from: server, to: client, pausable: false) }.start()
            self.pump(from: client, to: server, pausable: true)
        }

        private func pump(from: Int32, to: Int32, pausable: Bool) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !self.stopped.load(ordering: .acquiring) {
                if pausable && self.paused.load(ordering: .acquiring) {
                    usleep(1_000)
                    continue
                }
                guard case .success(let revents) = Posix.poll(from, events: Int16(POLLIN),
                                                              deadlineNs: Posix.monotonicNs + 10_000_000)
                else { return }
                if revents == 0 { continue }
                let n = recv(from, &buffer, buffer.count, 0)
                guard n > 0 else { shutdown(to, Int32(SHUT_WR)); return }
                var sent = 0
                while sent < n {
                    let w = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                    guard w > 0 else { return }
                    sent += w
                }
            }
        }
    }

    /// A cap below a frame's size does not refuse that frame for good: with nothing waiting, it goes.
    @Test func aFrameBiggerThanTheCapGoesWhenNothingWaits() throws {
        let relay = try LocalRelay()
        defer { relay.stop() }
        let receiver = RelayLinkDirectWriteTests.Peer(relay)
        defer { receiver.stop() }
        try receiver.waitConnected()
        var options = RelayLink.Options()
        options.maxBacklogBytes = 1024
        let connected = DispatchSemaphore(value: 0)
        let sender = RelayLink(url: relay.url, key: .generate(), options: options) {
            if case .connected = $0 { connected.signal() }
        }
        sender.start()
        defer { sender.stop() }
        #expect(connected.wait(timeout: .now() + 5) == .success)
        let payload = [UInt8](repeating: 7, count: 10 * 1024)
        // Results as booleans: a failure must not print 10 KiB of payload.
        let taken = sender.enqueue(.send(sendID: 0, recipient: receiver.key.publicKey, flags: 0, payload: payload[...]))
            == .queued
        #expect(taken)
        let got = try receiver.waitDelivered(1)
        let intact = got.count == 1 && got[0] == payload
        #expect(intact)
    }

    @Test func aFullBacklogRefusesFramesUntilItDrains() throws {
        // The burst the kernel's buffers took while paused reaches the receiver at once when resumed: more than
        // the relay's default queue for a slow reader (past which it would drop frames for the receiver).
        let relay = try LocalRelay { $0.limits.outboundQueueMaxBytes = 64 * 1024 * 1024 }
        defer { relay.stop() }
        let proxy = try PausableProxy(to: relay.server.port)
        defer { proxy.stop() }
        let receiver = RelayLinkDirectWriteTests.Peer(relay)
        defer { receiver.stop() }
        try receiver.waitConnected()

        var options = RelayLink.Options()
        options.maxBacklogBytes = 256 * 1024
        let connected = DispatchSemaphore(value: 0)
        let sender = RelayLink(url: "ws://127.0.0.1:\(proxy.port)/v1/relay", key: .generate(), options: options) {
            if case .connected = $0 { connected.signal() }
        }
        sender.start()
        defer { sender.stop() }
        #expect(connected.wait(timeout: .now() + 5) == .success)

        // Paused: the socket's buffers fill (a few MB on loopback), then the backlog; frames past the cap are
        // refused.
        proxy.pause(true)
        let payload = [UInt8](repeating: 0x5A, count: 100 * 1024)
        var taken = 0
        var refused = false
        for i in 0..<200 where !refused {
            var frame = payload
            frame[0] = UInt8(truncatingIfNeeded: i)
            let outcome = sender.enqueue(.send(sendID: 0, recipient: receiver.key.publicKey, flags: 0, payload: frame[...]))
            #expect(outcome != .notConnected)
            if outcome == .queued { taken += 1 } else { refused = true }
            usleep(1_000)  // room for the link to write what the socket takes
        }
        #expect(refused, "200 frames of 100 KiB taken with the relay paused")
        #expect(sender.refusedFrames.load(ordering: .relaxed) == 1)
        // Taken: what the kernel's send buffer can hold (its ceiling, tcp_wmem's third field) plus the cap and
        // the proxy's small receive buffer, not everything offered.
        if let wmem = try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8),
           let ceiling = wmem.split(whereSeparator: \.isWhitespace).last.flatMap({ Int($0) })
        {
            #expect(taken <= (ceiling + options.maxBacklogBytes + 64 * 1024) / payload.count + 2)
        }

        // Drained: every frame taken arrives, in order, and the next is taken within moments (the backlog is
        // measured again after the write that emptied it, whichever path made it, and a refusal has the I/O
        // thread measure it again; else a stale measure could refuse frames until its next 1 s wait ended).
        proxy.pause(false)
        _ = try receiver.waitDelivered(taken)
        var frame = payload
        frame[0] = UInt8(truncatingIfNeeded: taken)
        var again = false
        for _ in 0..<10 where !again {
            again = sender.enqueue(.send(sendID: 0, recipient: receiver.key.publicKey, flags: 0, payload: frame[...]))
                == .queued
            if !again { usleep(10_000) }
        }
        #expect(again, "the next frame refused for 100 ms after the backlog drained")
        if again { taken += 1 }
        let got = try receiver.waitDelivered(taken)
        #expect(got.count == taken)
        #expect(got.map { $0[0] } == (0..<taken).map { UInt8(truncatingIfNeeded: $0) })
    }
}

/// The messenger's side of a full backlog: a send the link refuses is told at once, as not connected (so an
/// answer stops rather than losing chunks silently), with one warning for the refusals, not one per frame; once
/// the backlog drains, sends go again and every one taken is delivered.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RelayMessengerBacklogTests {
    final class Records: LogSink {
        let records = Mutex<[LogRecord]>([])
        func write(_ record: LogRecord) { self.records.withLock { $0.append(record) } }
        var warnings: [LogRecord] { self.records.withLock { $0 }.filter { $0.level == .warning } }
    }

    @Test func aRefusedSendIsToldAtOnceAndWarnedOnce() async throws {
        let relay = try LocalRelay { $0.limits.outboundQueueMaxBytes = 64 * 1024 * 1024 }
        defer { relay.stop() }
        let proxy = try RelayLinkBacklogTests.PausableProxy(to: relay.server.port)
        defer { proxy.stop() }
        let b = try await connectedMessenger(relay)
        defer { b.stop() }
        var options = RelayLink.Options()
        options.maxBacklogBytes = 256 * 1024
        let log = Records()
        let a = RelayMessenger(url: "ws://127.0.0.1:\(proxy.port)/v1/relay", key: .generate(),
                               seen: try SeenMessageStore(database: try Database(path: ":memory:")),
                               relation: { _ in .sibling }, options: options,
                               logger: Logger(label: "test", level: .debug, sink: log))
        a.start()
        defer { a.stop() }
        var events = a.events.makeAsyncIterator()
        guard case .connected = await events.next() else { throw MessengerTestError("did not connect") }

        // An advert of about 80 KB sealed: the paused proxy's socket buffers fill, then the backlog.
        proxy.pause(true)
        let advert = Message.advert(SignedBlob(payload: [UInt8](repeating: 0x41, count: 60 * 1024),
                                               signature: [UInt8](repeating: 1, count: 64)))
        let outcomes = Mutex<[Int: SendOutcome]>([:])
        var taken: [Int] = []
        var refusals = 0
        // Until four refusals: the socket may still take a little now and then (its buffer grows), so frames
        // after the first refusal may be taken too; each refusal must be told at once, and warned of once.
        for i in 0..<800 where refusals < 4 {
            a.send(advert, to: b.publicKey, channel: .sibling, store: false) { outcome in
                outcomes.withLock { $0[i] = outcome }
            }
            // A refusal is told inside `send`; a frame taken waits for its RECEIPT.
            if outcomes.withLock({ $0[i] }) == .notConnected { refusals += 1 } else { taken.append(i) }
            usleep(1_000)
        }
        #expect(refusals == 4, "800 adverts of 80 KB sent with the relay paused, \(refusals) refused")
        #expect(a.isConnected, "refused by the backlog, not by a lost connection")
        #expect(log.warnings.count == 1)

        // Drained: the frames taken are delivered, and a send goes again.
        proxy.pause(false)
        let deadline = ContinuousClock.now + .seconds(20)
        func allDelivered() -> Bool {
            outcomes.withLock { o in taken.allSatisfy { o[$0] == .receipt(.delivered) } }
        }
        while !allDelivered() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(allDelivered(), "frames taken but not delivered")
        var again = false
        for _ in 0..<50 where !again {
            again = await a.sendAndWait(.inferCancel(id: "after"), to: b.publicKey, channel: .sibling, store: false)
                == .receipt(.delivered)
            if !again { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(again, "sends refused for a second after the backlog drained")
    }
}
