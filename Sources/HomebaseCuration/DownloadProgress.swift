/// Progress of a download as shown by the CLI's bar (§8): bytes, rate and ETA, from samples the shell takes with
/// its clock. The rate is a moving window so a stall shows as a falling rate, not the lifetime average.
public struct DownloadProgress: Sendable, Equatable {
    public var totalBytes: Int64
    public private(set) var doneBytes: Int64 = 0
    /// (ms, bytes) samples within the window.
    private var samples: [(UInt64, Int64)] = []
    public static let windowMs: UInt64 = 3000

    public init(totalBytes: Int64, resumedBytes: Int64 = 0, nowMs: UInt64) {
        self.totalBytes = totalBytes
        self.doneBytes = resumedBytes
        self.samples = [(nowMs, resumedBytes)]
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.totalBytes == b.totalBytes && a.doneBytes == b.doneBytes
    }

    public mutating func record(doneBytes: Int64, nowMs: UInt64) {
        self.doneBytes = doneBytes
        self.samples.append((nowMs, doneBytes))
        while self.samples.count > 2, let first = self.samples.first, nowMs - first.0 > Self.windowMs {
            self.samples.removeFirst()
        }
    }

    /// 0…1 (1 when the total is unknown and we are done is not claimed: 0 until a total is known).
    public var fraction: Double {
        guard self.totalBytes > 0 else { return 0 }
        return min(1, Double(self.doneBytes) / Double(self.totalBytes))
    }

    /// Bytes per second over the window; 0 before two samples apart in time.
    public var bytesPerSecond: Double {
        guard let first = self.samples.first, let last = self.samples.last, last.0 > first.0 else { return 0 }
        return Double(last.1 - first.1) * 1000 / Double(last.0 - first.0)
    }

    /// Seconds left at the current rate; `nil` when the rate is zero.
    public var etaSeconds: Int? {
        let rate = self.bytesPerSecond
        guard rate > 0 else { return nil }
        return Int((Double(max(0, self.totalBytes - self.doneBytes)) / rate).rounded(.up))
    }

    /// `[#########-----------]  45%  376 MB / 837 MB  12.4 MB/s  ETA 37s`
    public func bar(width: Int = 24) -> String {
        let filled = Int((self.fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let percent = Int((self.fraction * 100).rounded(.down))
        let pad = percent < 10 ? "  " : percent < 100 ? " " : ""
        let eta = self.etaSeconds.map { "ETA \($0)s" } ?? "ETA --"
        return "[\(bar)] \(pad)\(percent)%  \(ModelSize.format(self.doneBytes)) / \(ModelSize.format(self.totalBytes))"
            + "  \(ModelSize.format(Int64(self.bytesPerSecond)))/s  \(eta)"
    }
}
