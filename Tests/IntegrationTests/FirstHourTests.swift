import Foundation
import Testing

/// Issue 39, "the first hour": each mistake a newcomer makes, typed as they would type it into the built
/// binaries, gets one line that says what to do (the exit code, that line, and that nothing was changed or lost).
@Suite("CLI smoke test: the first hour's mistakes", .serialized, .timeLimit(.minutes(1)))
struct FirstHourTests {
    typealias Run = CLISmokeTests.Run
    typealias Daemon = CLISmokeTests.Daemon

    let directory = temporaryDirectory("first-hour")

    /// As `CLISmokeTests.environment`, at the log level a newcomer has (info), plus `extra`.
    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        let sanitizers = inherited.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].contains($0.key) }
        return ["HOME": self.directory, "PATH": inherited["PATH"] ?? "/usr/bin:/bin"]
            .merging(sanitizers) { $1 }.merging(extra) { $1 }
    }

    func run(_ tool: String, _ args: [String], env: [String: String] = [:], cwd: String? = nil) throws -> Run {
        try CLISmokeTests.run(tool, args, environment: self.environment(env), cwd: cwd)
    }

    func firstLine(_ text: String) -> String { text.split(separator: "\n").first.map(String.init) ?? "" }

    func startRelay(_ args: [String] = [], label: String = "relay") async throws -> (Daemon, UInt16) {
        let dir = self.directory + "/\(label)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let relay = try Daemon("relay", ["--listen", "127.0.0.1:0", "--data", dir + "/data"] + args,
                               directory: dir, environment: self.environment())
        guard let port = await relay.listeningPort() else {
            await relay.stop()
            throw IntegrationFailure("relay did not start: \(relay.stderr)")
        }
        return (relay, port)
    }

    // MARK: Item 1: a wrong relay URL

    @Test("init refuses an http:// relay URL like handset and guest do; nothing is created")
    func initRefusesHTTP() throws {
        let hb = self.directory + "/hb-http"
        for tool in ["homebase", "handset", "guest"] {
            let r = try self.run(tool, ["--state", hb + tool, "init", "--relay", "http://127.0.0.1:18080"])
            #expect(r.status == 64, "\(tool): \(r.status)")
            #expect(self.firstLine(r.stderr) == "\(tool): 'http://127.0.0.1:18080' is not a ws:// or wss:// URL",
                    "\(tool): \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: hb + tool + "/state.db"))
        }
    }

    @Test("the daemon says at info level, once, why it cannot connect, and status shows it")
    func daemonSaysWhyNotConnected() async throws {
        let (relay, port) = try await self.startRelay()
        defer { Task { await relay.stop() } }
        let hb = self.directory + "/hb-404"
        // The newcomer's mistake: the relay's address without /v1/relay.
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:\(port)"]).status == 0)
        let daemon = try Daemon("homebase", ["--state", hb, "run"], directory: self.directory,
                                environment: self.environment())
        let expected = "127.0.0.1:\(port) answered HTTP 404 Not Found at /: the relay's WebSocket path is "
            + "/v1/relay (use ws://127.0.0.1:\(port)/v1/relay)"
        var status = ""
        let shown = await eventually(.seconds(15)) {
            status = (try? self.run("homebase", ["--state", hb, "status"]).stdout) ?? ""
            return status.contains(expected)
        }
        #expect(shown, "status: \(status)")
        #expect(status.contains("not connected"))
        let json = try self.run("homebase", ["--state", hb, "status", "--json"]).json
        #expect(json?["relay_problem"] as? String == expected)
        // Several attempts later (the backoff starts at about a second), still one line for the one cause.
        try await Task.sleep(for: .seconds(4))
        await daemon.stop()
        let lines = daemon.stderr.split(separator: "\n").filter { $0.contains("Cannot connect to the relay") }
        #expect(lines == ["info homebase: Cannot connect to the relay: \(expected) component=relay"],
                "\(daemon.stderr)")
    }

    // MARK: Item 2: changing the relay or Ollama

    @Test("config --relay and --ollama are checked before they are kept; init again keeps --ollama")
    func configRelayAndOllama() async throws {
        let (relay, port) = try await self.startRelay()
        defer { Task { await relay.stop() } }
        let hb = self.directory + "/hb-config"
        let good = "ws://127.0.0.1:\(port)/v1/relay"
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", good, "--ollama", "http://127.0.0.1:9",
                                          "--name", "box"]).status == 0)
        let before = try self.run("homebase", ["--state", hb, "config", "--json"]).stdout

        // A wrong path, a closed port, wss:// against plain ws: refused with what the handshake met.
        let refusals = [
            ("ws://127.0.0.1:\(port)/relay", "answered HTTP 404 Not Found at /relay: the relay's WebSocket path is /v1/relay"),
            ("ws://127.0.0.1:9/v1/relay", "cannot reach the relay at 127.0.0.1:9"),
            ("wss://127.0.0.1:\(port)/v1/relay", "TLS with 127.0.0.1:\(port) failed"),
        ]
        for (url, line) in refusals {
            let r = try self.run("homebase", ["--state", hb, "config", "--relay", url])
            #expect(r.status == 1, "\(url): \(r.status)")
            #expect(r.stderr.hasPrefix("homebase: ") && r.stderr.contains(line)
                    && r.stderr.contains("nothing was saved") && r.stderr.split(separator: "\n").count == 1,
                    "\(url): \(r.stderr)")
        }
        let http = try self.run("homebase", ["--state", hb, "config", "--relay", "http://127.0.0.1:\(port)/v1/relay"])
        #expect(http.status == 64 && http.stderr.contains("is not a ws:// or wss:// URL"), "\(http.stderr)")
        // Ollama that is not there: refused, nothing saved.
        let ollama = try self.run("homebase", ["--state", hb, "config", "--ollama", "http://127.0.0.1:9"])
        #expect(ollama.status == 1 && ollama.stderr.contains("failed the check") && ollama.stderr.contains("nothing was saved"),
                "\(ollama.stderr)")
        #expect(try self.run("homebase", ["--state", hb, "config", "--json"]).stdout == before)

        // The real relay (the wrong one first, so the change shows) and an emulated Ollama are kept.
        let emulator = try Daemon("ollama-emulator", ["--listen", "127.0.0.1:0"], directory: self.directory,
                                  environment: self.environment())
        defer { Task { await emulator.stop() } }
        guard let ollamaPort = await emulator.listeningPort() else { throw IntegrationFailure("no emulator") }
        let set = try self.run("homebase", ["--state", hb, "config", "--relay", good,
                                            "--ollama", "http://127.0.0.1:\(ollamaPort)"])
        #expect(set.status == 0, "\(set.stderr)")
        var json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["relay_url"] as? String == good)
        #expect(json?["ollama_url"] as? String == "http://127.0.0.1:\(ollamaPort)")
        let status = try self.run("homebase", ["--state", hb, "status"]).stdout
        #expect(status.contains("http://127.0.0.1:\(ollamaPort)  verified"), "\(status)")

        // init again with only a new relay keeps Ollama, the name and the key.
        let id = try self.run("homebase", ["--state", hb, "id"]).stdout
        let again = try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:10/v1/relay"])
        #expect(again.status == 0 && again.stdout == id)
        json = try self.run("homebase", ["--state", hb, "config", "--json"]).json
        #expect(json?["ollama_url"] as? String == "http://127.0.0.1:\(ollamaPort)")
        #expect(json?["device_name"] as? String == "box")
        #expect(json?["relay_url"] as? String == "ws://127.0.0.1:10/v1/relay")
    }

    // MARK: Item 3: HOMEBASE_STATE

    @Test("with HOMEBASE_STATE exported each tool keeps its own identity; another tool's folder is refused")
    func stateFolderPerTool() throws {
        let shared = self.directory + "/shared-state"
        let env = ["HOMEBASE_STATE": shared]
        let relay = "ws://127.0.0.1:10/v1/relay"
        var keys: [String: String] = [:]
        for tool in ["homebase", "handset", "guest"] {
            let r = try self.run(tool, ["init", "--relay", relay], env: env)
            #expect(r.status == 0, "\(tool): \(r.stderr)")
            keys[tool] = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(FileManager.default.fileExists(atPath: shared + "/\(tool)/state.db"))
        }
        #expect(Set(keys.values).count == 3, "\(keys)")
        for tool in ["homebase", "handset", "guest"] {
            let id = tool == "homebase" ? ["id"] : ["status", "--json", "--offline"]
            let r = try self.run(tool, id, env: env)
            #expect(r.stdout.contains(keys[tool]!), "\(tool) lost its key: \(r.stdout) \(r.stderr)")
        }
        // --state naming the handset's folder: the guest refuses it, naming the owner; the handset's key stays.
        let taken = try self.run("guest", ["--state", shared + "/handset", "init", "--relay", relay])
        #expect(taken.status == 1)
        #expect(self.firstLine(taken.stderr) == "guest: \(shared)/handset holds the state of 'handset', not of "
                + "'guest'; give each tool its own --state DIR (or unset HOMEBASE_STATE)", "\(taken.stderr)")
        let still = try self.run("handset", ["status", "--json", "--offline"], env: env)
        #expect(still.stdout.contains(keys["handset"]!))

        // State kept directly in $HOMEBASE_STATE before: the tool says where it is and how to move it.
        let old = self.directory + "/old-layout"
        #expect(try self.run("homebase", ["--state", old, "init", "--relay", relay]).status == 0)
        let moved = try self.run("homebase", ["id"], env: ["HOMEBASE_STATE": old])
        #expect(moved.status == 1)
        #expect(moved.stderr == "homebase: no state in \(old)/homebase, but \(old)/state.db is from before each tool "
                + "had its own folder; if it is this homebase's, move it: mkdir -p \(old)/homebase && mv "
                + "\(old)/state.db* \(old)/homebase/\n", "\(moved.stderr)")
    }

    // MARK: Items 5 and 10: pairing, and a relay that needs a token

    @Test("pairing: a relay that needs a token says so; a stopped daemon and a mistyped key say what to do")
    func pairingMistakes() async throws {
        let tokens = self.directory + "/tokens"
        try "s3cret\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let (relay, port) = try await self.startRelay(["--token-file", tokens], label: "relay-token")
        defer { Task { await relay.stop() } }
        let url = "ws://127.0.0.1:\(port)/v1/relay"
        let hb = self.directory + "/hb-pair"
        let hs = self.directory + "/hs-pair"
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", url]).status == 0)
        #expect(try self.run("handset", ["--state", hs, "init", "--relay", url]).status == 0)
        guard let code = try self.run("homebase", ["--state", hb, "pair"]).stdout.split(separator: "\n").last
        else { throw IntegrationFailure("no code") }

        let noToken = try self.run("handset", ["--state", hs, "pair", String(code)])
        #expect(noToken.status == 1)
        #expect(noToken.stderr == "handset: the relay refused: token required (HTTP 401); set HOMEBASE_RELAY_TOKEN "
                + "or add ?token=TOKEN to the relay URL\n", "\(noToken.stderr)")
        let badToken = try self.run("handset", ["--state", hs, "pair", String(code)], env: ["HOMEBASE_RELAY_TOKEN": "x"])
        #expect(badToken.stderr.hasPrefix("handset: the relay refused: token not accepted (HTTP 401)"),
                "\(badToken.stderr)")
        // The same for config --relay on the Homebase, and the token makes it pass.
        let config = try self.run("homebase", ["--state", hb, "config", "--relay", url])
        #expect(config.stderr.hasPrefix("homebase: the relay refused: token required"), "\(config.stderr)")
        #expect(try self.run("homebase", ["--state", hb, "config", "--relay", url],
                             env: ["HOMEBASE_RELAY_TOKEN": "s3cret"]).status == 0)

        // With the token: the Homebase's daemon is not running.
        let offline = try self.run("handset", ["--state", hs, "pair", String(code)],
                                   env: ["HOMEBASE_RELAY_TOKEN": "s3cret"])
        #expect(offline.status == 1)
        #expect(offline.stderr.hasPrefix("handset: the Homebase in the code is not on the relay: start "
                                         + "'homebase run' on it"), "\(offline.stderr)")
        // A typo in the key part that leaves no valid key.
        let parts = code.split(separator: ":", maxSplits: 2)
        var mistyped: String?
        for c in "0123456789abcdef" {
            var key = Array(parts[1])
            key[10] = c
            let candidate = "\(parts[0]):\(String(key)):\(parts[2])"
            let r = try self.run("handset", ["--state", hs, "pair", candidate], env: ["HOMEBASE_RELAY_TOKEN": "s3cret"])
            if r.stderr.contains("mistyped or cut") {
                mistyped = r.stderr
                #expect(r.status == 1)
                break
            }
        }
        #expect(mistyped == "handset: the code's key part is mistyped or cut (it is not a valid key); copy the "
                + "whole line 'homebase pair' printed\n")
        let status = try self.run("handset", ["--state", hs, "status", "--json", "--offline"]).json
        #expect(status?["homebase"] is NSNull, "\(String(describing: status))")

        // A guest that joined through this relay, chatting without the token: the answer, then why on-device.
        let gs = self.directory + "/guest-token"
        #expect(try self.run("guest", ["--state", gs, "init", "--relay", url]).status == 0)
        let host = try self.run("homebase", ["--state", hb, "id"]).stdout.trimmingCharacters(in: .newlines)
        #expect(try self.run("guest", ["--state", gs, "join", host], env: ["HOMEBASE_RELAY_TOKEN": "s3cret"]).status == 0)
        let chat = try self.run("guest", ["--state", gs, "chat", "hello"])
        #expect(chat.status == 0 && !chat.stdout.isEmpty)
        #expect(chat.stderr == "answered on-device: the relay refused: token required (HTTP 401); set "
                + "HOMEBASE_RELAY_TOKEN or add ?token=TOKEN to the relay URL\n", "\(chat.stderr)")
        // guest status and handset status say the same.
        let guestStatus = try self.run("guest", ["--state", gs, "status"])
        #expect(guestStatus.stdout.contains("\nrelay   the relay refused: token required (HTTP 401)"), "\(guestStatus.stdout)")
        let handsetStatus = try self.run("handset", ["--state", hs, "status", "--json"]).json
        #expect((handsetStatus?["relay_problem"] as? String)?.hasPrefix("the relay refused: token required") == true,
                "\(String(describing: handsetStatus))")
    }

    // MARK: Item 7: silent acceptance

    @Test("grant of a key that never joined or a missing model, pin of a missing model, join of a bad key: warned")
    func silentAcceptance() async throws {
        let emulator = try Daemon("ollama-emulator", ["--listen", "127.0.0.1:0"], directory: self.directory,
                                  environment: self.environment())
        defer { Task { await emulator.stop() } }
        guard let ollamaPort = await emulator.listeningPort() else { throw IntegrationFailure("no emulator") }
        let hb = self.directory + "/hb-warn"
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:10/v1/relay",
                                          "--ollama", "http://127.0.0.1:\(ollamaPort)"]).status == 0)
        let stranger = String(repeating: "ab", count: 32)
        let grant = try self.run("homebase", ["--state", hb, "grant", stranger, "--models", "qwen2.5:7b,nosuch:1b"])
        #expect(grant.status == 0)
        let warnings = grant.stderr.split(separator: "\n").map(String.init)
        #expect(warnings.count == 2, "\(grant.stderr)")
        #expect(warnings.first?.hasPrefix("homebase: warning: abababab") == true
                && warnings.first?.contains("never asked to join") == true, "\(grant.stderr)")
        #expect(warnings.last == "homebase: warning: Ollama has no model 'nosuch:1b' (granted anyway); 'homebase "
                + "models' lists what it has, 'homebase pull nosuch:1b' downloads it")
        #expect(grant.stdout.hasPrefix("granted abababab"))

        let pin = try self.run("homebase", ["--state", hb, "config", "--pin", "qwen2.5:7b,llama9:70b"])
        #expect(pin.status == 0)
        #expect(pin.stderr == "homebase: warning: Ollama has no model 'llama9:70b' (pinned anyway); 'homebase "
                + "models' lists what it has, 'homebase pull llama9:70b' downloads it\n", "\(pin.stderr)")
        let known = try self.run("homebase", ["--state", hb, "config", "--pin", "qwen2.5:7b"])
        #expect(known.status == 0 && known.stderr.isEmpty, "\(known.stderr)")

        // guest join of a key with a typo that leaves no valid key: refused before anything is sent.
        let gs = self.directory + "/guest-warn"
        #expect(try self.run("guest", ["--state", gs, "init", "--relay", "ws://127.0.0.1:10/v1/relay"]).status == 0)
        let realKey = try self.run("homebase", ["--state", hb, "id"]).stdout.trimmingCharacters(in: .newlines)
        var refused: Run?
        for c in "0123456789abcdef" {
            var key = Array(realKey)
            key[20] = c
            let r = try self.run("guest", ["--state", gs, "join", String(key)])
            if r.stderr.contains("is not a valid key") { refused = r; break }
        }
        #expect(refused?.status == 1)
        #expect(refused?.stderr.hasSuffix("(mistyped or cut?); copy it from 'homebase id' on the host; nothing was sent\n") == true)
        let guestStatus = try self.run("guest", ["--state", gs, "status", "--json", "--offline"]).stdout
        #expect(!guestStatus.contains("pending"), "\(guestStatus)")
    }

    // MARK: Item 4: conformance anywhere

    @Test("conformance vectors run from an empty folder checks the built-in vectors; --help exits 0")
    func conformanceAnywhere() throws {
        let empty = self.directory + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let r = try self.run("conformance", ["vectors"], cwd: empty)
        #expect(r.status == 0, "\(r.stdout.split(separator: "\n").filter { $0.hasPrefix("FAIL") })")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("vectors built into this binary") == true)
        #expect(lines.last?.contains(" passed, 0 failed") == true, "\(lines.last ?? "")")
        #expect((Int(lines.last?.split(separator: " ").first ?? "") ?? 0) > 150)
        let help = try self.run("conformance", ["--help"], cwd: empty)
        #expect(help.status == 0 && help.stdout.hasPrefix("usage: conformance vectors [DIR]"))
        let wrong = try self.run("conformance", ["vectors", "nowhere"], cwd: empty)
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("FAIL relay-frames/load: cannot read nowhere/relay-frames.json; pass the folder "
                                      + "holding the vector files (conformance vectors DIR), or no DIR for the ones built in"))
    }

    // MARK: Item 8: IDs are never cut

    @Test("the catalog and models state print every ID whole, so a copied ID downloads")
    func idsAreNeverCut() async throws {
        var fixture = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        fixture.removeLast(3)  // Tests/IntegrationTests/FirstHourTests.swift
        let models = fixture.joined(separator: "/") + "/Fixtures/hub/models.json"
        let hub = try Daemon("hub-emulator", ["--models", models, "--listen", "127.0.0.1:0"], directory: self.directory,
                             environment: self.environment())
        defer { Task { await hub.stop() } }
        var port: UInt16?
        _ = await eventually(.seconds(10)) {
            let text = hub.stdout + hub.stderr
            guard let range = text.range(of: #"127\.0\.0\.1:(\d+)"#, options: .regularExpression) else { return false }
            port = UInt16(text[range].split(separator: ":").last ?? "")
            return port != nil && port != 0
        }
        guard let port else { throw IntegrationFailure("hub-emulator did not start: \(hub.stdout) \(hub.stderr)") }
        let env = ["HF_ENDPOINT": "http://127.0.0.1:\(port)", "HF_HOME": self.directory + "/hf"]
        let hs = self.directory + "/hs-catalog"
        #expect(try self.run("handset", ["--state", hs, "init", "--relay", "ws://127.0.0.1:10/v1/relay"]).status == 0)
        let long = "mlx-community/Mistral-Small-3.1-24B-Instruct-2503-4bit"
        let catalog = try self.run("handset", ["--state", hs, "models", "catalog", "--all", "--refresh"], env: env)
        #expect(catalog.status == 0, "\(catalog.stderr)")
        #expect(catalog.stdout.contains(long + " "), "\(catalog.stdout)")
        // Every ID-looking word in the listing is a repo of the fixture.
        let listing = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: models)))
        let ids = Set(((listing as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String })
        for word in catalog.stdout.split(whereSeparator: \.isWhitespace) where word.hasPrefix("mlx-community/") {
            #expect(ids.contains(String(word)), "cut or unknown ID \(word)")
        }
        #expect(try self.run("handset", ["--state", hs, "models", "custom", "add", long], env: env).status == 0)
        let state = try self.run("handset", ["--state", hs, "models", "state"], env: env)
        #expect(state.stdout.contains("  \(long) "), "\(state.stdout)")
    }

    // MARK: Item 9: the relay's own mistakes

    @Test("relay: a config key as in --help, --data naming a file, a port in use, the descriptor line")
    func relayMistakes() async throws {
        let dir = self.directory + "/relay-mistakes"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // metrics-listen (as --help spells it) and metrics_listen both work in the file.
        for key in ["metrics-listen", "metrics_listen"] {
            let conf = dir + "/\(key).conf"
            try "listen = 127.0.0.1:0\n\(key) = 127.0.0.1:0\ndata = \(dir)/data-\(key)\n"
                .write(toFile: conf, atomically: true, encoding: .utf8)
            let relay = try Daemon("relay", ["--config", conf], directory: dir, environment: self.environment())
            let port = await relay.listeningPort()
            await relay.stop()
            #expect(port != nil, "\(key): \(relay.stderr)")
        }
        let bad = dir + "/bad.conf"
        try "metrics-lisen = 127.0.0.1:0\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try self.run("relay", ["--config", bad])
        #expect(refused.status == 64 && refused.stderr == "relay: \(bad):1: unknown key 'metrics-lisen'\n", "\(refused.stderr)")

        // --data naming a file: one line, nothing written into it.
        let file = dir + "/not-a-folder"
        try "keep me".write(toFile: file, atomically: true, encoding: .utf8)
        let data = try self.run("relay", ["--listen", "127.0.0.1:0", "--data", file])
        #expect(data.status == 64)
        #expect(data.stderr == "relay: --data \(file) is a file; point it at a folder (created if missing) for the "
                + "relay's mailbox\n", "\(data.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")

        // A port in use: the address named. The descriptor line is not a warning.
        let (first, port) = try await self.startRelay(label: "relay-first")
        defer { Task { await first.stop() } }
        #expect(!first.stderr.contains("warning"), "\(first.stderr)")
        let second = try self.run("relay", ["--listen", "127.0.0.1:\(port)", "--data", dir + "/second"])
        #expect(second.status == 1)
        #expect(second.stderr.hasSuffix("relay: cannot listen on 127.0.0.1:\(port): the address is in use (another "
                                        + "relay?); stop that program or choose another --listen\n"), "\(second.stderr)")
    }

    // MARK: Item 6: why an answer fell back

    @Test("guest chat before the grant says it waits for the host; plain chat says why it fell back")
    func fallbackSaysWhy() async throws {
        let (relay, port) = try await self.startRelay(label: "relay-guest")
        defer { Task { await relay.stop() } }
        let url = "ws://127.0.0.1:\(port)/v1/relay"
        let hb = self.directory + "/hb-guest"
        let gs = self.directory + "/guest-wait"
        let host = try self.run("homebase", ["--state", hb, "init", "--relay", url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try self.run("guest", ["--state", gs, "init", "--relay", url]).status == 0)
        let join = try self.run("guest", ["--state", gs, "join", host])
        #expect(join.status == 0, "\(join.stderr)")
        #expect(join.stdout.hasPrefix("join stored for \(host.prefix(8))"), "\(join.stdout)")

        let chat = try self.run("guest", ["--state", gs, "chat", "hello"])
        #expect(chat.status == 0)
        #expect(!chat.stdout.isEmpty)
        #expect(chat.stderr == "answered on-device: waiting for \(host.prefix(8)) to grant you (join sent less than a "
                + "minute ago)\n", "\(chat.stderr)")
        let json = try self.run("guest", ["--state", gs, "chat", "--json", "hello"]).json
        #expect((json?["note"] as? String)?.hasPrefix("answered on-device: waiting for \(host.prefix(8))") == true,
                "\(String(describing: json))")

        // The handset pointed at a Homebase it never paired with.
        let hs = self.directory + "/hs-fallback"
        #expect(try self.run("handset", ["--state", hs, "init", "--relay", url]).status == 0)
        #expect(try self.run("handset", ["--state", hs, "config", "source", "external"]).status == 0)
        #expect(try self.run("handset", ["--state", hs, "config", "model", "qwen2.5:7b"]).status == 0)
        let plain = try self.run("handset", ["--state", hs, "chat", "hello"])
        #expect(plain.status == 0 && !plain.stdout.isEmpty)
        #expect(plain.stderr == "answered on-device: no Homebase paired and no endpoint verified; 'handset pair CODE' "
                + "first\n", "\(plain.stderr)")
    }

    // MARK: Item 11: a pulled model is listed at once

    @Test("homebase models lists a model right after homebase pull, while the daemon runs")
    func pulledModelIsListed() async throws {
        let emulator = try Daemon("ollama-emulator", ["--listen", "127.0.0.1:0"], directory: self.directory,
                                  environment: self.environment())
        defer { Task { await emulator.stop() } }
        guard let ollamaPort = await emulator.listeningPort() else { throw IntegrationFailure("no emulator") }
        let hb = self.directory + "/hb-pull"
        #expect(try self.run("homebase", ["--state", hb, "init", "--relay", "ws://127.0.0.1:10/v1/relay",
                                          "--ollama", "http://127.0.0.1:\(ollamaPort)"]).status == 0)
        let daemon = try Daemon("homebase", ["--state", hb, "run"], directory: self.directory,
                                environment: self.environment())
        defer { Task { await daemon.stop() } }
        let probed = await eventually(.seconds(15)) {
            let s = try? self.run("homebase", ["--state", hb, "status", "--json"]).json
            return (s?["runtime"] as? [String: Any])?["available"] as? Bool == true
        }
        #expect(probed)
        #expect(!(try self.run("homebase", ["--state", hb, "models"]).stdout.contains("gemma3:1b")))
        let pull = try self.run("homebase", ["--state", hb, "pull", "gemma3:1b"])
        #expect(pull.status == 0, "\(pull.stderr)")
        let listed = try self.run("homebase", ["--state", hb, "models"])
        #expect(listed.status == 0 && listed.stdout.contains("gemma3:1b"), "\(listed.stdout)")
    }

    // MARK: The README runner

    @Test("tools/readme-check fails on a README line that does not work, naming the line")
    func readmeCheckCatchesDrift() throws {
        var root = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        root.removeLast(3)  // Tests/IntegrationTests/FirstHourTests.swift
        let repository = root.joined(separator: "/")
        let readme = self.directory + "/README.md"
        try """
            # A README that drifted

            <!-- readme-check -->
            ```
            relay --listen 127.0.0.1:8080 --data /var/lib/homebase-relay
            homebase init --relay wss://relay.example/v1/relay [--name box]
            homebase config --pinned qwen2.5:7b   # renamed since
            ```
            """.write(toFile: readme, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", repository + "/tools/readme-check", readme]
        process.environment = self.environment(["HOMEBASE_BIN": CLISmokeTests.binaries.path])
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let o = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(o.contains("$ homebase init --relay ws://127.0.0.1:"), "\(o)")
        #expect(e.hasSuffix(":7: `homebase config --pinned qwen2.5:7b` exited 64: homebase: unknown option --pinned\n"),
                "\(e)")
    }
}
