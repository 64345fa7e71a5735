import Foundation
import HomebaseCore
import HomebaseService
import RelayService

/// Ollama's NDJSON as the Homebase decodes it (`/api/pull`: `LineSplitter`, then
/// `OllamaManagementClient.pullLine` per line, until `success`). Ollama's answers themselves come through
/// `/v1` (`openai-stream`). Input: `control || body`.
///
/// Reference: the body read one line at a time (`FuzzInput.lines`). Any cut gives the same progress lines and
/// the same ending (success, an error, or the end of the body first). A line over the limit fails the whole
/// read it is in (`LineSplitter`'s contract), the lines before it in that read too, so a cut may end with it
/// where the reference ended at one of those lines (with success or an error); its progress lines are then a
/// prefix of the reference's. Byte counts are never negative and nothing follows `success`.
enum OllamaPullHarness {
    static let target = FuzzTarget(
        "ollama-pull", "Ollama /api/pull NDJSON decoding: cuts against line-at-a-time reads, progress rules",
        seeds: Self.seeds, run: Self.run)

    /// A small line limit, so the fuzzer reaches it (the client's default is 64 KiB).
    static let maxLineBytes = 300

    struct Outcome: Equatable {
        var progress: [PullProgress] = []
        var ending: String = "end of body"
    }

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let control = input.first else { return }
        let body = input[1...]
        var decoded: [[UInt8]: Result<PullProgress?, Error>] = [:]
        let reference = Self.read(FuzzInput.lines(body), decoded: &decoded)
        let cut = Self.read(FuzzInput.pieces(body, seed: control), decoded: &decoded)
        if reference.ending == "line too long" || cut.ending == "line too long" {
            try check(cut.ending == "line too long" && reference.ending != "end of body",
                      "overflow verdicts differ: reference \(reference.ending), cut \(cut.ending)")
            try check(reference.progress.starts(with: cut.progress), "progress of a failing body is no prefix")
        } else {
            try checkEqual(cut, reference, "progress depends on the cuts")
        }
        for (i, progress) in reference.progress.enumerated() {
            try check(progress.total >= 0 && progress.completed >= 0, "negative byte counts: \(progress)")
            try check(!progress.isSuccess || i == reference.progress.count - 1, "progress after success")
        }
    }

    /// `OllamaManagementClient.runPull`'s loop over the body's reads. `decoded` remembers what each line
    /// decoded to (a pure function of the line), so that the second read of a body decodes nothing again.
    static func read(_ pieces: [ArraySlice<UInt8>], decoded: inout [[UInt8]: Result<PullProgress?, Error>]) -> Outcome {
        var splitter = LineSplitter(maxLineBytes: Self.maxLineBytes)
        var outcome = Outcome()
        func pullLine(_ line: [UInt8]) throws -> PullProgress? {
            if let known = decoded[line] { return try known.get() }
            let result: Result<PullProgress?, Error> = Result { try OllamaManagementClient.pullLine(line, model: "m") }
            decoded[line] = result
            return try result.get()
        }
        do {
            for piece in pieces {
                for line in try splitter.append(piece) {
                    if let progress = try pullLine(line) {
                        outcome.progress.append(progress)
                        if progress.isSuccess {
                            outcome.ending = "success"
                            return outcome
                        }
                    }
                }
            }
            if let last = try splitter.finish(), let progress = try pullLine(last) {
                outcome.progress.append(progress)
                if progress.isSuccess { outcome.ending = "success" }
            }
        } catch is LineSplitter.Error {
            outcome.ending = "line too long"
        } catch {
            outcome.ending = "\(error)"
        }
        return outcome
    }

    static func seeds() -> [[UInt8]] {
        ["ollama/api-pull-stream.txt", "ollama/api-pull-unknown-model.txt", "ollama/api-chat-stream.txt"].flatMap {
            name -> [[UInt8]] in
            let bytes = FixtureFiles.bytes(name)
            return [bytes.prefixed(0), bytes.prefixed(0x0D), bytes.prefixed(0x02)]
        }
    }
}

