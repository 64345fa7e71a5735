/// Faults the emulator injects into chat requests (`/api/chat`, `/v1/chat/completions`; `unknown-model` also
/// affects `/api/show`). Written as `slow-load=MS`, `stall-after=N`, `http-500`, `disconnect-after=N`,
/// `error-after=N`, `unknown-model`, several joined by `,` or `;`.
///
/// Sources, later ones overriding earlier ones field by field: the `--fault` flag (every request), the
/// `X-Emulator-Fault` request header, and a `[[fault:SPEC]]` marker in the last user message (for clients that
/// cannot set headers; the marker is removed before the answer is generated).
public struct EmulatorFault: Sendable, Equatable {
    /// Extra delay before the first token, as a cold model load would cause.
    public var slowLoadMs: Int?
    /// Stop sending after this many tokens and keep the connection open until the client leaves.
    public var stallAfterTokens: Int?
    /// Answer 500 with the surface's error body instead of generating.
    public var http500 = false
    /// Drop the TCP connection after this many tokens.
    public var disconnectAfterTokens: Int?
    /// Answer as if the model were not installed (404).
    public var unknownModel = false
    /// Fail after this many tokens of a started stream, as a runner that crashes mid-answer: `/v1` ends with an
    /// empty-delta chunk, no `finish_reason` and no `[DONE]`; native `/api/chat` with an `{"error":…}` line.
    public var errorAfterTokens: Int?

    public init() {}

    /// Parses a spec. - Throws: `EmulatorFault.ParseError` naming the bad part.
    public init(parsing spec: String) throws(ParseError) {
        for rawPart in spec.split(whereSeparator: { $0 == "," || $0 == ";" }) {
            let part = rawPart.trimmingCharacters(in: .whitespaces)
            guard !part.isEmpty else { continue }
            let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
            let key = pieces[0]
            let number = pieces.count == 2 ? Int(pieces[1]) : nil
            switch key {
            case "slow-load":
                guard let n = number, n >= 0 else { throw ParseError(part: part) }
                self.slowLoadMs = n
            case "stall-after":
                guard let n = number, n >= 0 else { throw ParseError(part: part) }
                self.stallAfterTokens = n
            case "error-after":
                guard let n = number, n >= 0 else { throw ParseError(part: part) }
                self.errorAfterTokens = n
            case "disconnect-after":
                guard let n = number, n >= 0 else { throw ParseError(part: part) }
                self.disconnectAfterTokens = n
            case "http-500":
                guard pieces.count == 1 else { throw ParseError(part: part) }
                self.http500 = true
            case "unknown-model":
                guard pieces.count == 1 else { throw ParseError(part: part) }
                self.unknownModel = true
            default:
                throw ParseError(part: part)
            }
        }
    }

    /// A spec part the parser did not understand.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let part: String
        public var description: String {
            "unknown fault '\(self.part)' (expected slow-load=MS, stall-after=N, http-500, disconnect-after=N, "
                + "error-after=N, unknown-model)"
        }
    }

    /// `self` with every fault that `other` sets taking its place.
    public func overridden(by other: EmulatorFault) -> EmulatorFault {
        var out = self
        if let v = other.slowLoadMs { out.slowLoadMs = v }
        if let v = other.stallAfterTokens { out.stallAfterTokens = v }
        if let v = other.disconnectAfterTokens { out.disconnectAfterTokens = v }
        if let v = other.errorAfterTokens { out.errorAfterTokens = v }
        if other.http500 { out.http500 = true }
        if other.unknownModel { out.unknownModel = true }
        return out
    }

    /// Splits `[[fault:SPEC]]` markers out of a prompt: the faults they name and the prompt without them.
    /// A marker with an unknown spec is left in the text (so a typo is visible in the answer's prompt).
    static func extractMarkers(from prompt: String) -> (fault: EmulatorFault, prompt: String) {
        var fault = EmulatorFault()
        var text = prompt
        while let open = text.range(of: "[[fault:"),
            let close = text.range(of: "]]", range: open.upperBound..<text.endIndex)
        {
            let spec = String(text[open.upperBound..<close.lowerBound])
            guard let parsed = try? EmulatorFault(parsing: spec) else { break }
            fault = fault.overridden(by: parsed)
            text.removeSubrange(open.lowerBound..<close.upperBound)
        }
        return (fault, text.trimmingCharacters(in: .whitespaces))
    }
}

import Foundation
