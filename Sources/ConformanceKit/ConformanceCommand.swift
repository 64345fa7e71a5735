import Foundation
import HomebaseCore

/// The `conformance` command line: parses arguments, runs the chosen suite, prints, returns the exit code.
public enum ConformanceCommand {
    public static let usage = """
        usage: conformance vectors [DIR]          (no DIR: the vectors built into this binary)
               conformance relay URL [--also URL ...] [--http BASE] [--token T] [--restart CMD] [--json]
                                     [--auth-deadline-ms MS] [--mailbox-frames N] [--rate-burst N]
                                     [--expect-rate-limit] [--durability-frames N] [--ca-file PEM] [--insecure]
               conformance relay URL --hostile [--http BASE] [--pid PID] [--token T] [--auth-deadline-ms MS]
                                     [--connections N] [--max-pending-auth N] [--slowloris N] [--random N]
                                     [--flooders N] [--flood-seconds S] [--endless-head-mib N] [--hard-limit BYTES]
                                     [--p99-ms MS] [--store-p99-ms MS] [--memory-budget-mib N] [--only NAME,...]
                                     [--json]
               conformance fleet URL1 URL2 [--kill-edge CMD --restart-edge CMD] [--kill-nats CMD --restart-nats CMD]
                                     [--frames N] [--json]
               conformance homebase PUBKEY --relay URL [--state DIR] [--wait-grant SECONDS] [--model TAG]
                                     [--revoke-cmd CMD] [--token T] [--name NAME] [--ca-file PEM] [--insecure]
                                     [--v1-only] [--json]
               conformance homebase PUBKEY --relay URL --hostile [--state DIR] [--wait-grant SECONDS] [--pid PID]
                                     [--token T] [--copies N] [--fresh-keys N] [--request-flood N] [--p99-ms MS]
                                     [--host-p99-ms MS] [--memory-budget-mib N] [--only NAME,...] [--json]

        Each check prints `PASS name`, `FAIL name: reason` or `SKIP name: reason`; the last line is
        `N passed, N failed` (and `, N skipped`). Exit code 0 only when nothing failed. --json prints a JSON
        report instead. `relay` checks use fresh random keys; auth-late waits the auth deadline + 2 s (12 s).
        --also URL (repeatable) names more edges of one relay fleet: connections alternate between the URLs,
        so the two clients of a check are on different edges and every reconnect changes edge.

        `fleet` checks two edges of one relay fleet: a login on edge 2 takes a key over from edge 1 (a frame sent
        right after its READY reaches it; the old login gets 4001); with --kill-edge/--restart-edge, 40 frames
        stored for a client on edge 2 all reach it on edge 1 after edge 2's kill -9; with --kill-nats/--restart-nats,
        N frames (STORE and live in turn) cross a NATS node's kill -9 and restart, and every frame the relay
        accepted arrives (STOREs refused meanwhile are sent again). The commands must wait until done.

        `relay --hostile` attacks the relay instead (plain ws:// only): 10,000 half-open connections (TCP only, and
        upgrades without AUTH: at most --max-pending-auth get 101, the rest 503), slowloris heads and AUTH frames,
        endless heads, random bytes after AUTH, maximal and oversized frames, floods of maximal and empty frames,
        a flood of STOREs acknowledged at once. During each attack a second client times its round trip to itself
        (p99 must stay under --p99-ms, default 10), a third its STOREs' RECEIPT 1 (under --store-p99-ms, default
        250), and the relay's memory and CPU are followed (/proc/PID with --pid, else /metrics with --http).
        It needs descriptors for --connections and raises its own soft limit to the hard one.

        `homebase` acts as a guest of the Homebase PUBKEY: it prints its key on stderr, sends contact.join and
        waits (default 120 s) for `homebase grant <key>`; then checks grant and advert signatures, advert.request,
        inference ordering, model_unavailable, cache_miss and an incremental request, cancel, replay, and with
        --revoke-cmd (run with /bin/sh -c, `{guest}` replaced by the guest key, e.g. `homebase revoke {guest}`)
        contact.revoke and not_granted.
        --state DIR keeps the guest key in DIR/guest.key (0600), so a grant survives reruns.
        The guest speaks envelope v2 (a Noise session for inference) when the host advertises it; --v1-only makes
        it a v1-only peer, to check that the host still serves one.

        `homebase --hostile` joins as a guest the same way, then attacks the Homebase (plain ws:// relay only):
        deep and huge JSON sealed by a stranger and by the granted guest, every message type from strangers,
        forged envelopes, a pending guest's request flood, pair.request and contact.join floods from --fresh-keys
        fresh keys. Meanwhile the relay round trip (p99 under --p99-ms) and the guest's advert.request round trip
        (p99 under --host-p99-ms, default 50) are timed, and with --pid the Homebase's memory is followed. Strangers'
        joins leave pending guests; each sends contact.leave afterwards, which removes them.
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
        if args.first == "--help" || args.first == "-h" || args.first == "help" {
            output(Self.usage)
            return 0
        }
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
            // No DIR: the copies built into this binary, so it works from any folder (issue 39).
            if let directory = args.first {
                if !json { output("vectors from \(directory)") }
                VectorChecks.run(directory: directory, into: runner)
            } else {
                if !json { output("vectors built into this binary (from Fixtures/; pass a DIR to check other files)") }
                VectorChecks.runEmbedded(into: runner)
            }
        case "relay":
            guard let options = Self.relayOptions(args) else {
                output(Self.usage)
                return 2
            }
            if options.hostile != nil {
                await HostileRelayChecks.run(options, into: runner)
            } else {
                await runner.run(RelayChecks.checks(options))
            }
        case "fleet":
            guard let options = Self.fleetOptions(args) else {
                output(Self.usage)
                return 2
            }
            await runner.run(FleetChecks.checks(options))
        case "homebase":
            guard var options = Self.homebaseOptions(args) else {
                output(Self.usage)
                return 2
            }
            options.notice = notice
            if options.hostile != nil {
                await HostileHomebaseChecks.run(options, into: runner)
            } else {
                await HomebaseChecks.run(options, into: runner)
            }
        default:
            output(Self.usage)
            return 2
        }
        output(json ? runner.report.json() : runner.report.summaryLine)
        return runner.report.exitCode
    }

    static func fleetOptions(_ args: [String]) -> FleetCheckOptions? {
        var rest = args[...]
        guard let a = rest.popFirst(), let b = rest.popFirst(), !a.hasPrefix("--"), !b.hasPrefix("--") else { return nil }
        var o = FleetCheckOptions(edges: [a, b])
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { return nil }
            switch flag {
            case "--kill-edge": o.killEdge = value
            case "--restart-edge": o.restartEdge = value
            case "--kill-nats": o.killNATS = value
            case "--restart-nats": o.restartNATS = value
            case "--frames":
                guard let n = Int(value), n >= 8 else { return nil }
                o.frames = n
            default: return nil
            }
        }
        return o
    }

    static func relayOptions(_ args: [String]) -> RelayCheckOptions? {
        var rest = args[...]
        guard let url = rest.popFirst(), !url.hasPrefix("--") else { return nil }
        var o = RelayCheckOptions(url: url)
        var h = HostileOptions()
        var hostile = false
        while let flag = rest.popFirst() {
            switch flag {
            case "--expect-rate-limit": o.expectRateLimit = true
            case "--insecure": o.insecureSkipVerify = true
            case "--hostile": hostile = true
            default:
                guard let value = rest.popFirst() else { return nil }
                if flag == "--only" {
                    h.only = Set(value.split(separator: ",").map(String.init))
                    continue
                }
                if Self.hostileOption(flag, value, &h) { continue }
                switch flag {
                case "--http": o.httpBase = value
                case "--also": o.otherURLs.append(value)
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
        if hostile { o.hostile = h }
        return o
    }

    /// Applies one `--hostile` sizing flag; false when `flag` is not one (or its value is invalid, which the
    /// caller then reports as an unknown flag).
    static func hostileOption(_ flag: String, _ value: String, _ h: inout HostileOptions) -> Bool {
        guard let n = Int(value), n > 0 else { return false }
        switch flag {
        case "--connections": h.connections = n
        case "--max-pending-auth": h.maxPendingAuth = n
        case "--slowloris": h.slowlorisConnections = n
        case "--random": h.randomConnections = n
        case "--flooders": h.flooders = n
        case "--flood-seconds": h.floodDuration = .seconds(n)
        case "--endless-head-mib": h.endlessHeadBytes = n << 20
        case "--hard-limit": h.hardLimit = n
        case "--p99-ms": h.p99Limit = .milliseconds(n)
        case "--memory-budget-mib": h.memoryBudget = n << 20
        case "--pid": h.pid = Int32(n)
        case "--copies": h.copies = n
        case "--fresh-keys": h.freshKeys = n
        case "--request-flood": h.requestFlood = n
        case "--host-p99-ms": h.hostP99Limit = .milliseconds(n)
        case "--store-p99-ms": h.storeP99Limit = .milliseconds(n)
        default: return false
        }
        return true
    }

    static func homebaseOptions(_ args: [String]) -> HomebaseCheckOptions? {
        var rest = args[...]
        guard let hex = rest.popFirst(), let host = PublicKey(hex: hex) else { return nil }
        var relay: String?
        var o = HomebaseCheckOptions(host: host, relayURL: "")
        var h = HostileOptions()
        var hostile = false
        while let flag = rest.popFirst() {
            if flag == "--insecure" {
                o.insecureSkipVerify = true
                continue
            }
            if flag == "--v1-only" {
                o.speaksV2 = false
                continue
            }
            if flag == "--hostile" {
                hostile = true
                continue
            }
            guard let value = rest.popFirst() else { return nil }
            if flag == "--only" {
                h.only = Set(value.split(separator: ",").map(String.init))
                continue
            }
            if Self.hostileOption(flag, value, &h) { continue }
            switch flag {
            case "--relay": relay = value
            case "--state": o.stateDirectory = value
            case "--model": o.model = value
            case "--token": o.token = value
            case "--name": o.guestName = value
            case "--ca-file": o.caFile = value
            case "--revoke-cmd": o.revokeCommand = value
            case "--wait-grant":
                guard let seconds = Int(value), seconds > 0 else { return nil }
                o.waitGrant = .seconds(seconds)
            default: return nil
            }
        }
        guard let relay else { return nil }
        o.relayURL = relay
        if hostile { o.hostile = h }
        return o
    }
}
