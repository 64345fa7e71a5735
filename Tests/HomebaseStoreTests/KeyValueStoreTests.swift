import Testing
@testable import HomebaseStore

@Suite struct KeyValueStoreTests {
    private func makeStore(now: UInt64 = 1_000) throws -> KeyValueStore {
        try KeyValueStore(database: Database(path: ":memory:"), clock: { now })
    }

    @Test func stringsAndDataRoundTripAndOverwrite() throws {
        let kv = try self.makeStore()
        #expect(try kv.string("name") == nil)
        try kv.setString("home", forKey: "name")
        try kv.setString("homebase", forKey: "name")
        try kv.setData([0, 1, 2], forKey: "seed")
        try kv.setData([], forKey: "empty")
        #expect(try kv.string("name") == "homebase")
        #expect(try kv.data("seed") == [0, 1, 2])
        #expect(try kv.data("empty") == [])
        #expect(try kv.updatedAtMs("name") == 1_000)
    }

    @Test func readingAsTheWrongKindThrows() throws {
        let kv = try self.makeStore()
        try kv.setData([0xFF], forKey: "seed")
        #expect(throws: StoreError.typeMismatch(column: "#0", expected: "TEXT", actual: "BLOB")) {
            try kv.string("seed")
        }
    }

    @Test func removeReportsWhetherTheKeyExisted() throws {
        let kv = try self.makeStore()
        try kv.setString("x", forKey: "a")
        #expect(try kv.remove("a"))
        #expect(try !kv.remove("a"))
        #expect(try kv.string("a") == nil)
    }

    @Test func keysWithPrefixReturnsOnlyThatRangeInOrder() throws {
        let kv = try self.makeStore()
        for key in ["ring/b", "ring/a", "ring", "rinh", "ring/\u{10FFFF}", "rin", "settings/x", "ring/z\u{10FFFF}"] {
            try kv.setString("v", forKey: key)
        }
        #expect(try kv.keys(withPrefix: "ring/") == ["ring/a", "ring/b", "ring/z\u{10FFFF}", "ring/\u{10FFFF}"])
        #expect(try kv.keys(withPrefix: "ring") == ["ring", "ring/a", "ring/b", "ring/z\u{10FFFF}", "ring/\u{10FFFF}"])
        #expect(try kv.keys(withPrefix: "nothing").isEmpty)
        #expect(try kv.keys(withPrefix: "").count == 8)
        #expect(try kv.keys(withPrefix: "ring/\u{10FFFF}") == ["ring/\u{10FFFF}"])
    }

    @Test(arguments: [
        ("a", "b"), ("ab", "ac"), ("\u{D7FF}", "\u{E000}"), ("a\u{10FFFF}", "b"), ("", nil), ("\u{10FFFF}", nil),
    ] as [(String, String?)])
    func prefixSuccessorIsTheExclusiveUpperBound(prefix: String, successor: String?) {
        #expect(KeyValueStore.successor(of: prefix) == successor)
    }

    @Test func valuesPersistAcrossReopen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("state.db")
        do {
            try KeyValueStore(database: Database(path: path)).setData([9, 9], forKey: "identity/seed")
        }
        let kv = try KeyValueStore(database: Database(path: path))
        #expect(try kv.data("identity/seed") == [9, 9])
        #expect(fileMode(path) == 0o600)
    }
}
