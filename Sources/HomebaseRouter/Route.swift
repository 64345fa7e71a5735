import HomebaseCore
import HomebaseCuration

/// The four routes `resolve()` reduces all settings to (design.md §R1); raw values are `route --json`'s.
public enum Route: String, Sendable, Hashable, CaseIterable {
    /// The floor, or the device model over it.
    case onDevice
    /// A model on an Ollama runtime: this device's own, this account's Homebase, or a friend's.
    case external
    /// The user's own OpenAI key.
    case openai
    /// The user's own Anthropic (Claude) key.
    case anthropic
}

/// The network shape the Ollama arm takes (design.md §R4), in the order `provider(model:)` walks them.
public enum ExternalShape: Sendable, Hashable {
    /// A friend's Homebase this device has joined, fresh: cross-account over the contact channel.
    case crossAccount(JoinedHomebase, tag: String)
    /// This device's own verified runtime: Ollama over loopback HTTP.
    case localEndpoint(VerifiedEndpoint, tag: String)
    /// This account's Homebase, from a fresh sibling advert: relay inference over the sibling channel.
    case sibling(VerifiedAdvert, tag: String)

    /// The model tag the shape serves.
    public var tag: String {
        switch self {
        case .crossAccount(_, let tag), .localEndpoint(_, let tag), .sibling(_, let tag): return tag
        }
    }

    /// The provider kind that serves the shape.
    public var providerKind: ProviderKind {
        switch self {
        case .crossAccount: return .crossAccount
        case .localEndpoint: return .ollama
        case .sibling: return .sibling
        }
    }
}

/// Everything `resolve()` decided, for the banner, `route --json` and `chat --json`.
public struct RouteResolution: Sendable, Hashable {
    public var route: Route
    /// The Ollama arm's shape, when `route` is `.external`.
    public var shape: ExternalShape?
    /// The model the route answers with: the tag, the cloud model, the device model or `floor`.
    public var model: String
    /// When `route` is `.onDevice`: the device model rung, or `nil` for the floor alone.
    public var onDeviceModel: DeviceModel?
    /// When `route` is `.onDevice`: why the floor answers although a device model is configured (a Hub model
    /// not downloaded yet, say); `nil` when the device model answers, or none is configured. Each call still
    /// tries the device model first, so a download that completes applies to the next call.
    public var floorReason: OnDeviceResolution.FloorReason?
    /// Set when the radio chose an arm that could not carry the call, so on-device answers instead.
    public var fallback: Fallback?
    /// The selected source is not configured enough to route (drives only a banner, never an error).
    public var needsConfiguration: Bool
    /// The selected Homebase has not been heard from recently (the orange flag).
    public var stale: Bool

    public init(route: Route, shape: ExternalShape? = nil, model: String, onDeviceModel: DeviceModel? = nil,
                floorReason: OnDeviceResolution.FloorReason? = nil, fallback: Fallback? = nil,
                needsConfiguration: Bool = false, stale: Bool = false) {
        self.route = route
        self.shape = shape
        self.model = model
        self.onDeviceModel = onDeviceModel
        self.floorReason = floorReason
        self.fallback = fallback
        self.needsConfiguration = needsConfiguration
        self.stale = stale
    }
}

/// The live banner in front of the Model settings (design.md §B, "the system never lies about where it is
/// thinking").
public struct RouteBanner: Sendable, Hashable, CustomStringConvertible {
    /// The stale-Homebase flag, word for word from design.md §B.
    public static let staleText = "Not heard from recently — inference falls back on-device until it's back."

    /// "External · qwen2.5:7b via Homebase", "On-device · floor", "On-device · floor (ORG/NAME not ready:
    /// not_downloaded)", …
    public var text: String
    /// `staleText` when the selected Homebase is stale, else `nil`.
    public var staleNotice: String?

    public init(text: String, staleNotice: String? = nil) {
        self.text = text
        self.staleNotice = staleNotice
    }

    public var description: String {
        self.staleNotice.map { "\(self.text)\n\($0)" } ?? self.text
    }
}
