import Foundation
import HomebaseCore

/// The model-source radio (design.md §B, "the switch"): the routing truth.
public enum ModelSource: String, Sendable, CaseIterable {
    /// The built-in floor (design.md §R7; "Apple Intelligence" on a phone).
    case apple
    /// A small model on the device's own runtime (design.md §B; "Community" MLX on a phone).
    case community
    /// Ollama, OpenAI or Claude, chosen by the runtime dropdown.
    case external
    /// The retired fourth radio position; still routes (design.md §R2, legacy branches).
    case legacyOpenAI = "openai"
}

/// The runtime dropdown inside the External pane.
public enum ExternalRuntime: String, Sendable, CaseIterable {
    case ollama
    case openai
    case claude
}

/// Whose Homebase serves the external selection: the account's own, or a friend's (by device key).
public enum ExternalHost: Sendable, Hashable, CustomStringConvertible {
    case own
    case joined(PublicKey)

    /// Parses a stored value; anything that is not `own` or 64 hex characters degrades to `.own`
    /// (design.md §R4: a damaged preference must not strand routing).
    public init(stored: String?) {
        if let stored, let key = PublicKey(hex: stored) {
            self = .joined(key)
        } else {
            self = .own
        }
    }

    /// The stored form: `own` or the lowercase hex key.
    public var description: String {
        switch self {
        case .own: return "own"
        case .joined(let key): return key.hex
        }
    }
}

/// The Ollama arm's selection: a model tag and the Homebase that serves it.
public struct ExternalSelection: Sendable, Hashable {
    public var tag: String
    public var host: ExternalHost

    public init(tag: String, host: ExternalHost = .own) {
        self.tag = tag
        self.host = host
    }
}

/// The device model rung: a small model on the device's own local Ollama (the Community stand-in).
public struct DeviceModel: Sendable, Hashable, Codable {
    /// Base URL of the device's own runtime, e.g. `http://127.0.0.1:11434`.
    public var url: String
    public var tag: String

    public init(url: String, tag: String) {
        self.url = url
        self.tag = tag
    }
}

extension DeviceModel {
    /// The `url` of a device model served by the Hub-cache runtime (`handset config device-model ID`): a
    /// downloaded MLX repo, answered by `HubModelProvider`, not an Ollama tag. Not an http URL, so no configured
    /// Ollama runtime can be mistaken for it.
    public static let hubRuntime = "hub:"

    /// A device model for a Hub repo id.
    public static func hub(_ id: String) -> DeviceModel { DeviceModel(url: Self.hubRuntime, tag: id) }

    public var isHub: Bool { self.url == Self.hubRuntime }
}

/// An outbound `settings.model_choice` message for the caller to seal and fan out to siblings.
public struct ModelChoiceMessage: Sendable, Hashable {
    public static let type = "settings.model_choice"
    public var choice: ModelChoice
}

/// The agent preferences the router reads, over a `SettingsBackend`.
///
/// Every getter reads the backend afresh (the router re-reads on every call). No setter here touches
/// the radio except `setModelSource`: configuration never flips the radio (design.md §B, consent boundary).
public struct AgentSettings: Sendable {
    /// Backend keys, stable because they are stored on disk.
    public enum Key {
        public static let modelSource = "agent.model_source"
        public static let externalRuntime = "agent.external_runtime"
        public static let externalModel = "agent.external_model"
        public static let externalHost = "agent.external_host"
        public static let localModelPreference = "agent.local_model"
        public static let deviceModel = "agent.device_model"
        public static let deviceEngine = "agent.device_engine"
        public static let openAIModel = "agent.openai_model"
        public static let claudeModel = "agent.claude_model"
        public static let modelChoice = "settings.model_choice"
    }

    /// Model used on the OpenAI route when none is configured.
    public static let defaultOpenAIModel = "gpt-4o-mini"
    /// Model used on the Claude route when none is configured.
    public static let defaultClaudeModel = "claude-sonnet-4-5"

    public let backend: any SettingsBackend

    public init(backend: any SettingsBackend) {
        self.backend = backend
    }

    // MARK: The radio

    /// The radio, or `nil` when never set (an install that predates the radio).
    ///
    /// An unrecognised stored value reads as `.apple`, not `nil`: the never-set derivation can reach a
    /// cloud key, and a damaged value must never route somewhere the user did not choose.
    public var modelSource: ModelSource? {
        guard let raw = self.backend.string(forKey: Key.modelSource) else { return nil }
        return ModelSource(rawValue: raw) ?? .apple
    }

    /// The only writer of the radio: an explicit user choice.
    public func setModelSource(_ source: ModelSource) throws {
        try self.backend.set(source.rawValue, forKey: Key.modelSource)
    }

    // MARK: The External pane

    /// The runtime dropdown; unset or unrecognised reads as the default, `.ollama`.
    public var externalRuntime: ExternalRuntime {
        self.backend.string(forKey: Key.externalRuntime).flatMap(ExternalRuntime.init(rawValue:)) ?? .ollama
    }

    public func setExternalRuntime(_ runtime: ExternalRuntime) throws {
        try self.backend.set(runtime.rawValue, forKey: Key.externalRuntime)
    }

