import HomebaseCore
import Testing
@testable import HomebaseRouter

@Suite struct JoinedHomebaseStoreTests {
    static let t0: UInt64 = 1_800_000_000_000

    static let records: [(JoinState, [String], UInt64, Bool)] = [
        (.joined, ["m"], 0, true),
        (.joined, ["m"], 24 * Fixture.hour - 1, true),
        (.joined, ["m"], 24 * Fixture.hour, false),
        (.joined, [], 0, false),
        (.pending, ["m"], 0, false),
        (.revoked, ["m"], 0, false),
    ]

    @Test(arguments: Self.records)
    func routableMeansJoinedWithModelsAndFresh(state: JoinState, tags: [String], ageMs: UInt64, routable: Bool) {
        let record = Fixture.joined(state: state, tags: tags, lastHeardMs: Self.t0)
        #expect(record.isRoutable(nowMs: Self.t0 + ageMs) == routable)
    }

    @Test func noteHostAliveOnlyMovesForwardAndOnlyForKnownHosts() {
        let store = InMemoryJoinedHomebaseStore([Fixture.joined(lastHeardMs: Self.t0)])
        store.noteHostAlive(Fixture.friend, atMs: Self.t0 + 5)
        #expect(store.record(for: Fixture.friend)?.lastHeardMs == Self.t0 + 5)
        store.noteHostAlive(Fixture.friend, atMs: Self.t0 + 1)
        #expect(store.record(for: Fixture.friend)?.lastHeardMs == Self.t0 + 5)
        store.noteHostAlive(Fixture.otherFriend, atMs: Self.t0 + 9)
        #expect(store.record(for: Fixture.otherFriend) == nil)
    }

    @Test func upsertAllAndRemove() {
        let store = InMemoryJoinedHomebaseStore()
        store.upsert(Fixture.joined(Fixture.otherFriend, lastHeardMs: 1))
        store.upsert(Fixture.joined(Fixture.friend, state: .pending, lastHeardMs: 1))
        store.upsert(Fixture.joined(Fixture.friend, state: .joined, lastHeardMs: 2))
        #expect(store.all().map(\.host) == [Fixture.friend, Fixture.otherFriend])
        #expect(store.record(for: Fixture.friend)?.state == .joined)
        store.remove(Fixture.friend)
        #expect(store.all().map(\.host) == [Fixture.otherFriend])
    }
}
