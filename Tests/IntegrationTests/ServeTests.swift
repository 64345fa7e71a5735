import Foundation
import HomebaseCore
import HomebaseRouter
import HomebaseService
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 36 end to end: `serve` on a paired handset (a real relay, the Ollama emulator, a Homebase daemon), apps
/// as raw HTTP clients. Streamed and whole answers, the Ollama API, route headers on a served and a fallback
/// answer, a disconnect freeing the Homebase's stream (its status page shows it), hostile input refused while
/// another answer keeps streaming.
@Suite("serve: the local OpenAI and Ollama APIs", .serialized, .timeLimit(.minutes(2)))
struct ServeTests {
    static let token = "sk-serve-integration"
    static let auth = "Authorization: Bearer \(ServeTests.token)\r\n"

    static func post(_ path: String, _ body: String, headers: String = ServeTests.auth) -> String {
        "POST \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\(headers)Content-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    static func chat(_ prompt: String, stream: Bool = true) -> String {
        #"{"model":"auto","messages":[{"role":"user","content":"\#(prompt)"}],"stream":\#(stream),"stream_options":{"include_usage":true}}"#
    }

    /// A response's body, de-chunked when it came chunked.
    static func body(_ response: String) -> String {
        guard let start = response.range(of: "\r\n\r\n") else { return "" }
        let raw = Array(response[start.upperBound...].utf8)
        guard response[..<start.lowerBound].contains("Transfer-Encoding: chunked") else { return String(decoding: raw, as: UTF8.self) }
        var decoder = HTTPChunkedDecoder(maxBodyBytes: 1 << 24)
        decoder.append(raw)
        var out: [UInt8] = []
        while case .data(let piece)? = try? decoder.next() { out += piece }
        return String(decoding: out, as: UTF8.self)
    }

    /// The text of every `delta.content` in an SSE body.
    static func streamedText(_ response: String) -> String {
        Self.body(response).components(separatedBy: "\n\n").compactMap { event -> String? in
            guard event.hasPrefix("data: {"), let node = try? JSONNode.parse(String(event.dropFirst(6))) else { return nil }
            return node["choices"]?.arrayValue?.first?["delta"]?["content"]?.stringValue
        }.joined()
    }

    func withServe(tokensPerSecond: Double = 400,
                   _ body: (IntegrationSystem, UInt16, @escaping @Sendable () async -> StreamCounts?) async throws -> Void)
        async throws
    {
        try await IntegrationSystem.with(tokensPerSecond: tokensPerSecond, homebase: { options in
            options.ui = StatusPageServer.Configuration(host: "127.0.0.1", port: 0)
        }) { system in
            var invocation = ServeInvocation(port: 0)
            invocation.token = Self.token
            let server = LocalAPIServer(backend: system.handset.session,
                                        options: LocalAPIServer.Options(tool: "handset", invocation: invocation))
            let port = try server.start()
            defer { server.stop() }
            let homebase = system.homebase
            // What `homebase status --json` prints: the daemon's status page, /api/status.
            let status: @Sendable () async -> StreamCounts? = {
                guard let url = homebase.daemonStatus?.uiURL, let p = URL(string: url)?.port else { return nil }
                let raw = try? await offPool {
                    try ServeClient.exchange(UInt16(p), "GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:\(p)\r\nConnection: close\r\n\r\n")
                }
                guard let raw, let start = raw.range(of: "\r\n\r\n"),
                      let json = try? JSONSerialization.jsonObject(with: Data(raw[start.upperBound...].utf8)) as? [String: Any],
                      let streaming = (json["admission"] as? [String: Any])?["streaming"] as? Int,
                      let streams = json["streams"] as? [Any]
                else { return nil }
                return StreamCounts(streaming: streaming, streams: streams.count)
            }
            try await body(system, port, status)
        }
    }

