import APIEmulatorKit
import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseNode
import HomebaseTransport
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

/// The device engine (issue 35): `config device-engine URL|off` on a real `DeviceSession`, an OpenAI-compatible
/// server standing in for the phone's runtime. The floor's answers and the downloaded-model rung come from it;
/// the canned floor stays last and the result says why it answered.
@Suite(.timeLimit(.minutes(1))) struct DeviceEngineTests {
    let dir: DeviceTempDirectory
    let session: DeviceSession
    let engine: OpenAIEmulator
    let engineURL: String

    init() throws {
        self.dir = try DeviceTempDirectory()
        let directory = StateDirectory(explicit: self.dir.path, tool: "handset")
        try DeviceSession.initialize(directory: directory, relayURL: "ws://127.0.0.1:1/", name: "phone")
        let node = try NodeState(path: directory.databasePath)
        let identity = try node.identity()
        var http = DeviceHTTP.unavailable
        http.engineHTTP = HTTPClient()
        let messenger = LoopbackMessengerHub().messenger(for: identity.publicKey) { _ in .stranger }
        self.session = try DeviceSession(node: node, identity: identity, messenger: messenger, relay: nil,
                                         http: http, clock: { wallMs() }, timers: .system)
        // The engine's key is ignored by real local servers; the emulator is told to accept the one we send.
        self.engine = OpenAIEmulator(configuration: APIEmulatorConfiguration(validKeys: [OpenAIChatEngine.ollamaKey],
                                                                             models: ["smollm2-135m"]))
        self.engineURL = "http://127.0.0.1:\(try self.engine.start())"
    }

    static let prompt = "What is the capital of France?"

    func ask() async -> ChatAnswer {
        await self.session.chat(ChatRequest(messages: [.user(Self.prompt)]))
    }

    @Test func theFloorAnswersFromTheEngineAndTheCannedFloorWhenItIsGone() async throws {
        defer { self.engine.stop() }
        // Before: the canned floor.
        var answer = await self.ask()
        #expect(answer.result.model == FloorProvider.modelName && answer.result.fallback == nil)
        let line = try await self.session.configureDeviceEngine(url: self.engineURL + "/v1")
        #expect(line.contains("smollm2-135m"))
        #expect(self.session.settings.deviceEngine == DeviceEngine(url: self.engineURL, model: "smollm2-135m"))
        #expect(DeviceReport.route(self.session)["device_engine"] as? [String: String]
                == ["url": self.engineURL, "model": "smollm2-135m"])
        answer = await self.ask()
        #expect(answer.result.text == EmulatorText.answer(for: Self.prompt))
        #expect(answer.result.providerKind == .onDevice && answer.result.model == "smollm2-135m")
        #expect(answer.resolution.route == .onDevice && answer.result.fallback == nil)
        // The engine is gone: the canned floor answers, and the result says the engine failed.
        self.engine.stop()
        answer = await self.ask()
        #expect(answer.result.text == FloorProvider().answer(ChatRequest(messages: [.user(Self.prompt)])).text)
        #expect(answer.result.model == FloorProvider.modelName)
        #expect(answer.result.fallback == Fallback(from: .onDevice, reason: .error("unreachable")))
    }

    @Test func anEngineThatDoesNotAnswerIsNotStored() async throws {
        self.engine.stop()
        await #expect(throws: CLIError.self) { try await self.session.configureDeviceEngine(url: self.engineURL) }
        #expect(self.session.settings.deviceEngine == nil)
    }

    @Test func offForgetsTheEngine() async throws {
        defer { self.engine.stop() }
        _ = try await self.session.configureDeviceEngine(url: self.engineURL)
        #expect(try await self.session.configureDeviceEngine(url: nil).contains("off"))
        #expect(self.session.settings.deviceEngine == nil)
        #expect(await self.ask().result.model == FloorProvider.modelName)
    }

    @Test func aHubModelNotDownloadedIsAnsweredByTheEngineAsTheFloor() async throws {
        defer { self.engine.stop() }
        _ = try await self.session.configureDeviceEngine(url: self.engineURL)
        try self.session.settings.setModelSource(.community)
        try self.session.settings.setDeviceModel(.hub("HuggingFaceTB/SmolLM2-135M-Instruct"))
        let answer = await self.ask()
        #expect(answer.result.text == EmulatorText.answer(for: Self.prompt))
        #expect(answer.result.model == "smollm2-135m" && answer.result.providerKind == .onDevice)
        // The rung did not answer (nothing downloaded): the result says so.
        #expect(answer.result.fallback?.from == .onDevice)
    }

    @Test func commandLinesParse() throws {
        #expect(try HandsetCommand.parse(["config", "device-engine", "off"]).command == .configDeviceEngine(url: nil))
        #expect(try HandsetCommand.parse(["config", "device-engine", "http://127.0.0.1:8081"]).command
                == .configDeviceEngine(url: "http://127.0.0.1:8081"))
        #expect(try GuestCommand.parse(["config", "device-engine", "http://127.0.0.1:8081"]).command
                == .configDeviceEngine(url: "http://127.0.0.1:8081"))
        #expect(throws: UsageError.self) { try HandsetCommand.parse(["config", "device-engine", "ws://x"]) }
        #expect(throws: UsageError.self) { try HandsetCommand.parse(["config", "device-engine"]) }
    }

    @Test func firstModelIDReadsOnlyAWellFormedList() {
        #expect(DeviceEngine.firstModelID(Array(#"{"data":[{"id":""},{"id":"b"}]}"#.utf8)) == "b")
        for hostile in ["", "[]", #"{"data":{}}"#, #"{"data":[{"id":1}]}"#, String(repeating: "{", count: 5000)] {
            #expect(DeviceEngine.firstModelID(Array(hostile.utf8)) == nil)
        }
        #expect(DeviceEngine.baseURL(" http://h:1/v1/ ") == "http://h:1")
    }
}
