// ollama-emulator: parse, configure, run until SIGTERM/SIGINT (design.md §D, command-line contract).
import Foundation
import OllamaEmulatorKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let configuration: EmulatorConfiguration
do {
    switch try EmulatorCommandLine.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        print(EmulatorCommandLine.usage)
        exit(0)
    case .run(let config):
        configuration = config
    }
} catch {
    FileHandle.standardError.write(Data("ollama-emulator: \(error)\n".utf8))
    exit(64)
}

let emulator = OllamaEmulator(configuration: configuration)
do {
    let port = try emulator.start()
    // Written unbuffered so a script waiting for this line sees it at once.
    FileHandle.standardOutput.write(Data("ollama-emulator listening on \(configuration.host):\(port)\n".utf8))
} catch {
    FileHandle.standardError.write(Data("ollama-emulator: cannot listen on \(configuration.host):\(configuration.port): \(error)\n".utf8))
    exit(1)
}

// Block the termination signals and wait for one synchronously: no handler runs on an arbitrary thread.
var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGTERM)
sigaddset(&signals, SIGINT)
pthread_sigmask(SIG_BLOCK, &signals, nil)
var received: Int32 = 0
sigwait(&signals, &received)
emulator.stop()
exit(0)
