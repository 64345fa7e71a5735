import HomebaseEngines
/// The on-device brain (design.md §B, "two rungs even after the fallback"): an optional device model — a
/// small model on the device's own local runtime, the Community stand-in — over the floor.
///
/// The device rung's results are relabelled `.onDevice`, with the device model's tag as `model`; if
/// the rung fails, the floor answers the same request. This provider never fails.
public struct OnDeviceProvider: LLMProvider {
    /// The device model rung, if one is configured and could be built.
    public let deviceRung: (any LLMProvider)?
    /// The device model's tag, reported as `model` when the rung answers.
    public let deviceModelTag: String?
    public let floor: FloorProvider

    /// - Parameters:
    ///   - deviceModel: the configured rung, or `nil` for the floor alone.
    ///   - makeDeviceProvider: builds the rung (an Ollama provider over the device's own runtime);
    ///     returning `nil` leaves the floor alone.
    public init(deviceModel: DeviceModel?,
                makeDeviceProvider: (DeviceModel) -> (any LLMProvider)? = { _ in nil },
                floor: FloorProvider = FloorProvider()) {
        self.deviceRung = deviceModel.flatMap(makeDeviceProvider)
        self.deviceModelTag = self.deviceRung == nil ? nil : deviceModel?.tag
        self.floor = floor
    }

    public var kind: ProviderKind { .onDevice }

    /// The model this provider answers with when nothing fails: the device model, or `floor`.
    public var modelName: String { self.deviceModelTag ?? FloorProvider.modelName }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        self.relabel(await FallbackProvider(primary: self.rungOrFloor, fallback: self.floor).answer(request))
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        let inner = FallbackProvider(primary: self.rungOrFloor, fallback: self.floor).stream(request)
        let provider = self
        return AsyncStream { continuation in
            let task = Task {
                for await event in inner {
                    if case .done(let result) = event {
                        continuation.yield(.done(provider.relabel(result)))
                    } else {
                        continuation.yield(event)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private var rungOrFloor: any LLMProvider { self.deviceRung ?? self.floor }

    private func relabel(_ result: ChatResult) -> ChatResult {
        var result = result
        if result.providerKind != .onDevice {
            // The rung answered (its own kind is whatever transport it uses): it is on-device here.
            result.providerKind = .onDevice
            result.model = self.deviceModelTag ?? result.model
        }
        if let fallback = result.fallback, fallback.from != .onDevice {
            result.fallback = Fallback(from: .onDevice, reason: fallback.reason)
        }
        return result
    }
}

extension FallbackProvider {
    /// `complete` that cannot fail, for callers that hold a concrete `FallbackProvider`.
    func answer(_ request: ChatRequest) async -> ChatResult {
        do {
            return try await self.complete(request)
        } catch {
            return self.floor.answer(request)
        }
    }
}
