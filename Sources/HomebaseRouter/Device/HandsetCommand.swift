import HomebaseCore
import HomebaseCuration
import HomebaseNode

/// `handset chat`'s options.
public struct ChatInvocation: Sendable, Equatable {
    public var json = false
    public var stream = false
    public var model: String?
    public var toolsPath: String?
    /// `nil`: interactive.
    public var prompt: String?
    public var watchdogs: InferenceClientStateMachine.Watchdogs?
    /// Guest only: which joined host to use.
    public var host: PublicKey?
    /// `--think false|low|medium|high`: how much a reasoning model thinks; nil keeps the runtime's default.
    public var think: ThinkSetting?
    public init() {}
}

/// `handset models …` (design.md §C).
public enum ModelsCommand: Sendable, Equatable {
    case catalog(json: Bool, refresh: Bool, all: Bool)
    case download(id: String, json: Bool)
    case cancel(id: String)
    case delete(id: String)
    case customAdd(id: String)
    case customRemove(id: String)
    case customList(json: Bool)
    case state(json: Bool)
}

/// One parsed `handset` command line (design.md §D's contract).
public enum HandsetCommand: Sendable, Equatable {
    case help
    case initialize(relay: String, name: String?)
    case pair(PairingCode)
    case route(json: Bool)
    case status(json: Bool, offline: Bool)
    case configSource(ModelSource)
    case configRuntime(ExternalRuntime)
    case configModel(tag: String, host: ExternalHost)
    case configEndpointVerify(url: String)
    case configDeviceModel(url: String, tag: String)
    /// `config device-model ID`: a downloaded Hub model on the Hub-cache runtime.
    case configDeviceHubModel(id: String)
    case configDeviceCapable(Bool)
    /// `config device-engine URL|off`: the device's own OpenAI-compatible engine (`nil`: off).
    case configDeviceEngine(url: String?)
    case models(ModelsCommand)
    case keyAdd(CloudProvider, key: String)
    case keyList
    case keyRemove(CloudProvider, index: Int)
    case keyTest(CloudProvider)
    case chat(ChatInvocation)
    /// `serve …`: the local OpenAI and Ollama APIs (issue 36).
    case serve(ServeInvocation)

    /// Help as data: every subcommand's usage and one sentence.
    public static let commands: [CommandHelp] = [
        CommandHelp("init --relay URL [--name NAME]", "Create this device's identity; prints its public key."),
        CommandHelp("pair CODE", "Join the account of the Homebase that printed CODE ('homebase pair')."),
        CommandHelp("route [--json]", "Show where the next chat would go, without touching the network."),
        CommandHelp("status [--json] [--offline]", "Show the device, its Homebase, roster, advert and route."),
        CommandHelp("config source apple|community|external", "Set the model-source radio."),
        CommandHelp("config runtime ollama|openai|claude", "Set the External pane's runtime."),
        CommandHelp("config model TAG [--host own|PUBKEY]", "Select the Ollama model (and whose Homebase)."),
        CommandHelp("config endpoint verify URL", "Verify a local Ollama (test-before-persist) and keep it."),
        CommandHelp("config device-model URL TAG", "Set the device model rung; syncs the choice to siblings."),
        CommandHelp("config device-model ID", "Answer on-device from Hub model ID once downloaded; syncs the choice."),
        CommandHelp("config device-capable yes|no", "Whether this device can run downloaded models."),
        CommandHelp("config device-engine URL|off",
                    "On-device answers from this OpenAI-compatible engine (e.g. llama-server); the canned floor stays last."),
        CommandHelp("models catalog [--json] [--refresh] [--all]",
                    "The on-device model catalog (7-day cache; --all lists past the vision and tools gates)."),
        CommandHelp("models download [--json] ID", "Download a model into the Hub cache (Ctrl-C cancels cleanly)."),
        CommandHelp("models cancel ID", "Cancel a download running in another process."),
        CommandHelp("models delete ID", "Delete a model's weights, marker and loaded copy."),
        CommandHelp("models custom add ID", "Add a custom Hub repo (owner/name); it bypasses the gates."),
        CommandHelp("models custom remove ID", "Remove a custom repo and its weights (the floor if it was active)."),
        CommandHelp("models custom list [--json]", "List the custom repos and their states."),
        CommandHelp("models state [--json]", "Every known model's download state and what answers on-device."),
        CommandHelp("key add openai|claude KEY", "Append a key to the provider's ring."),
        CommandHelp("key list", "List the key rings, masked."),
        CommandHelp("key remove openai|claude INDEX", "Remove the key at INDEX (0 is the active key)."),
        CommandHelp("key test openai|claude", "Check the active key without spending tokens."),
        CommandHelp("chat [--json] [--stream] [--model TAG] [--tools FILE] [--watchdog-ms A,F,S] [--think T] [PROMPT]",
                    "Ask; with no PROMPT, chat interactively (/quit ends). --think false|low|medium|high: how much a "
                        + "reasoning model thinks (its reasoning is shown apart: stderr, or \"reasoning\" in --json)."),
        CommandHelp(ServeInvocation.usage("handset"), ServeInvocation.summary("handset")),
    ]

