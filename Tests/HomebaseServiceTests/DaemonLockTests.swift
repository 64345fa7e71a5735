import Foundation
import HomebaseTransport
import Testing
@testable import HomebaseService

#if canImport(Glibc)
import Glibc
#endif

/// `DaemonLock`: one daemon per state directory, known exactly, gone with the process.
@Suite struct DaemonLockTests {
    func path() -> String {
        let dir = NSTemporaryDirectory() + "daemonlock-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir + "/" + DaemonLock.fileName
    }

    @Test func aSecondClaimFailsNamingTheHolderUntilTheFirstIsReleased() throws {
        let path = self.path()
        #expect(!DaemonLock.isHeld(path: path))  // no file yet
        var first: DaemonLock? = try DaemonLock.acquire(path: path)
        #expect(DaemonLock.isHeld(path: path))
        #expect(throws: DaemonLock.Failure.held(pid: getpid())) { try DaemonLock.acquire(path: path) }
        // The file is private and is left in place; only the lock goes.
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        withExtendedLifetime(first) {}
        first = nil
        #expect(!DaemonLock.isHeld(path: path))
        let again = try DaemonLock.acquire(path: path)
        #expect(DaemonLock.isHeld(path: path))
        withExtendedLifetime(again) {}
    }

    @Test func aProbeDoesNotTakeTheLockFromANewDaemon() throws {
        let path = self.path()
        do { _ = try DaemonLock.acquire(path: path) }  // released at once
        // Probing a free lock leaves it free for the next daemon.
        #expect(!DaemonLock.isHeld(path: path))
        let daemon = try DaemonLock.acquire(path: path)
        withExtendedLifetime(daemon) {}
    }

    @Test func aProbeAtTheMomentADaemonStartsDoesNotStopIt() throws {
        // `isHeld` takes a shared lock for a moment; a daemon starting just then waits it out.
        let path = self.path()
        do { _ = try DaemonLock.acquire(path: path) }  // the file exists
        let probe = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(probe) }
        #expect(flock(probe, LOCK_SH | LOCK_NB) == 0)
        let released = Thread {
            usleep(60_000)
            flock(probe, LOCK_UN)
        }
        released.start()
        // Patience far past the probe's 60 ms, so a busy machine delaying the release cannot fail the test; the
        // default (250 ms) is the same rule with less room.
        let daemon = try DaemonLock.acquire(path: path, patience: .seconds(10))
        #expect(DaemonLock.isHeld(path: path))
        withExtendedLifetime(daemon) {}
        // With no patience, the same moment refuses.
        #expect(flock(probe, LOCK_SH | LOCK_NB) != 0)  // the daemon holds it now
    }

    @Test func aStartingDaemonDoesNotSpeakWithAKilledOnesReport() async throws {
        // A daemon killed while connected left a report saying so; the next one, until it has connected,
        // must not be reported connected.
        let dir = NSTemporaryDirectory() + "daemonlock-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let state = try HomebaseState(path: dir + "/state.db")
        // Nothing listens on port 9: the relay never connects, the runtime never answers.
        _ = try state.initialize(
            settings: HomebaseSettings(relayURL: "ws://127.0.0.1:9/v1/relay", ollamaURL: "http://127.0.0.1:9",
                                       deviceName: "lock"),
            nowMs: 1)
        try state.setDaemonStatus(DaemonStatus(pid: 1, updatedAtMs: 1, relayURL: "ws://127.0.0.1:9/v1/relay",
                                               relayConnected: true,
                                               runtime: RuntimeStatus(endpoint: "http://127.0.0.1:9", verified: true,
                                                                      available: true, version: "0.1", models: [],
                                                                      checkedAtMs: 1)))
        let runner = HomebaseRunner(state: state, options: HomebaseRunner.Options(), logger: .discard())
        let task = Task { try? await runner.run() }
        let deadline = ContinuousClock.now + .seconds(5)
        while !state.daemonIsRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let live = state.liveDaemonStatus()
        #expect(live?.pid == getpid())
        #expect(live?.relayConnected == false)
        #expect(live?.runtimeAvailable == false)
        runner.stop()
        await task.value
        #expect(!state.daemonIsRunning)
    }

    @Test func theMessageNamesThePid() {
        #expect("\(DaemonLock.Failure.held(pid: 4242))" == "another homebase daemon is running on this state (pid 4242)")
        #expect("\(DaemonLock.Failure.held(pid: nil))" == "another homebase daemon is running on this state")
    }

    @Test func theStateFindsItsLockBesideTheDatabase() throws {
        let dir = NSTemporaryDirectory() + "daemonlock-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let state = try HomebaseState(path: dir + "/state.db")
        #expect(state.daemonLockPath == dir + "/" + DaemonLock.fileName)
        #expect(!state.daemonIsRunning)
        try state.setDaemonStatus(DaemonStatus(pid: 1, updatedAtMs: 1, relayURL: "ws://r", relayConnected: true,
                                               runtime: RuntimeStatus(endpoint: nil, verified: false,
                                                                      available: false, version: nil, models: [],
                                                                      checkedAtMs: 0)))
        // A report left by a daemon that is not running is not live.
        #expect(state.daemonStatus() != nil)
        #expect(state.liveDaemonStatus() == nil)
        let lock = try DaemonLock.acquire(path: state.daemonLockPath!)
        #expect(state.daemonIsRunning)
        #expect(state.liveDaemonStatus()?.relayConnected == true)
        withExtendedLifetime(lock) {}
        #expect(try HomebaseState(database: .init(path: ":memory:")).daemonLockPath == nil)
    }
}
