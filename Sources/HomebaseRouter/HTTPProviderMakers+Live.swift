import HomebaseCore
import HomebaseEngines
import HomebaseTransport

extension HTTPProviderMakers {
    /// The real HTTP providers over one shared client: `OllamaProvider` for a verified endpoint,
    /// `OpenAIProvider` / `AnthropicProvider` with the key closures the router passes (read per request), and
    /// the on-device provider whose device-model rung is an `OllamaProvider` to the device's own runtime
    /// (`handset device-model URL TAG`) over the floor.
    ///
    /// - Parameters:
    ///   - openAIBaseURL, anthropicBaseURL: API roots (tests and proxies override them).
    ///   - idleTimeout: silence allowed on a stream; the default tolerates a cold Ollama load.
    public static func live(http: HTTPClient, openAIBaseURL: String = OpenAIProvider.defaultBaseURL,
                            anthropicBaseURL: String = AnthropicChatEngine.defaultBaseURL,
                            idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout,
                            floor: FloorProvider = FloorProvider()) -> HTTPProviderMakers {
        HTTPProviderMakers(
            ollama: { endpoint, model in
                OllamaProvider(http: http, url: endpoint.url, model: model, idleTimeout: idleTimeout)
            },
            openAI: { model, apiKey in
                OpenAIProvider(http: http, model: model, apiKey: apiKey, baseURL: openAIBaseURL,
                               idleTimeout: idleTimeout)
            },
            anthropic: { model, apiKey in
                AnthropicProvider(http: http, model: model, apiKey: apiKey, baseURL: anthropicBaseURL,
                                  idleTimeout: idleTimeout)
            },
            onDevice: { deviceModel in
                OnDeviceProvider(deviceModel: deviceModel, makeDeviceProvider: { model in
                    OllamaProvider(http: http, url: model.url, model: model.tag, idleTimeout: idleTimeout)
                }, floor: floor)
            })
    }
}
