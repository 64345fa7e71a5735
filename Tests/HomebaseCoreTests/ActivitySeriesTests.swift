import HomebaseCore
import Testing

@Suite struct ActivitySeriesTests {
    @Test func addsLandInTheirBucketsAndTheWindowEndsNow() {
        var s = ActivitySeries(bucketMs: 10_000, bucketCount: 6)
        s.add(tokens: 30, requests: 1, atMs: 100_000)
        s.add(tokens: 12, requests: 0, atMs: 109_999)
        s.add(tokens: 5, requests: 2, atMs: 120_000)
        let w = s.window(nowMs: 125_000)
        #expect(w.startMs == 70_000)
        #expect(w.tokens == [0, 0, 0, 42, 0, 5])
        #expect(w.requests == [0, 0, 0, 1, 0, 2])
    }

    @Test func oldBucketsFallOutOfTheWindow() {
        var s = ActivitySeries(bucketMs: 10_000, bucketCount: 3)
        s.add(tokens: 1, requests: 1, atMs: 0)
        s.add(tokens: 2, requests: 1, atMs: 10_000)
        #expect(s.window(nowMs: 20_000).tokens == [1, 2, 0])
        #expect(s.window(nowMs: 30_000).tokens == [2, 0, 0])
        #expect(s.window(nowMs: 40_000).tokens == [0, 0, 0])
        // Writing after a gap reuses the slots without leaking what they held.
        s.add(tokens: 7, requests: 0, atMs: 40_000)
        #expect(s.window(nowMs: 40_000).tokens == [0, 0, 7])
        s.add(tokens: 9, requests: 0, atMs: 1_000_000)
        #expect(s.window(nowMs: 1_000_000).tokens == [0, 0, 9])
    }

    @Test func aClockSteppedBackCountsInTheNewestBucket() {
        var s = ActivitySeries(bucketMs: 10_000, bucketCount: 3)
        s.add(tokens: 1, requests: 0, atMs: 50_000)
        s.add(tokens: 4, requests: 0, atMs: 10_000)
        #expect(s.window(nowMs: 10_000).tokens == [0, 0, 5])
        #expect(s.window(nowMs: 10_000).startMs == 30_000)
    }

    @Test func negativeAmountsCountAsNone() {
        var s = ActivitySeries(bucketMs: 1_000, bucketCount: 2)
        s.add(tokens: -5, requests: -1, atMs: 1_000)
        #expect(s.window(nowMs: 1_000).tokens == [0, 0])
        #expect(s.window(nowMs: 1_000).requests == [0, 0])
    }

    @Test func theDefaultIsTheLastHourInTenSecondBuckets() {
        let w = ActivitySeries().window(nowMs: 7_200_000)
        #expect(w.tokens.count == 360 && w.bucketMs == 10_000)
        #expect(w.startMs == 7_200_000 - 3_590_000)
    }
}

@Suite struct RelayLinkHistoryTests {
    @Test func countsReconnectsAndKeepsTheLastLoss() {
        var h = RelayLinkHistory()
        #expect(!h.connected && h.reconnects == 0 && h.connectedSinceMs == nil)
        h.connected(atMs: 1_000)
        #expect(h.connected && h.connectedSinceMs == 1_000 && h.reconnects == 0)
        h.disconnected(atMs: 5_000, closeCode: 1012)
        #expect(!h.connected && h.connectedSinceMs == nil && h.lastLossAtMs == 5_000 && h.lastCloseCode == 1012)
        // Failed attempts while down are not new losses.
        h.disconnected(atMs: 6_000, closeCode: nil)
        #expect(h.lastLossAtMs == 5_000 && h.lastCloseCode == 1012)
        h.connected(atMs: 7_000, stored: 3)
        h.connected(atMs: 8_000, stored: 9)
        #expect(h.connected && h.connectedSinceMs == 7_000 && h.reconnects == 1)
        #expect(h.storedAtLogin == 3, "what the relay held at the login, not at a repeated event")
    }
}
