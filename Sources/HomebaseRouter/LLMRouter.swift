import HomebaseCore
import HomebaseCuration

/// The single place that decides which brain answers (design.md §R).
///
/// Decisions are made per call: `resolve()` and `provider(model:)` re-read every setting, store and the
/// clock each time, and nothing is cached, so a key added or a radio flipped applies to the next call.
/// There is no error path: every missing prerequisite, and every race between `resolve()` and
/// `provider(model:)`, lands on the on-device provider; every provider returned is wrapped so that an
/// in-call failure re-runs the request on-device (`FallbackProvider`).
///
/// Thread safety: immutable after `init`; the stores synchronise themselves.
public final class LLMRouter: Sendable {
    public let settings: AgentSettings
    public let keys: CloudKeyStore
    public let runtime: ExternalRuntimeStore
    public let adverts: ExternalModelsAdvertStore
    public let joined: any JoinedHomebaseStore
    public let factory: any ProviderFactory
    /// Whether this device is the account's Homebase: it never routes to a sibling advert (it is the
    /// host; design.md §R4).
    public let isHomebase: Bool
    /// Unix milliseconds; read wherever freshness is judged.
    public let clock: WallClock
    /// Why a configured device model cannot answer now (a Hub model not downloaded), or `nil` when it can: the
    /// route and banner then say the floor answers, and why, rather than name a model that is not there.
    public let deviceModelFloor: @Sendable (DeviceModel) -> OnDeviceResolution.FloorReason?

    /// The device runtime assumed for a legacy local-model preference when no device model is configured.
    public static let defaultDeviceRuntimeURL = "http://127.0.0.1:11434"

    public init(settings: AgentSettings, keys: CloudKeyStore, runtime: ExternalRuntimeStore,
                adverts: ExternalModelsAdvertStore, joined: any JoinedHomebaseStore, factory: any ProviderFactory,
                isHomebase: Bool, clock: WallClock,
                deviceModelFloor: @escaping @Sendable (DeviceModel) -> OnDeviceResolution.FloorReason? = { _ in nil }) {
        self.settings = settings
        self.keys = keys
        self.runtime = runtime
        self.adverts = adverts
        self.joined = joined
        self.factory = factory
        self.isHomebase = isHomebase
        self.clock = clock
        self.deviceModelFloor = deviceModelFloor
    }

    // MARK: Deciding

    /// The route the next call takes (design.md §R2's tree).
    public func resolve() -> Route {
        self.resolution().route
    }

    /// The route with everything that explains it.
    ///
    /// ```
    /// radio apple              → onDevice (floor)
    /// radio community          → onDevice (device model; needs configuration without one)
    /// radio external, openai   → key? openai    : onDevice {openai, no_key}
    /// radio external, claude   → key? anthropic : onDevice {anthropic, no_key}
    /// radio external, ollama   → arm available? external : onDevice {shape, reason}
    /// radio "openai" (legacy)  → key? openai    : onDevice {openai, no_key}
    /// never set                → Ollama arm, then local-model preference, then OpenAI key, then onDevice
    /// ```
    public func resolution() -> RouteResolution {
        switch self.settings.modelSource {
        case .apple:
            return self.onDevice(nil)
        case .community:
            let deviceModel = self.settings.effectiveDeviceModel
            return self.onDevice(deviceModel, needsConfiguration: deviceModel == nil)
        case .external:
            switch self.settings.externalRuntime {
            case .openai: return self.cloud(.openai)
            case .claude: return self.cloud(.anthropic)
            case .ollama:
                switch self.ollamaArm(nowMs: self.clock.nowMs) {
                case .available(let shape):
                    return RouteResolution(route: .external, shape: shape, model: shape.tag)
                case .unavailable(let from, let reason):
                    // Stale is an availability fact, flagged in orange; everything else is unfinished setup.
                    let stale = reason == .staleAdvert
                    return self.onDevice(self.settings.effectiveDeviceModel,
                                         fallback: Fallback(from: from, reason: reason),
                                         needsConfiguration: !stale, stale: stale)
                }
            }
        case .legacyOpenAI:
            return self.cloud(.openai)
        case nil:
            return self.legacyDerivation()
        }
    }

