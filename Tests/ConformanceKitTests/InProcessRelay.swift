import Foundation
import HomebaseCore
import HomebaseStore
@testable import RelayService

/// A relay on 127.0.0.1 port 0 in a temporary data directory, on its own thread (as RelayServiceTests' TestRelay).
final class InProcessRelay: @unchecked Sendable {
    let server: RelayServer
    let dataDirectory: String
    private let thread: Thread
    private let finished = DispatchSemaphore(value: 0)

    init(limits: RelayLimits, admission: Admission = Admission(),
         wrapMailbox: (any Mailbox) -> any Mailbox = { $0 }) throws
    {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)").path
        self.dataDirectory = dir
        var c = RelayConfiguration()
        c.listenHost = "127.0.0.1"
        c.listenPort = 0
        c.dataDirectory = dir
        c.durability = "normal"
        c.limits = limits
        let server = try RelayServer(configuration: c, admission: admission, logger: .discard(),
                                     wrapMailbox: wrapMailbox)
        self.server = server
        let done = self.finished
        self.thread = Thread {
            server.run()
            done.signal()
        }
        self.thread.start()
    }

    var url: String { "ws://127.0.0.1:\(self.server.port)/v1/relay" }
    var httpBase: String { "http://127.0.0.1:\(self.server.port)" }

    func stop() {
        self.server.shutdown()
        self.finished.wait()
        try? FileManager.default.removeItem(atPath: self.dataDirectory)
    }
}
