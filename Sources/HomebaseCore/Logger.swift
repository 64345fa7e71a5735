/// A small structured logger shaped like swift-log: a label, a level, metadata, and a sink chosen by the
/// executable. Libraries take a logger from their caller and never create a sink themselves.
///
/// Never log secrets, plaintext, payloads or full signatures; shorten public keys with `PublicKey.short`.
public struct Logger: Sendable {
    public enum Level: Int, Comparable, Sendable, CaseIterable {
        case trace, debug, info, notice, warning, error

        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }

        public var name: String {
            switch self {
            case .trace: "trace"
            case .debug: "debug"
            case .info: "info"
            case .notice: "notice"
            case .warning: "warning"
            case .error: "error"
            }
        }

        public init?(name: String) {
            guard let l = Level.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = l
        }
    }

    public typealias Metadata = [String: String]

    public let label: String
    public var level: Level
    public var metadata: Metadata
    public let sink: any LogSink

    public init(label: String, level: Level = .info, sink: any LogSink) {
        self.label = label
        self.level = level
        self.metadata = [:]
        self.sink = sink
    }

    /// A logger that drops everything (for tests and libraries used without logging).
    public static func discard(label: String = "discard") -> Logger {
        Logger(label: label, level: .error, sink: DiscardLogSink())
    }

    public func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy.metadata[key] = value
        return copy
    }

    public func log(_ level: Level, _ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        guard level >= self.level else { return }
        var m = self.metadata
        for (k, v) in metadata() { m[k] = v }
        self.sink.write(LogRecord(label: self.label, level: level, message: message(), metadata: m))
    }

    public func trace(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.trace, message(), metadata: metadata())
    }
    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.info, message(), metadata: metadata())
    }
    public func notice(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.notice, message(), metadata: metadata())
    }
    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        self.log(.error, message(), metadata: metadata())
    }
}

public struct LogRecord: Sendable, Equatable {
    public let label: String
    public let level: Logger.Level
    public let message: String
    public let metadata: Logger.Metadata

    /// `level label: message key=value …` with keys sorted, one line.
    public var formatted: String {
        var s = "\(self.level.name) \(self.label): \(self.message)"
        for k in self.metadata.keys.sorted() { s += " \(k)=\(self.metadata[k]!)" }
        return s
    }
}

public protocol LogSink: Sendable {
    func write(_ record: LogRecord)
}

public struct DiscardLogSink: LogSink {
    public init() {}
    public func write(_ record: LogRecord) {}
}
