import Testing
@testable import HomebaseCore

/// Issue 39: what a failed relay connection met, as one line that says what to check.
@Suite struct RelayConnectProblemTests {
    func line(_ cause: RelayConnectProblem.Cause, _ url: String = "ws://h.example:8080/v1/relay",
              token: Bool = false) -> String {
        RelayConnectProblem(cause: cause, url: url, tokenSent: token).description
    }

    @Test func eachCauseNamesWhatToCheck() {
        #expect(self.line(.httpStatus(404, "Not Found"), "ws://h.example:8080") ==
                "h.example:8080 answered HTTP 404 Not Found at /: the relay's WebSocket path is /v1/relay "
                + "(use ws://h.example:8080/v1/relay)")
        #expect(self.line(.httpStatus(401, "Unauthorized")) == "the relay refused: token required (HTTP 401); set "
                + "HOMEBASE_RELAY_TOKEN or add ?token=TOKEN to the relay URL")
        #expect(self.line(.httpStatus(401, "Unauthorized"), token: true).hasPrefix(
            "the relay refused: token not accepted (HTTP 401)"))
        #expect(self.line(.httpStatus(502, "Bad Gateway")) ==
                "h.example:8080 answered HTTP 502 Bad Gateway instead of a WebSocket upgrade; is "
                + "ws://h.example:8080/v1/relay a Homebase relay?")
        #expect(self.line(.unreachable("Connection refused")).hasPrefix(
            "cannot reach the relay at h.example:8080 (Connection refused)"))
        #expect(self.line(.timedOut).hasPrefix("no answer from the relay at h.example:8080 in time"))
        #expect(self.line(.tls("wrong version number"), "wss://h.example:8080/v1/relay").contains(
            "if the relay serves plain WebSocket use ws://"))
        #expect(self.line(.closedBeforeAnswer).contains("if it serves TLS use wss://"))
        #expect(self.line(.loginRefused(code: 4003, reason: "not admitted")).hasPrefix(
            "the relay refused the login (4003: not admitted)"))
    }

    @Test func aTokenInTheURLNeverReachesTheLine() {
        let text = self.line(.httpStatus(500, "Internal Server Error"), "ws://h.example:8080/v1/relay?token=s3cret",
                             token: true)
        #expect(!text.contains("s3cret"), "\(text)")
        #expect(!self.line(.other("boom"), "ws://h.example/v1/relay?token=s3cret").contains("s3cret"))
    }

    @Test func reportsOncePerCauseThenOnChangeAndTheRecovery() {
        var report = RelayProblemReport()
        let a = RelayConnectProblem(cause: .httpStatus(404, "Not Found"), url: "ws://h:1", tokenSent: false)
        let b = RelayConnectProblem(cause: .unreachable("Connection refused"), url: "ws://h:1", tokenSent: false)
        let steps = [report.failed(a), report.failed(a), report.failed(a), report.failed(b), report.failed(b)]
        #expect(steps == [a, nil, nil, b, nil])
        #expect(report.current == b)
        let recovered = report.connected()
        let again = report.connected()
        #expect(recovered && !again)
        let afterRecovery = report.failed(b)
        #expect(afterRecovery == b, "after a recovery the same cause is news again")
    }
}
