/// Renders metrics in the Prometheus text exposition format (version 0.0.4).
public struct PrometheusText: Sendable {
    public private(set) var output = ""
    private var declared: Set<String> = []

    public init() {}

    public enum Kind: String, Sendable { case counter, gauge }

    /// Adds one sample; `# HELP`/`# TYPE` lines are written the first time a name appears.
    public mutating func add(_ name: String, _ kind: Kind, help: String, labels: [(String, String)] = [],
                             value: Double) {
        if !self.declared.contains(name) {
            self.declared.insert(name)
            self.output += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
        }
        self.output += name
        if !labels.isEmpty {
            self.output += "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        self.output += " " + Self.format(value) + "\n"
    }

    public mutating func add(_ name: String, _ kind: Kind, help: String, labels: [(String, String)] = [],
                             value: some BinaryInteger) {
        self.add(name, kind, help: help, labels: labels, value: Double(value))
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func format(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}
