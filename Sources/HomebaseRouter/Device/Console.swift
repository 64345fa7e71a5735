import Foundation
import Synchronization
import HomebaseCore
import HomebaseNode

/// Terminal I/O shared by the `handset` and `guest` chats.
public enum Console {
    /// One line on stderr.
    public static func err(_ line: String, newline: Bool = true) {
        FileHandle.standardError.write(Data((newline ? line + "\n" : line).utf8))
    }

    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Lines of stdin, read on a thread of their own so a blocking read never holds a pool thread.
    public static func stdinLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            let thread = Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }
            thread.name = "stdin"
            thread.start()
        }
    }

    /// Answers one request. With `stream` (and not `json`), text is printed as it arrives; a fallback after
    /// partial output prints `ChatOutput.restartMarker` on stderr, then the fallback's answer.
    /// Prints a plain (not `--json`) answer's note as one dim line on stderr, under the answer.
    public static func printNote(_ answer: ChatAnswer, _ c: ChatInvocation) {
        guard !c.json, let note = answer.note else { return }
        Self.err(ChatOutput.dim(note, terminal: isatty(STDERR_FILENO) != 0))
    }

    public static func ask(_ session: DeviceSession, _ request: ChatRequest, _ c: ChatInvocation) async -> ChatAnswer {
        guard c.stream && !c.json else { return await session.chat(request, model: c.model) }
        let thinking = ThinkingLine()
        return await session.chat(request, model: c.model) { event in
            switch event {
            case .text(let text):
                if thinking.end() { Self.err("") }
                Self.out(text)
            // Reasoning goes to stderr, apart from the answer on stdout, on a line of its own; so does the queue
            // position.
            case .reasoning(let thought):
                Self.err((thinking.begin() ? "[reasoning] " : "") + thought, newline: false)
            case .queued(let position): Self.err("[queued: \(position == 1 ? "next" : "position \(position)")]")
            case .restart(let reason):
                Self.out("\n")
                Self.err(ChatOutput.restartMarker(reason))
            case .done: Self.out("\n")
            case .toolCall(let call): Self.err("[tool call: \(call.name) \(call.arguments)]")
            case .failed, .fallingBack: break
            }
        }
    }
}

/// Whether streamed reasoning is open on stderr: its first piece gets a label, the answer's first text a newline.
final class ThinkingLine: Sendable {
    private let open = Mutex(false)

    /// True for the first piece of a run of reasoning.
    func begin() -> Bool { self.open.withLock { o in defer { o = true }; return !o } }

    /// True when reasoning was open (it is closed now).
    func end() -> Bool { self.open.withLock { o in defer { o = false }; return o } }
}

/// The `route` and `status` outputs, as data for `--json` and as text.
public enum DeviceReport {
    /// `route --json`: `{"route", "banner", "needs_configuration"}` (design.md §D), plus `stale`, and `floor_reason`
    /// (why the floor answers for a configured device model, else null).
    public static func route(_ s: DeviceSession) -> [String: Any] {
        let resolution = s.router.resolution()
        let banner = s.router.banner()
        return ["route": resolution.route.rawValue, "banner": banner.text,
                "needs_configuration": resolution.needsConfiguration, "stale": banner.staleNotice != nil,
                "floor_reason": resolution.floorReason?.rawValue ?? NSNull(),
                // Where on-device answers come from before the canned floor (`config device-engine`).
                "device_engine": s.settings.deviceEngine.map { ["url": $0.url, "model": $0.model] } ?? NSNull()]
    }

    public static func printRoute(_ s: DeviceSession, json: Bool) {
        if json { return CLI.printJSON(Self.route(s)) }
        print(s.router.banner().description)
        if s.router.resolution().needsConfiguration { print("(finish configuring the selected source)") }
        if let engine = s.settings.deviceEngine {
            print("on-device answers come from the device engine \(engine.model) at \(engine.url); the built-in floor stays last")
        }
    }

