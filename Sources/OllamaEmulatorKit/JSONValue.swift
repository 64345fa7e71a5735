import Foundation

/// A JSON value that keeps object keys in the order written, so an emulator's bytes match the real API's
/// (Go marshals struct fields in declaration order; the OpenAI and Anthropic emulators follow the captured
/// examples field by field).
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        a.serialized() == b.serialized()
    }

    /// Compact serialisation, no spaces. `htmlSafe` (the default, as Go's encoding/json, hence Ollama) also
    /// escapes `<`, `>`, `&`, U+2028 and U+2029 as `\u003c` and so on; OpenAI and Anthropic do not.
    public func serialized(htmlSafe: Bool = true) -> String {
        var out = ""
        self.write(to: &out, htmlSafe: htmlSafe)
        return out
    }

    public var bytes: [UInt8] { Array(self.serialized().utf8) }

    /// UTF-8 of `serialized(htmlSafe: false)`.
    public var plainBytes: [UInt8] { Array(self.serialized(htmlSafe: false).utf8) }

    private func write(to out: inout String, htmlSafe: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d == d.rounded() && abs(d) < 1e15 { out += String(Int(d)) } else { out += String(d) }
        case .string(let s): Self.writeString(s, to: &out, htmlSafe: htmlSafe)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out, htmlSafe: htmlSafe)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, to: &out, htmlSafe: htmlSafe)
                out += ":"
                value.write(to: &out, htmlSafe: htmlSafe)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String, htmlSafe: Bool) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<" where htmlSafe: out += "\\u003c"
            case ">" where htmlSafe: out += "\\u003e"
            case "&" where htmlSafe: out += "\\u0026"
            case "\u{2028}" where htmlSafe: out += "\\u2028"
            case "\u{2029}" where htmlSafe: out += "\\u2029"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    /// Converts a value decoded by JSONSerialization (for echoing tool arguments). Key order follows sorting,
    /// as Go's map marshalling does.
    public init(foundation value: Any) {
        switch value {
        case is NSNull: self = .null
        case let n as NSNumber:
            if String(cString: n.objCType) == "c" {
                self = .bool(n.boolValue)
            } else if n.doubleValue == n.doubleValue.rounded() && abs(n.doubleValue) < 1e15 {
                self = .int(n.intValue)
            } else {
                self = .double(n.doubleValue)
            }
        case let s as String: self = .string(s)
        case let a as [Any]: self = .array(a.map { JSONValue(foundation: $0) })
        case let d as [String: Any]:
            self = .object(d.keys.sorted().map { ($0, JSONValue(foundation: d[$0]!)) })
        default: self = .null
        }
    }
}
