import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseService
import HomebaseTransport

/// The subcommands of `homebase` other than `init`, on an opened state database.
struct HomebaseCommands {
    let state: HomebaseState
    let args: Arguments
    let logger: Logger

    func run() async throws {
        var options = HomebaseRunner.Options()
        options.ui = try self.uiConfiguration()
        let runner = HomebaseRunner(state: self.state, options: options, logger: self.logger)
        let watcher = SignalWatcher(signals: [SIGTERM, SIGINT]) { _ in runner.stop() }
        try await runner.run()
        withExtendedLifetime(watcher) {}
    }

    /// `--ui HOST:PORT [--ui-token T] [--ui-host a,b]` (the token also from `HOMEBASE_UI_TOKEN`); nil without `--ui`.
    func uiConfiguration() throws -> StatusPageServer.Configuration? {
        guard let address = self.args.value("ui") else {
            if self.args.value("ui-token") != nil || self.args.value("ui-host") != nil {
                throw UsageError("--ui-token and --ui-host need --ui HOST:PORT")
            }
            return nil
        }
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw UsageError("--ui takes HOST:PORT, e.g. 127.0.0.1:8787, not '\(address)'")
        }
        let host = String(address[..<colon])
        let token = self.args.value("ui-token") ?? ProcessInfo.processInfo.environment["HOMEBASE_UI_TOKEN"]
        if let problem = StatusPageGate.bindProblem(host: host, accessToken: token) { throw UsageError(problem) }
        let names = (self.args.value("ui-host") ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
        return StatusPageServer.Configuration(host: host, port: port, accessToken: token, allowedHosts: names)
    }

    /// The running daemon's `/api/status` when it serves the status page: the same JSON as the page, a superset
    /// of the state database's answer below. Nil (and that answer instead) when there is no page or it does not
    /// answer within a couple of seconds.
    func pageStatusJSON(_ daemon: DaemonStatus?) async -> String? {
        guard let url = daemon?.uiURL else { return nil }
        var request = HTTPRequest(url: url + "api/status")
        request.connectTimeout = .seconds(2)
        request.timeout = .seconds(5)
        if let token = daemon?.uiToken { request.headers.append(("Authorization", "Bearer \(token)")) }
        guard let response = try? await HTTPClient(maxIdleConnections: 0).send(request),
              response.head.status == 200
        else { return nil }
        return String(decoding: response.body, as: UTF8.self)
    }

    func status() async throws {
        let settings = try self.state.settings()
        let pk = try self.state.deviceKey().publicKey
        let daemon = self.state.liveDaemonStatus()
        if self.args.flag("json"), let json = await self.pageStatusJSON(daemon) {
            print(json)
            return
        }
        let roster = try self.state.currentRoster()
        let siblings = roster?.payload.devices.filter { $0.pk != pk.hex } ?? []
        if self.args.flag("json") {
            var o: [String: Any] = [
                "device": pk.hex, "relay": settings.relayURL, "daemon_running": daemon != nil,
                "relay_connected": daemon?.relayConnected ?? false, "relay_problem": daemon?.relayProblem as Any,
                "ollama": settings.ollamaURL,
                "runtime": [
                    "kind": settings.runtime.rawValue,
                    "parallelism": daemon?.runtimeParallelism as Any,
                    "verified": self.state.verifiedEndpoint() == settings.verifiedRuntimeIdentity,
                    "available": daemon?.runtimeAvailable ?? false,
                    "version": daemon?.runtimeVersion as Any,
                    "error": daemon?.runtimeError as Any,
                ] as [String: Any],
                "siblings": siblings.map { ["pk": $0.pk, "name": $0.name, "role": $0.role] },
            ]
            o["models"] = (daemon?.models ?? []).map(Self.modelJSON)
            CLI.printJSON(o)
            return
        }
        print("device   \(pk.hex)")
        print("relay    \(settings.relayURL)  \(daemon == nil ? "(daemon not running; start 'homebase run')" : daemon!.relayConnected ? "connected" : "not connected")")
        if let d = daemon, !d.relayConnected, let problem = d.relayProblem { print("         \(problem)") }
        let verified = self.state.verifiedEndpoint() == settings.verifiedRuntimeIdentity
        if let d = daemon {
            print("runtime  \(settings.ollamaURL)  \(verified ? "verified" : "not verified")  \(d.runtimeAvailable ? "available" : "unavailable")  \(d.runtimeVersion.map { "\(settings.runtime == .ollama ? "ollama" : "build") \($0)" } ?? "")\(settings.runtime == .ollama ? "" : "  (\(settings.runtime.rawValue)\(d.runtimeParallelism.map { ", \($0) parallel" } ?? ""))")")
            if let e = d.runtimeError, !d.runtimeAvailable { print("         \(e)") }
            print("models   \(d.models.isEmpty ? "(none)" : "")")
            for m in d.models {
                print("  \(m.tag)\(m.loaded ? "  (loaded)" : "")\(Self.cloudLabel(m, shared: settings.sharedCloudModels))  \(m.capabilities.joined(separator: ","))")
            }
        } else {
            print("runtime  \(settings.ollamaURL)  \(verified ? "verified" : "not verified")  (start 'homebase run' for live status)")
        }
        print("siblings \(siblings.isEmpty ? "(none; pair a handset with 'homebase pair')" : "")")
        for s in siblings { print("  \(s.pk.prefix(16))…  \(s.name)  \(s.role)") }
    }