    /// The Ollama arm's selection, or `nil` when no (non-blank) tag is selected.
    public var externalSelection: ExternalSelection? {
        guard let tag = self.backend.string(forKey: Key.externalModel)?.trimmed, !tag.isEmpty else { return nil }
        return ExternalSelection(tag: tag, host: ExternalHost(stored: self.backend.string(forKey: Key.externalHost)))
    }

    /// Selects a model (a checkmark, not the radio). `nil` clears the selection.
    public func setExternalSelection(_ selection: ExternalSelection?) throws {
        guard let selection else {
            try self.backend.removeValue(forKey: Key.externalModel)
            try self.backend.removeValue(forKey: Key.externalHost)
            return
        }
        try self.backend.set(selection.tag.trimmed, forKey: Key.externalModel)
        try self.backend.set(selection.host.description, forKey: Key.externalHost)
    }

    /// Model for the OpenAI route.
    public var openAIModel: String {
        self.backend.string(forKey: Key.openAIModel)?.nonBlank ?? Self.defaultOpenAIModel
    }

    public func setOpenAIModel(_ model: String?) throws {
        try self.setOrRemove(model?.nonBlank, forKey: Key.openAIModel)
    }

    /// Model for the Claude route.
    public var claudeModel: String {
        self.backend.string(forKey: Key.claudeModel)?.nonBlank ?? Self.defaultClaudeModel
    }

    public func setClaudeModel(_ model: String?) throws {
        try self.setOrRemove(model?.nonBlank, forKey: Key.claudeModel)
    }

    // MARK: On-device

    /// The pre-radio "use this local model" preference, read only by the never-set derivation.
    public var localModelPreference: String? {
        self.backend.string(forKey: Key.localModelPreference)?.nonBlank
    }

    public func setLocalModelPreference(_ tag: String?) throws {
        try self.setOrRemove(tag?.nonBlank, forKey: Key.localModelPreference)
    }

    /// The configured device model rung (`handset config device-model URL TAG`), if any.
    public var deviceModel: DeviceModel? {
        guard let model = self.backend.decodedJSON(DeviceModel.self, forKey: Key.deviceModel),
            model.url.nonBlank != nil, model.tag.nonBlank != nil
        else { return nil }
        return model
    }

    public func setDeviceModel(_ model: DeviceModel?) throws {
        guard let model else {
            try self.backend.removeValue(forKey: Key.deviceModel)
            return
        }
        try self.backend.setJSON(DeviceModel(url: model.url.trimmed, tag: model.tag.trimmed), forKey: Key.deviceModel)
    }

    /// The device's own model engine (`config device-engine URL`), if any: the on-device answers come from it.
    public var deviceEngine: DeviceEngine? {
        guard let engine = self.backend.decodedJSON(DeviceEngine.self, forKey: Key.deviceEngine),
              engine.url.nonBlank != nil, engine.model.nonBlank != nil
        else { return nil }
        return engine
    }

    /// `nil` (`config device-engine off`) forgets it: the canned floor answers on-device again.
    public func setDeviceEngine(_ engine: DeviceEngine?) throws {
        guard let engine else {
            try self.backend.removeValue(forKey: Key.deviceEngine)
            return
        }
        try self.backend.setJSON(engine, forKey: Key.deviceEngine)
    }

    /// The device model rung the on-device provider uses: the device runtime's URL with the synced
    /// community choice's model, when one was made, else the configured tag. `nil` means the floor only.
    public var effectiveDeviceModel: DeviceModel? {
        guard var model = self.deviceModel else { return nil }
        if let choice = self.modelChoice, let id = choice.modelID.nonBlank {
            model.tag = id
        }
        return model
    }

    // MARK: The synced model choice

    /// The community model choice, local or applied from a sibling.
    public var modelChoice: ModelChoice? {
        self.backend.decodedJSON(ModelChoice.self, forKey: Key.modelChoice)
    }

    /// Records a choice made on this device and returns the message to fan out to siblings.
    public func choose(local choice: ModelChoice) throws -> ModelChoiceMessage {
        try self.backend.setJSON(choice, forKey: Key.modelChoice)
        return ModelChoiceMessage(choice: choice)
    }

    /// Forgets the choice: the on-device brain is the floor again (a removed custom repo that was active).
    public func clearModelChoice() throws {
        try self.backend.removeValue(forKey: Key.modelChoice)
    }

    /// Applies a sibling's choice. Returns nothing to send: applying never re-sends, so two devices
    /// cannot echo a choice back and forth (protocol-v1, `settings.model_choice`).
    public func apply(remote choice: ModelChoice) throws {
        try self.backend.setJSON(choice, forKey: Key.modelChoice)
    }

    private func setOrRemove(_ value: String?, forKey key: String) throws {
        if let value {
            try self.backend.set(value, forKey: key)
        } else {
            try self.backend.removeValue(forKey: key)
        }
    }
}

extension String {
    var trimmed: String { self.trimmingCharacters(in: .whitespacesAndNewlines) }
    /// The trimmed string, or `nil` when that is empty.
    var nonBlank: String? {
        let t = self.trimmed
        return t.isEmpty ? nil : t
    }
}
