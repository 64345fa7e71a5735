import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseRouter
import HomebaseTransport
import Synchronization

/// Runs `handset serve` / `guest serve` until SIGINT or SIGTERM: connects the relay link (kept up, like the
/// daemon's), selects the route as `chat` does, serves, and keeps the Homebase's advert fresh meanwhile.
public enum ServeRunner {
    /// How often a serving device asks its Homebase (or host) for a fresh advert, so the route does not go stale.
    static let advertRefresh = Duration.seconds(60)

    /// `handset serve`: the account's Homebase, as `handset chat` routes.
    public static func handset(_ s: DeviceSession, _ invocation: ServeInvocation) async throws {
        // The port first: a busy one fails here, before a relay login that would take the link of the serve
        // already running with this device's key (one link per key, the newer wins).
        let (server, port) = try Self.bind(s, tool: "handset", invocation)
        let wantsRelay = s.account.isPaired || !s.joined.all().isEmpty
        if wantsRelay {
            if await s.connect() {
                if let homebase = s.account.homebase {
                    await s.refreshAdvert(from: homebase, channel: .sibling, timeout: .milliseconds(1500))
                }
            } else {
                // Serving anyway: answers come from the device until the link (which keeps retrying) is up.
                CLI.warn("\(s.connectFailure); answering on-device until the relay is reachable")
            }
        }
        await Self.serve(server, port: port, invocation) {
            guard let homebase = s.account.homebase else { return }
            await s.refreshAdvert(from: homebase, channel: .sibling, timeout: .milliseconds(1500))
        }
    }

    /// `guest serve`: the joined host (`--host`, else the first joined), as `guest chat` routes.
    public static func guest(_ s: DeviceSession, _ invocation: ServeInvocation) async throws {
        let (server, port) = try Self.bind(s, tool: "guest", invocation)
        let records = s.joined.all()
        let host = invocation.guestHost ?? records.first { $0.state == .joined }?.host ?? records.first?.host
        if let host {
            if await s.connect() {
                await s.refreshAdvert(from: host, channel: .contact, timeout: .milliseconds(1500))
            } else {
                CLI.warn("\(s.connectFailure); answering on-device until the relay is reachable")
            }
        }
        try s.settings.setModelSource(.external)
        try s.settings.setExternalRuntime(.ollama)
        if let host, let model = s.guest.model(on: host, requested: nil) {
            try s.settings.setExternalSelection(ExternalSelection(tag: model, host: .joined(host)))
        } else {
            try s.settings.setExternalSelection(nil)
        }
        await Self.serve(server, port: port, invocation) {
            guard let host else { return }
            await s.refreshAdvert(from: host, channel: .contact, timeout: .milliseconds(1500))
        }
    }

    /// Listens on the invocation's address. - Throws: the one-line error for a port in use or a bad address.
    static func bind(_ s: DeviceSession, tool: String, _ invocation: ServeInvocation) throws -> (LocalAPIServer, UInt16) {
        let server = LocalAPIServer(backend: s, options: LocalAPIServer.Options(tool: tool, invocation: invocation))
        return (server, try server.start())
    }

    static func serve(_ server: LocalAPIServer, port: UInt16, _ invocation: ServeInvocation,
                      refresh: @escaping @Sendable () async -> Void) async {
        print("serving on http://\(invocation.host):\(port) (OpenAI: /v1, Ollama: /api)")
        fflush(nil)
        let refresher = Task {
            while !Task.isCancelled {
                do { try await Task.sleep(for: Self.advertRefresh) } catch { return }
                await refresh()
            }
        }
        await Self.waitForStopSignal()
        refresher.cancel()
        server.stop()
    }

    /// Returns at the first SIGINT or SIGTERM.
    static func waitForStopSignal() async {
        let once = Mutex(false)
        let box = Mutex<SignalWatcher?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let watcher = SignalWatcher(signals: [SIGINT, SIGTERM]) { _ in
                let first = once.withLock { fired in defer { fired = true }; return !fired }
                if first { continuation.resume() }
            }
            box.withLock { $0 = watcher }
        }
        _ = box.withLock { $0 }
    }
}
