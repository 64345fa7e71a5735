import Foundation
import HomebaseCore

/// The `conformance` command line: parses arguments, runs the chosen suite, prints, returns the exit code.
public enum ConformanceCommand {
    public static let usage = """
        usage: conformance vectors [DIR]
               conformance relay URL [--http BASE] [--token T] [--restart CMD] [--json]
                                     [--auth-deadline-ms MS] [--mailbox-frames N] [--rate-burst N]
                                     [--expect-rate-limit] [--durability-frames N] [--ca-file PEM] [--insecure]
               conformance homebase PUBKEY --relay URL [--state DIR] [--wait-grant SECONDS] [--model TAG]
                                     [--revoke-cmd CMD] [--token T] [--name NAME] [--ca-file PEM] [--insecure]
                                     [--v1-only] [--json]

        Each check prints `PASS name`, `FAIL name: reason` or `SKIP name: reason`; the last line is
        `N passed, N failed` (and `, N skipped`). Exit code 0 only when nothing failed. --json prints a JSON
        report instead. `relay` checks use fresh random keys; auth-late waits the auth deadline + 2 s (12 s).

        `homebase` acts as a guest of the Homebase PUBKEY: it prints its key on stderr, sends contact.join and
        waits (default 120 s) for `homebase grant <key>`; then checks grant and advert signatures, advert.request,
        inference ordering, model_unavailable, cache_miss and an incremental request, cancel, replay, and with
        --revoke-cmd (run with /bin/sh -c, e.g. `homebase revoke <key>`) contact.revoke and not_granted.
        --state DIR keeps the guest key in DIR/guest.key (0600), so a grant survives reruns.
        The guest speaks envelope v2 (a Noise session for inference) when the host advertises it; --v1-only makes
        it a v1-only peer, to check that the host still serves one.
        """

    /// Runs `arguments` (without the program name). `output` receives every printed line.
    /// `notice` receives operator instructions (the guest key to grant); the command line sends them to stderr.
    public static func run(_ arguments: [String], output: @escaping @Sendable (String) -> Void,
                           notice: @escaping @Sendable (String) -> Void = { line in
                               FileHandle.standardError.write(Data((line + "\n").utf8))
                           }) async -> Int32 {
        var args = arguments
        let json = args.contains("--json")
        args.removeAll { $0 == "--json" }
        guard let command = args.first else {
            output(Self.usage)
            return 2
        }
        args.removeFirst()
        let runner = CheckRunner(emit: json ? nil : output)
        switch command {
        case "vectors":
            guard args.count <= 1 else {
                output(Self.usage)
                return 2
            }
            VectorChecks.run(directory: args.first ?? "Fixtures", into: runner)
        case "relay":
            guard let options = Self.relayOptions(args) else {
                output(Self.usage)
                return 2
            }
            await runner.run(RelayChecks.checks(options))
        case "homebase":
            guard var options = Self.homebaseOptions(args) else {
                output(Self.usage)
                return 2
            }
            options.notice = notice
            await HomebaseChecks.run(options, into: runner)
        default:
            output(Self.usage)
            return 2
        }
        output(json ? runner.report.json() : runner.report.summaryLine)
        return runner.report.exitCode
    }

    static func relayOptions(_ args: [String]) -> RelayCheckOptions? {
        var rest = args[...]
        guard let url = rest.popFirst(), !url.hasPrefix("--") else { return nil }
        var o = RelayCheckOptions(url: url)
        while let flag = rest.popFirst() {
            switch flag {
            case "--expect-rate-limit": o.expectRateLimit = true
            case "--insecure": o.insecureSkipVerify = true
            default:
                guard let value = rest.popFirst() else { return nil }
                switch flag {
                case "--http": o.httpBase = value
                case "--token": o.token = value
                case "--restart": o.restartCommand = value
                case "--ca-file": o.caFile = value
                case "--auth-deadline-ms":
                    guard let ms = Int(value) else { return nil }
                    o.authDeadline = .milliseconds(ms)
                case "--mailbox-frames":
                    guard let n = Int(value), n > 0 else { return nil }
                    o.mailboxFrames = n
                case "--rate-burst":
                    guard let n = Int(value), n > 0 else { return nil }
                    o.rateBurstFrames = n
                case "--durability-frames":
                    guard let n = Int(value), n > 0 else { return nil }
                    o.durabilityFrames = n
                default: return nil
                }
            }
        }
        return o
    }

    static func homebaseOptions(_ args: [String]) -> HomebaseCheckOptions? {
        var rest = args[...]
        guard let hex = rest.popFirst(), let host = PublicKey(hex: hex) else { return nil }
        var relay: String?
        var o = HomebaseCheckOptions(host: host, relayURL: "")
        while let flag = rest.popFirst() {
            if flag == "--insecure" {
                o.insecureSkipVerify = true
                continue
            }
            if flag == "--v1-only" {
                o.speaksV2 = false
                continue
            }
            guard let value = rest.popFirst() else { return nil }
            switch flag {
            case "--relay": relay = value
            case "--state": o.stateDirectory = value
            case "--model": o.model = value
            case "--token": o.token = value
            case "--name": o.guestName = value
            case "--ca-file": o.caFile = value
            case "--revoke-cmd": o.revoke = { try await HomebaseChecks.shell(value) }
            case "--wait-grant":
                guard let seconds = Int(value), seconds > 0 else { return nil }
                o.waitGrant = .seconds(seconds)
            default: return nil
            }
        }
        guard let relay else { return nil }
        o.relayURL = relay
        return o
    }
}
