import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseRouter

// handset: a phone of the Homebase's account (design.md §D). Parse, configure, run; the logic is in
// HomebaseRouter/Device.

let tool = "handset"

struct Handset {
    let directory: StateDirectory

    func run(_ command: HandsetCommand) async throws {
        switch command {
        case .help:
            print(HandsetCommand.helpText)
        case .initialize(let relay, let name):
            print(try DeviceSession.initialize(directory: self.directory, relayURL: relay, name: name ?? tool).hex)
        case .pair(let code):
            try await self.pair(code)
        case .chat(let invocation):
            let session = try self.open(watchdogs: invocation.watchdogs)
            defer { session.stop() }
            try await self.chat(invocation, session)
        case .serve(let invocation):
            let session = try self.open()
            defer { session.stop() }
            try await ServeRunner.handset(session, invocation)
        default:
            let session = try self.open()
            defer { session.stop() }
            try await self.configure(command, session)
        }
    }

    func open(watchdogs: InferenceClientStateMachine.Watchdogs? = nil) throws -> DeviceSession {
        var options = DeviceSession.Options()
        if let watchdogs { options.watchdogs = watchdogs }
        options.relayToken = ProcessInfo.processInfo.environment["HOMEBASE_RELAY_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        return try DeviceSession(directory: self.directory, tool: tool, http: DeviceHTTP.standard(), options: options)
    }

    func pair(_ code: PairingCode) async throws {
        try self.directory.requireInitialized(tool: tool)
        // The Homebase listens on the relay named in the code.
        try NodeState(path: self.directory.databasePath).setRelayURL(code.relayURL)
        let session = try self.open()
        defer { session.stop() }
        guard await session.connect() else { throw CLIError(session.connectFailure) }
        let roster: RosterPayload
        do {
            roster = try await session.account.pair(code: code, name: session.node.name, messenger: session.messenger)
        } catch { throw CLIError(error.description) }
        print("paired with Homebase \(code.homebase.short): roster version \(roster.version), "
              + "\(roster.devices.count) devices, account \(session.account.accountKey?.short ?? "?")")
        await session.refreshAdvert(from: code.homebase, channel: .syncDelta, timeout: .milliseconds(1500))
        print(session.router.banner().description)
    }

    func configure(_ command: HandsetCommand, _ s: DeviceSession) async throws {
        switch command {
        case .route(let json):
            DeviceReport.printRoute(s, json: json)
        case .status(let json, let offline):
            // Connect even unpaired: status then says whether the relay can be used, and why not.
            if !offline, await s.connect(timeout: .seconds(2)), let homebase = s.account.homebase {
                await s.refreshAdvert(from: homebase, channel: .syncDelta, timeout: .milliseconds(1500))
            }
            DeviceReport.printHandsetStatus(s, json: json)
        case .configSource(let source):
            try s.settings.setModelSource(source)
            print(s.router.banner().description)
        case .configRuntime(let runtime):
            try s.settings.setExternalRuntime(runtime)
            print(s.router.banner().description)
        case .configModel(let tag, let host):
            try s.settings.setExternalSelection(ExternalSelection(tag: tag, host: host))
            print(s.router.banner().description)
        case .configEndpointVerify(let url):
            guard let verifier = s.http.verifier else { throw CLIError("this build cannot verify HTTP endpoints") }
            switch await s.runtime.verifyAndRecord(url: url, verifier: verifier,
                                                     preferredModel: s.settings.externalSelection?.tag,
                                                     nowMs: s.clock()) {
            case .verified(let endpoint):
                print("verified \(endpoint.url): Ollama \(endpoint.version), "
                      + "\(endpoint.models.count) models (\(endpoint.models.map(\.tag).joined(separator: ", ")))")
            case .failed(let step, let detail):
                throw CLIError("\(url) failed the \(step.rawValue) check: \(detail); nothing was saved")
            }
        case .configDeviceModel(let url, let tag):
            try s.settings.setDeviceModel(DeviceModel(url: url, tag: tag))
            let choice = ModelChoice(modelID: tag, vision: false, origin: s.publicKey.hex)
            if s.account.isPaired, await s.connect() {
                let n = try await s.account.chooseAndFanOut(choice, settings: s.settings, messenger: s.messenger)
                print("device model \(tag) at \(url); choice synced to \(n) of \(s.account.siblings.count) siblings")
            } else {
                _ = try s.settings.choose(local: choice)
                print("device model \(tag) at \(url)" + (s.account.isPaired ? "; not synced (relay unreachable)" : ""))
            }
        case .configDeviceHubModel(let id):
            try await ModelsConsole.chooseHubModel(id, s)
        case .configDeviceEngine(let url):
            print(try await s.configureDeviceEngine(url: url))
        case .configDeviceCapable(let capable):
            try s.models.setCapable(capable)
            print(capable ? "this device runs downloaded models" : "this device cannot run downloaded models: "
                  + "every download reports unsupported and the floor answers")
        case .models(let command):
            try await ModelsConsole.run(command, s)
        case .keyAdd(let provider, let key):
            guard try s.keys.add(key, to: provider) else { throw CLIError("that key is blank or already on the ring") }
            print("added \(CloudKeyStore.mask(key)) to \(provider.rawValue) (\(s.keys.list(provider).count) keys)")
        case .keyList:
            for provider in CloudProvider.allCases {
                let ring = s.keys.maskedList(provider)
                print("\(provider.rawValue): " + (ring.isEmpty ? "no keys" : ""))
                for (i, key) in ring.enumerated() { print("  \(i) \(key)" + (i == 0 ? " (active)" : "")) }
            }
        case .keyRemove(let provider, let index):
            guard try s.keys.remove(at: index, from: provider) else {
                throw CLIError("\(provider.rawValue) has no key at index \(index)")
            }
            print("removed; \(s.keys.list(provider).count) \(provider.rawValue) keys left")
        case .keyTest(let provider):
            guard let key = s.keys.activeKey(provider) else { throw CLIError("no \(provider.rawValue) key on the ring") }
            guard let validate = s.http.validateKey else { throw CLIError("this build cannot test keys") }
            switch await validate(provider, key) {
            case .valid: print("\(CloudKeyStore.mask(key)): valid")
            case .invalid: throw CLIError("\(CloudKeyStore.mask(key)) was rejected by \(provider.rawValue) (401)")
            case .unknown(let why): throw CLIError("could not check the key: \(why)")
            }
        default:
            preconditionFailure("handled in run(_:)")
        }
    }

    func chat(_ c: ChatInvocation, _ s: DeviceSession) async throws {
        let tools = try c.toolsPath.map { try ChatOutput.loadTools(path: $0) } ?? []
        let wantsRelay = s.account.isPaired || !s.joined.all().isEmpty
        let connected = wantsRelay ? await s.connect() : false
        if connected {
            if let homebase = s.account.homebase {
                await s.refreshAdvert(from: homebase, channel: .syncDelta, timeout: .milliseconds(1500))
            }
        }
        guard let prompt = c.prompt else { return try await Interactive(session: s, invocation: c, tools: tools).run() }
        var answer = await Console.ask(s, ChatRequest(messages: [.user(prompt)], tools: tools, options: ChatOptions(think: c.think)), c)
        // Not on the relay at all: why, from what the connection met (a refused token, a wrong URL).
        answer.note = answer.result.fallback != nil && wantsRelay && !connected
            ? "answered on-device: \(s.connectFailure)" : ChatOutput.fallbackNote(answer.result.fallback)
        if c.json {
            CLI.printJSON(answer.json)
        } else if !c.stream {
            // A reasoning model's thinking on stderr, apart from the answer.
            if let thought = answer.result.reasoning { Console.err("[reasoning] " + thought) }
            print(answer.result.text)
        }
        Console.printNote(answer, c)
    }
}

/// The interactive chat: lines from stdin, answers streamed, the connection kept (heartbeats keep the route
/// fresh). `/quit` or end of input ends it; `/route` shows the banner; `/model TAG` picks and syncs the device
/// model choice.
struct Interactive {
    let session: DeviceSession
    let invocation: ChatInvocation
    let tools: [RawJSON]