    public static let helpText = CommandHelp.render(
        tool: "handset", summary: "a phone of the Homebase's account: the LLM router with on-device fallback.",
        commands: commands,
        notes: ["chat --json prints {\"text\",\"route\",\"provider\",\"model\",\"fallback\"}.",
                "HOMEBASE_WATCHDOG_MS=ACCEPT,FIRST,STALL (or chat --watchdog-ms) shortens the inference watchdogs.",
                "HOMEBASE_RELAY_TOKEN=T (or ?token=T at the end of the relay URL) when the relay needs an access token."])

    static let specs: [DeviceCommandLine.Spec] = [
        .init(["init"], values: ["relay", "name"]),
        .init(["pair"]),
        .init(["route"], flags: ["json"]),
        .init(["status"], flags: ["json", "offline"]),
        .init(["config", "source"]),
        .init(["config", "runtime"]),
        .init(["config", "model"], values: ["host"]),
        .init(["config", "endpoint", "verify"]),
        .init(["config", "device-model"]),
        .init(["config", "device-capable"]),
        .init(["config", "device-engine"]),
        .init(["models", "catalog"], flags: ["json", "refresh", "all"]),
        .init(["models", "download"], flags: ["json"]),
        .init(["models", "cancel"]),
        .init(["models", "delete"]),
        .init(["models", "custom", "add"]),
        .init(["models", "custom", "remove"]),
        .init(["models", "custom", "list"], flags: ["json"]),
        .init(["models", "state"], flags: ["json"]),
        .init(["key", "add"]),
        .init(["key", "list"]),
        .init(["key", "remove"]),
        .init(["key", "test"]),
        .init(["chat"], values: ["model", "tools", "watchdog-ms", "think"], flags: ["json", "stream"]),
    ]