    /// `  cloud (not shared)` / `  cloud (shared)` for a cloud stub, empty for a local model.
    static func cloudLabel(_ m: DaemonStatus.Model, shared: [String]) -> String {
        guard m.cloud else { return "" }
        return shared.contains(m.tag) || shared.contains(where: { !$0.contains(":") && $0 + ":latest" == m.tag })
            ? "  cloud (shared)" : "  cloud (not shared)"
    }

    func models() async throws {
        let settings = try self.state.settings()
        let shared = settings.sharedCloudModels
        let client = OllamaManagementClient(endpoint: settings.ollamaURL, http: HTTPClient())
        var loaded: Set<String>?
        func direct(_ m: OllamaInstalledModel) async -> DaemonStatus.Model {
            if loaded == nil { loaded = Set((try? await client.ps())?.map(\.name) ?? []) }
            // A cloud stub's show goes to ollama.com: not asked.
            let info = m.isCloud ? nil : try? await client.show(m.name)
            return DaemonStatus.Model(
                tag: m.name, family: m.family, parameterSize: m.parameterSize, quantization: m.quantization,
                capabilities: info?.capabilities ?? m.capabilities ?? [], contextLength: info?.contextLength,
                loaded: loaded?.contains(m.name) ?? false, cloud: m.isCloud)
        }
        var models: [DaemonStatus.Model] = []
        if let d = self.state.liveDaemonStatus() {
            models = d.models
            // The daemon's view lags a pull (or an rm) by up to its re-probe interval (issue 39): Ollama, next to
            // us, says what is installed now; the daemon's richer entries stay for the models it knows.
            if settings.runtime == .ollama, let tags = try? await client.tags() {
                let names = Set(tags.map(\.name))
                models.removeAll { !names.contains($0.tag) }
                for m in tags where !models.contains(where: { $0.tag == m.name }) { models.append(await direct(m)) }
            }
        } else if settings.runtime == .openAICompatible {
            // No daemon: ask the server directly, so the command works either way.
            models = try await OpenAICompatibleClient(endpoint: settings.ollamaURL, http: HTTPClient()).snapshot().models
        } else {
            // No daemon: ask Ollama directly, so the command works either way.
            for m in try await client.tags() { models.append(await direct(m)) }
        }
        if self.args.flag("json") {
            CLI.printJSON(models.map { m in
                var o = Self.modelJSON(m)
                if m.cloud { o["shared"] = !Self.cloudLabel(m, shared: shared).contains("not") }
                return o
            })
        } else if models.isEmpty {
            print("no models installed; try 'homebase pull qwen2.5:7b'")
        } else {
            for m in models {
                // What the runtime cannot tell is shown as `?` (an OpenAI-compatible server), not as nothing.
                let unknown = Set(m.unknown ?? [])
                let size = unknown.contains("parameter_size") ? "?" : m.parameterSize
                let quant = unknown.contains("quantization") ? "?" : m.quantization
                let loaded = unknown.contains("loaded") ? "  loaded?" : m.loaded ? "  loaded" : ""
                print("\(m.tag)  \(size) \(quant)  \(m.capabilities.joined(separator: ","))\(loaded)\(Self.cloudLabel(m, shared: shared))")
            }
        }
    }

