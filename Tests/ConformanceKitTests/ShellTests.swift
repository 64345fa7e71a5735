import Foundation
import Testing
@testable import ConformanceKit

@Suite(.timeLimit(.minutes(1))) struct ShellTests {
    /// A restart command leaves the restarted relay running in the background; the command itself must count as
    /// finished when the shell exits (Foundation's Process waited for the background child, hanging --restart).
    @Test func backgroundChildDoesNotHoldTheCommandOpen() async throws {
        let start = ContinuousClock.now
        try await HomebaseChecks.shell("sleep 5 > /dev/null 2>&1 < /dev/null & true")
        #expect(ContinuousClock.now - start < .seconds(3))
    }

    @Test func exitStatusIsReported() async {
        await #expect(throws: CheckFailure.self) { try await HomebaseChecks.shell("exit 3") }
        #expect((try? HomebaseChecks.spawnAndWait("exit 7")) == 7)
        #expect((try? HomebaseChecks.spawnAndWait("true")) == 0)
    }
}
