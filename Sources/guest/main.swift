import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import HomebaseRouter

// guest: a device of another account using a friend's Homebase over the contact channel (design.md §D).
// Parse, configure, run; the logic is in HomebaseRouter/Device.

let tool = "guest"

struct Guest {
    let directory: StateDirectory

    func run(_ command: GuestCommand) async throws {
        switch command {
        case .help:
            print(GuestCommand.helpText)
            return
        case .initialize(let relay, let name):
            print(try DeviceSession.initialize(directory: self.directory, relayURL: relay, name: name ?? tool).hex)
            return
        default:
            break
        }
        var options = DeviceSession.Options()
        if case .chat(let c) = command, let w = c.watchdogs { options.watchdogs = w }
        options.relayToken = ProcessInfo.processInfo.environment["HOMEBASE_RELAY_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        let s = try DeviceSession(directory: self.directory, tool: tool, http: DeviceHTTP.standard(), options: options)
        defer { s.stop() }
        switch command {
        case .join(let host):
            guard host.acceptsSealedMessages else {
                throw CLIError("\(host.hex) is not a valid key (mistyped or cut?); copy it from 'homebase id' on the "
                               + "host; nothing was sent")
            }
            guard await s.connect() else { throw CLIError("\(s.connectFailure); the join was not sent") }
            let outcome = try await s.guest.join(host: host, name: s.node.name, messenger: s.messenger)
            switch outcome {
            case .receipt(.delivered): print("join sent to \(host.short) (delivered)")
            case .receipt(.stored):
                print("join stored for \(host.short): no device with this key is on the relay now; it gets the join "
                      + "when its 'homebase run' connects (if that runs, check the key against 'homebase id' there)")
            default: throw CLIError("the relay refused the join (\(outcome)); try again")
            }
            print("\(host.hex) pending: 'guest status' shows the grant once the host answers")
        case .status(let json, let offline):
            if !offline { await s.connect(timeout: .seconds(2), drain: .seconds(1)) }
            DeviceReport.printGuestStatus(s, json: json)
        case .leave(let given):
            let hosts = s.joined.all()
            guard let host = given ?? (hosts.count == 1 ? hosts[0].host : nil) else {
                throw CLIError(hosts.isEmpty ? "no host to leave" : "several hosts: say which HOST_PK to leave")
            }
            guard s.joined.record(for: host) != nil else { throw CLIError("\(host.short) is not one of your hosts") }
            let connected = await s.connect()
            try await s.guest.leave(host: host, messenger: s.messenger)
            print("left \(host.short)" + (connected ? "" : " (relay unreachable: the host was not told)"))
        case .chat(let c):
            try await self.chat(c, s)
        case .configDeviceEngine(let url):
            print(try await s.configureDeviceEngine(url: url))
        case .serve(let invocation):
            try await ServeRunner.guest(s, invocation)
        default:
            preconditionFailure("handled above")
        }
    }

    /// Routes through the joined Homebase: the selection is that host with the requested (or first) model on
    /// the External/Ollama radio; the router falls back on-device when it cannot be used.
    func chat(_ c: ChatInvocation, _ s: DeviceSession) async throws {
        let records = s.joined.all()
        let host = c.host ?? records.first { $0.state == .joined }?.host ?? records.first?.host
        let connected = host != nil ? await s.connect() : false
        if let host, connected {
            await s.refreshAdvert(from: host, channel: .contact, timeout: .milliseconds(1500))
        }
        try s.settings.setModelSource(.external)
        try s.settings.setExternalRuntime(.ollama)
        if let host, let model = s.guest.model(on: host, requested: c.model) {
            try s.settings.setExternalSelection(ExternalSelection(tag: model, host: .joined(host)))
        } else {
            try s.settings.setExternalSelection(nil)
        }
        var answer = await Console.ask(s, ChatRequest(messages: [.user(c.prompt ?? "")], options: ChatOptions(think: c.think)), c)
        if answer.result.fallback != nil, host != nil, !connected {
            answer.note = "answered on-device: \(s.connectFailure)"
        } else if answer.result.fallback != nil, let host, let record = s.joined.record(for: host),
                  record.state == .pending {
            answer.note = ChatOutput.waitingNote(host: record.name ?? host.short, sentMs: s.guest.joinSentMs(host),
                                                 nowMs: s.clock())
        } else if answer.result.fallback != nil, host == nil {
            answer.note = "answered on-device: no host joined yet; 'guest join HOST_PK' first"
        } else {
            answer.note = ChatOutput.fallbackNote(answer.result.fallback)
        }
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

await CLI.main(tool: tool) {
    let environment = ProcessInfo.processInfo.environment
    do {
        let (state, command) = try GuestCommand.parse(Array(CommandLine.arguments.dropFirst()), environment: environment)
        try await Guest(directory: StateDirectory(explicit: state, tool: tool)).run(command)
    } catch let error where "\(error)".hasPrefix("\(tool) serve:") {
        // serve's errors are one line that names the command (issue 36's contract).
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(error is UsageError ? 64 : 1)
    }
}
