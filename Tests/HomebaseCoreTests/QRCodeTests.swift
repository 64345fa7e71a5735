import Testing
@testable import HomebaseCore

@Suite struct QRCodeTests {
    struct Vector: Decodable {
        let name: String
        let data_hex: String
        let level: String
        let version: Int
        let mask: Int
        let rows: [String]
    }

    struct File: Decodable {
        let generator: String
        let vectors: [Vector]
    }

    static func level(_ letter: String) -> QRCode.ErrorCorrection {
        ["l": .low, "m": .medium, "q": .quartile, "h": .high][letter]!
    }

    static let file = Result { try Fixtures.load("qr-vectors.json", as: File.self) }

    /// Module for module as python-qrcode (an independent encoder) draws them, in the version and with the mask it chose:
    /// versions 1 to 40, every level, 8- and 16-bit counts, several blocks, alignment and version patterns.
    @Test func matchesAnIndependentEncoderModuleForModule() throws {
        let file = try Self.file.get()
        #expect(file.vectors.count >= 10)
        for v in file.vectors {
            let data = try #require(Hex.decode(v.data_hex))
            let minVersion = v.version >= 32 ? v.version : 1
            let qr = try QRCode.encode(data, correction: Self.level(v.level), mask: v.mask, minVersion: minVersion)
            #expect(qr.version == v.version, "\(v.name)")
            #expect(qr.size == v.rows.count, "\(v.name)")
            let rows = qr.rows.map { Array($0) }
            var differences: [String] = []
            for (y, row) in v.rows.enumerated() where y < rows.count {
                for (x, c) in row.enumerated() where x < rows[y].count && rows[y][x] != c { differences.append("(\(x),\(y))") }
            }
            if !differences.isEmpty {
                Issue.record("\(v.name): \(differences.count) modules differ: \(differences.prefix(30).joined(separator: " "))")
            }
        }
    }

    /// Without a mask named, the one with the lowest penalty is used (encoders weigh the rules differently in
    /// the details, so the choice is checked against our own rules, each mask's symbol against the vectors).
    @Test func picksTheMaskWithTheLowestPenalty() throws {
        for v in try Self.file.get().vectors where v.version < 30 {  // the largest two cost seconds in debug builds
            let data = try #require(Hex.decode(v.data_hex))
            let minVersion = v.version >= 32 ? v.version : 1
            let chosen = try QRCode.encode(data, correction: Self.level(v.level), minVersion: minVersion)
            let all = try (0...7).map {
                try QRCode.encode(data, correction: Self.level(v.level), mask: $0, minVersion: minVersion)
            }
            #expect(chosen == all[chosen.mask], "\(v.name)")
            #expect(all.allSatisfy { chosen.penalty <= $0.penalty }, "\(v.name)")
            #expect(Set(all.map(\.penalty)).count > 1, "the rules tell masks apart")
        }
    }

    /// The penalty's rules on small known symbols.
    @Test func penaltyRules() {
        // 11×11 all light: runs (11 per line: 3 + 6 each, 22 lines), 2×2 blocks (100), all light (k = 9).
        let light = [Bool](repeating: false, count: 121)
        #expect(QRCode.penalty(light, size: 11) == 22 * 9 + 100 * 3 + 9 * 10)
        // A checkerboard: no runs, no blocks, no finder-like pattern, balanced.
        let checker = (0..<121).map { ($0 % 11 + $0 / 11) % 2 == 0 }
        #expect(QRCode.penalty(checker, size: 11) == 0)
    }

    @Test func tooMuchDataIsAnErrorNotACrash() {
        #expect(throws: QRCode.TooLong(bytes: 2954)) {
            try QRCode.encode([UInt8](repeating: 0x41, count: 2954), correction: .low)
        }
        #expect(throws: QRCode.TooLong(bytes: 1300)) {
            try QRCode.encode([UInt8](repeating: 0x41, count: 1300), correction: .high)
        }
        // The largest that fits: 2953 bytes at L, version 40.
        #expect((try? QRCode.encode([UInt8](repeating: 0x41, count: 2953), correction: .low))?.version == 40)
        #expect((try? QRCode.encode([]))?.version == 1)
    }

    /// A Reed-Solomon remainder against a known value: "hello" at 1-M (ISO/IEC 18004's polynomial arithmetic).
    @Test func fieldArithmetic() {
        #expect(QRCode.ReedSolomon.multiply(0x80, 0x02) == 0x1D)
        #expect(QRCode.ReedSolomon.multiply(0x53, 0xCA) == QRCode.ReedSolomon.multiply(0xCA, 0x53))
        #expect(QRCode.ReedSolomon.divisor(degree: 1) == [1])
    }
}

