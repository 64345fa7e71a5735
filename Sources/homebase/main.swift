import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseService
import HomebaseTransport

// homebase: the daemon next to Ollama and its subcommands (design.md §D, command-line contract).

let usage = """
    Usage: homebase [--state DIR] COMMAND

      init --relay URL [--ollama URL] [--name NAME]   create keys and state; prints the device public key
                                                      (again: changes only what it is given)
        [--runtime ollama|openai-compatible|auto] [--endpoint URL]
                                                      a runtime other than Ollama: any OpenAI-compatible
                                                      server (llama-server, LM Studio, vLLM…); without
                                                      --runtime the kind is detected; it must list a model
                                                      and complete one token before anything is stored
      run [--ui HOST:PORT [--ui-token T] [--ui-host NAME,…]]
                                                      the daemon (SIGTERM stops it cleanly); --ui serves
                                                      the status page (loopback only unless --ui-token)
      id                                              print the device public key
      status [--json]                                 relay connection, runtime, models, siblings
      models [--json]                                 installed models (tag, capabilities, loaded, cloud)
      pull MODEL                                      download a model into Ollama, with progress
      pair                                            print a one-time pairing code (10 minutes, single use)
      grant GUEST_PK [--models a,b] [--expires DURATION]   let a friend's device use models (e.g. --expires 7d)
      revoke GUEST_PK                                 withdraw a grant (effective on the next request)
      guests [--json]                                 pending joins, granted and revoked guests
      config [--relay URL] [--ollama URL] [--pin a,b] [--max-concurrent N] [--max-queued N]
             [--runtime-parallel N] [--share-cloud a,b] [--json]
                                                      show or change settings: the relay and Ollama
                                                      (each checked before it is kept), models kept loaded
                                                      (--pin '' for none), requests streamed at once
                                                      (1-64, default 4) and queued beyond (0-1024, 16),
                                                      requests the runtime runs at once per model
                                                      (OLLAMA_NUM_PARALLEL, 1-64, default 1; the rest
                                                      wait in the Homebase's queue), cloud models
                                                      (*-cloud) shared with your devices and guests
                                                      (--share-cloud '' for none, the default)
      config --runtime ollama|openai-compatible|auto [--endpoint URL]
                                                      switch the runtime (verified first, as at init)

    State: --state DIR, else $HOMEBASE_STATE/homebase, else $XDG_DATA_HOME/homebase/homebase.
    Environment: HOMEBASE_RELAY_TOKEN (relay access token; or ?token=T in the relay URL),
    HOMEBASE_UI_TOKEN (--ui-token),
    HOMEBASE_LOG_LEVEL (default info).
    """

struct StderrSink: LogSink {
    func write(_ record: LogRecord) { FileHandle.standardError.write(Data((record.formatted + "\n").utf8)) }
}

let rawArguments = Array(CommandLine.arguments.dropFirst())
if rawArguments.isEmpty || rawArguments.contains("--help") || rawArguments.contains("-h") {
    print(usage)
    exit(rawArguments.isEmpty ? 64 : 0)
}

await CLI.main(tool: "homebase") {
    let args = try Arguments(rawArguments, valueOptions: ["state", "relay", "ollama", "name", "models", "expires",
                                                          "pin", "max-concurrent", "max-queued", "ui", "ui-token",
                                                          "ui-host", "runtime-parallel", "share-cloud", "runtime",
                                                          "endpoint"],
                             flagOptions: ["json"])
    let command = try args.positional(0, "command")
    let dir = StateDirectory(explicit: args.value("state"), tool: "homebase")
    let level = Logger.Level(name: ProcessInfo.processInfo.environment["HOMEBASE_LOG_LEVEL"] ?? "info") ?? .info
    let logger = Logger(label: "homebase", level: level, sink: StderrSink())
    if command == "init" {
        try args.expectPositionals(atMost: 1)
        try dir.requireOwnedByTool()
        let existing = dir.exists ? try HomebaseState(path: dir.databasePath) : nil
        let previous = try? existing?.settings()
        // Running init again keeps what it is not told to change: the relay, the runtime and the name too.
        guard let relay = args.value("relay") ?? previous?.relayURL else { throw UsageError("init needs --relay URL") }
        let relayURL = try CLI.relayURL(relay)
        var ollama = args.value("ollama") ?? previous?.ollamaURL ?? HomebaseSettings.defaultOllamaURL
        guard OllamaRuntimeVerifier.isHTTPURL(ollama) else {
            throw UsageError("'\(ollama)' is not an http:// or https:// URL (e.g. http://127.0.0.1:11434)")
        }
        var runtimeKind = args.value("ollama") != nil ? .ollama : previous?.runtime ?? .ollama
        // A runtime other than Ollama (or one to detect) is verified before anything is stored.
        var verifiedRuntime: (kind: RuntimeKind, endpoint: String)?
        if args.value("runtime") != nil || args.value("endpoint") != nil {
            if args.value("ollama") != nil { throw UsageError("give either --ollama URL or --runtime/--endpoint, not both") }
            // Without --endpoint, the runtime is looked for where the Homebase already points (or Ollama's default).
            verifiedRuntime = try await RuntimeSetup.verify(kindArgument: args.value("runtime"),
                                                            endpoint: args.value("endpoint") ?? previous?.ollamaURL)
            ollama = verifiedRuntime!.endpoint
            runtimeKind = verifiedRuntime!.kind
        }
        try dir.create()
        let state = try existing ?? HomebaseState(path: dir.databasePath)
        let name = args.value("name") ?? previous?.deviceName
            ?? (ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "homebase")
        // Running init again changes where to connect and the name, not what the owner configured: every other
        // setting, present or added later, is kept.
        var settings = previous
            ?? HomebaseSettings(relayURL: relayURL, ollamaURL: ollama, deviceName: name, runtime: runtimeKind)
        settings.relayURL = relayURL
        settings.ollamaURL = ollama
        settings.deviceName = name
        settings.runtime = runtimeKind
        let pk = try state.initialize(settings: settings, nowMs: Posix.wallClockMs)
        if verifiedRuntime != nil { try state.setVerifiedEndpoint(settings.verifiedRuntimeIdentity) }
        print(pk.hex)
        return
    }
    try dir.requireInitialized(tool: "homebase")
    let state = try HomebaseState(path: dir.databasePath)
    let commands = HomebaseCommands(state: state, args: args, logger: logger)
    switch command {
    case "run": try await commands.run()
    case "id": print(try state.deviceKey().publicKey.hex)
    case "status": try await commands.status()
    case "models": try await commands.models()
    case "pull": try await commands.pull(try args.positional(1, "MODEL"))
    case "pair":
        let code = try PairingService(state: state, logger: logger)
            .createPairingCode(relayURL: try state.settings().relayURL, nowMs: Posix.wallClockMs)
        print("Pairing code (valid 10 minutes, single use). On the handset run: handset pair '<code>'")
        print(code)
    case "grant": try await commands.grant(try args.positional(1, "GUEST_PK"))
    case "revoke": try commands.revoke(try args.positional(1, "GUEST_PK"))
    case "guests": try commands.guests()
    case "config": try await commands.config()
    default: throw UsageError("unknown command '\(command)'")
    }
}
