import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseTransport
import Synchronization

/// Runs `handset serve` / `guest serve` until SIGINT or SIGTERM: connects the relay link (kept up, like the
/// daemon's), selects the route as `chat` does, serves, and keeps the Homebase's advert fresh meanwhile.
public enum ServeRunner {
    /// How often a serving device asks its Homebase (or host) for a fresh advert, so the route does not go stale.
    static let advertRefresh = Duration.seconds(60)

    /// `handset serve`: the account's Homebase, as `handset chat` routes.
    public static func handset(_ s: DeviceSession, _ invocation: ServeInvocation) async throws {
        let wantsRelay = s.account.isPaired || !s.joined.all().isEmpty
        if wantsRelay {
            if await s.connect() {
                if let homebase = s.account.homebase {
                    await s.refreshAdvert(from: homebase, channel: .syncDelta, timeout: .milliseconds(1500))
                }
            } else {
                // Serving anyway: answers come from the device until the link (which keeps retrying) is up.
                CLI.warn("\(s.connectFailure); answering on-device until the relay is reachable")
            }
        }
        try await Self.serve(s, tool: "handset", invocation) {
            guard let homebase = s.account.homebase else { return }
            await s.refreshAdvert(from: homebase, channel: .syncDelta, timeout: .milliseconds(1500))
        }
    }

    /// `guest serve`: the joined host (`--host`, else the first joined), as `guest chat` routes.
    public static func guest(_ s: DeviceSession, _ invocation: ServeInvocation) async throws {
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
        try await Self.serve(s, tool: "guest", invocation) {
            guard let host else { return }
            await s.refreshAdvert(from: host, channel: .contact, timeout: .milliseconds(1500))
        }
    }

    static func serve(_ s: DeviceSession, tool: String, _ invocation: ServeInvocation,
                      refresh: @escaping @Sendable () async -> Void) async throws {
        let server = LocalAPIServer(backend: s, options: LocalAPIServer.Options(tool: tool, invocation: invocation))
        let port = try server.start()
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