    static func modelJSON(_ m: DaemonStatus.Model) -> [String: Any] {
        var o: [String: Any] = [
            "tag": m.tag, "family": m.family, "parameter_size": m.parameterSize, "quantization": m.quantization,
            "capabilities": m.capabilities, "context_length": m.contextLength as Any, "loaded": m.loaded,
            "cloud": m.cloud]
        if let unknown = m.unknown { o["unknown"] = unknown }
        return o
    }

    func pull(_ model: String) async throws {
        let settings = try self.state.settings()
        if settings.runtime != .ollama {
            throw CLIError("this Homebase's runtime is an OpenAI-compatible server at \(settings.ollamaURL), which manages"
                + " its own models: load or download '\(model)' there (llama-server -m FILE.gguf, LM Studio's model"
                + " list, vLLM --model …); 'homebase pull' only drives Ollama")
        }
        let client = OllamaManagementClient(endpoint: try self.state.settings().ollamaURL, http: HTTPClient())
        var renderer = PullProgressRenderer(model: model)
        let tty = isatty(STDOUT_FILENO) != 0
        var lastPrint: UInt64 = 0
        do {
            for try await p in client.pull(model) {
                let now = Posix.monotonicMs
                renderer.update(p, atMs: now)
                if tty, now >= lastPrint + 100 {
                    lastPrint = now
                    FileHandle.standardOutput.write(Data(renderer.rewrite(renderer.line).utf8))
                } else if !tty, now >= lastPrint + 2_000 {
                    lastPrint = now
                    print(renderer.line)
                }
            }
        } catch {
            if tty { print() }
            throw CLIError(PullProgressRenderer.failureLine(error))
        }
        if tty { FileHandle.standardOutput.write(Data(renderer.rewrite("").utf8)) }
        print(renderer.successLine(atMs: Posix.monotonicMs))
    }

    /// The runtime's model tags: the running daemon's last view, else the runtime asked directly (Ollama's
    /// `/api/tags`, or an OpenAI-compatible server's `/v1/models`); nil when neither answers (then nothing can be
    /// said about a tag).
    func installedModels() async -> [String]? {
        if let d = self.state.liveDaemonStatus(), d.runtimeAvailable { return d.models.map(\.tag) }
        guard let settings = try? self.state.settings() else { return nil }
        var configuration = OllamaManagementClient.Configuration()
        configuration.connectTimeout = .seconds(2)
        configuration.requestTimeout = .seconds(5)
        if settings.runtime == .openAICompatible {
            let client = OpenAICompatibleClient(endpoint: settings.ollamaURL, http: HTTPClient(),
                                                configuration: configuration)
            return (try? await client.snapshot())?.listed.map(\.id)
        }
        let client = OllamaManagementClient(endpoint: settings.ollamaURL, http: HTTPClient(), configuration: configuration)
        return (try? await client.tags())?.map(\.name)
    }

    /// One `warning:` line on stderr per tag the runtime does not have (the change is still made: a model may
    /// be pulled later).
    func warnMissing(_ tags: [String], what: String) async {
        guard !tags.isEmpty, !(tags == ["*"]) else { return }
        let ollama = (try? self.state.settings().runtime) != .openAICompatible
        let runtime = ollama ? "Ollama" : "the runtime"
        guard let installed = await self.installedModels() else {
            CLI.warn("could not ask \(runtime) which models it has, so \(tags.joined(separator: ", ")) went unchecked "
                     + "(is it running? 'homebase status' says)")
            return
        }
        for tag in HomebaseSettings.missingModels(tags, installed: installed) {
            CLI.warn("\(ollama ? "Ollama" : "The runtime") has no model '\(tag)' (\(what)); 'homebase models' lists "
                     + "what it has" + (ollama ? ", 'homebase pull \(tag)' downloads it" : ""))
        }
    }

