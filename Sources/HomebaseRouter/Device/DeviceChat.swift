import Foundation
import HomebaseCore
import HomebaseNode

/// One answered chat call and the route that was resolved for it.
public struct ChatAnswer: Sendable {
    public var resolution: RouteResolution
    public var result: ChatResult

    /// The `chat --json` object of system.md: `{"text", "route", "provider", "model", "fallback"}`.
    public var json: [String: Any] {
        var fallback: Any = NSNull()
        if let f = self.result.fallback {
            fallback = ["from": f.from.rawValue, "reason": f.reason.rawValue]
        }
        return ["text": self.result.text, "route": self.resolution.route.rawValue,
                "provider": self.result.providerKind.rawValue, "model": self.result.model, "fallback": fallback]
    }
}

/// What a streaming CLI prints around a chat.
public enum ChatOutput {
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
    /// answer is completed in one piece.
    public func chat(_ request: ChatRequest, model: String? = nil,
                     onEvent: (@Sendable (ChatStreamEvent) -> Void)? = nil) async -> ChatAnswer {
        let resolution = self.router.resolution()
        let provider = self.router.provider(model: model)
        guard let onEvent else {
            let result = (try? await provider.complete(request)) ?? FloorProvider().answer(request)
            return ChatAnswer(resolution: resolution, result: result)
        }
        var final: ChatResult?
        for await event in provider.stream(request) {
            onEvent(event)
            if case .done(let result) = event { final = result }
        }
        return ChatAnswer(resolution: resolution, result: final ?? FloorProvider().answer(request))
    }
}
