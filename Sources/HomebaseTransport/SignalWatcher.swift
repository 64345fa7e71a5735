import Dispatch
import Foundation

/// Runs handlers for POSIX signals (SIGTERM, SIGINT, SIGHUP) on a private queue.
///
/// The handler is `@Sendable` and non-isolated, so executables can install it from top-level code without
/// inheriting the main actor (a main-actor closure run on a dispatch queue traps).
public final class SignalWatcher: @unchecked Sendable {
    // Immutable after init; the sources are only kept alive here.
    private let sources: [DispatchSourceSignal]

    public init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "homebase.signals")
        self.sources = signals.map { sig in
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { handler(sig) }
            s.resume()
            return s
        }
    }
}
