import HomebaseNode
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

@Suite struct ModelsCommandLineTests {
    @Test func theModelsCommandsParse() throws {
        #expect(try HandsetCommand.parse(["models", "catalog", "--json", "--refresh", "--all"]).command
                == .models(.catalog(json: true, refresh: true, all: true)))
        #expect(try HandsetCommand.parse(["models", "download", "mlx-community/gemma-3-4b-it-4bit"]).command
                == .models(.download(id: "mlx-community/gemma-3-4b-it-4bit", json: false)))
        #expect(try HandsetCommand.parse(["models", "custom", "add", "me/model"]).command == .models(.customAdd(id: "me/model")))
        #expect(try HandsetCommand.parse(["models", "state", "--json"]).command == .models(.state(json: true)))
        #expect(try HandsetCommand.parse(["config", "device-model", "me/model"]).command == .configDeviceHubModel(id: "me/model"))
        #expect(try HandsetCommand.parse(["config", "device-model", "http://127.0.0.1:11434", "qwen2.5:0.5b"]).command
                == .configDeviceModel(url: "http://127.0.0.1:11434", tag: "qwen2.5:0.5b"))
        #expect(try HandsetCommand.parse(["config", "device-capable", "no"]).command == .configDeviceCapable(false))
    }

    @Test(arguments: [["models", "download", "not-a-repo"], ["models", "custom", "add", "a/b/c"],
                      ["config", "device-model", "qwen2.5:0.5b"], ["config", "device-capable", "maybe"],
                      ["models", "catalog", "extra"]])
    func badInputIsAUsageError(argv: [String]) {
        #expect(throws: UsageError.self) { try HandsetCommand.parse(argv) }
    }
}
