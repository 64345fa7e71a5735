import HomebaseCore
import HomebaseStore
import Testing
@testable import HomebaseRouter

@Suite struct SQLiteJoinedHomebaseStoreTests {
    static let t0: UInt64 = 1_800_000_000_000

    @Test func roundTripsEveryFieldAndPersists() throws {
        let file = try TemporaryStateFile()
        let record = JoinedHomebase(
            host: Fixture.friend, name: "Ana", state: .joined,
            models: [AdvertPayload.Model(tag: "llama3.1:70b", family: "llama", parameterSize: "70B",
                                         quantization: "Q4_0", capabilities: ["completion"], contextLength: 8192,
                                         loaded: true)],
            lastHeardMs: Self.t0)
        try SQLiteJoinedHomebaseStore(database: try Database(path: file.path)).upsert(record)
        try SQLiteJoinedHomebaseStore(database: try Database(path: file.path))
            .upsert(JoinedHomebase(host: Fixture.otherFriend, state: .pending, lastHeardMs: 5))
        let reopened = try SQLiteJoinedHomebaseStore(database: try Database(path: file.path))
        #expect(reopened.record(for: Fixture.friend) == record)
        #expect(reopened.record(for: Fixture.otherFriend)?.name == nil)
        #expect(reopened.all().map(\.host) == [Fixture.friend, Fixture.otherFriend])
    }

    @Test func upsertReplacesAndRemoveDeletes() throws {
        let file = try TemporaryStateFile()
        let store = try SQLiteJoinedHomebaseStore(database: try Database(path: file.path))
        try store.upsert(Fixture.joined(state: .pending, lastHeardMs: 1))
        try store.upsert(Fixture.joined(state: .revoked, lastHeardMs: 2))
        #expect(store.all().count == 1)
        #expect(store.record(for: Fixture.friend)?.state == .revoked)
        try store.remove(Fixture.friend)
        try store.remove(Fixture.friend)
        #expect(store.record(for: Fixture.friend) == nil)
    }

    @Test func noteHostAliveOnlyMovesForwardAndOnlyForKnownHosts() throws {
        let file = try TemporaryStateFile()
        let store = try SQLiteJoinedHomebaseStore(database: try Database(path: file.path))
        try store.upsert(Fixture.joined(lastHeardMs: Self.t0))
        try store.noteHostAlive(Fixture.friend, atMs: Self.t0 + 5)
        #expect(store.record(for: Fixture.friend)?.lastHeardMs == Self.t0 + 5)
        try store.noteHostAlive(Fixture.friend, atMs: Self.t0 + 1)
        #expect(store.record(for: Fixture.friend)?.lastHeardMs == Self.t0 + 5)
        try store.noteHostAlive(Fixture.otherFriend, atMs: Self.t0 + 9)
        #expect(store.record(for: Fixture.otherFriend) == nil)
    }

    /// Issue 38 item 6: a row written with `AdvertisedModel` (no `family`, `parameter_size`, `quantization` when
    /// unknown) still reads after the router keeps `AdvertPayload.Model`.
    @Test func aRowStoredBeforeTheOneModelTypeStillReads() throws {
        let file = try TemporaryStateFile()
        let database = try Database(path: file.path)
        let store = try SQLiteJoinedHomebaseStore(database: database)
        try store.upsert(Fixture.joined(lastHeardMs: 1))
        try database.execute(#"UPDATE joined_homebases SET models = '[{"tag":"llama3.1:70b","capabilities":["completion"],"loaded":false}]'"#)
        let record = try #require(store.record(for: Fixture.friend))
        #expect(record.models.map(\.tag) == ["llama3.1:70b"])
        #expect(record.models.first?.family == "")
        #expect(record.models.first?.unknown == ["family", "parameter_size", "quantization"])
        #expect(record.isRoutable(nowMs: 2))
    }

    @Test func aCorruptRowReadsAsAbsent() throws {
        let file = try TemporaryStateFile()
        let database = try Database(path: file.path)
        let store = try SQLiteJoinedHomebaseStore(database: database)
        try store.upsert(Fixture.joined(lastHeardMs: 1))
        try database.execute("UPDATE joined_homebases SET models = 'not json'")
        try database.execute(
            "INSERT INTO joined_homebases VALUES (x'0102', NULL, 'joined', '[]', 1)")
        #expect(store.record(for: Fixture.friend) == nil)
        #expect(store.all().isEmpty)
    }
}