    /// The settings leave the selected source unable to route: drives the "finish configuring" banner.
    public var needsConfiguration: Bool {
        self.resolution().needsConfiguration
    }

    // MARK: Providing

    /// The provider for the next call (design.md §R4's walk). Never fails; never returns a provider
    /// whose failures escape.
    ///
    /// - Parameter model: overrides the model name of an external or cloud route (`chat --model`);
    ///   it never changes the route, and the on-device route ignores it.
    public func provider(model: String? = nil) -> any LLMProvider {
        let resolution = self.resolution()
        let model = model?.nonBlank
        let onDevice = self.factory.makeOnDevice(deviceModel: self.settings.effectiveDeviceModel)
        switch resolution.route {
        case .onDevice:
            let base = FallbackProvider(
                primary: self.factory.makeOnDevice(deviceModel: resolution.onDeviceModel), fallback: FloorProvider())
            guard let fallback = resolution.fallback else { return base }
            return RoutedFallbackProvider(base: base, annotation: fallback)
        case .openai, .anthropic:
            let cloud: CloudProvider = resolution.route == .openai ? .openai : .anthropic
            let kind: ProviderKind = cloud == .openai ? .openai : .anthropic
            // Re-check: the key may have been removed since resolve() read it.
            guard self.keys.hasKey(cloud) else {
                return RoutedFallbackProvider(base: onDevice, annotation: Fallback(from: kind, reason: .noKey))
            }
            let apiKey = self.keys.apiKeyProvider(cloud)
            let primary = cloud == .openai
                ? self.factory.makeOpenAI(model: model ?? self.settings.openAIModel, apiKey: apiKey)
                : self.factory.makeAnthropic(model: model ?? self.settings.claudeModel, apiKey: apiKey)
            return FallbackProvider(primary: primary, fallback: onDevice)
        case .external:
            // Walk the shapes again on fresh reads: the advert may have expired, the endpoint been
            // forgotten or the grant revoked since resolve() looked. Every such race lands on-device.
            switch self.ollamaArm(nowMs: self.clock.nowMs) {
            case .unavailable(let from, let reason):
                return RoutedFallbackProvider(base: onDevice, annotation: Fallback(from: from, reason: reason))
            case .available(.crossAccount(let record, let tag)):
                let primary = self.factory.makeCrossAccount(host: record.host, model: model ?? tag)
                return FallbackProvider(primary: primary, fallback: onDevice)
            case .available(.localEndpoint(let endpoint, let tag)):
                let primary = self.factory.makeOllama(endpoint: endpoint, model: model ?? tag)
                return FallbackProvider(primary: primary, fallback: onDevice)
            case .available(.sibling(let advert, let tag)):
                let primary = self.factory.makeSibling(host: advert.host, model: model ?? tag)
                return FallbackProvider(primary: primary, fallback: onDevice)
            }
        }
    }

    // MARK: The banner

    /// The live banner naming the resolved route, with the stale flag when the selected Homebase is stale.
    public func banner() -> RouteBanner {
        let resolution = self.resolution()
        let text: String
        switch resolution.route {
        case .onDevice:
            if let reason = resolution.floorReason, let tag = resolution.onDeviceModel?.tag {
                text = "On-device · \(FloorProvider.modelName) (\(tag) not ready: \(reason.rawValue))"
            } else {
                text = "On-device · \(resolution.onDeviceModel?.tag ?? FloorProvider.modelName)"
            }
        case .openai:
            text = "OpenAI · \(resolution.model)"
        case .anthropic:
            text = "Claude · \(resolution.model)"
        case .external:
            switch resolution.shape {
            case .localEndpoint(_, let tag)?:
                text = "External · \(tag) on this computer"
            case .sibling(_, let tag)?:
                text = "External · \(tag) via Homebase"
            case .crossAccount(let record, let tag)?:
                text = "External · \(tag) via \(record.name?.nonBlank ?? record.host.short)"
            case nil:
                text = "External · \(resolution.model)"
            }
        }
        return RouteBanner(text: text, staleNotice: self.selectedHomebaseIsStale() ? RouteBanner.staleText : nil)
    }

    /// Whether the Ollama selection's Homebase is known but stale, whatever the radio says (the External
    /// pane shows the flag even before the radio points there).
    public func selectedHomebaseIsStale() -> Bool {
        guard self.settings.externalSelection != nil else { return false }
        if case .unavailable(_, .staleAdvert) = self.ollamaArm(nowMs: self.clock.nowMs) { return true }
        return false
    }

