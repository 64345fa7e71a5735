import Foundation
import HomebaseCore
import HomebaseNode

/// One answered chat call and the route that was resolved for it.
public struct ChatAnswer: Sendable {
    public var resolution: RouteResolution
    public var result: ChatResult
    /// Milliseconds from the call to the first text of the answer that was kept (after a restart, the
    /// fallback's first text), and to the end.
    public var firstTextMs: Double?
    public var totalMs: Double = 0
    /// The envelope version the answer came in, for an answer from a Homebase (Protocol/envelope.md §7): 2 on
    /// a forward-secret session, 1 with a v1-only host.
    public var envelope: Int?
    /// Why the answer did not come from where the device was pointed, in words (issue 39): printed as one dim
    /// line under a plain answer and as `note` in `--json`. Nil when nothing fell back.
    public var note: String?

    /// Completion tokens per second after the first text (from reported usage, else counted words).
    public var tokensPerSecond: Double? {
        guard let first = self.firstTextMs, self.totalMs > first + 1 else { return nil }
        let tokens = self.result.usage?.completionTokens
            ?? self.result.text.split(whereSeparator: { $0 == " " || $0 == "\n" }).count
        return Double(tokens) / ((self.totalMs - first) / 1000)
    }

    /// The `chat --json` object of design.md §D: `{"text", "route", "provider", "model", "fallback"}`.
    public var json: [String: Any] {
        var fallback: Any = NSNull()
        if let f = self.result.fallback {
            fallback = ["from": f.from.rawValue, "reason": f.reason.rawValue]
        }
        var timing: [String: Any] = ["total_ms": (self.totalMs * 10).rounded() / 10]
        if let f = self.firstTextMs { timing["first_text_ms"] = (f * 10).rounded() / 10 }
        if let t = self.tokensPerSecond { timing["tokens_per_s"] = (t * 10).rounded() / 10 }
        // design.md §D's five fields, plus `timing` and `envelope` (the demo's summary table reads them).
        var out: [String: Any] = [
            "text": self.result.text, "route": self.resolution.route.rawValue,
            "provider": self.result.providerKind.rawValue, "model": self.result.model, "fallback": fallback,
            "timing": timing,
        ]
        if let e = self.envelope { out["envelope"] = e }
        // A reasoning model's thinking, apart from the answer (null when there was none).
        out["reasoning"] = self.result.reasoning ?? NSNull()
        if let n = self.note { out["note"] = n }
        return out
    }
}

/// What a streaming CLI prints around a chat.
public enum ChatOutput {
    /// Why the answer fell back, in one line that says what to do (issue 39); nil without a fallback. Pure.
    public static func fallbackNote(_ fallback: Fallback?) -> String? {
        guard let f = fallback else { return nil }
        let why: String
        switch f.reason {
        case .offline: why = "the Homebase is not reachable; is 'homebase run' running there?"
        case .noModelSelected: why = "no model is selected; pick one with 'handset config model TAG'"
        case .notJoined: why = "the host has not granted you yet ('guest status' shows when it does)"
        case .revoked: why = "the host revoked your access"
        case .noModels: why = "the Homebase has no models; 'homebase pull MODEL' there"
        case .staleAdvert: why = "no recent word from the Homebase; is 'homebase run' running there?"
        case .noEndpoint: why = "no Homebase paired and no endpoint verified; 'handset pair CODE' first"
        case .noKey: why = "the selected cloud has no key; 'handset key add PROVIDER KEY'"
        case .acceptTimeout, .firstOutputTimeout, .stall:
            why = "the Homebase did not answer in time (\(f.reason.rawValue))"
        case .tools: why = "a request with tools is answered on this device"
        case .deviceModelFailed: why = "the device model failed; 'handset models state' shows why"
        default: why = f.reason.rawValue.hasPrefix("error:") ? "the answer failed (\(f.reason.rawValue))" : f.reason.rawValue
        }
        return "answered on-device: \(why)"
    }

    /// The guest's note while its join waits for the host (`sentMs`: when the join went out, if known).
    public static func waitingNote(host: String, sentMs: UInt64?, nowMs: UInt64) -> String {
        guard let sentMs, nowMs >= sentMs else { return "answered on-device: waiting for \(host) to grant you" }
        let minutes = (nowMs - sentMs) / 60_000
        let ago = minutes == 0 ? "less than a minute" : minutes == 1 ? "1 min" : "\(minutes) min"
        return "answered on-device: waiting for \(host) to grant you (join sent \(ago) ago)"
    }

    /// `line` dimmed when stderr is a terminal, plain otherwise.
    public static func dim(_ line: String, terminal: Bool) -> String {
        terminal ? "\u{1B}[2m\(line)\u{1B}[0m" : line
    }

    /// The stderr line printed when a fallback restarts an answer that had begun streaming.
    public static func restartMarker(_ reason: FallbackReason) -> String {
        "[fallback: \(reason.rawValue) — answering on-device]"
    }

    /// Reads a tools file: a JSON array of OpenAI-style tool objects, each kept as its JSON text.
    public static func loadTools(path: String) throws -> [RawJSON] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read tools file \(path)")
        }
        guard let array = try? JSONSerialization.jsonObject(with: data) as? [Any] else {
            throw CLIError("tools file \(path) is not a JSON array")
        }
        return try array.map { element in
            guard element is [String: Any],
                let bytes = try? JSONSerialization.data(withJSONObject: element, options: [.sortedKeys])
            else { throw CLIError("tools file \(path): every tool must be a JSON object") }
            return RawJSON(String(decoding: bytes, as: UTF8.self))
        }
    }
}

extension DeviceSession {
    /// Resolves the route, asks the router for a provider and answers `request`. Never fails: at worst the
    /// floor answers. `onEvent` sees every stream event (text, `.restart`, `.done`) when given; without it the
    /// answer is completed in one piece. `onProvider` sees the resolved route and the provider the router handed
    /// out, before the first event (`serve` names the provider in its response headers).
    public func chat(_ request: ChatRequest, model: String? = nil,
                     onEvent: (@Sendable (ChatStreamEvent) -> Void)? = nil,
                     onProvider: (@Sendable (RouteResolution, any LLMProvider) -> Void)? = nil) async -> ChatAnswer {
        let start = ContinuousClock.now
        func elapsedMs() -> Double {
            let d = ContinuousClock.now - start
            return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        }
        let resolution = self.router.resolution()
        let provider = self.router.provider(model: model)
        onProvider?(resolution, provider)
        // Always streamed, so the time to the first text can be reported even for a one-shot answer.
        var final: ChatResult?
        var firstText: Double?
        for await event in provider.stream(request) {
            onEvent?(event)
            switch event {
            case .text(let t) where !t.isEmpty:
                if firstText == nil { firstText = elapsedMs() }
            case .reasoning(let t) where !t.isEmpty:
                // Reasoning is output too: the first sign of an answer on its way.
                if firstText == nil { firstText = elapsedMs() }
            case .restart:
                firstText = nil
            case .done(let result):
                final = result
            default:
                break
            }
        }
        var answer = ChatAnswer(resolution: resolution, result: final ?? FloorProvider().answer(request),
                                firstTextMs: firstText, totalMs: elapsedMs())
        if answer.result.fallback == nil, [.remote, .crossAccount].contains(answer.result.providerKind) {
            switch resolution.shape {
            case .sibling(let advert, _): answer.envelope = Int(self.messenger.envelopeVersion(for: advert.host))
            case .crossAccount(let joined, _): answer.envelope = Int(self.messenger.envelopeVersion(for: joined.host))
            case .localEndpoint, nil: break
            }
        }
        return answer
    }
}
