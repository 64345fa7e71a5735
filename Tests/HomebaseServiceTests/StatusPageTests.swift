import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseTransport
import Testing
@testable import HomebaseService

/// A daemon on the loopback hub with its status page on 127.0.0.1, port 0.
final class PageHarness: Sendable {
    static let csrf = "0123456789abcdef0123456789abcdef"
    let h: Harness
    let collector: StatusCollector
    let page: StatusPageServer
    let base: String
    let port: UInt16
    let http = HTTPClient(maxIdleConnections: 0)

    init(engine: FakeEngine = FakeEngine(), token: String? = nil, maxEventClients: Int = 8,
         configure: (inout StatusPageServer.Configuration) -> Void = { _ in }) throws {
        self.h = try Harness(engine: engine)
        self.collector = StatusCollector(daemon: self.h.daemon)
        var configuration = StatusPageServer.Configuration(host: "127.0.0.1", port: 0, accessToken: token)
        configuration.maxEventClients = maxEventClients
        configuration.eventIntervalMs = 50
        configure(&configuration)
        self.page = StatusPageServer(collector: self.collector, configuration: configuration, csrfToken: Self.csrf)
        self.port = try self.page.start()
        self.base = "http://127.0.0.1:\(self.port)"
        self.h.start()
    }

    func stop() async {
        self.page.stop()
        await self.h.stop()
    }

    func get(_ path: String, _ headers: [(String, String)] = []) async throws -> HTTPResponse {
        var r = HTTPRequest(url: self.base + path, headers: headers)
        r.timeout = .seconds(10)
        return try await self.http.send(r)
    }

    func post(_ path: String, _ body: String, csrf: String? = PageHarness.csrf,
              _ headers: [(String, String)] = [("Content-Type", "application/json")]) async throws -> HTTPResponse {
        var r = HTTPRequest(method: "POST", url: self.base + path, headers: headers)
        if let csrf { r.headers.append(("X-CSRF-Token", csrf)) }
        r.body = Array(body.utf8)
        r.timeout = .seconds(10)
        return try await self.http.send(r)
    }

    func status() async throws -> [String: Any] {
        let response = try await self.get("/api/status")
        #expect(response.head.status == 200)
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }
}

extension HTTPResponse {
    var text: String { String(decoding: self.body, as: UTF8.self) }
}

