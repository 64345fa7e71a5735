import Foundation

/// What one check concluded.
public enum CheckOutcome: Equatable, Sendable {
    case pass
    /// A pass with what was measured (the hostile checks' figures), printed after the name.
    case passed(String)
    /// The implementation under test broke a rule; the reason is one line.
    case fail(String)
    /// The check could not be run meaningfully (a documented precondition is missing); not a failure.
    case skip(String)
}

/// One named rule of the protocol, checked by running `run`. A thrown error is a failure with the error as reason.
public struct Check: Sendable {
    public let name: String
    public let run: @Sendable () async throws -> CheckOutcome

    public init(_ name: String, run: @escaping @Sendable () async throws -> CheckOutcome) {
        self.name = name
        self.run = run
    }
}

/// The outcome of one check, as reported.
public struct CheckResult: Equatable, Sendable, Codable {
    public var name: String
    /// `pass`, `fail` or `skip`.
    public var status: String
    /// Why it failed or was skipped; on a pass, the figures measured (often empty).
    public var reason: String

    public init(name: String, outcome: CheckOutcome) {
        self.name = name
        switch outcome {
        case .pass: (self.status, self.reason) = ("pass", "")
        case .passed(let figures): (self.status, self.reason) = ("pass", Self.oneLine(figures))
        case .fail(let r): (self.status, self.reason) = ("fail", Self.oneLine(r))
        case .skip(let r): (self.status, self.reason) = ("skip", Self.oneLine(r))
        }
    }

    /// `PASS name` (`PASS name: figures`), `FAIL name: reason` or `SKIP name: reason`.
    public var line: String {
        switch self.status {
        case "pass": self.reason.isEmpty ? "PASS \(self.name)" : "PASS \(self.name): \(self.reason)"
        case "fail": "FAIL \(self.name): \(self.reason)"
        default: "SKIP \(self.name): \(self.reason)"
        }
    }

    private static func oneLine(_ s: String) -> String {
        s.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

/// Every result of a run, with the summary the command ends on.
public struct Report: Equatable, Sendable {
    public var results: [CheckResult] = []

    public init(results: [CheckResult] = []) { self.results = results }

    public var passed: Int { self.results.filter { $0.status == "pass" }.count }
    public var failed: Int { self.results.filter { $0.status == "fail" }.count }
    public var skipped: Int { self.results.filter { $0.status == "skip" }.count }

    /// `N passed, N failed` (and `, N skipped` when any were).
    public var summaryLine: String {
        "\(self.passed) passed, \(self.failed) failed" + (self.skipped > 0 ? ", \(self.skipped) skipped" : "")
    }

    /// 0 only when nothing failed.
    public var exitCode: Int32 { self.failed == 0 ? 0 : 1 }

    /// Names of the failed checks, for tests and summaries.
    public var failedNames: [String] { self.results.filter { $0.status == "fail" }.map(\.name) }

    public func result(named name: String) -> CheckResult? { self.results.first { $0.name == name } }

    /// The machine-readable report: `{"passed", "failed", "skipped", "results": [{name, status, reason}]}`.
    public func json() -> String {
        struct Wire: Encodable {
            var passed: Int
            var failed: Int
            var skipped: Int
            var results: [CheckResult]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let wire = Wire(passed: self.passed, failed: self.failed, skipped: self.skipped, results: self.results)
        // Strings and integers only: encoding cannot fail.
        return (try? String(decoding: encoder.encode(wire), as: UTF8.self)) ?? "{}"
    }
}

/// Runs checks one after another (they share a relay or a host, so they must not overlap) and collects a report.
public final class CheckRunner: @unchecked Sendable {
    public private(set) var report = Report()
    private let emit: (@Sendable (String) -> Void)?

    /// - Parameter emit: receives each result line as it is known (nil: collect silently, e.g. for `--json`).
    public init(emit: (@Sendable (String) -> Void)?) {
        self.emit = emit
    }

    public func run(_ check: Check) async {
        let outcome: CheckOutcome
        do { outcome = try await check.run() } catch { outcome = .fail("\(error)") }
        self.record(check.name, outcome)
    }

    public func run(_ checks: [Check]) async {
        for c in checks { await self.run(c) }
    }

    /// Records an outcome computed elsewhere (vector files check many vectors in one pass).
    public func record(_ name: String, _ outcome: CheckOutcome) {
        let result = CheckResult(name: name, outcome: outcome)
        self.report.results.append(result)
        self.emit?(result.line)
    }
}

/// A failure inside a check, with a one-line reason.
public struct CheckFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