    /// Parses everything after the tool name. `--state` is returned apart.
    ///
    /// - Throws: `UsageError` (exit 64) naming what is wrong.
    public static func parse(_ argv: [String], environment: [String: String] = [:]) throws(UsageError)
        -> (state: String?, command: HandsetCommand)
    {
        let (state, help, rest) = try DeviceCommandLine.globals(argv)
        if help || rest.isEmpty || rest == ["help"] { return (state, .help) }
        if rest[0] == "serve" {
            return (state, .serve(try ServeInvocation.parse(Array(rest.dropFirst()), tool: "handset",
                                                            environment: environment)))
        }
        let (spec, a) = try DeviceCommandLine.match(rest, Self.specs)
        let command: HandsetCommand
        switch spec.words {
        case ["init"]:
            try a.expectPositionals(atMost: 0)
            command = .initialize(relay: try DeviceCommandLine.relayURL(a.value("relay")), name: a.value("name"))
        case ["pair"]:
            try a.expectPositionals(atMost: 1)
            let text = try a.positional(0, "pairing CODE")
            do { command = .pair(try PairingCode.parse(text)) } catch { throw UsageError("\(error)") }
        case ["route"]:
            try a.expectPositionals(atMost: 0)
            command = .route(json: a.flag("json"))
        case ["status"]:
            try a.expectPositionals(atMost: 0)
            command = .status(json: a.flag("json"), offline: a.flag("offline"))
        case ["config", "source"]:
            try a.expectPositionals(atMost: 1)
            let text = try a.positional(0, "source (apple, community or external)")
            guard let source = ModelSource(rawValue: text), source != .legacyOpenAI else {
                throw UsageError("unknown source '\(text)'; use apple, community or external")
            }
            command = .configSource(source)
        case ["config", "runtime"]:
            try a.expectPositionals(atMost: 1)
            let text = try a.positional(0, "runtime (ollama, openai or claude)")
            guard let runtime = ExternalRuntime(rawValue: text) else {
                throw UsageError("unknown runtime '\(text)'; use ollama, openai or claude")
            }
            command = .configRuntime(runtime)
        case ["config", "model"]:
            try a.expectPositionals(atMost: 1)
            let tag = try a.positional(0, "model TAG")
            var host = ExternalHost.own
            if let h = a.value("host"), h != "own" {
                host = .joined(try DeviceCommandLine.publicKey(h, "--host"))
            }
            command = .configModel(tag: tag, host: host)
        case ["config", "endpoint", "verify"]:
            try a.expectPositionals(atMost: 1)
            command = .configEndpointVerify(url: try DeviceCommandLine.httpURL(try a.positional(0, "endpoint URL")))
        case ["config", "device-model"]:
            try a.expectPositionals(atMost: 2)
            if a.positionals.count == 1 {
                command = .configDeviceHubModel(id: try Self.repoID(try a.positional(0, "model ID")))
            } else {
                let url = try DeviceCommandLine.httpURL(try a.positional(0, "device runtime URL"))
                command = .configDeviceModel(url: url, tag: try a.positional(1, "model TAG"))
            }
        case ["config", "device-capable"]:
            try a.expectPositionals(atMost: 1)
            switch try a.positional(0, "yes or no") {
            case "yes", "true", "on": command = .configDeviceCapable(true)
            case "no", "false", "off": command = .configDeviceCapable(false)
            case let other: throw UsageError("device-capable takes yes or no, not '\(other)'")
            }
        case ["config", "device-engine"]:
            command = .configDeviceEngine(url: try Self.deviceEngineURL(a))
        case ["models", "catalog"]:
            try a.expectPositionals(atMost: 0)
            command = .models(.catalog(json: a.flag("json"), refresh: a.flag("refresh"), all: a.flag("all")))
        case ["models", "download"]:
            try a.expectPositionals(atMost: 1)
            command = .models(.download(id: try Self.repoID(try a.positional(0, "model ID")), json: a.flag("json")))
        case ["models", "cancel"]:
            try a.expectPositionals(atMost: 1)
            command = .models(.cancel(id: try Self.repoID(try a.positional(0, "model ID"))))
        case ["models", "delete"]:
            try a.expectPositionals(atMost: 1)
            command = .models(.delete(id: try Self.repoID(try a.positional(0, "model ID"))))
        case ["models", "custom", "add"]:
            try a.expectPositionals(atMost: 1)
            command = .models(.customAdd(id: try Self.repoID(try a.positional(0, "repo ID (owner/name)"))))
        case ["models", "custom", "remove"]:
            try a.expectPositionals(atMost: 1)
            command = .models(.customRemove(id: try a.positional(0, "repo ID")))
        case ["models", "custom", "list"]:
            try a.expectPositionals(atMost: 0)
            command = .models(.customList(json: a.flag("json")))
        case ["models", "state"]:
            try a.expectPositionals(atMost: 0)
            command = .models(.state(json: a.flag("json")))
        case ["key", "add"]:
            try a.expectPositionals(atMost: 2)
            let provider = try DeviceCommandLine.cloud(try a.positional(0, "provider (openai or claude)"))
            command = .keyAdd(provider, key: try a.positional(1, "KEY"))
        case ["key", "list"]:
            try a.expectPositionals(atMost: 0)
            command = .keyList
        case ["key", "remove"]:
            try a.expectPositionals(atMost: 2)
            let provider = try DeviceCommandLine.cloud(try a.positional(0, "provider (openai or claude)"))
            let text = try a.positional(1, "INDEX")
            guard let index = Int(text), index >= 0 else { throw UsageError("INDEX must be 0 or more, not '\(text)'") }
            command = .keyRemove(provider, index: index)
        case ["key", "test"]:
            try a.expectPositionals(atMost: 1)
            command = .keyTest(try DeviceCommandLine.cloud(try a.positional(0, "provider (openai or claude)")))
        default:  // ["chat"]
            command = .chat(try Self.chat(a, environment: environment))
        }
        return (state, command)
    }

    /// A Hub repo id, `owner/name` (shape only: whether it exists is the download's business).
    static func repoID(_ text: String) throws(UsageError) -> String {
        guard RepoID.isValid(text) else { throw UsageError("'\(text)' is not a Hub repo id (owner/name)") }
        return text
    }

    /// `config device-engine URL|off`'s argument: an http URL, or nil for `off`.
    static func deviceEngineURL(_ a: Arguments) throws(UsageError) -> String? {
        try a.expectPositionals(atMost: 1)
        let text = try a.positional(0, "engine URL or off")
        if ["off", "none", "no"].contains(text.lowercased()) { return nil }
        return try DeviceCommandLine.httpURL(text)
    }

    /// `chat`'s options; the words after the options are the prompt (joined by spaces).
    static func chat(_ a: Arguments, environment: [String: String]) throws(UsageError) -> ChatInvocation {
        var c = ChatInvocation()
        c.json = a.flag("json")
        c.stream = a.flag("stream")
        c.model = a.value("model")
        c.toolsPath = a.value("tools")
        if let t = a.value("think") {
            guard let setting = ThinkSetting(text: t) else {
                throw UsageError("--think takes false, true, low, medium or high, not '\(t)'")
            }
            c.think = setting
        }
        c.prompt = a.positionals.isEmpty ? nil : a.positionals.joined(separator: " ")
        if let w = a.value("watchdog-ms") ?? environment["HOMEBASE_WATCHDOG_MS"] {
            c.watchdogs = try DeviceCommandLine.watchdogs(w)
        }
        if c.json && c.prompt == nil { throw UsageError("chat --json needs a PROMPT") }
        return c
    }
}