    // MARK: The arms

    enum ArmCheck: Sendable, Hashable {
        case available(ExternalShape)
        /// `from` is the kind that would have served the selection.
        case unavailable(from: ProviderKind, reason: FallbackReason)
    }

    /// The Ollama arm: a selected tag, then the shapes in `provider(model:)`'s order.
    func ollamaArm(nowMs: UInt64) -> ArmCheck {
        guard let selection = self.settings.externalSelection else {
            let from: ProviderKind = self.isHomebase || self.runtime.hasVerifiedEndpoint ? .ollama : .sibling
            return .unavailable(from: from, reason: .noModelSelected)
        }
        switch selection.host {
        case .joined(let host):
            // A friend's Homebase is checked first and decides alone: stale means on-device, never a
            // silent switch to this device's own runtime.
            guard let record = self.joined.record(for: host) else {
                return .unavailable(from: .crossAccount, reason: .notJoined)
            }
            switch record.state {
            case .pending: return .unavailable(from: .crossAccount, reason: .notJoined)
            case .revoked: return .unavailable(from: .crossAccount, reason: .revoked)
            case .joined: break
            }
            guard !record.models.isEmpty else { return .unavailable(from: .crossAccount, reason: .noModels) }
            guard record.isFresh(nowMs: nowMs) else { return .unavailable(from: .crossAccount, reason: .staleAdvert) }
            return .available(.crossAccount(record, tag: selection.tag))
        case .own:
            if let endpoint = self.runtime.configured {
                return .available(.localEndpoint(endpoint, tag: selection.tag))
            }
            guard !self.isHomebase else { return .unavailable(from: .ollama, reason: .noEndpoint) }
            guard let advert = self.adverts.advert else { return .unavailable(from: .sibling, reason: .noEndpoint) }
            guard !advert.models.isEmpty else { return .unavailable(from: .sibling, reason: .noModels) }
            guard ExternalModelsAdvertStore.isFresh(advert, nowMs: nowMs) else {
                return .unavailable(from: .sibling, reason: .staleAdvert)
            }
            return .available(.sibling(advert, tag: selection.tag))
        }
    }

    private func cloud(_ provider: CloudProvider) -> RouteResolution {
        let kind: ProviderKind = provider == .openai ? .openai : .anthropic
        guard self.keys.hasKey(provider) else {
            return self.onDevice(self.settings.effectiveDeviceModel, fallback: Fallback(from: kind, reason: .noKey),
                                 needsConfiguration: true)
        }
        return provider == .openai
            ? RouteResolution(route: .openai, model: self.settings.openAIModel)
            : RouteResolution(route: .anthropic, model: self.settings.claudeModel)
    }

    /// The never-set radio (design.md §R2): a working Ollama arm, then an explicit local-model preference,
    /// then a stored OpenAI key, then on-device. No fallback is reported: no source was chosen.
    private func legacyDerivation() -> RouteResolution {
        if case .available(let shape) = self.ollamaArm(nowMs: self.clock.nowMs) {
            return RouteResolution(route: .external, shape: shape, model: shape.tag)
        }
        if let preference = self.settings.localModelPreference {
            let url = self.settings.deviceModel?.url ?? Self.defaultDeviceRuntimeURL
            return self.onDevice(DeviceModel(url: url, tag: preference))
        }
        if self.keys.hasBYOKey() {
            return RouteResolution(route: .openai, model: self.settings.openAIModel)
        }
        return self.onDevice(self.settings.effectiveDeviceModel)
    }

    private func onDevice(_ deviceModel: DeviceModel?, fallback: Fallback? = nil, needsConfiguration: Bool = false,
                          stale: Bool = false) -> RouteResolution {
        let floorReason = deviceModel.flatMap(self.deviceModelFloor)
        let model = floorReason == nil ? deviceModel?.tag : nil
        return RouteResolution(route: .onDevice, model: model ?? FloorProvider.modelName, onDeviceModel: deviceModel,
                               floorReason: floorReason, fallback: fallback, needsConfiguration: needsConfiguration,
                               stale: stale)
    }
}
