// hub-emulator: parse, configure, run until SIGTERM/SIGINT (Fixtures/hub/README.md).
import Foundation
import HubEmulatorKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let configuration: HubEmulatorConfiguration
do {
    switch try HubEmulatorCommandLine.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        print(HubEmulatorCommandLine.usage)
        exit(0)
    case .run(let config):
        configuration = config
    }
} catch {
    FileHandle.standardError.write(Data("hub-emulator: \(error)\n".utf8))
    exit(64)
}

let emulator = HubEmulator(configuration: configuration)
do {
    let port = try emulator.start()
    FileHandle.standardOutput.write(Data(
        "hub-emulator listening on \(configuration.host):\(port) with \(configuration.models.count) repos\n".utf8))
} catch {
    FileHandle.standardError.write(Data(
        "hub-emulator: cannot listen on \(configuration.host):\(configuration.port): \(error)\n".utf8))
    exit(1)
}

var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGTERM)
sigaddset(&signals, SIGINT)
pthread_sigmask(SIG_BLOCK, &signals, nil)
var received: Int32 = 0
sigwait(&signals, &received)
emulator.stop()
exit(0)
