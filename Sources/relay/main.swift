import Dispatch
import Foundation
import HomebaseCore
import HomebaseTransport
import RelayService

// relay [--listen HOST:PORT] [--data DIR] [--config FILE] [--KEY VALUE …]: the ciphertext relay for a VPS.

struct StderrLogSink: LogSink {
    func write(_ record: LogRecord) {
        FileHandle.standardError.write(Data((record.formatted + "\n").utf8))
    }
}

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("relay: \(message)\n".utf8))
    exit(code)
}

let usage = """
    Usage: relay [--listen HOST:PORT] [--data DIR] [--config FILE] [--KEY VALUE ...]

    A dumb ciphertext relay for Homebase devices (Protocol/relay.md): WebSocket at /v1/relay,
    GET /healthz, GET /metrics. Keys can also be set as RELAY_<KEY> environment variables or as
    `key = value` lines in the config file, the key spelled as below without the dashes (e.g.
    `metrics_listen = 127.0.0.1:9090`; `-` and `_` are the same); flags win over the environment, which
    wins over the file.

    Keys:
    \(RelayConfiguration.keys.map { "  --\($0.key.replacingOccurrences(of: "_", with: "-"))  \($0.help)" }.joined(separator: "\n"))

    Signals: SIGTERM/SIGINT stop gracefully (clients get 1012 and reconnect); SIGHUP reloads the
    token and allowlist files.
    """

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(usage)
    exit(0)
}

let configuration: RelayConfiguration
let admission: Admission
do {
    configuration = try RelayConfiguration.resolve(arguments: arguments, environment: ProcessInfo.processInfo.environment)
    admission = try Admission.load(tokenFile: configuration.tokenFile, allowlistFile: configuration.allowlistFile)
} catch {
    fail("\(error)", code: 64)
}

// A --data that names a file, not a folder: say so, instead of Foundation's error domain and code.
var isDirectory: ObjCBool = false
if configuration.natsServers.isEmpty,
   FileManager.default.fileExists(atPath: configuration.dataDirectory, isDirectory: &isDirectory),
   !isDirectory.boolValue {
    fail("--data \(configuration.dataDirectory) is a file; point it at a folder (created if missing) for the "
         + "relay's mailbox", code: 64)
}
let logger = Logger(label: "relay", level: configuration.logLevel, sink: StderrLogSink())
// One descriptor per connection: the soft limit (often 1,024) would refuse connections long before the relay's
// own limits do, so take what the hard limit allows. When even that is below the configured limits, say once
// how many connections it allows (nothing is wrong below that load).
let descriptors = Posix.raiseDescriptorLimit()
if let line = RelayConfiguration.descriptorNotice(limit: descriptors, limits: configuration.limits) {
    logger.notice(line)
}
let server: RelayServer
do {
    server = try RelayServer(configuration: configuration, admission: admission, logger: logger)
} catch TransportError.io(EADDRINUSE) {
    let metrics = configuration.metricsHost.map { " or \($0):\(configuration.metricsPort ?? 0) (metrics_listen)" } ?? ""
    fail("cannot listen on \(configuration.listenHost):\(configuration.listenPort)\(metrics): the address is in use "
         + "(another relay?); stop that program or choose another --listen", code: 1)
} catch {
    fail("cannot start: \(error)", code: 1)
}

signal(SIGPIPE, SIG_IGN)
let watcher = SignalWatcher(signals: [SIGTERM, SIGINT, SIGHUP]) { [server, configuration, logger] sig in
    guard sig == SIGHUP else { return server.shutdown() }
    do {
        server.reloadAdmission(try Admission.load(tokenFile: configuration.tokenFile,
                                                  allowlistFile: configuration.allowlistFile))
    } catch {
        logger.error("Admission reload failed; keeping the old lists", metadata: ["error": "\(error)"])
    }
}

print("relay listening on \(configuration.listenHost):\(server.port)")
fflush(nil)
server.run()
withExtendedLifetime(watcher) {}
exit(0)
