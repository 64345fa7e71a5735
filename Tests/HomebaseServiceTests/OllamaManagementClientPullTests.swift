import Foundation
import HomebaseTransport
import OllamaEmulatorKit
import Testing
@testable import HomebaseService

/// `OllamaManagementClient.pull`: NDJSON progress, in-band errors, hostile streams.
@Suite(.timeLimit(.minutes(1))) struct OllamaManagementClientPullTests {
    /// Collects a pull: the lines that arrived, and the error it ended with.
    static func collect(_ stream: AsyncThrowingStream<PullProgress, Error>) async -> ([PullProgress], Error?) {
        var lines: [PullProgress] = []
        do {
            for try await progress in stream { lines.append(progress) }
            return (lines, nil)
        } catch {
            return (lines, error)
        }
    }

    /// A server that streams `chunks` as the body of every request, with `status`.
    static func streaming(_ chunks: [String], status: Int = 200) -> CannedServer {
        CannedServer { _, writer in
            guard writer.startStream(status: status, headers: [("Content-Type", "application/x-ndjson")]) else {
                return
            }
            for chunk in chunks {
                guard writer.writeChunk(Array(chunk.utf8)) else { return }
            }
            writer.finish()
        }
    }

    @Test func pullFromTheEmulatorReportsLayersAndEndsWithSuccess() async throws {
        var configuration = EmulatorConfiguration()
        configuration.pullProgressIntervalMs = 1
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())

        let (lines, error) = await Self.collect(client.pull("gemma3:1b"))
        #expect(error == nil)
        #expect(lines.first == PullProgress(status: "pulling manifest"))
        #expect(lines.last?.isSuccess == true)
        let model = EmulatedModel(name: "gemma3:1b")
        let weights = lines.filter { $0.digest == "sha256:" + model.digest }
        // `completed` is absent on the first line (omitempty): read as 0.
        #expect(weights.first == PullProgress(status: "pulling \(model.digest.prefix(12))",
                                              digest: "sha256:" + model.digest, total: Int64(model.size),
                                              completed: 0))
        #expect(weights.last?.completed == Int64(model.size))
        #expect(Set(lines.compactMap(\.digest)).count == 4, "weights, template, license, params")
        #expect(try await client.tags().map(\.name).contains("gemma3:1b"))
    }

    @Test func unknownModelIsAnInBandErrorAfter200() async throws {
        let emulator = OllamaEmulator(configuration: EmulatorConfiguration())
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())

        let (lines, error) = await Self.collect(client.pull("nosuch:1b"))
        #expect(lines == [PullProgress(status: "pulling manifest")])
        let pullError = try #require(error as? OllamaError)
        #expect(pullError == .pull(model: "nosuch:1b", message: "pull model manifest: file does not exist"))
        #expect(pullError.description
            == "model 'nosuch:1b' not found in the registry (pull model manifest: file does not exist)")
    }

    @Test func recordedStreamsParse() async throws {
        let success = Self.streaming([try fixture("ollama/api-pull-stream.txt")])
        defer { success.stop() }
        let client = OllamaManagementClient(endpoint: success.endpoint, http: HTTPClient())
        let (lines, error) = await Self.collect(client.pull("llama3.2"))
        #expect(error == nil)
        #expect(lines.map(\.status) == ["pulling manifest", "pulling dde5aa3fc5ff", "pulling dde5aa3fc5ff",
                                        "verifying sha256 digest", "writing manifest", "removing unused layers",
                                        "success"])
        #expect(lines[1] == PullProgress(
            status: "pulling dde5aa3fc5ff",
            digest: "sha256:dde5aa3fc5ffc17176b5e8bdc82f587b24b2678c6c66101bf7da77af9f7ccdff",
            total: 2019377376, completed: 241970))

        let unknown = Self.streaming([try fixture("ollama/api-pull-unknown-model.txt")])
        defer { unknown.stop() }
        let (_, failure) = await Self.collect(
            OllamaManagementClient(endpoint: unknown.endpoint, http: HTTPClient()).pull("x"))
        #expect(failure as? OllamaError == .pull(model: "x", message: "pull model manifest: file does not exist"))
    }

    @Test func linesSplitAcrossChunksAndCRLFAreReassembled() async throws {
        let server = Self.streaming([#"{"status":"pulling mani"#, "fest\"}\r\n\n{\"sta", #"tus":"success"}"#])
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        let (lines, error) = await Self.collect(client.pull("m"))
        #expect(error == nil)
        #expect(lines.map(\.status) == ["pulling manifest", "success"])
    }

    @Test(arguments: [
        // Ends without success: a dropped connection mid-download is not a finished pull.
        ([#"{"status":"pulling manifest"}"# + "\n", #"{"status":"pulling ab","digest":"sha256:ab","total":9}"# + "\n"],
         OllamaError.pull(model: "m", message: "the download ended before Ollama reported success")),
        ([], OllamaError.pull(model: "m", message: "the download ended before Ollama reported success")),
        (["not json\n"], OllamaError.malformed("/api/pull sent a line that is not a progress object")),
        ([#"{"status":"x","total":"big"}"# + "\n"],
         OllamaError.malformed("/api/pull sent a line that is not a progress object")),
        ([#"{"status":5}"# + "\n"], OllamaError.malformed("/api/pull sent a line that is not a progress object")),
        (["[1]\n"], OllamaError.malformed("/api/pull sent a line that is not a progress object")),
        ([#"{"digest":"sha256:ab"}"# + "\n"], OllamaError.malformed("/api/pull sent a line without status")),
        ([#"{"status":"pulling manifest","error":"disk full"}"# + "\n"],
         OllamaError.pull(model: "m", message: "disk full")),
        ([String(repeating: "a", count: 70_000)],
         OllamaError.malformed("/api/pull sent a line over 65536 bytes (lineTooLong(limit: 65536))")),
    ] as [([String], OllamaError)])
    func hostileStreamEndsWithAnErrorNeverACrash(chunks: [String], expected: OllamaError) async throws {
        let server = Self.streaming(chunks)
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        let (_, error) = await Self.collect(client.pull("m"))
        #expect(error as? OllamaError == expected)
    }

    @Test func negativeAndMissingCountsReadAsZero() throws {
        let line = Array(#"{"status":"pulling ab","digest":"sha256:ab","total":-5}"#.utf8)
        #expect(try OllamaManagementClient.pullLine(line, model: "m")
            == PullProgress(status: "pulling ab", digest: "sha256:ab", total: 0, completed: 0))
        #expect(try OllamaManagementClient.pullLine(Array("  ".utf8), model: "m") == nil)
    }

    @Test(arguments: [
        (400, #"{"error":"model is required"}"#, "model is required"),
        (500, #"{"error":"pull model manifest: file does not exist"}"#, "pull model manifest: file does not exist"),
        (404, "404 page not found", "404 page not found"),
    ] as [(Int, String, String)])
    func errorStatusBeforeTheStreamIsAnHTTPError(status: Int, body: String, message: String) async throws {
        let server = CannedServer { _, writer in writer.respond(status: status, body: body) }
        defer { server.stop() }
        let client = OllamaManagementClient(endpoint: server.endpoint, http: HTTPClient())
        let (lines, error) = await Self.collect(client.pull("m"))
        #expect(lines.isEmpty)
        #expect(error as? OllamaError == .http(status: status, message: message))
    }

    @Test func closedPortIsUnreachable() async throws {
        let port = try closedPort()
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        let (_, error) = await Self.collect(client.pull("m"))
        #expect(error as? OllamaError == .unreachable("http://127.0.0.1:\(port) (connection refused)"))
    }

    @Test func stoppingTheIterationAbortsTheDownload() async throws {
        var configuration = EmulatorConfiguration()
        // A whole pull takes about 11 pauses, ~220 ms: long gone by the check below unless it was aborted.
        configuration.pullProgressIntervalMs = 20
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient())
        for try await progress in client.pull("gemma3:1b") {
            #expect(progress.status == "pulling manifest")
            break
        }
        // The emulator installs only after the last layer; an aborted pull never gets there.
        try await Task.sleep(for: .milliseconds(800))
        #expect(try await !client.tags().map(\.name).contains("gemma3:1b"))
    }

    /// Issue 34: Ollama hashes the layers after the last download line without a word (minutes on a slow disk):
    /// that silence does not fail the pull, while a silence as long in the middle of the download does.
    @Test func theSilentVerifyPhaseOutlastsTheDownloadIdleLimit() async throws {
        var configuration = EmulatorConfiguration()
        configuration.pullProgressIntervalMs = 1
        configuration.pullVerifyMs = 1_500
        let emulator = OllamaEmulator(configuration: configuration)
        let port = try emulator.start(port: 0)
        defer { emulator.stop() }
        var limits = OllamaManagementClient.Configuration()
        limits.pullIdleTimeout = .milliseconds(500)
        let client = OllamaManagementClient(endpoint: "http://127.0.0.1:\(port)", http: HTTPClient(), configuration: limits)
        var last: PullProgress?
        for try await progress in client.pull("gemma3:1b") { last = progress }
        #expect(last?.isSuccess == true)

        // The same limit in the middle of the download (a line a second) fails the pull, named.
        var slow = EmulatorConfiguration()
        slow.pullProgressIntervalMs = 1_000
        let stalled = OllamaEmulator(configuration: slow)
        let stalledPort = try stalled.start(port: 0)
        defer { stalled.stop() }
        let stalledClient = OllamaManagementClient(endpoint: "http://127.0.0.1:\(stalledPort)", http: HTTPClient(),
                                                   configuration: limits)
        do {
            for try await _ in stalledClient.pull("gemma3:1b") {}
            Issue.record("a stalled download must fail")
        } catch let error as OllamaError {
            guard case .timedOut = error else { Issue.record("expected timedOut, got \(error)"); return }
        }
    }
}
