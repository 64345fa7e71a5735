/// One fuzz target: a parser or decoder that reads bytes from the network or the disk, driven by arbitrary
/// input, with the properties that must hold for every input checked on the way.
///
/// The same `run` serves libFuzzer (`Fuzz/`, through `tools/fuzz`) and the test suite, which replays every
/// target's seeds and the inputs under `Fixtures/fuzz/regressions/<name>/` through it: a crash found once stays
/// found. A parser trapping is a finding; so is `run` throwing, which means the parser gave an answer that
/// breaks one of its own rules (an answer that depends on how the input was split, a decode that does not
/// round-trip, a buffer over its bound).
public struct FuzzTarget: Sendable {
    /// The name `tools/fuzz` and the regression directory use.
    public let name: String
    /// What it fuzzes and what it checks, for `tools/fuzz --list`.
    public let summary: String
    private let body: @Sendable ([UInt8]) throws(InvariantViolation) -> Void
    private let makeSeeds: @Sendable () -> [[UInt8]]

    init(
        _ name: String, _ summary: String,
        seeds: @escaping @Sendable () -> [[UInt8]],
        run: @escaping @Sendable ([UInt8]) throws(InvariantViolation) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.body = run
        self.makeSeeds = seeds
    }

    /// Runs one input. - Throws: the first property the parser broke on it.
    public func run(_ input: [UInt8]) throws(InvariantViolation) {
        try self.body(input)
    }

    /// Inputs to start from: real shapes from `Fixtures/` and hand-written edge cases, already in this
    /// target's input layout (control bytes first, where it has them).
    public func seeds() -> [[UInt8]] { self.makeSeeds() }
}

/// A property of a parser that an input broke.
public struct InvariantViolation: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Throws `InvariantViolation(message)` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(InvariantViolation) {
    if !condition { throw InvariantViolation(message()) }
}

/// Throws unless `a == b`, naming both.
func checkEqual<T: Equatable>(_ a: T, _ b: T, _ what: @autoclosure () -> String) throws(InvariantViolation) {
    if a != b { throw InvariantViolation("\(what()): \(a) != \(b)") }
}

/// Every target, by name.
public enum FuzzTargets {
    public static let all: [FuzzTarget] = [
        WebSocketHarness.target,
        HTTPHeadHarness.requestTarget,
        HTTPHeadHarness.responseTarget,
        ChunkedHarness.decoderTarget,
        ChunkedHarness.streamDecoderTarget,
        SSEHarness.target,
        LineSplitterHarness.target,
        JSONHarness.readerTarget,
        JSONHarness.differentialTarget,
        RelayFrameHarness.target,
        EnvelopeHarness.target,
        SessionEnvelopeHarness.target,
        MessageHarness.target,
        SignedPayloadHarness.target,
        PairingCodeHarness.target,
        ChatStreamHarness.openAITarget,
        ChatStreamHarness.anthropicTarget,
        OllamaPullHarness.target,
        RelayURLHarness.target,
        RelayConfigHarness.target,
        FleetHarness.target,
        LocalAPIHarness.requestTarget,
        LocalAPIHarness.gateTarget,
    ]

    public static func named(_ name: String) -> FuzzTarget? {
        self.all.first { $0.name == name }
    }
}
