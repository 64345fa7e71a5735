import HomebaseCore
import Testing
@testable import HomebaseRouter

@Suite struct ExternalModelsAdvertStoreTests {
    let backend = InMemorySettingsBackend()
    var store: ExternalModelsAdvertStore { ExternalModelsAdvertStore(backend: self.backend) }
    static let t0: UInt64 = 1_800_000_000_000

    static let ages: [(UInt64, Bool)] = [
        (0, true),
        (9 * Fixture.minute + 59_000, true),
        (10 * Fixture.minute - 1, true),
        (10 * Fixture.minute, false),
        (10 * Fixture.minute + 1_000, false),
        (48 * Fixture.hour, false),
    ]

    @Test(arguments: Self.ages)
    func freshMeansLessThanTenMinutesOld(ageMs: UInt64, fresh: Bool) throws {
        try self.store.accept(Fixture.advert(issuedAtMs: Self.t0))
        #expect((self.store.freshAdvert(nowMs: Self.t0 + ageMs) != nil) == fresh)
    }

    static let futureStamps: [(UInt64, Bool)] = [(1_000, true), (10 * Fixture.minute, true),
                                                 (10 * Fixture.minute + 1, false)]

    @Test(arguments: Self.futureStamps)
    func aFutureStampIsTrustedOnlyWithinOneWindow(aheadMs: UInt64, fresh: Bool) {
        let advert = Fixture.advert(issuedAtMs: Self.t0 + aheadMs)
        #expect(ExternalModelsAdvertStore.isFresh(advert, nowMs: Self.t0) == fresh)
    }

    @Test func anEmptyAdvertIsNeverFresh() throws {
        try self.store.accept(Fixture.advert(issuedAtMs: Self.t0, tags: []))
        #expect(self.store.advert != nil)
        #expect(self.store.freshAdvert(nowMs: Self.t0) == nil)
    }

    @Test func anOlderOrEqualSeqIsIgnored() throws {
        #expect(try self.store.accept(Fixture.advert(issuedAtMs: Self.t0, seq: 5, tags: ["a"])))
        #expect(try !self.store.accept(Fixture.advert(issuedAtMs: Self.t0 + 1, seq: 4, tags: ["b"])))
        #expect(try !self.store.accept(Fixture.advert(issuedAtMs: Self.t0 + 1, seq: 5, tags: ["b"])))
        #expect(self.store.advert?.models.map(\.tag) == ["a"])
        #expect(try self.store.accept(Fixture.advert(issuedAtMs: Self.t0 + 1, seq: 6, tags: ["c"])))
        #expect(self.store.advert?.models.map(\.tag) == ["c"])
    }

    @Test func anotherHostReplacesTheAdvertWhateverItsSeq() throws {
        try self.store.accept(Fixture.advert(issuedAtMs: Self.t0, seq: 9))
        #expect(try self.store.accept(Fixture.advert(issuedAtMs: Self.t0, seq: 1, host: Fixture.friend)))
        #expect(self.store.advert?.host == Fixture.friend)
    }

    @Test func theStoredAdvertRoundTrips() throws {
        let advert = VerifiedAdvert(
            host: Fixture.ownHomebase, seq: 3, issuedAtMs: Self.t0, runtimeVersion: "0.5.1",
            models: [AdvertPayload.Model(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B",
                                         quantization: "Q4_K_M", capabilities: ["completion", "tools"],
                                         contextLength: 32768, loaded: true)])
        try self.store.accept(advert)
        #expect(self.store.advert == advert)
    }

    /// Issue 38 item 6: a record `AdvertisedModel` wrote, before the router kept `AdvertPayload.Model`, left out
    /// the fields it did not know (optional there); it still reads, the missing ones empty and listed as unknown.
    @Test func anAdvertStoredBeforeTheOneModelTypeStillReads() throws {
        let host = String(repeating: "a1", count: 32)
        let old = #"{"host":"\#(host)","seq":4,"issued_at_ms":1800000000000,"runtime_version":"0.5.1","models":["#
            + #"{"tag":"qwen2.5:7b","capabilities":["completion","tools"],"loaded":true},"#
            + #"{"tag":"llama3.2:3b","family":"llama","parameter_size":"3.2B","quantization":"Q4_K_M","#
            + #""capabilities":["completion"],"context_length":8192,"loaded":false}]}"#
        try self.backend.set(old, forKey: ExternalModelsAdvertStore.Key.ownAdvert)
        let advert = try #require(self.store.advert)
        #expect(advert.seq == 4)
        #expect(advert.models == [
            AdvertPayload.Model(tag: "qwen2.5:7b", family: "", parameterSize: "", quantization: "",
                                capabilities: ["completion", "tools"], contextLength: nil, loaded: true,
                                unknown: ["family", "parameter_size", "quantization"]),
            AdvertPayload.Model(tag: "llama3.2:3b", family: "llama", parameterSize: "3.2B", quantization: "Q4_K_M",
                                capabilities: ["completion"], contextLength: 8192, loaded: false),
        ])
        // What it reads is stored whole from then on.
        try self.store.accept(advert)
        #expect(self.store.advert == advert)
    }

    @Test func theSmallestStoredModelReads() throws {
        try self.backend.set(Self.record(#"[{"tag":"m","capabilities":[],"loaded":true}]"#),
                             forKey: ExternalModelsAdvertStore.Key.ownAdvert)
        #expect(self.store.advert?.models.map(\.tag) == ["m"])
    }

    static let host = String(repeating: "a1", count: 32)
    /// A stored advert of `host` with `models` (JSON text).
    static func record(_ models: String) -> String {
        #"{"host":"\#(host)","seq":1,"issued_at_ms":1,"models":\#(models)}"#
    }

    @Test(arguments: ["garbage", #"{"host":"abcd","seq":1,"issued_at_ms":1,"models":[]}"#,
                      #"{"host":"\#(host)","seq":-1,"issued_at_ms":1,"models":[]}"#,
                      // A stored model is read leniently only where a field may be missing, never mistyped.
                      record(#"[{"capabilities":[],"loaded":true}]"#),
                      record(#"[{"tag":"m","loaded":true}]"#),
                      record(#"[{"tag":"m","capabilities":[]}]"#),
                      record(#"[{"tag":"m","family":7,"capabilities":[],"loaded":true}]"#),
                      record(#"[{"tag":"m","capabilities":[],"loaded":true,"unknown":"family"}]"#),
                      record(#"{"tag":"m","capabilities":[],"loaded":true}"#)])
    func aDamagedStoredAdvertReadsAsNone(stored: String) throws {
        try self.backend.set(stored, forKey: ExternalModelsAdvertStore.Key.ownAdvert)
        #expect(self.store.advert == nil)
    }

    struct Verifier: AdvertVerifier {
        let good: [UInt8]
        func verifiedAdvert(payload: [UInt8], signature: [UInt8]) -> VerifiedAdvert? {
            signature == self.good ? Fixture.advert(issuedAtMs: ExternalModelsAdvertStoreTests.t0) : nil
        }
    }

    @Test func onlyVerifiedAdvertsAreReceived() throws {
        let verifier = Verifier(good: [1, 2, 3])
        #expect(try !self.store.receive(payload: [0], signature: [9], verifier: verifier))
        #expect(self.store.advert == nil)
        #expect(try self.store.receive(payload: [0], signature: [1, 2, 3], verifier: verifier))
        #expect(self.store.advert?.host == Fixture.ownHomebase)
    }
}
