import HomebaseCore
import Testing

@Suite struct StatusPageGateTests {
    static let csrf = "c5f0e1d2c3b4a5968778695a4b3c2d1e"
    let open = StatusPageGate(.init(accessToken: nil, csrfToken: StatusPageGateTests.csrf))
    let locked = StatusPageGate(.init(allowedHosts: ["Homebase.lan"], accessToken: "owner-secret-0123456789",
                                      csrfToken: StatusPageGateTests.csrf))

    func head(_ method: String = "GET", _ target: String = "/", host: String? = "127.0.0.1:8787",
              _ headers: [(String, String)] = []) -> HTTPRequestHead {
        var fields = host.map { [HTTPHeaderField(name: "Host", value: $0)] } ?? []
        fields += headers.map { HTTPHeaderField(name: $0.0, value: $0.1) }
        return HTTPRequestHead(method: method, target: target, headers: fields)
    }

    /// A POST as the page sends it: same origin, CSRF header, JSON.
    func action(_ path: String = "/api/revoke", host: String = "127.0.0.1:8787",
                origin: String? = "http://127.0.0.1:8787", csrf: String? = StatusPageGateTests.csrf,
                type: String = "application/json", extra: [(String, String)] = []) -> HTTPRequestHead {
        var headers: [(String, String)] = [("Content-Type", type)]
        if let origin { headers.append(("Origin", origin)) }
        if let csrf { headers.append(("X-CSRF-Token", csrf)) }
        return self.head("POST", path, host: host, headers + extra)
    }

    @Test func routesTheTable() {
        #expect(self.open.decide(self.head()) == .serve(.page))
        #expect(self.open.decide(self.head("HEAD", "/index.html")) == .serve(.page))
        #expect(self.open.decide(self.head("GET", "/app.js")) == .serve(.asset("/app.js")))
        #expect(self.open.decide(self.head("GET", "/app.css")) == .serve(.asset("/app.css")))
        #expect(self.open.decide(self.head("GET", "/api/status?x=1")) == .serve(.status))
        #expect(self.open.decide(self.head("GET", "/api/events")) == .serve(.events))
        for a in StatusPageGate.Action.allCases {
            #expect(self.open.decide(self.action("/api/" + a.rawValue)) == .serve(.action(a)))
        }
        #expect(self.open.decide(self.head("GET", "/api/nothing")) == .refuse(status: 404, reason: "not found"))
        #expect(self.open.decide(self.head("GET", "/../etc/passwd")) == .refuse(status: 404, reason: "not found"))
        #expect(self.open.decide(self.head("GET", "/api/revoke")) == .refuse(status: 405, reason: "use POST"))
        #expect(self.open.decide(self.head("POST", "/api/status")) == .refuse(status: 405, reason: "use GET"))
        #expect(self.open.decide(self.head("DELETE", "/")) == .refuse(status: 405, reason: "use GET"))
        #expect(self.open.decide(self.head("HEAD", "/api/status")) == .serve(.status))
        #expect(self.open.decide(self.head("HEAD", "/api/events")) == .refuse(status: 405, reason: "use GET"))
    }

    @Test(arguments: ["127.0.0.1:8787", "localhost:8787", "LOCALHOST", "127.1.2.3", "[::1]:8787", "[::1]"])
    func loopbackHostsAreServed(host: String) {
        #expect(self.open.decide(self.head(host: host)) == .serve(.page))
    }

    /// DNS rebinding: another site's name resolving to 127.0.0.1 still sends its own name.
    @Test(arguments: ["evil.example:8787", "localhost.evil.example", "127.0.0.1.evil.example", "10.0.0.2:8787",
                      "0.0.0.0:8787", "[::2]:8787", "127.0.0.1:port", "127.0.0.256", "[::1", "", ":8787",
                      "a:1:2"])
    func otherHostsAreRefused(host: String) {
        #expect(self.open.decide(self.head(host: host)) == .refuse(status: 403, reason: "host not allowed"))
    }

