import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A daemon's claim on its state directory: an exclusive `flock(2)` on `daemon.lock` beside the state database,
/// held while `homebase run` runs (one state per directory, as the command line keeps them). The kernel drops it
/// when the process ends, however it ends (SIGKILL and power loss included), so whether a daemon runs is known
/// exactly, with no heartbeat to write or to go stale.
///
/// Two daemons on one state would both log in to the relay with the same key and replace each other's
/// connection forever (relay.md §3); the second one now stops at start instead.
public final class DaemonLock: Sendable {
    public static let fileName = "daemon.lock"

    /// Why the lock could not be taken.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Another process holds it; its pid as it wrote it, if readable.
        case held(pid: Int32?)
        /// The lock file could not be opened or locked.
        case io(String)

        public var description: String {
            switch self {
            case .held(let pid):
                "another homebase daemon is running on this state\(pid.map { " (pid \($0))" } ?? "")"
            case .io(let message): message
            }
        }
    }

    private let fd: Int32

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        close(self.fd)  // releases the lock
    }

    /// Takes the lock at `path` (creating the file, 0600) and writes this process's pid into it.
    ///
    /// `isHeld` tests by taking a shared lock for a moment, so a refusal is retried for a while (a probe holds
    /// the lock for microseconds, a daemon for its life): a `homebase status` run just as the daemon starts
    /// must not stop it.
    public static func acquire(path: String, patience: Duration = .milliseconds(250)) throws(Failure) -> DaemonLock {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot open \(path): \(String(cString: strerror(errno)))") }
        let deadline = ContinuousClock.now + patience
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            if error == EWOULDBLOCK && ContinuousClock.now < deadline {
                usleep(5_000)
                continue
            }
            close(fd)
            if error == EWOULDBLOCK { throw .held(pid: Self.pid(at: path)) }
            throw .io("cannot lock \(path): \(String(cString: strerror(error)))")
        }
        let text = Array("\(getpid())\n".utf8)
        // The pid is only for the message a second daemon prints: a failed write costs nothing else.
        if ftruncate(fd, 0) == 0 {
            _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        }
        return DaemonLock(fd: fd)
    }

    /// Whether a process holds the lock at `path` (false when there is no such file). Any process, the holder
    /// included (a separate open file description conflicts with its lock).
    public static func isHeld(path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        return false  // taken and, with the close, released at once
    }

    /// The pid the holder wrote, if the file has one.
    static func pid(at path: String) -> Int32? {
        guard let data = FileManager.default.contents(atPath: path),
              let text = String(data: data.prefix(32), encoding: .utf8) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
