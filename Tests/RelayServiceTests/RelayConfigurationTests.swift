import Foundation
import HomebaseCore
import Testing
@testable import RelayService

/// The relay's configuration files (config, tokens, allowlist) and flags.
@Suite struct RelayConfigurationTests {
    /// A file in a fresh temporary directory.
    func file(_ text: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("file").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Found while fuzzing the config parser (Fixtures/fuzz/regressions/relay-config): lines were split at
    /// `"\n"`, which to a `String` is not the CRLF of a file saved on Windows (one `Character`), so such a file
    /// was one line, its first value the rest of the file; and a vertical tab stayed inside a value.
    @Test func filesWithCRLFOrOtherLineBreaksAreReadLineByLine() throws {
        let config = try self.file("# relay\r\nlisten = 127.0.0.1:9000\r\ndata = /srv/relay\r\n\u{0B}log_level = debug\r\n")
        let c = try RelayConfiguration.resolve(arguments: ["--config", config], environment: [:])
        #expect(c.listenHost == "127.0.0.1" && c.listenPort == 9000)
        #expect(c.dataDirectory == "/srv/relay")
        #expect(c.logLevel == .debug)

        let tokens = try self.file("tok-1\r\ntok-2 # second\r\n")
        let allowlist = try self.file(String(repeating: "ab", count: 32) + "\r\n")
        let admission = try Admission.load(tokenFile: tokens, allowlistFile: allowlist)
        #expect(admission.tokens == ["tok-1", "tok-2"])
        #expect(admission.allowedKeys == [PublicKey(hex: String(repeating: "ab", count: 32))!])
    }

    /// Found while fuzzing (Fixtures/fuzz/regressions/relay-config/token-beginning-with-a-combining-mark): a
    /// combining mark joins the character before it into one `Character`, so a token beginning with one was
    /// never admitted by `Authorization: Bearer TOKEN` (the space and the mark were one `Character`, not a space),
    /// and a `#`, `=` or line break followed by one was not seen. The files and the header are read by scalar.
    @Test func combiningMarksDoNotHideSpacesCommentsOrSeparators() throws {
        let token = "\u{065C}kl2"
        let admission = try Admission.parse(tokens: "tok-1\n\(token)  \ntok-3 #\u{0301} comment\n", allowlist: nil,
                                            allowlistName: "")
        #expect(admission.tokens == ["tok-1", token, "tok-3"])
        #expect(admission.admitsUpgrade(authorization: "Bearer " + token, queryToken: nil))
        #expect(admission.admitsUpgrade(authorization: "bearer  \(token) ", queryToken: nil))
        #expect(!admission.admitsUpgrade(authorization: "Bearer" + token, queryToken: nil))
        #expect(!admission.admitsUpgrade(authorization: "Basic " + token, queryToken: nil))

        let settings = try RelayConfiguration.parseSettings(
            "data =\u{0301}/srv/relay\nlog_level = debug #\u{0301} comment\n", path: "relay.conf")
        #expect(settings == ["data": "\u{0301}/srv/relay", "log_level": "debug"])
        #expect(throws: RelayConfigurationError.self) { try RelayConfiguration.parseSettings("data =\n", path: "c") }
        #expect(throws: RelayConfigurationError.self) { try RelayConfiguration.parseSettings("= x\n", path: "c") }
    }

    /// Found while fuzzing (Fixtures/fuzz/regressions/relay-config/lifetime-overflowing-milliseconds): a stored
    /// frame lifetime of 604800000000000000 s overflowed on its way to milliseconds and trapped the relay at
    /// start. Durations are bounded now, with an error that names the bound.
    @Test func hugeDurationsAreErrorsNotTraps() throws {
        for (key, value) in [("stored_frame_lifetime_s", "604800000000000000"), ("stored_frame_lifetime_s", "315360001"),
                             ("auth_deadline_ms", "9223372036854775807"), ("idle_timeout_ms", "604800001"),
                             ("outbound_stall_ms", "99999999999"), ("close_flush_timeout_ms", "604800001")] {
            var c = RelayConfiguration()
            #expect(throws: RelayConfigurationError.self, "\(key) = \(value)") { try c.apply([key: value]) }
        }
        var c = RelayConfiguration()
        try c.apply(["stored_frame_lifetime_s": "315360000", "idle_timeout_ms": "604800000"])
        #expect(c.limits.storedFrameLifetimeMs == 315_360_000_000 && c.limits.idleTimeoutMs == 604_800_000)
    }

    @Test func flagsOverrideTheEnvironmentWhichOverridesTheFile() throws {
        let config = try self.file("max_payload_bytes = 1000\nmailbox_max_frames = 10\nping_interval_ms = 1000\n")
        let c = try RelayConfiguration.resolve(
            arguments: ["--config", config, "--max-payload-bytes", "3000"],
            environment: ["RELAY_MAX_PAYLOAD_BYTES": "2000", "RELAY_MAILBOX_MAX_FRAMES": "20"])
        #expect(c.limits.maxPayloadBytes == 3000)
        #expect(c.limits.mailboxMaxFrames == 20)
        #expect(c.limits.pingIntervalMs == 1000)
    }

    @Test func fleetSettings() throws {
        let c = try RelayConfiguration.resolve(
            arguments: ["--nats", "nats://10.0.0.1:4222, nats://10.0.0.2:4222", "--edge-id", "eu-1", "--nats-replicas", "3"],
            environment: [:])
        #expect(c.natsServers == ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222"])
        #expect(c.edgeID == "eu-1" && c.natsReplicas == 3)
        #expect(RelayConfiguration().natsServers.isEmpty, "the single relay with SQLite stays the default")
        for bad in [["--nats", "http://x:4222"], ["--nats", " , "], ["--edge-id", "a b"], ["--edge-id", ""],
                    ["--edge-id", String(repeating: "e", count: 65)], ["--nats-replicas", "0"], ["--nats-replicas", "7"]]
        {
            #expect(throws: RelayConfigurationError.self, "\(bad)") {
                try RelayConfiguration.resolve(arguments: bad, environment: [:])
            }
        }
    }
}

/// Issue 39: a config file key is spelled as in --help or with underscores; the descriptor limit is said once,
/// as the connections it allows, and only when it allows fewer than configured.
@Suite struct RelayFirstHourConfigurationTests {
    @Test func aFileKeyMayBeSpelledAsInHelp() throws {
        let dashed = try RelayConfiguration.parseSettings("metrics-listen = 127.0.0.1:9090\nlog-level = debug\n",
                                                          path: "relay.conf")
        #expect(dashed == ["metrics_listen": "127.0.0.1:9090", "log_level": "debug"])
        #expect(try RelayConfiguration.parseSettings("metrics_listen = 127.0.0.1:9090\n", path: "relay.conf")
                == ["metrics_listen": "127.0.0.1:9090"])
        #expect(throws: RelayConfigurationError.self) {
            try RelayConfiguration.parseSettings("metrics-lisen = 127.0.0.1:9090\n", path: "relay.conf")
        }
    }

    @Test func theDescriptorNoticeNamesTheConnectionsItAllows() {
        let limits = RelayLimits()
        let needed = limits.maxConnections + limits.maxPendingAuth + RelayConfiguration.reservedDescriptors
        #expect(RelayConfiguration.descriptorNotice(limit: needed, limits: limits) == nil)
        #expect(RelayConfiguration.descriptorNotice(limit: 20_000, limits: limits) ==
                "The descriptor limit (20000) allows about 19936 connections at once (max_connections is "
                + "\(limits.maxConnections)); for more raise LimitNOFILE or ulimit -Hn to \(needed)")
    }
}
