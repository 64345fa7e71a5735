import Foundation

/// A JSON value that keeps object keys in the order written, so the emulators' bytes follow the captured
/// examples field by field (reference/model-apis.md §4-5).
public indirect enum EmulatorJSON: Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case string(String)
    case array([EmulatorJSON])
    case object([(String, EmulatorJSON)])

    /// Compact serialisation, no spaces.
    public func serialized() -> String {
        var out = ""
        self.write(to: &out)
        return out
    }

    public var bytes: [UInt8] { Array(self.serialized().utf8) }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, to: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
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

    /// Decodes a request body; `nil` when it is not a JSON object.
    static func decodeObject(_ bytes: [UInt8]) -> [String: Any]? {
        guard !bytes.isEmpty else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }
}
