import Foundation
import Testing

@testable import HomebaseTransport

/// A local Python `http.server` (stdlib only) on 127.0.0.1, port 0, for the HTTPClient tests. Each test starts
/// its own, so the counters in `/stats` belong to that test.
final class HTTPClientTestServer: Sendable {
    static let script = #"""
import gzip, json, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

stats = {"closed": 0, "firehose_bytes": 0, "connections": 0}
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with lock:
            stats["connections"] += 1

    def send_body(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def head(self, *fields):
        self.send_response(200)
        for name, value in fields:
            self.send_header(name, value)
        self.end_headers()

    def start_chunked(self, ctype):
        self.head(("Content-Type", ctype), ("Transfer-Encoding", "chunked"))
        self.wfile.flush()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        path = self.path
        if path == "/json":
            self.send_body(200, json.dumps({"hello": "world", "peer": self.client_address[1]}).encode())
        elif path == "/request":
            self.send_body(200, json.dumps({"method": self.command, "x-test": self.headers.get("X-Test"),
                                            "length": self.headers.get("Content-Length")}).encode())
        elif path == "/error":
            self.send_body(500, b'{"error":"model \'x\' crashed"}')
        elif path.startswith("/huge"):
            n = 2 * 1024 * 1024
            if path == "/huge-chunked":
                self.start_chunked("application/octet-stream")
                block = b"x" * 65536
                for _ in range(n // len(block)):
                    self.chunk(block)
                self.end_chunked()
            else:
                self.send_body(200, b"x" * n, "application/octet-stream")
        elif path == "/sse":
            self.start_chunked("text/event-stream")
            for i in range(5):
                self.chunk(b'data: {"n":%d}\n\n' % i)
                time.sleep(0.1)
            self.chunk(b"data: [DONE]\n\n")
            self.end_chunked()
        elif path == "/chunk-burst":
            # Fifty chunks and a trailer in one write: one read for the client.
            self.head(("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked"))
            body = b"".join(b"%x;ext=%d\r\n%s\r\n" % (len(w), i, w) for i, w in enumerate(b"w%d " % n for n in range(50)))
            self.wfile.write(body + b"0\r\nX-Trailer: t\r\n\r\n")
            self.wfile.flush()
        elif path == "/gzip-body":
            data = gzip.compress(b"hello gzip")
            self.head(("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked"))
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
            self.wfile.flush()
        elif path == "/gzip-chunked":
            self.head(("Transfer-Encoding", "gzip, chunked"))
            self.wfile.write(b"3\r\nabc\r\n0\r\n\r\n")
            self.wfile.flush()
        elif path == "/bad-chunk":
            self.head(("Transfer-Encoding", "chunked"))
            self.wfile.write(b"3\r\nabcXY\r\n0\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
        elif path == "/drip":
            self.start_chunked("text/event-stream")
            for i in range(60):
                self.chunk(b'data: {"n":%d}\n\n' % i)
                time.sleep(0.005)
            self.chunk(b"data: [DONE]\n\n")
            self.end_chunked()
        elif path == "/slow-done":
            # Tokens slower than the client's pacing, then [DONE], then the terminator a little later.
            self.start_chunked("text/event-stream")
            for i in range(3):
                self.chunk(b'data: {"n":%d}\n\n' % i)
                time.sleep(0.05)
            self.chunk(b"data: [DONE]\n\n")
            time.sleep(0.02)
            self.end_chunked()
        elif path == "/silent":
            time.sleep(30)
        elif path == "/infinite":
            self.start_chunked("text/event-stream")
            try:
                while True:
                    self.chunk(b": tick\n\n")
                    time.sleep(0.25)
            except OSError:
                with lock:
                    stats["closed"] += 1
        elif path == "/firehose":
            self.start_chunked("application/octet-stream")
            block = b"f" * 65536
            try:
                while True:
                    self.chunk(block)
                    with lock:
                        stats["firehose_bytes"] += len(block)
            except OSError:
                with lock:
                    stats["closed"] += 1
        elif path == "/stats":
            with lock:
                body = json.dumps(stats).encode()
            self.send_body(200, body)
        else:
            self.send_body(404, b'{"error":"not found"}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path == "/echo":
            self.send_body(200, body, self.headers.get("Content-Type", "application/octet-stream"),
                           [("X-Echo-Header", self.headers.get("X-Test", "")), ("X-Method", "POST")])
        elif self.path == "/api/chat":
            self.start_chunked("application/x-ndjson")
            for word in ["The", " sky", " is", " blue"]:
                self.chunk(json.dumps({"message": {"role": "assistant", "content": word}, "done": False}).encode() + b"\n")
                time.sleep(0.02)
            self.chunk(b'{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}\n')
            self.end_chunked()
        else:
            self.send_body(404, b'{"error":"not found"}')

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 64  # the default listen backlog of 5 drops concurrent connects
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.handle_error = lambda request, address: None  # clients hanging up is what several tests do
print(server.server_address[1], flush=True)
server.serve_forever()
"""#

    let port: Int
    private let process: Process

    /// Starts a server. The wait for Python to print its port runs on a thread of its own, not on one of
    /// the few threads of the concurrency pool, which the tests running in parallel need.
    static func start() async throws -> HTTPClientTestServer {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try HTTPClientTestServer() })
            }
        }
    }

    private init() throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("homebase-http-test-server-\(UUID().uuidString).py")
        defer { try? FileManager.default.removeItem(at: path) }
        try Self.script.write(to: path, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", path.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line: [UInt8] = []
        while !line.contains(UInt8(ascii: "\n")) {
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { break }
            line += data
        }
        self.process = process
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw CocoaError(.fileReadCorruptFile)
        }
        self.port = port
    }

    deinit {
        // SIGKILL: the test runner's threads may block SIGTERM, and a child inherits that mask. The wait after it
        // is short (the child is gone at once), and Foundation on Linux keeps a Process (and its pipes) forever
        // unless waitUntilExit saw it end, even after its termination was signalled.
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(self.port)\(path)" }

    /// The server's counters: connections it saw the client drop, bytes `/firehose` managed to write.
    func stats(_ client: HTTPClient) async throws -> [String: Int] {
        let response = try await client.send(HTTPRequest(url: self.url("/stats"), timeout: .seconds(5)))
        return try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Int] ?? [:]
    }

    /// Polls `/stats` until `key` reaches `value` or `limit` passes; returns the last value seen.
    func waitForStat(_ client: HTTPClient, _ key: String, atLeast value: Int, within limit: Duration) async throws
        -> Int
    {
        let deadline = ContinuousClock.now + limit
        while true {
            let seen = try await self.stats(client)[key] ?? 0
            if seen >= value || ContinuousClock.now >= deadline { return seen }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

func json(_ body: [UInt8]) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] ?? [:]
}

@Suite(.timeLimit(.minutes(1)))
struct HTTPClientTests {
    @Test func getReturnsStatusLowercasedHeadersAndBody() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let response = try await client.send(HTTPRequest(url: server.url("/json")))
        #expect(response.head.status == 200)
        #expect(response.head.header("Content-Type") == "application/json")
        #expect(response.head.headers.allSatisfy { $0.0 == $0.0.lowercased() })
        #expect(try json(response.body)["hello"] as? String == "world")
    }

    @Test func sequentialRequestsReuseTheConnection() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let first = try await client.send(HTTPRequest(url: server.url("/json")))
        let second = try await client.send(HTTPRequest(url: server.url("/json")))
        // The server reports the client's source port: the same port means the same TCP connection.
        #expect(try json(first.body)["peer"] as? Int == json(second.body)["peer"] as? Int)
    }

    @Test func aReusedHandleKeepsNothingOfItsLastRequest() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        // A failure first: its message must not be the next transfer's.
        await #expect(throws: HTTPClientError.self) {
            try await client.send(HTTPRequest(url: "http://127.0.0.1:1/", connectTimeout: .seconds(2)))
        }
        _ = try await client.send(
            HTTPRequest(method: "POST", url: server.url("/echo"), headers: [("X-Test", "set")], body: [1, 2, 3]))
        let plain = try await client.send(HTTPRequest(url: server.url("/request")))
        #expect(client.loopHandlesReused == 2)
        let seen = try json(plain.body)
        #expect(plain.head.status == 200)
        #expect(seen["method"] as? String == "GET")
        #expect(seen["x-test"] is NSNull)
        #expect(seen["length"] is NSNull)
    }

    @Test func postSendsBodyAndHeadersVerbatim() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let body: [UInt8] = Array(#"{"model":"llama3.2"}"#.utf8) + [0, 255, 10] + Array(repeating: 7, count: 100_000)
        let response = try await client.send(
            HTTPRequest(
                method: "POST", url: server.url("/echo"),
                headers: [("Content-Type", "application/json"), ("X-Test", "hello there")], body: body))
        #expect(response.head.status == 200)
        #expect(response.body == body)
        #expect(response.head.header("x-echo-header") == "hello there")
        #expect(response.head.header("content-type") == "application/json")
    }

    /// The loop keeps the last header list for requests with the same headers: a request whose headers differ
    /// (or that is refused) never sends another's.
    @Test func eachRequestSendsItsOwnHeadersWhenTheLastListIsKept() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        func echo(_ value: String, extra: [(String, String)] = []) async throws -> String? {
            let response = try await client.send(
                HTTPRequest(method: "POST", url: server.url("/echo"), headers: [("X-Test", value)] + extra, body: [1]))
            return response.head.header("x-echo-header")
        }
        #expect(try await echo("one") == "one")
        #expect(try await echo("one") == "one")
        #expect(try await echo("two") == "two")
        #expect(try await echo("one") == "one")
        await #expect(throws: HTTPClientError.invalidRequest("bad header \"X-Evil\"")) {
            try await echo("one", extra: [("X-Evil", "a\r\nb")])
        }
        #expect(try await echo("one", extra: [("X-Other", "x")]) == "one")
        #expect(try await echo("three") == "three")
    }

    @Test func serverErrorIsAResponseWithItsBody() async throws {
        let server = try await HTTPClientTestServer.start()
        let response = try await HTTPClient().send(HTTPRequest(url: server.url("/error")))
        #expect(response.head.status == 500)
        #expect(try json(response.body)["error"] as? String == "model 'x' crashed")
    }

    @Test(arguments: ["/huge", "/huge-chunked"])
    func bodyOverTheLimitFailsWithResponseTooLarge(path: String) async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        await #expect(throws: HTTPClientError.responseTooLarge) {
            try await client.send(HTTPRequest(url: server.url(path), maxResponseBytes: 1024 * 1024))
        }
        let exact = try await client.send(HTTPRequest(url: server.url(path), maxResponseBytes: 2 * 1024 * 1024))
        #expect(exact.body.count == 2 * 1024 * 1024)
    }

    @Test func connectionRefusedFailsQuicklyWithConnectFailed() async throws {
        // Bound but not listening: connecting is refused, and no one else can take the port meanwhile.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                #expect(bind(fd, pointer, length) == 0)
                #expect(getsockname(fd, pointer, &length) == 0)
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let start = ContinuousClock.now
        do {
            _ = try await HTTPClient().send(HTTPRequest(url: "http://127.0.0.1:\(port)/", connectTimeout: .seconds(30)))
            Issue.record("expected connectFailed")
        } catch let error as HTTPClientError {
            guard case .connectFailed = error else { Issue.record("got \(error)"); return }
        }
        // Refused, not timed out: far below the 30 s connect timeout even on a loaded machine.
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func silentServerTripsTheIdleTimeout() async throws {
        let server = try await HTTPClientTestServer.start()
        let start = ContinuousClock.now
        await #expect(throws: HTTPClientError.timedOut) {
            try await HTTPClient().send(HTTPRequest(url: server.url("/silent"), idleTimeout: .milliseconds(300)))
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(300) && elapsed < .milliseconds(1000), "took \(elapsed)")
    }

    @Test func silentServerTripsTheTotalTimeout() async throws {
        let server = try await HTTPClientTestServer.start()
        await #expect(throws: HTTPClientError.timedOut) {
            try await HTTPClient().send(HTTPRequest(url: server.url("/silent"), timeout: .milliseconds(300)))
        }
    }

    @Test func headerWithLineBreakIsRefusedBeforeSending() async throws {
        let server = try await HTTPClientTestServer.start()
        await #expect(throws: HTTPClientError.invalidRequest("bad header \"X-Evil\"")) {
            try await HTTPClient().send(
                HTTPRequest(url: server.url("/json"), headers: [("X-Evil", "a\r\nHost: elsewhere")]))
        }
        await #expect(throws: HTTPClientError.self) {
            try await HTTPClient().send(HTTPRequest(url: "file:///etc/passwd"))
        }
    }

    @Test func cancellingSendAbortsAtOnce() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let task = Task { try await client.send(HTTPRequest(url: server.url("/silent"))) }
        try await Task.sleep(for: .milliseconds(150))  // let the request reach the silent server
        let start = ContinuousClock.now
        task.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await task.value }
        let latency = ContinuousClock.now - start
        print("HTTPClient send cancel latency: \(latency)")
        #expect(latency < .milliseconds(200))
    }

    /// epoll descriptors this process holds now.
    static func epollDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == "anon_inode:[eventpoll]"
        }.count
    }

    @Test func droppedClientsCloseTheirDescriptors() async throws {
        // Each client's loop holds an epoll set and an eventfd; a process that makes clients now and then
        // (the CLI's commands, the verifier) must not collect them.
        // Counted against what the process holds with the ten alive: clients dropped by earlier tests may
        // close theirs at any moment meanwhile, which only lowers the count.
        let server = try await HTTPClientTestServer.start()
        var clients: [HTTPClient] = []
        for _ in 0..<10 {
            let client = HTTPClient()
            #expect(try await client.send(HTTPRequest(url: server.url("/json"))).head.status == 200)
            clients.append(client)
        }
        let held = try Self.epollDescriptors()
        #expect(held >= 10)
        clients.removeAll()
        // The loop threads end on their own after the drop; give them a moment.
        var after = try Self.epollDescriptors()
        for _ in 0..<100 where after > held - 10 {
            try await Task.sleep(for: .milliseconds(20))
            after = try Self.epollDescriptors()
        }
        #expect(after <= held - 10, "epoll descriptors: \(held) with the ten clients, \(after) after dropping them")
    }
}

/// `HeaderLine`: the head's lines as libcurl hands them over, read as bytes.
@Suite struct HeaderLineTests {
    func parse(_ text: String) -> HeaderLine {
        Array(text.utf8).withUnsafeBytes { HeaderLine($0) }
    }

    @Test func statusLinesFieldsFoldingAndTheEnd() {
        #expect(self.parse("HTTP/1.1 200 OK\r\n") == .statusLine(200))
        #expect(self.parse("HTTP/2 404\r\n") == .statusLine(404))
        #expect(self.parse("HTTP/1.1  100   Continue\r\n") == .statusLine(100))  // runs of spaces
        #expect(self.parse("HTTP/1.1 abc\r\n") == .statusLine(0))
        #expect(self.parse("HTTP/1.1 +200 OK\r\n") == .statusLine(0))
        #expect(self.parse("HTTP/1.1 99999999999999999999\r\n") == .statusLine(0))  // no overflow
        #expect(self.parse("HTTP/1.1\r\n") == .statusLine(0))
        #expect(self.parse("\r\n") == .end)
        #expect(self.parse("\n") == .end)
        #expect(self.parse("") == .end)
        #expect(self.parse("Content-Type: text/event-stream\r\n") == .field(name: "content-type", value: "text/event-stream"))
        #expect(self.parse("X-Odd \t:\t  spaced value \t\r\n") == .field(name: "x-odd", value: "spaced value"))
        #expect(self.parse("Empty:\r\n") == .field(name: "empty", value: ""))
        #expect(self.parse("A: b: c\r\n") == .field(name: "a", value: "b: c"))  // the first colon splits
        #expect(self.parse("  folded more  \r\n") == .continuation("folded more"))
        #expect(self.parse("\tx\r\n") == .continuation("x"))
        #expect(self.parse("no colon here\r\n") == .other)
        // Only ASCII letters are lowercased; bytes that are not UTF-8 become replacement characters.
        #expect(self.parse("ÄB: v\r\n") == .field(name: "Äb", value: "v"))
        let invalid: [UInt8] = Array("X: ".utf8) + [0xFF, 0x0D, 0x0A]
        #expect(invalid.withUnsafeBytes { HeaderLine($0) } == .field(name: "x", value: "\u{FFFD}"))
    }
}
