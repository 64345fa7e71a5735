import Testing
@testable import HomebaseService

@Suite struct PullProgressRendererTests {
    @Test(arguments: [
        (0, "0 B"), (999, "999 B"), (1_000, "1.0 kB"), (1_049, "1.0 kB"), (1_050, "1.1 kB"), (999_499, "999.5 kB"),
        (999_600, "1.0 MB"), (35_200_000, "35.2 MB"), (1_234_567_890, "1.2 GB"), (4_683_087_519, "4.7 GB"),
        (1_100_000_000_000, "1.1 TB"), (-5, "0 B"),
    ] as [(Int64, String)])
    func bytesUseDecimalUnits(count: Int64, text: String) {
        #expect(PullProgressRenderer.bytes(count) == text)
    }

    @Test(arguments: [
        (0, "0s"), (0.2, "1s"), (45, "45s"), (59.5, "1m00s"), (60, "1m00s"), (65, "1m05s"), (100, "1m40s"),
        (3_599, "59m59s"), (3_600, "1h00m"), (7_500, "2h05m"), (-1, "--"), (.infinity, "--"), (.nan, "--"),
        (1e12, "--"),
    ] as [(Double, String)])
    func durationsAreCompact(seconds: Double, text: String) {
        #expect(PullProgressRenderer.duration(seconds: seconds) == text)
    }

    @Test(arguments: [
        (0, 100, 10, "[..........]"), (35, 100, 10, "[###.......]"), (99, 100, 10, "[#########.]"),
        (100, 100, 10, "[##########]"), (150, 100, 10, "[##########]"), (5, 0, 4, "[....]"),
        (1, 2, 14, "[#######.......]"),
    ] as [(Int64, Int64, Int, String)])
    func barFillsInProportionRoundingDown(done: Int64, total: Int64, width: Int, text: String) {
        #expect(PullProgressRenderer.bar(done: done, total: total, width: width) == text)
    }

    @Test func phasesShowUntilALayerHasASize() {
        var r = PullProgressRenderer(model: "qwen2.5:7b")
        #expect(r.line == "pulling qwen2.5:7b")
        r.update(PullProgress(status: "pulling manifest"), atMs: 0)
        #expect(r.line == "pulling qwen2.5:7b  pulling manifest")
    }

    @Test func lineShowsBarSizesRateAndETA() {
        var r = PullProgressRenderer(model: "qwen2.5:7b", barWidth: 14)
        let digest = "sha256:2bada8a74506"
        r.update(PullProgress(status: "pulling manifest"), atMs: 0)
        r.update(PullProgress(status: "pulling 2bada8a74506", digest: digest, total: 4_700_000_000), atMs: 1_000)
        // One sample with bytes: no rate yet, so no rate or ETA shown.
        #expect(r.line == "pulling qwen2.5:7b  [..............]  0 B / 4.7 GB")
        r.update(PullProgress(status: "pulling 2bada8a74506", digest: digest, total: 4_700_000_000,
                              completed: 1_200_000_000), atMs: 35_090)
        // Window is 5 s, but the only older sample is from 1 000 ms: 1.2 GB over 34.09 s = 35.2 MB/s.
        #expect(r.line == "pulling qwen2.5:7b  [###...........]  1.2 GB / 4.7 GB  35.2 MB/s  ETA 1m40s")
    }

    @Test func layersAreSummedAndALayerUpdateReplacesItsPreviousNumbers() {
        var r = PullProgressRenderer(model: "m")
        r.update(PullProgress(status: "pulling a", digest: "sha256:a", total: 1_000, completed: 400), atMs: 0)
        r.update(PullProgress(status: "pulling a", digest: "sha256:a", total: 1_000, completed: 1_000), atMs: 10)
        r.update(PullProgress(status: "pulling b", digest: "sha256:b", total: 500, completed: 500), atMs: 20)
        #expect(r.completedBytes == 1_500 && r.totalBytes == 1_500)
        // Done: the phase after the layers shows instead of a rate.
        r.update(PullProgress(status: "verifying sha256 digest"), atMs: 30)
        #expect(r.line == "pulling m  [####################]  1.5 kB / 1.5 kB  verifying sha256 digest")
    }

    @Test func rateFollowsTheWindowSoAStallShows() {
        var r = PullProgressRenderer(model: "m", rateWindowMs: 2_000)
        let layer = { (done: Int64) in PullProgress(status: "pulling a", digest: "sha256:a", total: 100_000_000,
                                                     completed: done) }
        // 10 MB/s for 10 s…
        for second in 0...10 { r.update(layer(Int64(second) * 10_000_000), atMs: UInt64(second) * 1_000) }
        #expect(r.bytesPerSecond == 10_000_000)
        // …then nothing for 3 s: the window sees no progress, the average since the start would not.
        for second in 11...13 { r.update(layer(100_000_000 - 1), atMs: UInt64(second) * 1_000) }
        #expect(r.bytesPerSecond.map { $0 < 1 } == true)
    }

    @Test func rateIsNeverNegativeWhenALayerRestarts() {
        var r = PullProgressRenderer(model: "m")
        r.update(PullProgress(status: "pulling a", digest: "sha256:a", total: 1_000, completed: 800), atMs: 0)
        r.update(PullProgress(status: "pulling a", digest: "sha256:a", total: 1_000, completed: 100), atMs: 1_000)
        #expect(r.bytesPerSecond == 0)
        #expect(r.line == "pulling m  [##..................]  100 B / 1.0 kB  0 B/s")
    }

    @Test func successLineGivesSizeAndTime() {
        var r = PullProgressRenderer(model: "qwen2.5:7b")
        r.update(PullProgress(status: "pulling manifest"), atMs: 5_000)
        r.update(PullProgress(status: "pulling a", digest: "sha256:a", total: 4_700_000_000,
                              completed: 4_700_000_000), atMs: 100_000)
        r.update(PullProgress(status: "success"), atMs: 138_000)
        #expect(r.successLine(atMs: 138_000) == "pulled qwen2.5:7b (4.7 GB) in 2m13s")
        // A model already present: no bytes at all.
        var present = PullProgressRenderer(model: "m")
        present.update(PullProgress(status: "success"), atMs: 0)
        #expect(present.successLine(atMs: 400) == "pulled m in 1s")
    }

    @Test func failureLinesAreActionable() {
        #expect(PullProgressRenderer.failureLine(
            OllamaError.pull(model: "x", message: "pull model manifest: file does not exist"))
            == "model 'x' not found in the registry (pull model manifest: file does not exist)")
        #expect(PullProgressRenderer.failureLine(OllamaError.pull(model: "x", message: "disk full"))
            == "pulling 'x' failed: disk full")
        #expect(PullProgressRenderer.failureLine(OllamaError.unreachable("http://127.0.0.1:11434 (connection refused)"))
            == "Ollama is not running at http://127.0.0.1:11434 (connection refused) — start it with `ollama serve`")
        #expect(PullProgressRenderer.failureLine(CancellationError()) == "pull cancelled")
    }

    @Test func rewritePadsOverALongerPreviousLine() {
        var r = PullProgressRenderer(model: "m")
        #expect(r.rewrite("abcdef") == "\rabcdef")
        #expect(r.rewrite("abc") == "\rabc   ")
        #expect(r.rewrite("abcd") == "\rabcd")
    }
}