@Suite(.timeLimit(.minutes(1))) struct StatusPageTests {
    /// A stopped page lets go of its HTTP server, whose handler holds the page: the cycle kept the page, its
    /// collector and the whole daemon alive after `stop()` (LeakSanitizer, `tools/test --sanitize address`).
    @Test func aStoppedPageIsFreed() async throws {
        weak var freed: StatusPageServer?
        let h = try Harness()
        do {
            let page = StatusPageServer(collector: StatusCollector(daemon: h.daemon),
                                        configuration: .init(host: "127.0.0.1", port: 0))
            _ = try page.start()
            page.stop()
            freed = page
        }
        #expect(freed == nil)
        await h.stop()
    }

    @Test func theAssetsAreTheFilesInToolsStatuspage() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("tools/statuspage")
        let read = { (name: String) in try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8) }
        #expect(try read("index.html") == StatusPageAssets.indexHTML, "run tools/gen-statuspage-assets")
        #expect(try read("app.css") == StatusPageAssets.appCSS, "run tools/gen-statuspage-assets")
        #expect(try read("app.js") == StatusPageAssets.appJS, "run tools/gen-statuspage-assets")
        #expect(StatusPageAssets.indexHTML.contains(StatusPageAssets.csrfPlaceholder))
        // Nothing is fetched from elsewhere: the page works offline.
        for text in [StatusPageAssets.indexHTML, StatusPageAssets.appCSS, StatusPageAssets.appJS] {
            #expect(!text.contains("https://") && !text.contains("//cdn"))
        }
    }

    @Test func statusJSONKeepsTheCLIContractAndAddsTheRest() async throws {
        let p = try PageHarness()
        let handset = try await p.h.pairedHandset(0x31, name: "pixel")
        let s = try await p.status()
        // `homebase status --json`'s keys, as the state-database path prints them.
        for key in ["device", "relay", "daemon_running", "relay_connected", "ollama", "runtime", "siblings", "models"] {
            #expect(s[key] != nil, "missing \(key)")
        }
        #expect(s["device"] as? String == p.h.homebase.hex)
        #expect(s["daemon_running"] as? Bool == true)
        let runtime = try #require(s["runtime"] as? [String: Any])
        #expect(runtime["verified"] as? Bool == true && runtime["available"] as? Bool == true)
        #expect(runtime["version"] as? String == "0.5.1")
        #expect(runtime["error"] is NSNull)
        let siblings = try #require(s["siblings"] as? [[String: Any]])
        #expect(siblings.count == 1)
        #expect(siblings.first?["pk"] as? String == handset.key.hex && siblings.first?["name"] as? String == "pixel")
        #expect(siblings.first?["last_heard"] as? Int != nil, "the pairing request was heard")
        let models = try #require(s["models"] as? [[String: Any]])
        #expect(models.map { $0["tag"] as? String } == ["qwen2.5:7b"])
        #expect(models.first?["pinned"] as? Bool == false)
        // Issue 34: whether a model is a cloud stub, shared, and where its context comes from.
        #expect(models.first?["cloud"] as? Bool == false && models.first?["shared"] as? Bool == true)
        #expect(models.first?["context_source"] as? String == "default")
        let series = try #require(s["series"] as? [String: Any])
        #expect((series["tokens"] as? [Int])?.count == 360)
        for key in ["relay_link", "guests", "streams", "events", "admission", "totals", "pinned_models", "name",
                    "started_at"] {
            #expect(s[key] != nil, "missing \(key)")
        }
        await p.stop()
    }

    @Test func aStreamAndARefusalShowWhoWhichModelAndHowMuchNeverContent() async throws {
        let engine = FakeEngine([.text("secret answer"), .waitForGate, .text(" more"), .finish(.stop, nil)])
        let p = try PageHarness(engine: engine)
        let g = try await p.h.grantedGuest(0x32, models: .only(["qwen2.5:7b"]))
        p.h.guestRequest("s1", from: g.messenger, messages: [ChatMessage(role: "user", content: "private prompt")])
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        let live = try await p.status()
        let streams = try #require(live["streams"] as? [[String: Any]])
        #expect(streams.count == 1)
        #expect(streams.first?["peer"] as? String == g.key.hex && streams.first?["kind"] as? String == "guest")
        #expect(streams.first?["peer_name"] as? String == "friend" && streams.first?["state"] as? String == "streaming")
        #expect(streams.first?["model"] as? String == "qwen2.5:7b" && streams.first?["tokens"] as? Int == 1)
        let text = try await p.get("/api/status").text
        #expect(!text.contains("secret answer") && !text.contains("private prompt"))
        // Issue 37: the guest's usage counts the request while it streams, not only once it ends.
        func guest(_ report: [String: Any]) -> [String: Any]? {
            (report["guests"] as? [[String: Any]])?.first { $0["pubkey"] as? String == g.key.hex }
        }
        let today = guest(live)?["usage_today"] as? [String: Any]
        #expect(today?["requests"] as? Int == 1 && today?["tokens"] as? Int == 1, "\(String(describing: today))")
        #expect(guest(live)?["live_requests"] as? Int == 1)
        engine.gate.open()
        _ = await g.inbox.finished("s1")
        await eventually("counted once when it ended") {
            guard let report = try? await p.status(), let g = guest(report) else { return false }
            return (g["usage_today"] as? [String: Any])?["requests"] as? Int == 1 && g["live_requests"] as? Int == 0
        }
        #expect(streams.first?["id"] as? String == "s1" && streams.first?["first_token_ms"] as? Int != nil)
        // The last finished requests, not only errors: who, which model, how much, how fast, how it ended.
        let finished = try #require(try await p.status()["finished"] as? [[String: Any]])
        #expect(finished.count == 1)
        #expect(finished.first?["peer"] as? String == g.key.hex && finished.first?["peer_name"] as? String == "friend")
        #expect(finished.first?["outcome"] as? String == "done" && finished.first?["tokens"] as? Int == 2)
        #expect(finished.first?["model"] as? String == "qwen2.5:7b" && finished.first?["kind"] as? String == "guest")
        #expect(finished.first?["first_token_ms"] as? Int != nil && finished.first?["duration_ms"] as? Int != nil)
        p.h.guestRequest("s2", from: g.messenger, model: "not-granted:1b")
        _ = await g.inbox.finished("s2")
        await eventually("the refusal listed") {
            let events = (try? await p.status())?["events"] as? [[String: Any]]
            return events?.first?["code"] as? String == "not_granted"
        }
        let after = try await p.status()
        #expect((after["streams"] as? [Any])?.isEmpty == true)
        #expect((after["totals"] as? [String: Any])?["tokens"] as? Int == 2)
        let event = try #require((after["events"] as? [[String: Any]])?.first)
        #expect(event["model"] as? String == "not-granted:1b" && event["peer_kind"] as? String == "guest")
        await p.stop()
    }

    @Test func theChartCountsWhatWasStreamedSinceTheLastSample() async throws {
        let p = try PageHarness(engine: FakeEngine(FakeEngine.answer(["a", "b", "c"])))
        let handset = try await p.h.pairedHandset(0x33)
        p.h.request("c1", from: handset.messenger)
        _ = await handset.inbox.finished("c1")
        p.collector.sample()
        p.h.request("c2", from: handset.messenger)
        _ = await handset.inbox.finished("c2")
        p.collector.sample()
        p.collector.sample()
        let series = try #require(try await p.status()["series"] as? [String: Any])
        #expect((series["tokens"] as? [Int])?.reduce(0, +) == 6)
        #expect((series["requests"] as? [Int])?.reduce(0, +) == 2)
        await p.stop()
    }

    @Test func revokeThroughThePageStopsTheGuest() async throws {
        let engine = FakeEngine([.text("partial"), .hang])
        let p = try PageHarness(engine: engine)
        let g = try await p.h.grantedGuest(0x34)
        p.h.guestRequest("r1", from: g.messenger)
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        // Refused without the CSRF token, or with the wrong one: nothing changes.
        #expect(try await p.post("/api/revoke", #"{"guest":"\#(g.key.hex)"}"#, csrf: nil).head.status == 403)
        #expect(try await p.post("/api/revoke", #"{"guest":"\#(g.key.hex)"}"#, csrf: "f" + PageHarness.csrf.dropFirst())
                    .head.status == 403)
        #expect(try p.h.contacts.registry.currentRecord(for: g.key)?.state == .granted)
        let done = try await p.post("/api/revoke", #"{"guest":"\#(g.key.hex)"}"#)
        #expect(done.head.status == 200, "\(done.text)")
        #expect(try p.h.contacts.registry.currentRecord(for: g.key)?.state == .revoked)
        await eventually("r1 ends with not_granted") { g.inbox.inference("r1").last?.errorCode == "not_granted" }
        _ = await g.inbox.first("contact.revoke") { if case .contactRevoke = $0 { true } else { false } }
        await p.stop()
    }

    /// Issue 37: the owner declines a pending join from the page; a granted guest is revoked, not declined.
    @Test func declineAPendingJoinThroughThePage() async throws {
        let p = try PageHarness()
        let registry = try p.h.contacts.registry
        let pending = p.h.guest(0x36)
        _ = try registry.recordJoin(guest: pending.key, name: "stranger", nowMs: p.h.clock.value)
        #expect(try registry.currentRecord(for: pending.key)?.state == .pending)
        let guests = { (try await p.status()["guests"] as? [[String: Any]])?.compactMap { $0["pubkey"] as? String } }
        #expect(try await guests()?.contains(pending.key.hex) == true)
        let done = try await p.post("/api/decline", #"{"guest":"\#(pending.key.hex)"}"#)
        #expect(done.head.status == 200, "\(done.text)")
        #expect(try registry.currentRecord(for: pending.key) == nil)
        #expect(try await guests()?.contains(pending.key.hex) == false)
        // Not pending: refused with a sentence, and nothing changes.
        let again = try await p.post("/api/decline", #"{"guest":"\#(pending.key.hex)"}"#)
        #expect(again.head.status == 409 && again.text.contains("has not asked to join"), "\(again.text)")
        let granted = try await p.h.grantedGuest(0x37)
        let refused = try await p.post("/api/decline", #"{"guest":"\#(granted.key.hex)"}"#)
        #expect(refused.head.status == 409 && refused.text.contains("revoke it instead"), "\(refused.text)")
        #expect(try registry.currentRecord(for: granted.key)?.state == .granted)
        await p.stop()
    }

    /// Issue 37: the owner stops one stream without revoking the guest; it ends with `host_error` (the guest
    /// falls back), stays granted, and the request is listed as stopped.
    @Test func stopOneStreamWithoutRevoking() async throws {
        let engine = FakeEngine([.text("partial"), .hang])
        let p = try PageHarness(engine: engine)
        let g = try await p.h.grantedGuest(0x38)
        p.h.guestRequest("r1", from: g.messenger)
        _ = await g.inbox.first("chunk") { if case .inferChunk = $0 { true } else { false } }
        let stop = #"{"peer":"\#(g.key.hex)","id":"r1"}"#
        #expect(try await p.post("/api/stop", #"{"peer":"\#(g.key.hex)","id":"other"}"#).head.status == 409)
        let done = try await p.post("/api/stop", stop)
        #expect(done.head.status == 200, "\(done.text)")
        await eventually("r1 ends with host_error") { g.inbox.inference("r1").last?.errorCode == "host_error" }
        #expect(try p.h.contacts.registry.currentRecord(for: g.key)?.state == .granted, "nobody revoked")
        let report = try await p.status()
        #expect((report["streams"] as? [[String: Any]])?.isEmpty == true)
        let finished = try #require(report["finished"] as? [[String: Any]])
        #expect(finished.first?["outcome"] as? String == "stopped" && finished.first?["tokens"] as? Int == 1)
        let again = try await p.post("/api/stop", stop)
        #expect(again.head.status == 409 && again.text.contains("already ended"), "\(again.text)")
        await p.stop()
    }

    /// Issue 37: a pairing code (and its QR code) from the page instead of "run `homebase pair`"; a handset
    /// pairs with it.
    @Test func pairingCodeAndQRFromThePage() async throws {
        let p = try PageHarness()
        let response = try await p.post("/api/pair", "{}")
        #expect(response.head.status == 200, "\(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        let text = try #require(object["code"] as? String)
        let code = try PairingCode.parse(text)
        let relayURL = try p.h.state.settings().relayURL
        #expect(code.homebase == p.h.homebase && code.relayURL == relayURL)
        #expect(object["expires_in_s"] as? Int == 600)
        let qr = try #require(object["qr"] as? [String: Any])
        let expected = try QRCode.encode(Array(text.utf8), correction: .medium)
        #expect(qr["size"] as? Int == expected.size && qr["rows"] as? [String] == expected.rows)
        let handset = p.h.device(0x39)
        handset.messenger.send(.pairRequest(secret: code.secretHex, name: "tablet"), to: p.h.homebase,
                               channel: .sibling, store: false)
        _ = await handset.inbox.first("pair.accept") { if case .pairAccept = $0 { true } else { false } }
        await eventually("the tablet among the siblings") {
            ((try? await p.status())?["siblings"] as? [[String: Any]])?.contains { $0["name"] as? String == "tablet" }
                == true
        }
        // Not an object: refused like any action body.
        #expect(try await p.post("/api/pair", "[]").head.status == 400)
        await p.stop()
    }

    /// Issue 37: the relay's close code, round trip and stored-message count.
    @Test func theRelayLinkShowsCloseCodeRoundTripAndStoredCount() async throws {
        let p = try PageHarness()
        p.collector.relayEvent(.connected(stored: 0))
        p.collector.relayEvent(.disconnected(closeCode: 1012))
        var link = try #require(try await p.status()["relay_link"] as? [String: Any])
        #expect(link["last_close_code"] as? Int == 1012 && link["connected"] as? Bool == false)
        p.collector.relayEvent(.connected(stored: 4))
        link = try #require(try await p.status()["relay_link"] as? [String: Any])
        #expect(link["stored_at_login"] as? Int == 4 && link["reconnects"] as? Int == 1)
        #expect(link["round_trip_ms"] is NSNull, "the loopback messenger has no relay")
        await p.stop()
    }

    @Test func grantAndPinThroughThePage() async throws {
        let p = try PageHarness()
        let g = p.h.guest(0x35)
        let grant = #"{"guest":"\#(g.key.hex)","models":["qwen2.5:7b"],"expires_hours":24}"#
        #expect(try await p.post("/api/grant", grant).head.status == 200)
        let record = try #require(try p.h.contacts.registry.currentRecord(for: g.key))
        #expect(record.state == .granted && record.grant?.models == .only(["qwen2.5:7b"]))
        #expect(record.grant?.expiresAtMs == p.h.clock.value + 24 * 3_600_000)
        _ = await g.inbox.first("contact.grant") { if case .contactGrant = $0 { true } else { false } }

        #expect(try await p.post("/api/pin", #"{"model":"qwen2.5:7b","pinned":true}"#).head.status == 200)
        #expect(try p.h.state.settings().pinnedModels == ["qwen2.5:7b"])
        await eventually("the runtime pins it") { p.h.runtime.pinned == ["qwen2.5:7b"] }
        let models = try #require(try await p.status()["models"] as? [[String: Any]])
        #expect(models.first?["pinned"] as? Bool == true)
        #expect(try await p.post("/api/pin", #"{"model":"qwen2.5:7b","pinned":false}"#).head.status == 200)
        #expect(try p.h.state.settings().pinnedModels == [])
        await p.stop()
    }

    @Test(arguments: [
        (StatusPageGate.Action.grant, #"{"guest":"00","models":["*"]}"#),
        (.grant, #"{"guest":"\#(String(repeating: "ab", count: 32))","models":[]}"#),
        (.grant, #"{"guest":"\#(String(repeating: "ab", count: 32))","models":["*"],"expires_hours":0}"#),
        (.grant, #"{"guest":"\#(String(repeating: "ab", count: 32))","models":["*"],"expires_hours":true}"#),
        (.grant, #"{"guest":"\#(String(repeating: "ab", count: 32))","models":["a b"]}"#),
        (.revoke, #"["not an object"]"#),
        (.revoke, "not json"),
        (.decline, #"{"guest":"abc"}"#),
        (.stop, #"{"peer":"\#(String(repeating: "ab", count: 32))"}"#),
        (.stop, #"{"peer":"ab","id":"r1"}"#),
        (.stop, #"{"peer":"\#(String(repeating: "ab", count: 32))","id":"\#(String(repeating: "x", count: 129))"}"#),
        (.pin, #"{"model":"a,b","pinned":true}"#),
        (.pin, #"{"model":"qwen2.5:7b","pinned":"yes"}"#),
    ])
    func badActionBodiesAreRefusedWithASentence(action: StatusPageGate.Action, body: String) {
        #expect(throws: StatusPageCommand.Invalid.self) { try StatusPageCommand.parse(action, body: Array(body.utf8)) }
    }

    @Test func goodActionBodiesParse() throws {
        let hex = String(repeating: "ab", count: 32)
        let key = try #require(PublicKey(hex: hex))
        let all = #"{"guest":"\#(hex)","models":["*"],"expires_hours":null}"#
        #expect(try StatusPageCommand.parse(.grant, body: Array(all.utf8))
                    == .grant(guest: key, models: .all, expiresInHours: nil))
        let some = #"{"guest":"\#(hex)","models":["a:1","b"],"expires_hours":168}"#
        #expect(try StatusPageCommand.parse(.grant, body: Array(some.utf8))
                    == .grant(guest: key, models: .only(["a:1", "b"]), expiresInHours: 168))
        #expect(try StatusPageCommand.parse(.revoke, body: Array(#"{"guest":"\#(hex)"}"#.utf8)) == .revoke(guest: key))
        #expect(try StatusPageCommand.parse(.pin, body: Array(#"{"model":"m:1","pinned":false}"#.utf8))
                    == .pin(model: "m:1", pinned: false))
    }

    @Test func refusalsOverTheWire() async throws {
        let p = try PageHarness(token: "owner-secret-0123456789")
        let auth = [("Authorization", "Bearer owner-secret-0123456789")]
        #expect(try await p.get("/api/status").head.status == 401)
        #expect(try await p.get("/api/status", auth).head.status == 200)
        #expect(try await p.get("/api/status", auth + [("Host", "evil.example:80")]).head.status == 403)
        let page = try await p.get("/", auth)
        #expect(page.head.status == 200 && page.text.contains(PageHarness.csrf))
        #expect(page.head.headers.contains { $0.0.lowercased() == "content-security-policy" })
        let login = try await p.get("/?token=owner-secret-0123456789")
        #expect(login.head.status == 303)
        #expect(login.head.headers.contains { $0.0.lowercased() == "set-cookie" && $0.1.hasPrefix("homebase_ui=") })
        // An oversized action is refused before it is read whole.
        let big = "{\"guest\":\"" + String(repeating: "a", count: 20_000) + "\"}"
        #expect(try await p.post("/api/revoke", big, [("Content-Type", "application/json")] + auth).head.status == 413)
        #expect(try await p.post("/api/revoke", "{}", [("Content-Type", "text/plain")] + auth).head.status == 415)
        await p.stop()
    }

    @Test func eventsStreamTheStatusToABoundedNumberOfPages() async throws {
        let p = try PageHarness(maxEventClients: 1)
        var request = HTTPRequest(url: p.base + "/api/events")
        request.timeout = .seconds(10)
        let (head, body) = try await p.http.stream(request)
        #expect(head.status == 200)
        #expect(head.headers.contains { $0.0.lowercased() == "content-type" && $0.1 == "text/event-stream" })
        var received = ""
        for try await piece in body {
            received += String(decoding: piece, as: UTF8.self)
            if received.components(separatedBy: "event: status\ndata: {").count > 2 { break }
        }
        #expect(received.hasPrefix("retry: 2000\n\n"))
        // The one place is taken: a second page is told so.
        let second = try await p.get("/api/events")
        #expect(second.head.status == 503)
        await p.stop()
    }
}