    func grant(_ guestHex: String) async throws {
        let guest = try Self.guestKey(guestHex)
        let models: GrantPayload.GrantedModels
        if let list = self.args.value("models") {
            let tags: [String]
            do throws(HomebaseSettings.EditError) {
                tags = try HomebaseSettings.parseModelList(list)
            } catch {
                throw UsageError(error.description)
            }
            models = tags == ["*"] ? .all : .only(tags)
        } else {
            models = .all
        }
        let now = Posix.wallClockMs
        var expiresAt: UInt64?
        if let e = self.args.value("expires") {
            guard let ms = Self.durationMs(e) else { throw UsageError("--expires takes a duration like 30m, 12h or 7d, not '\(e)'") }
            expiresAt = now + ms
        }
        let registry = try GuestRegistry(state: self.state)
        let known = try registry.guests(nowMs: now).contains { $0.pubkey == guest.hex }
        if !known {
            CLI.warn("\(guest.short) never asked to join; the grant is kept and sent, and it takes effect once "
                     + "that device runs 'guest join \(try self.state.deviceKey().publicKey.hex)'")
        }
        if case .only(let tags) = models { await self.warnMissing(tags, what: "granted anyway") }
        let (grant, _) = try registry.grant(guest: guest, models: models, expiresAt: expiresAt,
                                                                     nowMs: now)
        let scope = { () -> String in
            if case .only(let tags) = grant.models { return tags.joined(separator: ", ") }
            return "all models"
        }()
        print("granted \(guest.short) \(scope)\(expiresAt.map { ", expires in \(Self.describe(ms: $0 - now))" } ?? "")")
        print(self.state.daemonIsRunning
              ? "the running daemon sends the signed grant and an advert within a second (stored if the guest is offline)"
              : "saved; 'homebase run' sends the signed grant when it starts")
    }

    func revoke(_ guestHex: String) throws {
        let guest = try Self.guestKey(guestHex)
        _ = try GuestRegistry(state: self.state).revoke(guest: guest, nowMs: Posix.wallClockMs)
        print(self.state.daemonIsRunning
              ? "revoked \(guest.short): refused from its next request; a stream in progress is stopped"
              : "revoked \(guest.short): refused from now on; 'homebase run' tells the guest when it starts")
    }

    /// `homebase config`: shows the settings, or changes the pinned models and the admission limits. A
    /// running daemon applies the change within a second.
    func config() async throws {
        try self.args.expectPositionals(atMost: 1)
        let endpoints = try await self.checkedEndpoints()
        var edits: [HomebaseSettings.Edit] = []
        do throws(HomebaseSettings.EditError) {
            if let pin = self.args.value("pin") { edits.append(.pin(try HomebaseSettings.parseModelList(pin))) }
            if let share = self.args.value("share-cloud") {
                edits.append(.shareCloud(try HomebaseSettings.parseModelList(share)))
            }
        } catch {
            throw UsageError(error.description)
        }
        for (option, make) in [("max-concurrent", HomebaseSettings.Edit.maxConcurrent),
                               ("max-queued", HomebaseSettings.Edit.maxQueued),
                               ("runtime-parallel", HomebaseSettings.Edit.runtimeParallel)] {
            guard let text = self.args.value(option) else { continue }
            guard let n = Int(text) else { throw UsageError("--\(option) takes a whole number, not '\(text)'") }
            edits.append(make(n))
        }
        var settings = try self.state.settings()
        var runtimeChanged = false
        if self.args.value("runtime") != nil || self.args.value("endpoint") != nil {
            if endpoints.ollama != nil { throw UsageError("give either --ollama URL or --runtime/--endpoint, not both") }
            // Test-before-persist, as at init: a runtime that cannot complete one token is not stored.
            let verified = try await RuntimeSetup.verify(kindArgument: self.args.value("runtime"),
                                                         endpoint: self.args.value("endpoint") ?? settings.ollamaURL)
            edits.append(.runtime(verified.kind, endpoint: verified.endpoint))
            runtimeChanged = true
        }
        let moved = (endpoints.relay.map { $0 != settings.relayURL } ?? false)
            || (endpoints.ollama.map { $0.url != settings.ollamaURL || settings.runtime != .ollama } ?? false)
            || runtimeChanged
        if !edits.isEmpty || endpoints.relay != nil || endpoints.ollama != nil {
            do throws(HomebaseSettings.EditError) {
                settings = try settings.applying(edits)
            } catch {
                throw UsageError(error.description)
            }
            if let relay = endpoints.relay { settings.relayURL = relay }
            if let ollama = endpoints.ollama {
                settings.ollamaURL = ollama.url
                settings.runtime = .ollama
                try self.state.setVerifiedEndpoint(settings.verifiedRuntimeIdentity)
            }
            try self.state.setSettings(settings)
            if runtimeChanged { try self.state.setVerifiedEndpoint(settings.verifiedRuntimeIdentity) }
            if let pins = self.args.value("pin"), !pins.isEmpty {
                await self.warnMissing(settings.pinnedModels, what: "pinned anyway")
            }
        }
        if self.args.flag("json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(settings), as: UTF8.self))
            return
        }
        print("relay           \(settings.relayURL)")
        print("\(settings.runtime == .ollama ? "ollama         " : "runtime        ") \(settings.runtime == .ollama ? "" : "openai-compatible ")\(settings.ollamaURL)")
        print("name            \(settings.deviceName)")
        print("pinned          \(settings.pinnedModels.isEmpty ? "(none)" : settings.pinnedModels.joined(separator: ","))")
        print("max concurrent  \(settings.maxConcurrentRequests)")
        print("max queued      \(settings.maxQueuedRequests)")
        print("runtime parallel \(settings.runtimeParallel)")
        print("shared cloud    \(settings.sharedCloudModels.isEmpty ? "(none)" : settings.sharedCloudModels.joined(separator: ","))")
        if moved && self.state.daemonIsRunning {
            print("saved; restart 'homebase run' to use the new relay or runtime")
        } else if !edits.isEmpty || endpoints.relay != nil || endpoints.ollama != nil {
            print(self.state.daemonIsRunning ? "saved; the running daemon applies it within a second" : "saved; 'homebase run' uses it")
        }
    }

