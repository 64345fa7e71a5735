import Foundation
import OllamaEmulatorKit

/// The ordered JSON value the emulators write (shared with the Ollama emulator); the OpenAI and Anthropic
/// emulators serialise it without Go's HTML escaping (`serialized(htmlSafe: false)`, `plainBytes`).
public typealias EmulatorJSON = JSONValue

extension JSONValue {
    /// Decodes a request body; `nil` when it is not a JSON object.
    static func decodeObject(_ bytes: [UInt8]) -> [String: Any]? {
        guard !bytes.isEmpty else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }
}