    /// `handset status --json`: the device, its relay, the paired Homebase and roster, the last advert, the route.
    public static func handsetStatus(_ s: DeviceSession) -> [String: Any] {
        let now = s.clock()
        var out = Self.route(s)
        out["device"] = s.publicKey.hex
        out["name"] = s.node.name
        out["relay"] = (try? s.node.relayURL()) ?? NSNull()
        out["connected"] = s.messenger.isConnected
        out["relay_problem"] = s.relayProblem ?? NSNull()
        out["homebase"] = s.account.homebase?.hex ?? NSNull()
        out["account"] = s.account.accountKey?.hex ?? NSNull()
        if let roster = s.account.roster {
            out["roster"] = ["version": roster.version,
                             "devices": roster.devices.map { ["pk": $0.pk, "name": $0.name, "role": $0.role] }]
        } else {
            out["roster"] = NSNull()
        }
        if let advert = s.adverts.advert {
            out["advert"] = ["seq": advert.seq, "age_ms": now >= advert.issuedAtMs ? now - advert.issuedAtMs : 0,
                             "fresh": ExternalModelsAdvertStore.isFresh(advert, nowMs: now),
                             "models": advert.models.map(\.tag)] as [String: Any]
        } else {
            out["advert"] = NSNull()
        }
        return out
    }

    public static func printHandsetStatus(_ s: DeviceSession, json: Bool) {
        let st = Self.handsetStatus(s)
        if json { return CLI.printJSON(st) }
        print("device    \(s.publicKey.hex) (\(s.node.name))")
        print("relay     \((try? s.node.relayURL()) ?? "-")" + (s.messenger.isConnected ? " (connected)" : ""))
        if let problem = s.relayProblem { print("          \(problem)") }
        print("homebase  \(s.account.homebase?.hex ?? "not paired")")
        if let roster = s.account.roster {
            print("roster    version \(roster.version): "
                  + roster.devices.map { "\($0.name) (\($0.role), \($0.pk.prefix(8)))" }.joined(separator: ", "))
        }
        if let advert = st["advert"] as? [String: Any], let age = advert["age_ms"] as? UInt64,
            let fresh = advert["fresh"] as? Bool, let models = advert["models"] as? [String] {
            print("advert    \(age / 1000) s old, \(fresh ? "fresh" : "stale"): \(models.joined(separator: ", "))")
        } else {
            print("advert    none yet")
        }
        print("route     \(s.router.banner().description)")
    }

    /// `guest status --json`: `device`, and `hosts` each with `pubkey`, `name`, `state`, `models`, `last_heard`.
    public static func guestStatus(_ s: DeviceSession) -> [String: Any] {
        var out = Self.route(s)
        out["device"] = s.publicKey.hex
        out["relay"] = (try? s.node.relayURL()) ?? NSNull()
        out["connected"] = s.messenger.isConnected
        out["relay_problem"] = s.relayProblem ?? NSNull()
        out["hosts"] = s.joined.all().map { r -> [String: Any] in
            ["pubkey": r.host.hex, "name": r.name ?? NSNull(), "state": r.state.rawValue,
             "models": r.models.map(\.tag), "last_heard": r.lastHeardMs,
             "fresh": r.isFresh(nowMs: s.clock())]
        }
        return out
    }

    public static func printGuestStatus(_ s: DeviceSession, json: Bool) {
        if json { return CLI.printJSON(Self.guestStatus(s)) }
        print("device  \(s.publicKey.hex)")
        if let problem = s.relayProblem { print("relay   \(problem)") }
        let hosts = s.joined.all()
        if hosts.isEmpty { print("no hosts; ask one with 'guest join HOST_PK'") }
        for r in hosts {
            let heard = r.lastHeardMs == 0 ? "never heard" : "last heard \((s.clock() &- r.lastHeardMs) / 1000) s ago"
            let models = r.models.isEmpty ? "no models" : r.models.map(\.tag).joined(separator: ", ")
            print("host    \(r.host.hex) \(r.state.rawValue): \(models); \(heard)")
        }
        print("route   \(s.router.banner().description)")
    }
}
