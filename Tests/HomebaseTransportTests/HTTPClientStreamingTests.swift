import Foundation
import HomebaseCore
import Synchronization
import Testing

@testable import HomebaseTransport

@Suite(.timeLimit(.minutes(1)))
struct HTTPClientStreamingTests {
    @Test func sseChunksArriveAsTheServerSendsThem() async throws {
        let server = try await HTTPClientTestServer.start()
        let start = ContinuousClock.now
        let (head, body) = try await HTTPClient().stream(HTTPRequest(url: server.url("/sse")))
        #expect(head.status == 200)
        #expect(head.header("content-type") == "text/event-stream")
        var parser = SSEParser()
        var events: [SSEEvent] = []
        var firstChunkAt: Duration?
        for try await chunk in body {
            firstChunkAt = firstChunkAt ?? ContinuousClock.now - start
            events += try parser.append(chunk)
        }
        let total = ContinuousClock.now - start
        // Five events 100 ms apart: buffering the body would put the first chunk at the end.
        #expect(firstChunkAt! < .milliseconds(250), "first chunk after \(firstChunkAt!)")
        #expect(total >= .milliseconds(450), "whole stream took \(total)")
        #expect(events.map(\.data) == (0..<5).map { #"{"n":\#($0)}"# } + ["[DONE]"])
    }

    /// Reads `/drip` (60 events 5 ms apart) with `client`, starting `pacing` after the first delivery; returns
    /// the number of deliveries, the time of the first, and the events.
    func drip(pacing: HTTPBodyPacing?, idleTimeout: Duration? = nil,
              client: HTTPClient = HTTPClient()) async throws -> (Int, Duration, [String], Duration) {
        let server = try await HTTPClientTestServer.start()
        var request = HTTPRequest(url: server.url("/drip"), idleTimeout: idleTimeout)
        request.bodyPacing = pacing
        let start = ContinuousClock.now
        let (_, body) = try await client.stream(request)
        var parser = SSEParser()
        var events: [String] = []
        var deliveries = 0
        var first: Duration?
        for try await piece in body {
            deliveries += 1
            first = first ?? ContinuousClock.now - start
            pacing?.start()
            events += try parser.append(piece).map(\.data)
        }
        return (deliveries, first ?? .zero, events, ContinuousClock.now - start)
    }

