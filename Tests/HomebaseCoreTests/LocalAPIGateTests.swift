import HomebaseCore
import Testing

@Suite struct LocalAPIGateTests {
    let open = LocalAPIGate(.init())
    let locked = LocalAPIGate(.init(token: "sk-local-secret", listenHost: "192.168.1.20", allowedHosts: ["Studio.lan"],
                                    corsOrigin: "http://localhost:3000"))

    func head(_ method: String = "GET", _ target: String = "/v1/models", host: String? = "127.0.0.1:11435",
              _ headers: [(String, String)] = []) -> HTTPRequestHead {
        var fields = host.map { [HTTPHeaderField(name: "Host", value: $0)] } ?? []
        fields += headers.map { HTTPHeaderField(name: $0.0, value: $0.1) }
        return HTTPRequestHead(method: method, target: target, headers: fields)
    }

    func code(_ d: LocalAPIGate.Decision) -> (Int, String?)? {
        if case .refuse(let e) = d { return (e.status, e.code) }
        return nil
    }

    @Test func routesTheTable() {
        #expect(self.open.decide(self.head()) == .serve(.models))
        #expect(self.open.decide(self.head("GET", "/v1/models/qwen2.5%3A7b")) == .serve(.model("qwen2.5:7b")))
        #expect(self.open.decide(self.head("POST", "/v1/chat/completions")) == .serve(.chatCompletions))
        #expect(self.open.decide(self.head("GET", "/api/version")) == .serve(.ollamaVersion))
        #expect(self.open.decide(self.head("GET", "/api/tags")) == .serve(.ollamaTags))
        #expect(self.open.decide(self.head("POST", "/api/show")) == .serve(.ollamaShow))
        #expect(self.open.decide(self.head("POST", "/api/chat")) == .serve(.ollamaChat))
        #expect(self.open.decide(self.head("GET", "/api/ps")) == .serve(.ollamaPS))
        #expect(self.open.decide(self.head("HEAD", "/")) == .serve(.root))
        #expect(self.code(self.open.decide(self.head("GET", "/v1/completions")))! == (404, "not_found"))
        #expect(self.code(self.open.decide(self.head("GET", "/v1/models/%zz")))! == (404, "not_found"))
        #expect(self.code(self.open.decide(self.head("GET", "/api/generate")))! == (404, "not_found"))
        #expect(self.code(self.open.decide(self.head("GET", "/v1/chat/completions")))! == (405, "method_not_allowed"))
        #expect(self.code(self.open.decide(self.head("POST", "/v1/models")))! == (405, "method_not_allowed"))
        #expect(self.code(self.open.decide(self.head("DELETE", "/api/chat")))! == (405, "method_not_allowed"))
    }

    /// Found by the local-api-gate fuzzer: a 405 quoted the whole path back. Every quoted value is clipped.
    @Test func refusalsQuoteHostileValuesClipped() {
        let long = "/v1/models/" + String(repeating: "u", count: 250)
        for head in [self.head("POST", long), self.head("GET", "/x" + String(repeating: "é", count: 200))] {
            guard case .refuse(let e) = self.open.decide(head) else { Issue.record("served"); continue }
            #expect(e.message.utf8.count <= 100, "\(e.status): \(e.message.utf8.count) bytes")
        }
        #expect(LocalAPIGate.clip("short") == "short")
        #expect(LocalAPIGate.clip(String(repeating: "é", count: 40), maxBytes: 9) == "éééé…")
    }

