/// Turns `/api/pull` progress into the one terminal line `homebase pull MODEL` rewrites with `\r`:
///
///     pulling qwen2.5:7b  [#######.......]  1.2 GB / 4.7 GB  35.2 MB/s  ETA 1m40s
///
/// Pure: the caller passes the time of each update (monotonic ms). Layers are summed into bytes done and
/// total; the rate is measured over a sliding window, so a stall shows as a falling rate rather than the
/// average since the start. Sizes use decimal units, as Ollama prints them.
public struct PullProgressRenderer: Sendable {
    public let model: String
    /// Cells in the bar.
    public let barWidth: Int
    /// The rate is the bytes done over (about) this long.
    public let rateWindowMs: UInt64

    /// Per-layer (total, completed), by digest; a layer's numbers replace its earlier ones.
    private var layers: [String: (total: Int64, completed: Int64)] = [:]
    private var layerOrder: [String] = []
    /// The latest phase text (`pulling manifest`, `verifying sha256 digest`, …).
    private var phase = ""
    /// (time, bytes done) samples inside the window, oldest first.
    private var samples: [(atMs: UInt64, bytes: Int64)] = []
    private var startedAtMs: UInt64?
    /// Length of the last line written by `rewrite`, to blank what a shorter line leaves behind.
    private var lastWidth = 0

    public init(model: String, barWidth: Int = 20, rateWindowMs: UInt64 = 5_000) {
        precondition(barWidth > 0 && rateWindowMs > 0, "bar width and rate window must be positive")
        self.model = model
        self.barWidth = barWidth
        self.rateWindowMs = rateWindowMs
    }

    /// Bytes downloaded so far, over all layers seen.
    public var completedBytes: Int64 { self.layers.values.reduce(0) { $0 + min($1.completed, $1.total) } }
    /// Bytes to download, over all layers seen (grows as layers are announced).
    public var totalBytes: Int64 { self.layers.values.reduce(0) { $0 + $1.total } }

    /// Records `progress`, received at `nowMs`.
    public mutating func update(_ progress: PullProgress, atMs nowMs: UInt64) {
        if self.startedAtMs == nil { self.startedAtMs = nowMs }
        if let digest = progress.digest, progress.total > 0 {
            if self.layers[digest] == nil { self.layerOrder.append(digest) }
            self.layers[digest] = (progress.total, progress.completed)
            self.phase = ""
        } else if !progress.isSuccess {
            self.phase = progress.status
        }
        // Phase lines before the first sized layer carry no bytes; timing them would only dilute the rate.
        guard self.totalBytes > 0 else { return }
        self.samples.append((nowMs, self.completedBytes))
        // Keep one sample at or before the window's start, so the rate spans the whole window.
        let windowStart = nowMs >= self.rateWindowMs ? nowMs - self.rateWindowMs : 0
        while self.samples.count > 2, self.samples[1].atMs <= windowStart {
            self.samples.removeFirst()
        }
    }

    /// Bytes per second over the window; `nil` until two samples apart in time exist.
    public var bytesPerSecond: Double? {
        guard let first = self.samples.first, let last = self.samples.last, last.atMs > first.atMs else {
            return nil
        }
        let bytes = max(0, last.bytes - first.bytes)
        return Double(bytes) * 1_000 / Double(last.atMs - first.atMs)
    }

    /// The progress line, without `\r`: a phase alone until a layer has a size, then the bar, sizes, rate and
    /// ETA (rate and ETA only while known and meaningful).
    public var line: String {
        let head = "pulling \(self.model)"
        let total = self.totalBytes
        guard total > 0 else {
            return self.phase.isEmpty ? head : "\(head)  \(self.phase)"
        }
        let done = self.completedBytes
        var parts = [head, Self.bar(done: done, total: total, width: self.barWidth),
                     "\(Self.bytes(done)) / \(Self.bytes(total))"]
        if !self.phase.isEmpty && done >= total {
            parts.append(self.phase)
        } else if done < total, let rate = self.bytesPerSecond {
            parts.append("\(Self.bytes(Int64(rate)))/s")
            if rate >= 1 {
                parts.append("ETA " + Self.duration(seconds: Double(total - done) / rate))
            }
        }
        return parts.joined(separator: "  ")
    }

    /// The last line of a pull that ended with `success`.
    public func successLine(atMs nowMs: UInt64) -> String {
        let elapsed = self.startedAtMs.map { Double(nowMs &- $0) / 1_000 } ?? 0
        let size = self.totalBytes > 0 ? " (\(Self.bytes(self.totalBytes)))" : ""
        return "pulled \(self.model)\(size) in \(Self.duration(seconds: elapsed))"
    }

    /// One line for a pull that failed: the error's own description (an unknown model reads
    /// `model 'x' not found in the registry (pull model manifest: file does not exist)`).
    public static func failureLine(_ error: any Error) -> String {
        if let error = error as? OllamaError { return error.description }
        if error is CancellationError { return "pull cancelled" }
        return "pull failed: \(error)"
    }

    /// `line` prefixed with `\r` and padded with spaces over whatever the previous, longer line left.
    public mutating func rewrite(_ line: String) -> String {
        let width = line.count
        let padding = max(0, self.lastWidth - width)
        self.lastWidth = width
        return "\r" + line + String(repeating: " ", count: padding)
    }

    // MARK: Formatting

    /// `[#####.....]`: `width` cells, filled in proportion (rounded down, so full only when done).
    public static func bar(done: Int64, total: Int64, width: Int) -> String {
        let fraction = total > 0 ? min(1, max(0, Double(done) / Double(total))) : 0
        let filled = min(width, Int(fraction * Double(width)))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }

    /// Decimal units with one decimal from kB up: `999 B`, `1.2 kB`, `35.2 MB`, `4.7 GB`, `1.1 TB`.
    public static func bytes(_ count: Int64) -> String {
        let value = Double(max(0, count))
        let units: [(String, Double)] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)]
        for (unit, scale) in units where value >= scale * 0.9995 {
            return Self.oneDecimal(value / scale) + " " + unit
        }
        return "\(Int64(value)) B"
    }

    /// `45s`, `1m40s`, `2h05m`: rounded up to the second; `--` for an unusable value.
    public static func duration(seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0, seconds < 100 * 86_400 else { return "--" }
        let total = Int(seconds.rounded(.up))
        if total < 60 { return "\(total)s" }
        if total < 3_600 { return "\(total / 60)m" + Self.twoDigits(total % 60) + "s" }
        return "\(total / 3_600)h" + Self.twoDigits(total % 3_600 / 60) + "m"
    }

    private static func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    private static func oneDecimal(_ value: Double) -> String {
        let tenths = Int64((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