    static let dripEvents = (0..<60).map { #"{"n":\#($0)}"# } + ["[DONE]"]

    @Test func pacedStreamIsReadInFewPiecesWithNothingLost() async throws {
        let (unpaced, _, plain, _) = try await self.drip(pacing: nil)
        let (paced, first, events, total) = try await self.drip(pacing: HTTPBodyPacing(interval: .milliseconds(100)))
        #expect(plain == Self.dripEvents)
        #expect(events == Self.dripEvents)
        // One read per 100 ms after the first (the stream lasts 300 ms or more), where unpaced reads take
        // nearly every event.
        let bound = Int(total / .milliseconds(100)) + 3
        #expect(paced <= bound, "paced deliveries: \(paced) in \(total)")
        #expect(unpaced >= 20, "unpaced deliveries: \(unpaced)")
        // Pacing starts after the first delivery, which is not held.
        #expect(first < .milliseconds(90), "first delivery after \(first)")
    }

    @Test func aPausedStreamDoesNotKeepTheLoopBusy() async throws {
        // While a paced read waits, the server keeps writing, so its socket is readable all along. The loop
        // watches sockets level-triggered: had the paused transfer's socket stayed in the set, every wait
        // would end at once and the loop would spin through the pause (thousands of passes).
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let pacing = HTTPBodyPacing(interval: .milliseconds(100))
        var request = HTTPRequest(url: server.url("/drip"))
        request.bodyPacing = pacing
        let before = client.loopPasses
        let (_, body) = try await client.stream(request)
        var parser = SSEParser()
        var events: [String] = []
        var deliveries = 0
        var times: [ContinuousClock.Instant] = []
        for try await piece in body {
            deliveries += 1
            times.append(.now)
            pacing.start()
            events += try parser.append(piece).map(\.data)
        }
        #expect(events == Self.dripEvents)
        // Nothing is read between ticks, not even when libcurl runs the transfer on a timer of its own during a
        // hold (its connect phase leaves one, due about 200 ms in): reads stay about an interval apart (at
        // least half of it by the resume rule; 40 ms leaves room for this task's scheduling).
        let gaps = zip(times.dropFirst(), times.dropFirst(2)).map { $1 - $0 }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(40) }, "gaps: \(gaps)")
        // Plain HTTP/1: each pause held the socket out of the loop's set, without pausing the transfer.
        #expect(client.pacingSocketHolds >= deliveries - 2, "\(client.pacingSocketHolds) holds, \(deliveries) deliveries")
        let passes = client.loopPasses - before
        // A few passes per delivery (read, pause, resume) and a few for the start and the end.
        #expect(passes <= 6 * deliveries + 20, "\(passes) passes for \(deliveries) deliveries")
        print("paused stream: \(passes) loop passes for \(deliveries) deliveries")
    }

    @Test func aTickReadsTheHeldSocketWhereItIs() async throws {
        // Each tick reads the held socket where it is, out of the loop's set: the server writes every few
        // milliseconds, so the read finds text and the socket stays out for the next interval. Only a tick
        // that finds nothing (the server lagging) puts it back, and the transfer's end ends its last hold.
        // Putting it back on every tick and waiting for the kernel to report it would cost two `epoll_ctl`s
        // and a pass per read.
        let client = HTTPClient()
        let (deliveries, _, events, _) = try await self.drip(pacing: HTTPBodyPacing(interval: .milliseconds(20)),
                                                             client: client)
        #expect(events == Self.dripEvents)
        #expect(deliveries >= 8, "\(deliveries) deliveries")
        #expect(client.pacingSocketHolds >= deliveries - 2, "\(client.pacingSocketHolds) holds, \(deliveries) deliveries")
        #expect(client.pacingHoldReleases <= 4, "\(client.pacingHoldReleases) releases, \(deliveries) deliveries")
    }

    @Test func aChangedCadenceAppliesToAStreamAlreadyPaced() async throws {
        let server = try await HTTPClientTestServer.start()
        let cadence = HTTPReadCadence(interval: .milliseconds(10))
        let pacing = HTTPBodyPacing(cadence: cadence)
        var request = HTTPRequest(url: server.url("/drip"))
        request.bodyPacing = pacing
        let (_, body) = try await HTTPClient().stream(request)
        var parser = SSEParser()
        var events: [String] = []
        var times: [ContinuousClock.Instant] = []
        for try await piece in body {
            times.append(.now)
            pacing.start()
            if times.count == 3 { cadence.set(.milliseconds(200)) }  // the owner's change, mid-stream
            events += try parser.append(piece).map(\.data)
        }
        #expect(events == Self.dripEvents)
        #expect(pacing.interval == .milliseconds(200))
        // From the pause after the change on, reads are at least half the new interval apart (the resume
        // tick's rule); at the old 10 ms they would be about 10 ms apart.
        let gaps = zip(times.dropFirst(3), times.dropFirst(4)).map { $1 - $0 }
        #expect(!gaps.isEmpty)
        #expect(gaps.allSatisfy { $0 >= .milliseconds(90) }, "gaps after the change: \(gaps)")
    }

    @Test func pacedTimeIsNotSilence() async throws {
        // The pause (150 ms) is longer than the idle timeout (80 ms), yet the server never falls silent.
        let (_, _, events, _) = try await self.drip(pacing: HTTPBodyPacing(interval: .milliseconds(150)),
                                                 idleTimeout: .milliseconds(80))
        #expect(events == Self.dripEvents)
    }

    /// Four paced requests whose consumer stops at `[DONE]` (before the chunked terminator arrived); returns
    /// how many connections the server saw, the `/stats` request (another client) included.
    func connectionsForEarlyEnds(finishing: Bool) async throws -> Int {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        /// Reads until `[DONE]`, then returns, which drops the body at once.
        func readUntilDone() async throws {
            let pacing = HTTPBodyPacing(interval: .milliseconds(30))
            var request = HTTPRequest(url: server.url("/slow-done"), idleTimeout: .seconds(5))
            request.bodyPacing = pacing
            let (_, body) = try await client.stream(request)
            var parser = SSEParser()
            for try await piece in body {
                pacing.start()
                for event in try parser.append(piece) where event.data == "[DONE]" {
                    if finishing { pacing.finish() }
                    return
                }
            }
        }
        for _ in 0..<4 {
            try await readUntilDone()
            try await Task.sleep(for: .milliseconds(80))  // past the terminator and the drain grace
        }
        return try await server.stats(HTTPClient())["connections"] ?? -1
    }

    @Test func aFinishedPacedBodyKeepsItsConnection() async throws {
        // Finished: the transfer reads the terminator after the consumer let go, so one connection serves all.
        #expect(try await self.connectionsForEarlyEnds(finishing: true) == 2)
        // Not finished (a real cancel): each early end closes its connection.
        let unfinished = try await self.connectionsForEarlyEnds(finishing: false)
        #expect(unfinished == 5, "connections without finish: \(unfinished)")
    }

    /// Pushes a paced `/slow-done` body to a test; at `[DONE]` it finishes the pacing and lets go with
    /// `cancels` calls of `cancel()`, as the Homebase does (its stream and the engine's handler each let go).
    final class LetGoAtDone: HTTPStreamHandler, @unchecked Sendable {
        let pacing = HTTPBodyPacing(interval: .milliseconds(30))
        let cancels: Int
        let handle = Mutex<HTTPStreamHandle?>(nil)
        let ended = AsyncStream<Void>.makeStream()
        private var parser = SSEParser()  // loop thread only

        init(cancels: Int) { self.cancels = cancels }

        func head(_ head: HTTPClientResponseHead) {}
        func body(_ bytes: [UInt8]) {
            self.pacing.start()
            guard let events = try? self.parser.append(bytes), events.contains(where: { $0.data == "[DONE]" })
            else { return }
            self.pacing.finish()
            let handle = self.handle.withLock { $0 }
            for _ in 0..<self.cancels { handle?.cancel() }
            self.ended.continuation.yield()
        }
        func end(_ error: HTTPClientError?) { self.ended.continuation.yield() }
    }

    @Test(arguments: [1, 2, 3])
    func aDrainingBodyLetGoAgainKeepsItsConnection(cancels: Int) async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        for _ in 0..<4 {
            let handler = LetGoAtDone(cancels: cancels)
            var request = HTTPRequest(url: server.url("/slow-done"), idleTimeout: .seconds(5))
            request.bodyPacing = handler.pacing
            let handle = client.stream(request, handler: handler)
            handler.handle.withLock { $0 = handle }
            for await _ in handler.ended.stream { break }
            try await Task.sleep(for: .milliseconds(80))  // past the terminator and the drain grace
        }
        // One connection for the four requests, one for /stats: a second cancel while the first request
        // drained used to abort it (and so close its connection).
        #expect(try await server.stats(HTTPClient())["connections"] == 2)
        // The let-goes ran on the loop thread (inside its body callback): they cost it another pass, not a
        // wake-up through the loop's eventfd. Only the four starts, posted from here, sent one.
        #expect(client.loopWakeupsSent == 4)
    }

    /// Lets go of its transfer from `end`, after the transfer ended (as the Homebase's engine does when the
    /// answer ends with the response), or from `body` while it still runs.
    final class LetGoFrom: HTTPStreamHandler, @unchecked Sendable {
        let inBody: Bool
        let handle = Mutex<HTTPStreamHandle?>(nil)
        let ended = AsyncStream<Void>.makeStream()
        init(inBody: Bool) { self.inBody = inBody }
        func head(_ head: HTTPClientResponseHead) {}
        func body(_ bytes: [UInt8]) { if self.inBody { self.handle.withLock { $0 }?.cancel() } }
        func end(_ error: HTTPClientError?) {
            if !self.inBody { self.handle.withLock { $0 }?.cancel() }
            self.ended.continuation.yield()
        }
    }

    @Test func lettingGoOfAnEndedTransferPostsNothing() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        for inBody in [false, true] {
            let handler = LetGoFrom(inBody: inBody)
            let handle = client.stream(HTTPRequest(url: server.url("/drip"), idleTimeout: .seconds(5)), handler: handler)
            handler.handle.withLock { $0 = handle }
            for await _ in handler.ended.stream { break }
            // From `end` the transfer is over: nothing to abort, no inbox entry, no extra pass. From `body` it
            // still runs: the cancel is posted (and aborts it).
            #expect(client.loopCancelsPosted == (inBody ? 1 : 0), "let go in \(inBody ? "body" : "end")")
            // Later, from another thread (the Homebase stops a finished answer's request): nothing either.
            handle.cancel()
            #expect(client.loopCancelsPosted == (inBody ? 1 : 0))
        }
        #expect(client.loopWakeupsSent == 2)  // the two starts
    }

    @Test func ollamaNDJSONStreamSplitsIntoLines() async throws {
        let server = try await HTTPClientTestServer.start()
        let request = HTTPRequest(
            method: "POST", url: server.url("/api/chat"), headers: [("Content-Type", "application/json")],
            body: Array(#"{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}"#.utf8),
            idleTimeout: .seconds(5))
        let (head, body) = try await HTTPClient().stream(request)
        #expect(head.header("content-type") == "application/x-ndjson")
        var splitter = LineSplitter()
        var content = ""
        var done = false
        for try await chunk in body {
            for line in try splitter.append(chunk) {
                let object = try json(line)
                content += (object["message"] as? [String: Any])?["content"] as? String ?? ""
                done = object["done"] as? Bool ?? false
            }
        }
        #expect(try splitter.finish() == nil)
        #expect(content == "The sky is blue")
        #expect(done)
    }

    @Test func errorStatusStillStreamsItsBody() async throws {
        let server = try await HTTPClientTestServer.start()
        let (head, body) = try await HTTPClient().stream(HTTPRequest(url: server.url("/error")))
        var bytes: [UInt8] = []
        for try await chunk in body { bytes += chunk }
        #expect(head.status == 500)
        #expect(try json(bytes)["error"] as? String == "model 'x' crashed")
    }

    @Test func cancellingTheConsumerAbortsAnIdleStreamAtOnce() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let firstChunk = AsyncStream<Void>.makeStream()
        let task = Task {
            let (_, body) = try await client.stream(HTTPRequest(url: server.url("/infinite")))
            for try await _ in body { firstChunk.continuation.yield() }
        }
        for await _ in firstChunk.stream { break }
        // The server ticks every 250 ms: the connection is idle when we cancel, which is where libcurl's
        // progress callback alone would take up to a second to notice.
        try await Task.sleep(for: .milliseconds(50))
        let start = ContinuousClock.now
        task.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await task.value }
        let latency = ContinuousClock.now - start
        print("HTTPClient stream cancel latency: \(latency)")
        #expect(latency < .milliseconds(200))
        // And the transfer is really gone: the server's next write finds the connection closed.
        #expect(try await server.waitForStat(client, "closed", atLeast: 1, within: .seconds(3)) == 1)
    }

    @Test func cancellingBeforeTheHeadAbortsAtOnce() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let task = Task { try await client.stream(HTTPRequest(url: server.url("/silent"))) }
        try await Task.sleep(for: .milliseconds(150))
        let start = ContinuousClock.now
        task.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await task.value }
        #expect(ContinuousClock.now - start < .milliseconds(200))
    }

    @Test func droppingTheStreamAbortsTheTransfer() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        do {
            let (head, _) = try await client.stream(HTTPRequest(url: server.url("/infinite")))
            #expect(head.status == 200)
        }
        #expect(try await server.waitForStat(client, "closed", atLeast: 1, within: .seconds(3)) == 1)
    }

    @Test func slowConsumerPausesTheTransferInsteadOfBuffering() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let (_, body) = try await client.stream(HTTPRequest(url: server.url("/firehose")))
        var iterator = body.makeAsyncIterator()
        var received = 0
        for _ in 0..<3 {
            let chunk = try await iterator.next()
            #expect(chunk!.count <= HTTPClient.streamBufferBytes + 64 * 1024)
            received += chunk!.count
            try await Task.sleep(for: .milliseconds(150))
        }
        // Unpaused, the client would swallow hundreds of MiB in these 450 ms; paused, the server is held to
        // what the socket buffers and our bounded buffer take (a few MiB on loopback).
        let sent = try await server.stats(client)["firehose_bytes"] ?? 0
        #expect(sent < 32 * 1024 * 1024, "server wrote \(sent) bytes while we read \(received)")
        // A paused transfer resumes and keeps flowing once the consumer reads again.
        var more = 0
        while more < 8 * 1024 * 1024, let chunk = try await iterator.next() { more += chunk.count }
        #expect(more >= 8 * 1024 * 1024)
    }

    @Test func twentyConcurrentStreamsTakeAboutAsLongAsOne() async throws {
        let server = try await HTTPClientTestServer.start()
        let client = HTTPClient()
        let start = ContinuousClock.now
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    let (_, body) = try await client.stream(HTTPRequest(url: server.url("/sse")))
                    var parser = SSEParser()
                    var count = 0
                    for try await chunk in body { count += try parser.append(chunk).count }
                    return count
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - start
        #expect(counts == Array(repeating: 6, count: 20))
        // One stream takes 500 ms (measured alone: 0.52 s for all twenty); one after another, twenty would
        // take 10 s. The slack is for the other suites running in parallel on two cores.
        print("HTTPClient 20 concurrent 500 ms streams took \(elapsed)")
        #expect(elapsed < .milliseconds(1500), "took \(elapsed)")
    }

    @Test func streamToAClosedPortThrowsBeforeTheHead() async throws {
        let client = HTTPClient()
        await #expect(throws: HTTPClientError.self) {
            _ = try await client.stream(HTTPRequest(url: "http://127.0.0.1:1/", connectTimeout: .seconds(1)))
        }
    }
}