    /// `config --relay URL` and `--ollama URL`, each checked before anything is kept (issue 39): the relay must
    /// accept the WebSocket upgrade (with `HOMEBASE_RELAY_TOKEN` when set), Ollama must pass test-before-persist
    /// (design.md §R4). A failure is one line saying what the check met; nothing is saved.
    func checkedEndpoints() async throws -> (relay: String?, ollama: (url: String, version: String?)?) {
        var relay: String?
        if let given = self.args.value("relay") {
            let url = try CLI.relayURL(given)
            let token = ProcessInfo.processInfo.environment["HOMEBASE_RELAY_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            if let problem = RelayProbe.check(url: url, token: token) {
                throw CLIError("\(problem); nothing was saved")
            }
            relay = url
        }
        var ollama: (url: String, version: String?)?
        if let given = self.args.value("ollama") {
            do {
                let status = try await OllamaRuntimeVerifier(http: HTTPClient()).verify(endpoint: given)
                ollama = (status.endpoint ?? given, status.version)
            } catch let error as RuntimeVerificationError {
                throw CLIError("\(given) failed the check: \(error); nothing was saved")
            }
        }
        return (relay, ollama)
    }

    func guests() throws {
        let list = try GuestRegistry(state: self.state).guests(nowMs: Posix.wallClockMs)
        if self.args.flag("json") {
            print(GuestSummary.json(list))
            return
        }
        if list.isEmpty {
            print("no guests; a friend runs 'guest join \(try self.state.deviceKey().publicKey.hex)'")
            return
        }
        for g in list {
            var models = "-"
            if case .only(let tags)? = g.models { models = tags.joined(separator: ",") } else if g.models != nil { models = "*" }
            let state = g.expired ? "expired" : g.state.rawValue
            print("\(g.pubkey)  \(state)  \(g.name)  models: \(models)  requests: \(g.usage.requests)  tokens: \(g.usage.promptTokens + g.usage.completionTokens)")
        }
    }

    static func guestKey(_ hex: String) throws -> PublicKey {
        guard let k = PublicKey(hex: hex) else { throw UsageError("'\(hex)' is not a 64-hex public key") }
        return k
    }

    /// `90s`, `30m`, `12h`, `7d` (or a bare number of seconds) in milliseconds.
    static func durationMs(_ text: String) -> UInt64? {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, UInt64)] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)]
        for (suffix, scale) in units where t.hasSuffix(suffix) {
            guard let n = UInt64(t.dropLast()), n > 0 else { return nil }
            return n * scale
        }
        guard let n = UInt64(t), n > 0 else { return nil }
        return n * 1_000
    }

    static func describe(ms: UInt64) -> String {
        if ms >= 86_400_000 { return "\(ms / 86_400_000)d" }
        if ms >= 3_600_000 { return "\(ms / 3_600_000)h" }
        return "\(max(1, ms / 60_000))m"
    }
}
