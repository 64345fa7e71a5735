import Testing
@testable import HomebaseCore

@Suite struct RelayURLTests {
    @Test func parsesTheUsualForms() throws {
        let a = try #require(RelayURL("wss://relay.example/v1/relay"))
        #expect(a.secure && a.host == "relay.example" && a.port == 443 && a.target == "/v1/relay")
        #expect(a.hostHeader == "relay.example")
        let b = try #require(RelayURL("ws://127.0.0.1:8080/v1/relay?token=abc"))
        #expect(!b.secure && b.port == 8080 && b.target == "/v1/relay?token=abc" && b.hostHeader == "127.0.0.1:8080")
        let c = try #require(RelayURL("ws://[::1]:9000"))
        #expect(c.host == "::1" && c.port == 9000 && c.target == "/" && c.hostHeader == "[::1]:9000")
        let d = try #require(RelayURL("  HTTPS://Relay.Example:8443/x  "))
        #expect(d.secure && d.port == 8443 && d.httpURL == "https://Relay.Example:8443/x")
    }

    @Test(arguments: ["", "relay.example", "ftp://x/", "ws://", "ws://:80/", "ws://h:0/", "ws://h:99999/",
                      "ws://user@h/", "ws://h/a b", "ws://[::1/", "ws://h/#frag", "ws://ho st/"])
    func rejectsMalformed(_ s: String) {
        #expect(RelayURL(s) == nil)
    }
}