    @Test("models, streamed and whole answers, Ollama NDJSON, then a fallback answer after the Homebase stops")
    func answersThroughTheRouter() async throws {
        try await self.withServe { system, port, _ in
            let models = try await offPool { try ServeClient.exchange(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\(Self.auth)Connection: close\r\n\r\n") }
            #expect(models.hasPrefix("HTTP/1.1 200") && models.contains(#"{"id":"qwen2.5:7b","object":"model""#))
            #expect(models.contains(#""owned_by":"homebase""#))

            let prompt = "What is the weather at home?"
            let streamed = try await offPool { try ServeClient.exchange(port, Self.post("/v1/chat/completions", Self.chat(prompt))) }
            #expect(streamed.hasPrefix("HTTP/1.1 200") && streamed.contains("Content-Type: text/event-stream\r\n"))
            #expect(streamed.contains("X-Homebase-Route: external\r\n") && streamed.contains("X-Homebase-Provider: remote\r\n"))
            #expect(!streamed.contains("X-Homebase-Fallback"))
            #expect(Self.streamedText(streamed) == IntegrationOllama.expectedText(prompt))
            #expect(streamed.contains(#""homebase":{"route":"external","provider":"remote","model":"qwen2.5:7b","fallback":null}"#))
            #expect(streamed.contains(#""choices":[],"usage":{"#) && Self.body(streamed).hasSuffix("data: [DONE]\n\n"))

            let whole = try await offPool { try ServeClient.exchange(port, Self.post("/v1/chat/completions", Self.chat(prompt, stream: false))) }
            let body = try JSONNode.parse(String(whole[whole.range(of: "\r\n\r\n")!.upperBound...]))
            #expect(body["object"] == .string("chat.completion"))
            #expect(body["choices"]?.arrayValue?.first?["message"]?["content"] == .string(IntegrationOllama.expectedText(prompt)))
            #expect(body["homebase"]?["provider"] == .string("remote"))

            let ndjson = try await offPool { try ServeClient.exchange(port, Self.post("/api/chat",
                #"{"model":"qwen2.5:7b","messages":[{"role":"user","content":"\#(prompt)"}]}"#)) }
            #expect(ndjson.contains("Content-Type: application/x-ndjson\r\n") && ndjson.contains("X-Homebase-Provider: remote\r\n"))
            let lines = Self.body(ndjson).split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap { try? JSONNode.parse(String($0)) }
            #expect(lines.count >= 2 && lines.last?["done"] == .bool(true) && lines.dropLast().allSatisfy { $0["done"] == .bool(false) })
            #expect(lines.compactMap { $0["message"]?["content"]?.stringValue }.joined() == IntegrationOllama.expectedText(prompt))

            // The Homebase goes away: a fallback is still an answer, same status, same shape, headers say so.
            await system.homebase.stop()
            let fallback = try await offPool { try ServeClient.exchange(port, Self.post("/v1/chat/completions", Self.chat("And now?"))) }
            #expect(fallback.hasPrefix("HTTP/1.1 200"))
            #expect(fallback.contains("X-Homebase-Route: external\r\n") && fallback.contains("X-Homebase-Provider: on-device\r\n"))
            #expect(fallback.contains("X-Homebase-Fallback: offline\r\n"))
            #expect(fallback.contains(#""fallback":{"from":"remote","reason":"offline"}"#))
            #expect(Self.streamedText(fallback) == FloorProvider().answer(ChatRequest(messages: [.user("And now?")])).text)
        }
    }

    @Test("an app that drops its connection mid-stream frees the Homebase's stream within a second")
    func disconnectFreesTheHomebase() async throws {
        try await self.withServe(tokensPerSecond: 15) { system, port, status in
            #expect(await eventually(.seconds(5)) { await status() != nil }, "no status page")
            let app = try ServeClient(port: port)
            app.send(Self.post("/v1/chat/completions", Self.chat("Tell me a long story about the sea")))
            let first = try await offPool { app.read(until: #""delta":{"content":"#) }
            #expect(first.contains(#""delta":{"content":"#))
            #expect(await status() == StreamCounts(streaming: 1, streams: 1))
            app.close()
            let closed = ContinuousClock.now
            let freed = await eventually(.seconds(3)) { await status() == StreamCounts(streaming: 0, streams: 0) }
            let took = ContinuousClock.now - closed
            #expect(freed)
            #expect(took < .seconds(1), "the Homebase's stream ended \(took) after the app left")
            print("serve: the Homebase's stream ended \(took) after the app disconnected")
        }
    }

    @Test("hostile input gets the defined refusals while another answer keeps streaming")
    func hostileInputWhileAnswering() async throws {
        try await self.withServe(tokensPerSecond: 25) { _, port, _ in
            let prompt = "Describe the lighthouse in detail"
            let app = try ServeClient(port: port)
            defer { app.close() }
            app.send(Self.post("/v1/chat/completions", Self.chat(prompt)))
            #expect(try await offPool { app.read(until: #""delta":{"content":"#) }.contains("X-Homebase-Provider: remote"))

            let refusals = try await offPool { () -> [String] in
                let big = String(repeating: "x", count: (1 << 20) + 1)
                var out = [
                    try ServeClient.exchange(port, Self.post("/v1/chat/completions", big)),
                    try ServeClient.exchange(port, Self.post("/v1/chat/completions", #"{"messages":[{"role":"user","#)),
                    try ServeClient.exchange(port, Self.post("/v1/chat/completions", Self.chat("x"),
                                                             headers: "Authorization: Bearer wrong\r\n")),
                    try ServeClient.exchange(port, "GET /v1/models HTTP/1.1\r\nHost: rebind.evil.example\r\n\(Self.auth)Connection: close\r\n\r\n"),
                ]
                // Slowloris: a head that never completes is closed at the 10 s request deadline.
                let slow = try ServeClient(port: port)
                defer { slow.close() }
                slow.send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n")
                out.append(slow.read(timeoutMs: 12_000))
                return out
            }
            #expect(refusals[0].hasPrefix("HTTP/1.1 413") && refusals[0].contains(#""code":"request_too_large""#))
            #expect(refusals[1].hasPrefix("HTTP/1.1 400") && refusals[1].contains(#""type":"invalid_request_error""#))
            #expect(refusals[2].hasPrefix("HTTP/1.1 401") && refusals[2].contains(#""code":"invalid_api_key""#))
            #expect(refusals[3].hasPrefix("HTTP/1.1 403") && refusals[3].contains(#""code":"host_not_allowed""#))
            #expect(refusals[4].hasPrefix("HTTP/1.1 408"))

            let rest = try await offPool { app.read(until: "data: [DONE]", timeoutMs: 30_000) }
            #expect(rest.contains("data: [DONE]"))
            #expect(rest.contains(#""provider":"remote""#))
        }
    }
}

/// The Homebase's live streams, from its status page.
struct StreamCounts: Sendable, Equatable {
    var streaming: Int
    var streams: Int
}

/// Runs blocking socket work on a thread of its own, off the cooperative pool the router's tasks need.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }.start()
    }
}

/// A raw HTTP/1.1 client on one socket: an app, or an attacker, byte for byte.
final class ServeClient: @unchecked Sendable {
    let fd: Int32

    init(port: UInt16) throws {
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else { throw IntegrationFailure("connect to 127.0.0.1:\(port) failed") }
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads until `marker` shows up, the peer closes, or `timeoutMs` passes.
    func read(until marker: String? = nil, timeoutMs: Int = 10_000) -> String {
        var data: [UInt8] = []
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while ContinuousClock.now < deadline {
            if let marker, String(decoding: data, as: UTF8.self).contains(marker) { break }
            var p = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }

    func close() { Glibc.close(self.fd) }

    /// One request and its whole response (`Connection: close` ends it).
    static func exchange(_ port: UInt16, _ request: String, timeoutMs: Int = 15_000) throws -> String {
        let c = try ServeClient(port: port)
        defer { c.close() }
        c.send(request)
        return c.read(timeoutMs: timeoutMs)
    }
}