    func run() async throws {
        var c = self.invocation
        c.stream = true
        var history: [ChatMessage] = []
        Console.err(self.session.router.banner().description + "\n(type /quit to end)")
        for await line in Console.stdinLines() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            if text == "/quit" { break }
            if text == "/route" { Console.err(self.session.router.banner().description); continue }
            if text.hasPrefix("/model ") {
                let tag = String(text.dropFirst(7)).trimmingCharacters(in: .whitespaces)
                let choice = ModelChoice(modelID: tag, vision: false, origin: self.session.publicKey.hex)
                let n = try await self.session.account.chooseAndFanOut(choice, settings: self.session.settings,
                                                                       messenger: self.session.messenger)
                Console.err("model choice \(tag) synced to \(n) siblings")
                continue
            }
            history.append(.user(text))
            let answer = await Console.ask(self.session, ChatRequest(messages: history, tools: self.tools, options: ChatOptions(think: c.think)), c)
            history.append(.assistant(answer.result.text))
        }
    }
}

await CLI.main(tool: tool) {
    let environment = ProcessInfo.processInfo.environment
    do {
        let (state, command) = try HandsetCommand.parse(Array(CommandLine.arguments.dropFirst()), environment: environment)
        try await Handset(directory: StateDirectory(explicit: state, tool: tool)).run(command)
    } catch let error where "\(error)".hasPrefix("\(tool) serve:") {
        // serve's errors are one line that names the command (issue 36's contract).
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(error is UsageError ? 64 : 1)
    }
}
