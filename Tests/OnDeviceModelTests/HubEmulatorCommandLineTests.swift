import HubEmulatorKit
import Testing

@Suite struct HubEmulatorCommandLineTests {
    let models: [UInt8] = Array(#"[{"id":"mlx-community/a-1B-4bit"},{"id":"mlx-community/b-2B-4bit"}]"#.utf8)

    @Test func flagsAndFaultsParse() throws {
        let command = try HubEmulatorCommandLine.parse(
            ["--listen", "127.0.0.1:0", "--models", "m.json", "--weight-bytes", "1024", "--fault", "listing-500;gated=o/x",
             "--fault", "drop-after=10", "--fault", "corrupt=*", "--fault", "slow=1000"], readFile: { _ in self.models })
        guard case .run(let c) = command else {
            Issue.record("expected run")
            return
        }
        #expect(c.port == 0 && c.weightBytes == 1024 && c.models.count == 2)
        #expect(c.faults.listing == .http500 && c.faults.gated == ["o/x"] && c.faults.dropAfter == 10)
        #expect(c.faults.corrupt == ["*"] && c.faults.slowBytesPerSecond == 1000)
    }

    @Test(arguments: [["--models"], [], ["--models", "m.json", "--fault", "explode"],
                      ["--models", "m.json", "--fault", "slow=0"], ["--models", "m.json", "--listen", "nohost"]])
    func mistakesAreUsageErrors(argv: [String]) {
        #expect(throws: HubEmulatorCommandLine.UsageError.self) {
            try HubEmulatorCommandLine.parse(argv, readFile: { _ in self.models })
        }
    }

    @Test func aModelsFileThatIsNotAListOfIDsIsRefused() {
        for bad in [#"{"id":"x"}"#, #"[{"name":"x"}]"#, "garbage"] {
            #expect(throws: HubEmulatorCommandLine.UsageError.self) {
                try HubEmulatorCommandLine.parse(["--models", "m.json"], readFile: { _ in Array(bad.utf8) })
            }
        }
    }
}
