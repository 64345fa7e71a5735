import HomebaseCore
import HomebaseNode

/// One parsed `guest` command line (design.md §D's contract).
public enum GuestCommand: Sendable, Equatable {
    case help
    case initialize(relay: String, name: String?)
    case join(host: PublicKey)
    case status(json: Bool, offline: Bool)
    /// `nil`: the only host in the store.
    case leave(host: PublicKey?)
    case chat(ChatInvocation)
    /// `config device-engine URL|off`, as for the handset.
    case configDeviceEngine(url: String?)
    /// `serve …`: the local OpenAI and Ollama APIs over the joined host (issue 36).
    case serve(ServeInvocation)

    public static let commands: [CommandHelp] = [
        CommandHelp("init --relay URL [--name NAME]", "Create this device's identity; prints its public key."),
        CommandHelp("join HOST_PK", "Ask a friend's Homebase to share; pending until the grant arrives."),
        CommandHelp("status [--json] [--offline]", "Show each host with its state, models and last contact."),
        CommandHelp("leave [HOST_PK]", "Tell the host you are leaving and forget it."),
        CommandHelp("chat [--json] [--stream] [--model TAG] [--host PK] [--watchdog-ms A,F,S] [--think T] PROMPT",
                    "Ask through the joined Homebase (on-device when it cannot answer). --think false|low|medium|high: "
                        + "how much a reasoning model thinks (its reasoning is shown apart)."),
        CommandHelp("config device-engine URL|off",
                    "On-device answers from this OpenAI-compatible engine (e.g. llama-server); the canned floor stays last."),
        CommandHelp(ServeInvocation.usage("guest"), ServeInvocation.summary("guest")),
    ]

    public static let helpText = CommandHelp.render(
        tool: "guest", summary: "a device of another account using a friend's Homebase over the contact channel.",
        commands: commands,
        notes: ["status connects for up to ~2 s to receive grants that arrived meanwhile (--offline skips that).",
                "chat --json prints {\"text\",\"route\",\"provider\",\"model\",\"fallback\"}.",
                "HOMEBASE_WATCHDOG_MS=ACCEPT,FIRST,STALL (or chat --watchdog-ms) shortens the inference watchdogs.",
                "HOMEBASE_RELAY_TOKEN=T (or ?token=T at the end of the relay URL) when the relay needs an access token."])

    static let specs: [DeviceCommandLine.Spec] = [
        .init(["init"], values: ["relay", "name"]),
        .init(["join"]),
        .init(["status"], flags: ["json", "offline"]),
        .init(["leave"]),
        .init(["config", "device-engine"]),
        .init(["chat"], values: ["model", "host", "watchdog-ms", "think"], flags: ["json", "stream"]),
    ]

    /// Parses everything after the tool name. `--state` is returned apart.
    public static func parse(_ argv: [String], environment: [String: String] = [:]) throws(UsageError)
        -> (state: String?, command: GuestCommand)
    {
        let (state, help, rest) = try DeviceCommandLine.globals(argv)
        if help || rest.isEmpty || rest == ["help"] { return (state, .help) }
        if rest[0] == "serve" {
            return (state, .serve(try ServeInvocation.parse(Array(rest.dropFirst()), tool: "guest",
                                                            environment: environment)))
        }
        let (spec, a) = try DeviceCommandLine.match(rest, Self.specs)
        switch spec.words {
        case ["init"]:
            try a.expectPositionals(atMost: 0)
            return (state, .initialize(relay: try DeviceCommandLine.relayURL(a.value("relay")), name: a.value("name")))
        case ["join"]:
            try a.expectPositionals(atMost: 1)
            return (state, .join(host: try DeviceCommandLine.publicKey(try a.positional(0, "HOST_PK"), "HOST_PK")))
        case ["status"]:
            try a.expectPositionals(atMost: 0)
            return (state, .status(json: a.flag("json"), offline: a.flag("offline")))
        case ["leave"]:
            try a.expectPositionals(atMost: 1)
            let host = try a.positionals.first.map { (t) throws(UsageError) in
                try DeviceCommandLine.publicKey(t, "HOST_PK")
            }
            return (state, .leave(host: host))
        case ["config", "device-engine"]:
            return (state, .configDeviceEngine(url: try HandsetCommand.deviceEngineURL(a)))
        default:  // ["chat"]
            var c = try HandsetCommand.chat(a, environment: environment)
            guard c.prompt != nil else { throw UsageError("chat needs a PROMPT") }
            if let h = a.value("host") { c.host = try DeviceCommandLine.publicKey(h, "--host") }
            return (state, .chat(c))
        }
    }
}