    @Test(arguments: ["localhost", "localhost:11435", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:11435", "LOCALHOST"])
    func loopbackHostsPass(_ host: String) {
        #expect(self.open.decide(self.head(host: host)) == .serve(.models))
    }

    @Test(arguments: [nil, "", "evil.example", "evil.example:11435", "localhost.evil.example", "127.0.0.2",
                      "192.168.1.20", "[::1", "[::1]x", "localhost:port", "a:b:c", "[]"] as [String?])
    func foreignHostsAreRefused(_ host: String?) {
        #expect(self.code(self.open.decide(self.head(host: host)))! == (403, "host_not_allowed"))
    }

    @Test func listenHostAndAllowedHostsPass() {
        let auth = [("Authorization", "Bearer sk-local-secret")]
        #expect(self.locked.decide(self.head(host: "192.168.1.20:11435", auth)) == .serve(.models))
        #expect(self.locked.decide(self.head(host: "studio.lan", auth)) == .serve(.models))
        #expect(self.locked.decide(self.head(host: "localhost", auth)) == .serve(.models))
        #expect(self.code(self.locked.decide(self.head(host: "other.lan", auth)))! == (403, "host_not_allowed"))
    }

    @Test func tokenIsRequiredWhenSet() {
        #expect(self.code(self.locked.decide(self.head()))! == (401, "invalid_api_key"))
        #expect(self.code(self.locked.decide(self.head("GET", "/v1/models", host: "localhost",
                                                       [("Authorization", "Bearer sk-local-secreT")])))! == (401, "invalid_api_key"))
        #expect(self.code(self.locked.decide(self.head("GET", "/v1/models", host: "localhost",
                                                       [("Authorization", "sk-local-secret")])))! == (401, "invalid_api_key"))
        #expect(self.code(self.locked.decide(self.head("GET", "/nothing", host: "localhost")))! == (401, "invalid_api_key"))
        #expect(self.locked.decide(self.head("GET", "/api/tags", host: "localhost",
                                             [("Authorization", "bearer sk-local-secret")])) == .serve(.ollamaTags))
        // The open gate needs none, and ignores one sent anyway (the openai client always sends its api_key).
        #expect(self.open.decide(self.head("GET", "/v1/models", host: "localhost", [("Authorization", "Bearer x")]))
            == .serve(.models))
    }

    @Test func bodyLimitFromTheDeclaredLength() {
        let big = self.head("POST", "/v1/chat/completions", host: "localhost", [("Content-Length", "\((1 << 20) + 1)")])
        #expect(self.code(self.open.decide(big))! == (413, "request_too_large"))
        #expect(self.code(self.open.decide(self.head("POST", "/api/chat"), bodyBytes: (1 << 20) + 1))! == (413, "request_too_large"))
        #expect(self.open.decide(self.head("POST", "/api/chat"), bodyBytes: 1 << 20) == .serve(.ollamaChat))
    }

    @Test func corsOnlyWhenConfiguredAndOnlyForThatOrigin() {
        let origin = [("Origin", "http://localhost:3000")]
        #expect(self.open.corsHeaders(self.head("GET", "/v1/models", host: "localhost", origin)).isEmpty)
        #expect(self.code(self.open.decide(self.head("OPTIONS", "/v1/models", host: "localhost", origin)))! == (403, "cors_not_allowed"))
        #expect(self.locked.decide(self.head("OPTIONS", "/v1/chat/completions", host: "localhost", origin)) == .preflight)
        let preflight = self.locked.corsHeaders(self.head("OPTIONS", "/v1/chat/completions", host: "localhost", origin))
        #expect(preflight.contains { $0 == ("Access-Control-Allow-Origin", "http://localhost:3000") })
        #expect(preflight.contains { $0.0 == "Access-Control-Allow-Headers" && $0.1.contains("Authorization") })
        let other = [("Origin", "http://evil.example")]
        #expect(self.locked.corsHeaders(self.head("GET", "/v1/models", host: "localhost", other)).isEmpty)
        #expect(self.code(self.locked.decide(self.head("OPTIONS", "/v1/models", host: "localhost", other)))! == (403, "cors_not_allowed"))
        // A preflight from a foreign Host is still a foreign Host.
        #expect(self.code(self.locked.decide(self.head("OPTIONS", "/v1/models", host: "evil.example", origin)))! == (403, "host_not_allowed"))
    }

    @Test func bindProblems() {
        #expect(LocalAPIGate.bindProblem(tool: "handset", listenHost: "127.0.0.1", token: nil) == nil)
        #expect(LocalAPIGate.bindProblem(tool: "handset", listenHost: "localhost", token: nil) == nil)
        #expect(LocalAPIGate.bindProblem(tool: "handset", listenHost: "0.0.0.0", token: nil)
            == "handset serve: a non-loopback --listen needs --token T")
        #expect(LocalAPIGate.bindProblem(tool: "guest", listenHost: "192.168.1.2", token: nil)
            == "guest serve: a non-loopback --listen needs --token T")
        #expect(LocalAPIGate.bindProblem(tool: "guest", listenHost: "0.0.0.0", token: "t0k") == nil)
        #expect(LocalAPIGate.bindProblem(tool: "guest", listenHost: "0.0.0.0", token: "with space") != nil)
    }
}