/// The relay's configuration from disk and command line: a config file's `key = value` lines, the admission
/// files (tokens, allowed keys), and flags. Input: `mode || text`; mode 0 is a config file, 1 an allowlist,
/// 2 a token file, 3 a command line (arguments separated by NUL; `--config`, which reads a file, is left out).
///
/// Checks: a configuration that is accepted is usable: every limit positive and finite, the idle timeout
/// above the ping interval; the file's settings resolve the same through flags; an allowlist holds only the
/// keys written in it; tokens have no surrounding whitespace (a line end included) or comments; settings
/// read from a file have none either.
enum RelayConfigHarness {
    static let target = FuzzTarget(
        "relay-config", "relay config file, admission files and flags: accepted settings are usable",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let mode = input.first else { return }
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        switch mode & 3 {
        case 0:
            guard let settings = try? RelayConfiguration.parseSettings(text, path: "fuzz.conf") else { return }
            var configuration = RelayConfiguration()
            guard (try? configuration.apply(settings)) != nil else { return }
            try Self.checkUsable(configuration)
            for value in [configuration.dataDirectory, configuration.tokenFile, configuration.allowlistFile]
                .compactMap({ $0 }) {
                try check(value.trimmingCharacters(in: .whitespacesAndNewlines) == value,
                          "a setting read with whitespace around it: \(value.debugDescription)")
            }
            let flags = settings.sorted { $0.key < $1.key }.flatMap { ["--" + $0.key, $0.value] }
            let resolved = try? RelayConfiguration.resolve(arguments: flags, environment: [:])
            try checkEqual(resolved, configuration, "the file's settings given as flags")
        case 1:
            guard let admission = try? Admission.parse(tokens: nil, allowlist: text, allowlistName: "allowlist")
            else { return }
            for key in admission.allowedKeys ?? [] {
                try check(text.lowercased().contains(key.hex), "allowed key \(key.hex) is not in the file")
            }
        case 2:
            guard let admission = try? Admission.parse(tokens: text, allowlist: nil, allowlistName: "") else { return }
            for token in admission.tokens {
                try check(!token.isEmpty && !token.contains("#") && !token.contains("\n")
                          && token.trimmingCharacters(in: .whitespacesAndNewlines) == token,
                          "token \(token.debugDescription)")
                try check(admission.admitsUpgrade(authorization: "Bearer " + token, queryToken: nil)
                          || token.contains(" "), "token \(token.debugDescription) not admitted by its bearer header")
                try check(admission.admitsUpgrade(authorization: nil, queryToken: token), "token not admitted by query")
            }
        default:
            let arguments = text.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
            guard !arguments.contains(where: { $0.hasPrefix("--config") }),
                let configuration = try? RelayConfiguration.resolve(arguments: arguments, environment: [:])
            else { return }
            try Self.checkUsable(configuration)
        }
    }

    static func checkUsable(_ c: RelayConfiguration) throws(InvariantViolation) {
        let l = c.limits
        let integers = [l.maxPayloadBytes, l.mailboxMaxFrames, l.mailboxMaxBytes, l.outboundQueueMaxBytes,
                        l.maxPendingAuth, l.maxConnections]
        try check(integers.allSatisfy { $0 > 0 }, "a non-positive limit: \(l)")
        let rates = [l.sendFramesPerSecond, l.sendFramesBurst, l.sendBytesPerSecond, l.sendBytesBurst]
        try check(rates.allSatisfy { $0 > 0 && $0.isFinite }, "a rate that is not a positive number: \(rates)")
        try check(l.storedFrameLifetimeMs > 0 && l.authDeadlineMs > 0 && l.pingIntervalMs > 0,
                  "a zero duration: \(l)")
        try check(l.idleTimeoutMs > l.pingIntervalMs, "idle timeout not above the ping interval")
    }

    static func seeds() -> [[UInt8]] {
        let config = """
            # relay.conf
            listen = 127.0.0.1:8080
            metrics_listen = [::1]:9090
            data = /var/lib/homebase-relay   # trailing comment
            log_level = debug
            durability = normal
            max_payload_bytes = 262144
            stored_frame_lifetime_s = 604800
            send_frames_per_second = 50.5
            idle_timeout_ms = 90000
            ping_interval_ms = 30000
            """
        let allowlist = "# keys\n79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664\n\n"
            + "DA29E95B02E00FFA15645775FB1D2BA222A1943395EEA06B94E2C057B7BE69D0 # b\n"
        let tokens = "tok-1\n  tok 2  \n#comment\n\ttok3#x\n"
        let flags = ["--listen", "0.0.0.0:1", "--send-frames-burst=9", "--log_level", "trace"].joined(separator: "\0")
        return [Array(config.utf8).prefixed(0), Array(allowlist.utf8).prefixed(1), Array(tokens.utf8).prefixed(2),
                Array(flags.utf8).prefixed(3)]
    }
}
