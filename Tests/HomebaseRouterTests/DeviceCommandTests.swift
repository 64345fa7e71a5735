import HomebaseCore
import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

@Suite struct DeviceCommandTests {
    static let pk = String(repeating: "ab", count: 32)
    static let code = "hb1:\(pk):\(String(repeating: "01", count: 16))@ws://127.0.0.1:8080/"

    private func handset(_ line: String) throws(UsageError) -> HandsetCommand {
        try HandsetCommand.parse(line.split(separator: " ").map(String.init)).command
    }

    private func guest(_ line: String) throws(UsageError) -> GuestCommand {
        try GuestCommand.parse(line.split(separator: " ").map(String.init)).command
    }

    @Test func handsetCommandsParse() throws {
        #expect(try self.handset("init --relay ws://r:1/ --name Phone") == .initialize(relay: "ws://r:1/", name: "Phone"))
        #expect(try self.handset("route --json") == .route(json: true))
        #expect(try self.handset("status") == .status(json: false, offline: false))
        #expect(try self.handset("config source external") == .configSource(.external))
        #expect(try self.handset("config runtime claude") == .configRuntime(.claude))
        #expect(try self.handset("config model qwen2.5:7b") == .configModel(tag: "qwen2.5:7b", host: .own))
        #expect(try self.handset("config model q --host \(Self.pk)")
                == .configModel(tag: "q", host: .joined(PublicKey(hex: Self.pk)!)))
        #expect(try self.handset("config endpoint verify http://127.0.0.1:11434")
                == .configEndpointVerify(url: "http://127.0.0.1:11434"))
        #expect(try self.handset("config device-model http://h:1 llama3.2:1b")
                == .configDeviceModel(url: "http://h:1", tag: "llama3.2:1b"))
        #expect(try self.handset("key add claude sk-ant-x") == .keyAdd(.anthropic, key: "sk-ant-x"))
        #expect(try self.handset("key list") == .keyList)
        #expect(try self.handset("key remove openai 1") == .keyRemove(.openai, index: 1))
        #expect(try self.handset("key test openai") == .keyTest(.openai))
        #expect(try self.handset("--help") == .help)
        #expect(try self.handset("") == .help)
        guard case .pair(let code) = try self.handset("pair \(Self.code)") else {
            Issue.record("not a pair command")
            return
        }
        #expect(code.homebase.hex == Self.pk)
    }

    @Test func stateIsAGlobalOption() throws {
        let parsed = try HandsetCommand.parse(["--state", "/tmp/x", "route"])
        #expect(parsed.state == "/tmp/x")
        #expect(parsed.command == .route(json: false))
        #expect(try HandsetCommand.parse(["route", "--state=/y"]).state == "/y")
    }

    /// Issue 34: `chat --think` on both tools.
    @Test func thinkParsesOnBothTools() throws {
        guard case .chat(let c) = try self.handset("chat --think low hi") else { Issue.record("not chat"); return }
        #expect(c.think == .low && c.prompt == "hi")
        guard case .chat(let g) = try self.guest("chat --think false hi") else { Issue.record("not chat"); return }
        #expect(g.think == .off)
        guard case .chat(let none) = try self.handset("chat hi") else { Issue.record("not chat"); return }
        #expect(none.think == nil)
        #expect(throws: UsageError.self) { try self.handset("chat --think max hi") }
    }

    @Test func chatOptionsParse() throws {
        let parsed = try HandsetCommand.parse(
            ["chat", "--json", "--model", "m", "--tools", "t.json", "--watchdog-ms", "100,200,300", "hi", "there"])
        guard case .chat(let c) = parsed.command else {
            Issue.record("not chat")
            return
        }
        #expect(c.json && !c.stream && c.model == "m" && c.toolsPath == "t.json" && c.prompt == "hi there")
        #expect(c.watchdogs == InferenceClientStateMachine.Watchdogs(acceptMs: 100, firstOutputMs: 200, stallMs: 300))
        let env = try HandsetCommand.parse(["chat", "--stream"], environment: ["HOMEBASE_WATCHDOG_MS": "1,2,3"])
        guard case .chat(let i) = env.command else { return }
        #expect(i.prompt == nil && i.stream && i.watchdogs?.stallMs == 3)
    }

    @Test(arguments: [
        ("bogus", "unknown command 'bogus'"),
        ("config", "config needs a subcommand"),
        ("config colour red", "unknown config command 'colour'"),
        ("init", "init needs --relay URL"),
        ("init --relay http://x", "'http://x' is not a ws:// or wss:// URL"),
        ("pair", "missing pairing CODE"),
        ("route --stream", "unknown option --stream"),
        ("route extra", "unexpected argument 'extra'"),
        ("config source openai", "unknown source 'openai'; use apple, community or external"),
        ("config runtime gemini", "unknown runtime 'gemini'; use ollama, openai or claude"),
        ("config model q --host nothex", "--host must be 64 hex characters"),
        ("config endpoint verify ftp://x", "'ftp://x' is not an http:// or https:// URL"),
        ("key add mistral k", "unknown provider 'mistral'; use openai or claude"),
        ("key remove openai -1", "INDEX must be 0 or more, not '-1'"),
        ("key remove openai x", "INDEX must be 0 or more, not 'x'"),
        ("chat --json", "chat --json needs a PROMPT"),
        ("chat --watchdog-ms 1,2 hi", "--watchdog-ms needs three positive millisecond values: ACCEPT,FIRST,STALL"),
        ("chat --model", "--model needs a value"),
    ])
    func handsetUsageErrorsAreOneLine(line: String, message: String) {
        do {
            _ = try self.handset(line)
            Issue.record("'\(line)' parsed")
        } catch {
            #expect(error.description == message)
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func guestCommandsParse() throws {
        #expect(try self.guest("init --relay wss://r/") == .initialize(relay: "wss://r/", name: nil))
        #expect(try self.guest("join \(Self.pk)") == .join(host: PublicKey(hex: Self.pk)!))
        #expect(try self.guest("status --json --offline") == .status(json: true, offline: true))
        #expect(try self.guest("leave") == .leave(host: nil))
        #expect(try self.guest("leave \(Self.pk)") == .leave(host: PublicKey(hex: Self.pk)!))
        guard case .chat(let c) = try self.guest("chat --stream --host \(Self.pk) hello") else {
            Issue.record("not chat")
            return
        }
        #expect(c.stream && c.prompt == "hello" && c.host == PublicKey(hex: Self.pk))
    }

    @Test(arguments: [
        ("join", "missing HOST_PK"),
        ("join abc", "HOST_PK must be 64 hex characters"),
        ("chat", "chat needs a PROMPT"),
        ("chat --tools f hi", "unknown option --tools"),
        ("leave a b", "unexpected argument 'b'"),
        ("pair x", "unknown command 'pair'"),
    ])
    func guestUsageErrorsAreOneLine(line: String, message: String) {
        do {
            _ = try self.guest(line)
            Issue.record("'\(line)' parsed")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func helpListsEveryCommand() {
        for c in HandsetCommand.commands { #expect(HandsetCommand.helpText.contains("handset " + c.usage)) }
        // Help and parser are two lists: every option a command parses is in its usage line, and back.
        for (commands, specs) in [(HandsetCommand.commands, HandsetCommand.specs), (GuestCommand.commands, GuestCommand.specs)] {
            for spec in specs {
                let words = spec.words.joined(separator: " ")
                let usage = commands.filter { $0.usage == words || $0.usage.hasPrefix(words + " ") }
                    .max { $0.usage.count < $1.usage.count }
                guard let usage = usage?.usage else {
                    Issue.record("no usage line for '\(words)'")
                    continue
                }
                let documented = Set(usage.split(whereSeparator: { " []|".contains($0) }).filter { $0.hasPrefix("--") }
                    .map { String($0.dropFirst(2)) })
                #expect(documented == spec.values.union(spec.flags), "'\(words)': usage \(documented.sorted()), parsed \(spec.values.union(spec.flags).sorted())")
            }
        }
        for c in GuestCommand.commands { #expect(GuestCommand.helpText.contains("guest " + c.usage)) }
        #expect(HandsetCommand.helpText.contains("--state DIR"))
    }
}
