import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization
import Testing
@testable import HomebaseService

/// The status page under the attacks of issue 37, on real sockets: strangers on the network must not lock the
/// owner out of a token-protected page.
@Suite(.timeLimit(.minutes(1))) struct StatusPageAttackTests {
    static let token = "owner-token-0123456789"
    static let unfinishedHead = "GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    /// The defaults the page runs with: a head deadline of a few seconds, slots per address, a send timeout.
    @Test func theDefaultsAreTheOnesTheREADMEStates() {
        let c = StatusPageServer.Configuration(host: "0.0.0.0", port: 8787, accessToken: Self.token)
        #expect(c.requestReadTimeoutMs == 5_000 && c.perAddress == 8 && c.maxConnections == 32)
        #expect(c.sendTimeoutMs == 10_000 && c.maxEventClients == 8)
    }

    /// The owner's request with the token, on a new connection.
    func ownerStatus(_ p: PageHarness) async throws -> Int {
        try await p.get("/api/status", [("Authorization", "Bearer \(Self.token)")]).head.status
    }

    /// 34 unfinished request heads without the token, from the owner's own address and from another, took every
    /// slot: the owner with the token got `503 too many connections`.
    @Test func unfinishedHeadsDoNotLockOutTheOwner() async throws {
        let p = try PageHarness(token: Self.token)
        var strangers: [RawSocket] = []
        for source in ["127.0.0.2", "127.0.0.1"] {
            for _ in 0..<34 {
                let s = try RawSocket(port: p.port, source: source)
                s.send(Self.unfinishedHead)
                strangers.append(s)
            }
        }
        try await Task.sleep(for: .milliseconds(300))  // every one accepted
        for _ in 0..<3 { #expect(try await self.ownerStatus(p) == 200) }
        // The owner's live page holds its connection while more strangers come.
        let live = try RawSocket(port: p.port)
        live.send("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        #expect(live.readAll(timeoutMs: 300).text.hasPrefix("HTTP/1.1 200"))
        for _ in 0..<40 {
            let s = try RawSocket(port: p.port, source: "127.0.0.3")
            s.send(Self.unfinishedHead)
            strangers.append(s)
        }
        try await Task.sleep(for: .milliseconds(300))
        let more = live.readAll(timeoutMs: 300)
        #expect(!more.closed && more.text.contains("event: status"), "the owner's live page was evicted")
        #expect(try await self.ownerStatus(p) == 200)
        // A stranger's request without the token is refused, and its connection closed.
        let s = try RawSocket(port: p.port, source: "127.0.0.4")
        s.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let refused = s.readAll(timeoutMs: 2_000)
        #expect(refused.text.hasPrefix("HTTP/1.1 401") && refused.closed)
        await p.stop()
    }

    /// A client sending a header byte at a time (one every 20 s stayed 143 s) is cut at the request deadline
    /// with 408, and so is a body that never completes. One that sends nothing is idle, not late (a browser's
    /// preconnected socket): it waits for the idle timeout, and is evicted first when slots run short.
    @Test func aRequestDribbledAByteAtATimeIsCutAtItsDeadline() async throws {
        let p = try PageHarness(token: Self.token) { $0.requestReadTimeoutMs = 800 }
        let slow = try RawSocket(port: p.port)
        let silent = try RawSocket(port: p.port)
        let body = try RawSocket(port: p.port)
        body.send("POST /api/pin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"mod")
        let started = ContinuousClock.now
        let dribble = Thread {
            for byte in Self.unfinishedHead + String(repeating: "x", count: 100) {
                guard slow.send(String(byte)) else { return }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        dribble.start()
        let cut = slow.readAll(timeoutMs: 5_000)
        let elapsed = started.duration(to: .now)
        #expect(cut.closed && cut.text.hasPrefix("HTTP/1.1 408"), "\(cut)")
        #expect(elapsed < .seconds(3), "cut after \(elapsed)")
        let half = body.readAll(timeoutMs: 2_000)
        #expect(half.closed && half.text.hasPrefix("HTTP/1.1 408"), "\(half)")
        #expect(try await self.ownerStatus(p) == 200)
        let quiet = silent.readAll(timeoutMs: 200)
        #expect(!quiet.closed && quiet.text.isEmpty, "\(quiet)")
        // It sends its request at last, long after the deadline would have run from its start: served.
        silent.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        #expect(silent.readAll(timeoutMs: 1_000).text.hasPrefix("HTTP/1.1 200"))
        await p.stop()
    }

    /// A live page that stops reading held its server thread (and its live-page slot) for good: it is dropped
    /// once a send has waited `sendTimeoutMs`, and the owner's next live page gets the slot.
    @Test func aLivePageThatStopsReadingIsDropped() async throws {
        let p = try PageHarness(token: Self.token, maxEventClients: 1) {
            $0.sendTimeoutMs = 300
            $0.eventIntervalMs = 2
        }
        let stalled = try RawSocket(port: p.port, receiveBuffer: 2048)
        stalled.send("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        try await Task.sleep(for: .milliseconds(200))
        let request = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n"
        let busy = try RawSocket(port: p.port)
        busy.send(request)
        #expect(busy.readAll(timeoutMs: 500).text.hasPrefix("HTTP/1.1 503"), "the stalled page holds the slot")
        await eventually("the stalled live page dropped", timeout: .seconds(40)) {
            guard let owner = try? RawSocket(port: p.port) else { return false }
            owner.send(request)
            return owner.readAll(timeoutMs: 300).text.hasPrefix("HTTP/1.1 200")
        }
        await p.stop()
    }

    /// `--ui 0.0.0.0 --ui-token`: a request to the machine's own address or name with the token got 403 "host not
    /// allowed" unless `--ui-host` named it.
    @Test func withATokenTheMachinesOwnAddressesAndNameAreAllowed() async throws {
        let p = try PageHarness(token: Self.token)
        let own = LocalHosts.current()
        #expect(!own.isEmpty)
        let name = try #require(own.last)  // the host name's `label.local`
        #expect(name.hasSuffix(".local"))
        var hosts = [name, name.replacingOccurrences(of: ".local", with: "")]
        if let address = own.first(where: { $0.contains(".") && !$0.hasPrefix("127.") && !$0.hasSuffix(".local") }) {
            hosts.append(address)
        }
        for host in hosts {
            let auth = [("Host", "\(host):\(p.port)"), ("Authorization", "Bearer \(Self.token)")]
            #expect(try await p.get("/api/status", auth).head.status == 200, "\(host)")
            #expect(try await p.get("/api/status", [("Host", "\(host):\(p.port)")]).head.status == 401, "\(host)")
        }
        let evil = [("Host", "evil.example:\(p.port)"), ("Authorization", "Bearer \(Self.token)")]
        #expect(try await p.get("/api/status", evil).head.status == 403)
        await p.stop()
    }

    /// The machine's addresses change (DHCP): a host not allowed asks for them again, at most so often.
    @Test func aNewAddressOfTheMachineIsLearned() async throws {
        let answers = Mutex([["10.1.1.1"], ["10.2.2.2"]])
        let h = try Harness()
        var configuration = StatusPageServer.Configuration(host: "127.0.0.1", port: 0, accessToken: Self.token)
        configuration.ownHostsRefreshMs = 0
        let page = StatusPageServer(collector: StatusCollector(daemon: h.daemon), configuration: configuration,
                                    ownHosts: { answers.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] } })
        let port = try page.start()
        let http = HTTPClient(maxIdleConnections: 0)
        func status(_ host: String) async throws -> Int {
            try await http.send(HTTPRequest(url: "http://127.0.0.1:\(port)/api/status", headers: [
                ("Host", host), ("Authorization", "Bearer \(Self.token)"),
            ])).head.status
        }
        #expect(try await status("10.1.1.1") == 200)
        #expect(try await status("10.2.2.2") == 200, "learned on the refusal")
        #expect(try await status("10.1.1.1") == 403, "the old address is gone")
        page.stop()
        await h.stop()
    }
}
