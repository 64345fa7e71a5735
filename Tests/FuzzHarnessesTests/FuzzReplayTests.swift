import FoundationEssentials
import FuzzHarnesses
import Testing

/// Replays every fuzz target's seeds and every saved reproducer (`Fixtures/fuzz/regressions/<target>/`) through
/// the same harness code libFuzzer runs (`tools/fuzz`): a parser bug found once stays fixed.
@Suite struct FuzzReplayTests {
    static let regressions: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/FuzzHarnessesTests/FuzzReplayTests.swift
        return parts.joined(separator: "/") + "/Fixtures/fuzz/regressions"
    }()

    static func reproducers(of target: String) -> [(name: String, bytes: [UInt8])] {
        let directory = Self.regressions + "/" + target
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.sorted().filter { !$0.hasPrefix(".") }.compactMap { name in
            FileManager.default.contents(atPath: directory + "/" + name).map { (name, Array($0)) }
        }
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func seedsAndRegressionsPass(target name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let seeds = target.seeds()
        #expect(seeds.count >= 3, "\(name) has only \(seeds.count) seeds")
        for (i, seed) in seeds.enumerated() {
            do throws(InvariantViolation) { try target.run(seed) } catch {
                Issue.record("\(name) seed \(i): \(error)")
            }
        }
        for reproducer in Self.reproducers(of: name) {
            do throws(InvariantViolation) { try target.run(reproducer.bytes) } catch {
                Issue.record("\(name) regression \(reproducer.name): \(error)")
            }
        }
    }

    /// A reproducer filed under a name no target has would never run.
    @Test func everyRegressionDirectoryIsATarget() {
        let directories = (try? FileManager.default.contentsOfDirectory(atPath: Self.regressions)) ?? []
        for directory in directories where !directory.hasPrefix(".") {
            #expect(FuzzTargets.named(directory) != nil, "Fixtures/fuzz/regressions/\(directory) is no target")
        }
    }

    @Test func targetNamesAreUnique() {
        let names = FuzzTargets.all.map(\.name)
        #expect(Set(names).count == names.count)
    }
}