    /// Issue 37: `--ui 0.0.0.0 --ui-token` from the LAN names the machine's address or name: with a token those
    /// are allowed (a rebinding page cannot carry the token); without one they stay refused.
    @Test func withATokenTheMachinesOwnHostsAreServed() {
        let own = ["192.168.1.20", "fd00::20", "homebox", "homebox.local"]
        let token = "owner-secret-0123456789"
        let locked = StatusPageGate(.init(accessToken: token, csrfToken: Self.csrf, ownHosts: own + ["HomeBox.LAN"]))
        let auth = [("Authorization", "Bearer " + token)]
        for host in ["192.168.1.20:8787", "[fd00::20]:8787", "homebox:8787", "HOMEBOX.local", "homebox.lan"] {
            #expect(locked.decide(self.head("GET", "/api/status", host: host, auth)) == .serve(.status), "\(host)")
            #expect(locked.decide(self.head("GET", "/api/status", host: host))
                == .refuse(status: 401, reason: "this page needs its access token"), "\(host)")
        }
        for host in ["192.168.1.21", "evil.example", "homebox.evil.example"] {
            #expect(locked.decide(self.head("GET", "/api/status", host: host, auth))
                == .refuse(status: 403, reason: "host not allowed"), "\(host)")
        }
        let open = StatusPageGate(.init(accessToken: nil, csrfToken: Self.csrf, ownHosts: own))
        for host in ["192.168.1.20:8787", "homebox"] {
            #expect(open.decide(self.head(host: host)) == .refuse(status: 403, reason: "host not allowed"))
        }
    }

    @Test func aMissingHostIsABadRequest() {
        #expect(self.open.decide(self.head(host: nil)) == .refuse(status: 400, reason: "no Host header"))
    }

    @Test func aConfiguredHostIsServed() {
        let authed = [("Authorization", "Bearer owner-secret-0123456789")]
        #expect(self.locked.decide(self.head(host: "homebase.lan:8787", authed)) == .serve(.page))
        #expect(self.open.decide(self.head(host: "homebase.lan:8787"))
                    == .refuse(status: 403, reason: "host not allowed"))
    }

    @Test func oversizedBodiesAreRefusedDeclaredOrRead() {
        let big = self.action(extra: [("Content-Length", "16385")])
        #expect(self.open.decide(big) == .refuse(status: 413, reason: "request body too large"))
        #expect(self.open.decide(self.action(), bodyBytes: 16 * 1024 + 1)
                    == .refuse(status: 413, reason: "request body too large"))
        #expect(self.open.decide(self.action(), bodyBytes: 16 * 1024) == .serve(.action(.revoke)))
    }

    @Test func withATokenEveryRouteNeedsIt() {
        let refused = StatusPageGate.Decision.refuse(status: 401, reason: "this page needs its access token")
        for target in ["/", "/app.js", "/api/status", "/api/events"] {
            #expect(self.locked.decide(self.head("GET", target)) == refused)
            #expect(self.locked.decide(self.head("GET", target, [("Authorization", "Bearer owner-secret-0123456789")]))
                        != refused)
            let cookie = ("Cookie", "a=b; homebase_ui=owner-secret-0123456789")
            #expect(self.locked.decide(self.head("GET", target, [cookie])) != refused)
            #expect(self.locked.decide(self.head("GET", target, [("Authorization", "Bearer owner-secret-012345678X")]))
                        == refused)
            #expect(self.locked.decide(self.head("GET", target, [("Cookie", "homebase_ui=owner")])) == refused)
        }
        #expect(self.locked.decide(self.action()) == refused)
        #expect(self.locked.decide(self.action(extra: [("Cookie", "homebase_ui=owner-secret-0123456789")]))
                    == .serve(.action(.revoke)))
    }

    @Test func theTokenInTheQueryLogsInOnThePageOnly() {
        #expect(self.locked.decide(self.head("GET", "/?token=owner-secret-0123456789")) == .login)
        #expect(self.locked.decide(self.head("GET", "/?token=wrong"))
                    == .refuse(status: 401, reason: "this page needs its access token"))
        #expect(self.locked.decide(self.head("GET", "/api/status?token=owner-secret-0123456789"))
                    == .refuse(status: 401, reason: "this page needs its access token"))
    }

    @Test func postsNeedTheCSRFTokenTheirOwnOriginAndJSON() {
        let csrfRefusal = StatusPageGate.Decision.refuse(status: 403, reason: "missing or wrong CSRF token")
        #expect(self.open.decide(self.action(csrf: nil)) == csrfRefusal)
        #expect(self.open.decide(self.action(csrf: "c5f0e1d2c3b4a5968778695a4b3c2d1f")) == csrfRefusal)
        #expect(self.open.decide(self.action(csrf: "")) == csrfRefusal)
        #expect(self.open.decide(self.action(origin: "http://evil.example"))
                    == .refuse(status: 403, reason: "cross-origin request refused"))
        #expect(self.open.decide(self.action(origin: "http://localhost:8787"))
                    == .refuse(status: 403, reason: "cross-origin request refused"))
        #expect(self.open.decide(self.action(origin: "null"))
                    == .refuse(status: 403, reason: "cross-origin request refused"))
        // Without an Origin (curl, an older client) the CSRF token alone decides.
        #expect(self.open.decide(self.action(origin: nil)) == .serve(.action(.revoke)))
        #expect(self.open.decide(self.action(type: "text/plain")) == .refuse(status: 415, reason: "send JSON"))
        #expect(self.open.decide(self.action(type: "application/x-www-form-urlencoded"))
                    == .refuse(status: 415, reason: "send JSON"))
        #expect(self.open.decide(self.action(type: "application/json; charset=utf-8")) == .serve(.action(.revoke)))
    }

    @Test func onlyLoopbackMayServeWithoutAToken() {
        #expect(StatusPageGate.bindProblem(host: "127.0.0.1", accessToken: nil) == nil)
        #expect(StatusPageGate.bindProblem(host: "localhost", accessToken: nil) == nil)
        #expect(StatusPageGate.bindProblem(host: "0.0.0.0", accessToken: nil) != nil)
        #expect(StatusPageGate.bindProblem(host: "192.168.1.5", accessToken: nil) != nil)
        #expect(StatusPageGate.bindProblem(host: "0.0.0.0", accessToken: "short") != nil)
        #expect(StatusPageGate.bindProblem(host: "0.0.0.0", accessToken: "owner-secret-0123456789") == nil)
        // The token goes into a cookie and a URL as it is.
        #expect(StatusPageGate.bindProblem(host: "127.0.0.1", accessToken: "owner-secret-012345;x=1") != nil)
        #expect(StatusPageGate.bindProblem(host: "127.0.0.1", accessToken: "owner secret 0123456789") != nil)
        #expect(StatusPageGate.bindProblem(host: "127.0.0.1", accessToken: "owner-secret-0123456789\r\nX: y") != nil)
    }

    @Test func secretsCompareByValue() {
        #expect(StatusPageGate.constantTimeEquals("abc", "abc"))
        #expect(!StatusPageGate.constantTimeEquals("abc", "abd"))
        #expect(!StatusPageGate.constantTimeEquals("abc", "abcd"))
        #expect(!StatusPageGate.constantTimeEquals("", "a"))
    }
}
