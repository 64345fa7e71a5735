import HomebaseCore
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseRouter

/// `handset serve` / `guest serve`'s command line (issue 36's contract).
@Suite struct ServeCommandTests {
    static let pk = String(repeating: "ab", count: 32)

    func handset(_ line: String, _ environment: [String: String] = [:]) throws(UsageError) -> ServeInvocation? {
        guard case .serve(let s) = try HandsetCommand.parse(line.split(separator: " ").map(String.init),
                                                            environment: environment).command else { return nil }
        return s
    }

    func guest(_ line: String, _ environment: [String: String] = [:]) throws(UsageError) -> ServeInvocation? {
        guard case .serve(let s) = try GuestCommand.parse(line.split(separator: " ").map(String.init),
                                                          environment: environment).command else { return nil }
        return s
    }

    @Test func defaults() throws {
        let h = try #require(try self.handset("serve"))
        #expect(h.host == "127.0.0.1" && h.port == 11435 && h.token == nil && h.corsOrigin == nil && h.allowedHosts.isEmpty)
        let g = try #require(try self.guest("serve"))
        #expect(g.host == "127.0.0.1" && g.port == 11436)
        #expect(try self.handset("--state /tmp/x serve") == h)
    }

    @Test func everyFlag() throws {
        let s = try #require(try self.handset(
            "serve --listen 0.0.0.0:8080 --token sk-1 --cors http://localhost:3000 --allow-host Studio.lan --allow-host=nas"))
        #expect(s.host == "0.0.0.0" && s.port == 8080 && s.token == "sk-1")
        #expect(s.corsOrigin == "http://localhost:3000" && s.allowedHosts == ["studio.lan", "nas"])
        let g = try #require(try self.guest("serve --listen=localhost:9000 --host \(Self.pk)"))
        #expect(g.host == "localhost" && g.port == 9000 && g.guestHost == PublicKey(hex: Self.pk))
    }

    @Test func tokenFromTheEnvironment() throws {
        let s = try #require(try self.handset("serve --listen 0.0.0.0:8080", ["HOMEBASE_SERVE_TOKEN": "sk-env"]))
        #expect(s.token == "sk-env")
        #expect(try self.handset("serve --token sk-flag", ["HOMEBASE_SERVE_TOKEN": "sk-env"])?.token == "sk-flag")
        #expect(try self.handset("serve", ["HOMEBASE_SERVE_TOKEN": ""])?.token == nil)
    }

    @Test(arguments: [
        ("serve --listen 0.0.0.0:8080", "handset serve: a non-loopback --listen needs --token T"),
        ("serve --listen 192.168.1.2:11435", "handset serve: a non-loopback --listen needs --token T"),
        ("serve --listen 11435", "handset serve: --listen takes HOST:PORT (e.g. 127.0.0.1:11435), not '11435'"),
        ("serve --listen 127.0.0.1:0", "handset serve: --listen takes HOST:PORT (e.g. 127.0.0.1:11435), not '127.0.0.1:0'"),
        ("serve --listen 127.0.0.1:70000", "handset serve: --listen takes HOST:PORT (e.g. 127.0.0.1:11435), not '127.0.0.1:70000'"),
        ("serve --listen example.com:80", "handset serve: --listen takes an IPv4 address or localhost, not 'example.com'"),
        ("serve --listen", "handset serve: --listen needs a value"),
        ("serve --cors *", "handset serve: --cors takes an origin such as http://localhost:3000, not '*'"),
        ("serve --cors http://a/", "handset serve: --cors takes an origin such as http://localhost:3000, not 'http://a/'"),
        ("serve --allow-host a/b", "handset serve: --allow-host takes a host name, not 'a/b'"),
        ("serve --host \(ServeCommandTests.pk)", "handset serve: unknown option '--host'"),
        ("serve extra", "handset serve: unknown option 'extra'"),
    ])
    func errorsAreOneLineNamingTheCommand(line: String, message: String) {
        do {
            _ = try self.handset(line)
            Issue.record("'\(line)' parsed")
        } catch {
            #expect(error.description == message)
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func helpListsServe() {
        #expect(HandsetCommand.helpText.contains("handset serve [--listen HOST:PORT] [--token T] [--cors ORIGIN] [--allow-host NAME]..."))
        #expect(GuestCommand.helpText.contains("guest serve [--listen HOST:PORT] [--token T] [--cors ORIGIN] [--allow-host NAME]... [--host PK]"))
        #expect(HandsetCommand.helpText.contains("127.0.0.1:11435") && GuestCommand.helpText.contains("127.0.0.1:11436"))
    }
}

/// A consumer that went away (an app closed its connection) gets no fallback run for nobody.
@Suite struct FallbackCancellationTests {
    final class Recording: LLMProvider, Sendable {
        let kind = ProviderKind.onDevice
        let streams = Mutex(0)
        func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
            ChatResult(text: "fallback", providerKind: .onDevice, model: "device")
        }
        func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
            self.streams.withLock { $0 += 1 }
            return AsyncStream { c in
                c.yield(.done(ChatResult(text: "fallback", providerKind: .onDevice, model: "device")))
                c.finish()
            }
        }
    }

    @Test func cancelledConsumerRunsNoFallback() async throws {
        let fallback = Recording()
        let provider = FallbackProvider(primary: DrippingProvider(count: 1_000, everyMs: 10), fallback: fallback)
        let consumer = Task {
            var n = 0
            for await event in provider.stream(Fixture.request) {
                if case .text = event { n += 1 }
            }
            return n
        }
        try await Task.sleep(for: .milliseconds(60))
        consumer.cancel()
        _ = await consumer.value
        try await Task.sleep(for: .milliseconds(100))
        #expect(fallback.streams.withLock { $0 } == 0)
    }
}

