/// A QR Code (ISO/IEC 18004, model 2) for a string of bytes: byte mode, versions 1 to 40, any error-correction
/// level. Pure: the status page shows a pairing code as one, for a phone's camera (`handset pair` reads the
/// text). Checked module for module against another encoder's output (Fixtures/qr-vectors.json).
///
/// The smallest version that holds the bytes is chosen, and the mask with the lowest penalty (the standard's four
/// rules) unless one is named.
public struct QRCode: Equatable, Sendable {
    public enum ErrorCorrection: Int, Sendable, CaseIterable {
        /// About 7 % of the codewords can be restored.
        case low
        /// About 15 %.
        case medium
        /// About 25 %.
        case quartile
        /// About 30 %.
        case high

        /// The two bits written in the format information.
        var formatBits: Int { [1, 0, 3, 2][self.rawValue] }
    }

    /// The bytes do not fit a version-40 symbol at this level.
    public struct TooLong: Error, Equatable, Sendable, CustomStringConvertible {
        public let bytes: Int
        public var description: String { "\(self.bytes) bytes do not fit in a QR code" }
    }

    /// 1 to 40.
    public let version: Int
    /// Modules on a side: 17 + 4 × version.
    public let size: Int
    /// 0 to 7.
    public let mask: Int
    public let correction: ErrorCorrection
    /// Row-major, `true` for dark.
    private var modules: [Bool]

    /// Whether the module at column `x`, row `y` is dark.
    public subscript(x x: Int, y y: Int) -> Bool { self.modules[y * self.size + x] }

    /// Each row as `0` (light) and `1` (dark) characters, top to bottom.
    public var rows: [String] {
        (0..<self.size).map { y in String((0..<self.size).map { self[x: $0, y: y] ? "1" : "0" }) }
    }

    /// Encodes `bytes` in byte mode.
    /// - Parameters:
    ///   - mask: 0 to 7 to force one; nil picks the one with the lowest penalty.
    ///   - minVersion: the smallest version to use (a larger one is used when the bytes need it).
    public static func encode(_ bytes: [UInt8], correction: ErrorCorrection = .medium, mask: Int? = nil,
                              minVersion: Int = 1) throws(TooLong) -> QRCode {
        precondition((1...40).contains(minVersion), "a QR version is 1 to 40")
        precondition(mask.map { (0...7).contains($0) } ?? true, "a QR mask is 0 to 7")
        var chosen: Int?
        for version in minVersion...40 {
            let countBits = version <= 9 ? 8 : 16
            if bytes.count < (1 << countBits),
               4 + countBits + bytes.count * 8 <= Self.dataCodewords(version, correction) * 8 {
                chosen = version
                break
            }
        }
        guard let version = chosen else { throw TooLong(bytes: bytes.count) }

        // The bit stream: mode, count, data, terminator, padding to the capacity.
        var bits = BitBuffer()
        bits.append(0b0100, 4)
        bits.append(bytes.count, version <= 9 ? 8 : 16)
        for b in bytes { bits.append(Int(b), 8) }
        let capacity = Self.dataCodewords(version, correction) * 8
        bits.append(0, min(4, capacity - bits.count))
        bits.append(0, (8 - bits.count % 8) % 8)
        var pad = 0xEC
        while bits.count < capacity {
            bits.append(pad, 8)
            pad ^= 0xEC ^ 0x11
        }
        let codewords = Self.withErrorCorrection(bits.bytes, version: version, correction: correction)

        var symbol = Symbol(version: version)
        symbol.drawFunctionPatterns(correction: correction)
        symbol.drawCodewords(codewords)
        let masks = mask.map { [$0] } ?? Array(0...7)
        var best: (penalty: Int, mask: Int, modules: [Bool])?
        for m in masks {
            var candidate = symbol
            candidate.applyMask(m)
            candidate.drawFormatBits(correction: correction, mask: m)
            let penalty = masks.count == 1 ? 0 : QRCode.penalty(candidate.modules, size: candidate.size)
            if best == nil || penalty < best!.penalty { best = (penalty, m, candidate.modules) }
        }
        return QRCode(version: version, size: symbol.size, mask: best!.mask, correction: correction,
                      modules: best!.modules)
    }

    private init(version: Int, size: Int, mask: Int, correction: ErrorCorrection, modules: [Bool]) {
        self.version = version
        self.size = size
        self.mask = mask
        self.correction = correction
        self.modules = modules
    }

    // MARK: Capacity and error correction

    /// Error-correction codewords per block, by level then version (index 0 unused).
    static let eccPerBlock: [[Int]] = [
        [-1, 7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30,
         30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [-1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28,
         28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28],
        [-1, 13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28,
         30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [-1, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30,
         30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
    ]
    /// Error-correction blocks, by level then version (index 0 unused).
    static let blocks: [[Int]] = [
        [-1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17,
         18, 19, 19, 20, 21, 22, 24, 25],
        [-1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29,
         31, 33, 35, 37, 38, 40, 43, 45, 47, 49],
        [-1, 1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38,
         40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68],
        [-1, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45,
         48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81],
    ]

    /// Modules left for data and error correction once the function patterns are drawn.
    static func rawModules(_ version: Int) -> Int {
        var result = (16 * version + 128) * version + 64
        if version >= 2 {
            let align = version / 7 + 2
            result -= (25 * align - 10) * align - 55
            if version >= 7 { result -= 36 }
        }
        return result
    }

    static func dataCodewords(_ version: Int, _ correction: ErrorCorrection) -> Int {
        rawModules(version) / 8
            - self.eccPerBlock[correction.rawValue][version] * self.blocks[correction.rawValue][version]
    }

    /// Splits the data into blocks, adds each block's Reed-Solomon codewords and interleaves them.
    static func withErrorCorrection(_ data: [UInt8], version: Int, correction: ErrorCorrection) -> [UInt8] {
        let blockCount = self.blocks[correction.rawValue][version]
        let eccLength = self.eccPerBlock[correction.rawValue][version]
        let raw = self.rawModules(version) / 8
        let shortBlocks = blockCount - raw % blockCount
        let shortLength = raw / blockCount
        let divisor = ReedSolomon.divisor(degree: eccLength)
        var blocks: [[UInt8]] = []
        var offset = 0
        for i in 0..<blockCount {
            let dataLength = shortLength - eccLength + (i < shortBlocks ? 0 : 1)
            var block = Array(data[offset..<(offset + dataLength)])
            offset += dataLength
            let ecc = ReedSolomon.remainder(block, divisor: divisor)
            if i < shortBlocks { block.append(0) }  // a place holder, skipped when interleaving
            blocks.append(block + ecc)
        }
        var result: [UInt8] = []
        for i in 0..<blocks[0].count {
            for (j, block) in blocks.enumerated() where i != shortLength - eccLength || j >= shortBlocks {
                result.append(block[i])
            }
        }
        return result
    }

    // MARK: Drawing

    private struct Symbol {
        let version: Int
        let size: Int
        var modules: [Bool]
        var isFunction: [Bool]

        init(version: Int) {
            self.version = version
            self.size = 17 + 4 * version
            self.modules = Array(repeating: false, count: self.size * self.size)
            self.isFunction = self.modules
        }

        mutating func set(_ x: Int, _ y: Int, _ dark: Bool) {
            self.modules[y * self.size + x] = dark
            self.isFunction[y * self.size + x] = true
        }

        func dark(_ x: Int, _ y: Int) -> Bool { self.modules[y * self.size + x] }

        mutating func drawFunctionPatterns(correction: ErrorCorrection) {
            for i in 0..<self.size {
                self.set(6, i, i % 2 == 0)
                self.set(i, 6, i % 2 == 0)
            }
            for (x, y) in [(3, 3), (self.size - 4, 3), (3, self.size - 4)] {
                for dy in -4...4 {
                    for dx in -4...4 where (0..<self.size).contains(x + dx) && (0..<self.size).contains(y + dy) {
                        let distance = max(abs(dx), abs(dy))
                        self.set(x + dx, y + dy, distance != 2 && distance != 4)
                    }
                }
            }
            let positions = self.alignmentPositions()
            for (i, x) in positions.enumerated() {
                for (j, y) in positions.enumerated() {
                    let last = positions.count - 1
                    if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }
                    for dy in -2...2 {
                        for dx in -2...2 { self.set(x + dx, y + dy, max(abs(dx), abs(dy)) != 1) }
                    }
                }
            }
            self.drawFormatBits(correction: correction, mask: 0)  // reserves the area; redrawn after masking
            if self.version >= 7 {
                var remainder = self.version
                for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
                let bits = self.version << 12 | remainder
                for i in 0..<18 {
                    let dark = (bits >> i) & 1 != 0
                    let a = self.size - 11 + i % 3, b = i / 3
                    self.set(a, b, dark)
                    self.set(b, a, dark)
                }
            }
        }

        func alignmentPositions() -> [Int] {
            guard self.version > 1 else { return [] }
            let count = self.version / 7 + 2
            let step = self.version == 32 ? 26 : (self.version * 4 + count * 2 + 1) / (count * 2 - 2) * 2
            var result = [6]
            var position = self.size - 7
            var tail: [Int] = []
            for _ in 1..<count {
                tail.insert(position, at: 0)
                position -= step
            }
            result += tail
            return result
        }

        mutating func drawFormatBits(correction: ErrorCorrection, mask: Int) {
            let data = correction.formatBits << 3 | mask
            var remainder = data
            for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
            let bits = (data << 10 | remainder) ^ 0x5412
            func bit(_ i: Int) -> Bool { (bits >> i) & 1 != 0 }
            for i in 0...5 { self.set(8, i, bit(i)) }
            self.set(8, 7, bit(6))
            self.set(8, 8, bit(7))
            self.set(7, 8, bit(8))
            for i in 9..<15 { self.set(14 - i, 8, bit(i)) }
            for i in 0..<8 { self.set(self.size - 1 - i, 8, bit(i)) }
            for i in 8..<15 { self.set(8, self.size - 15 + i, bit(i)) }
            self.set(8, self.size - 8, true)  // the dark module
        }

        /// Places the codewords in the zigzag of two-module columns, right to left, skipping function modules.
        mutating func drawCodewords(_ codewords: [UInt8]) {
            var i = 0
            var right = self.size - 1
            while right >= 1 {
                if right == 6 { right = 5 }
                for vertical in 0..<self.size {
                    for j in 0..<2 {
                        let x = right - j
                        let upward = (right + 1) & 2 == 0
                        let y = upward ? self.size - 1 - vertical : vertical
                        if !self.isFunction[y * self.size + x], i < codewords.count * 8 {
                            self.modules[y * self.size + x] = (codewords[i >> 3] >> (7 - (i & 7))) & 1 != 0
                            i += 1
                        }
                    }
                }
                right -= 2
            }
        }

        mutating func applyMask(_ mask: Int) {
            for y in 0..<self.size {
                for x in 0..<self.size where !self.isFunction[y * self.size + x] {
                    let invert: Bool
                    switch mask {
                    case 0: invert = (x + y) % 2 == 0
                    case 1: invert = y % 2 == 0
                    case 2: invert = x % 3 == 0
                    case 3: invert = (x + y) % 3 == 0
                    case 4: invert = (x / 3 + y / 2) % 2 == 0
                    case 5: invert = x * y % 2 + x * y % 3 == 0
                    case 6: invert = (x * y % 2 + x * y % 3) % 2 == 0
                    default: invert = ((x + y) % 2 + x * y % 3) % 2 == 0
                    }
                    if invert { self.modules[y * self.size + x].toggle() }
                }
            }
        }

    }

    /// This symbol's penalty (`penalty(_:size:)`).
    var penalty: Int { Self.penalty(self.modules, size: self.size) }

    /// The standard's penalty of a masked symbol: runs of five or more, 2×2 blocks, finder-like patterns
    /// (1:1:3:1:1 with four light modules on a side), and the balance of dark and light. Encoders weigh the
    /// finder-like rule differently in the details, so two of them may pick different masks for the same data.
    static func penalty(_ modules: [Bool], size n: Int) -> Int {
            func dark(_ x: Int, _ y: Int) -> Bool { modules[y * n + x] }
            var result = 0
            for horizontal in [true, false] {
                for a in 0..<n {
                    var runColor = false, run = 0
                    var line: [Bool] = []
                    line.reserveCapacity(n)
                    for b in 0..<n {
                        let dark = horizontal ? dark(b, a) : dark(a, b)
                        line.append(dark)
                        if b > 0 && dark == runColor {
                            run += 1
                            if run == 5 { result += 3 } else if run > 5 { result += 1 }
                        } else {
                            runColor = dark
                            run = 1
                        }
                    }
                    // 1:1:3:1:1 dark-light-dark with four light modules on either side.
                    let pattern: [Bool] = [true, false, true, true, true, false, true]
                    let light = [Bool](repeating: false, count: 4)
                    if n >= 11 {
                        for start in 0...(n - 11) {
                            let window = Array(line[start..<(start + 11)])
                            if window == pattern + light || window == light + pattern { result += 40 }
                        }
                    }
                }
            }
            for y in 0..<(n - 1) {
                for x in 0..<(n - 1) {
                    let c = dark(x, y)
                    if c == dark(x + 1, y) && c == dark(x, y + 1) && c == dark(x + 1, y + 1) {
                        result += 3
                    }
                }
            }
            let darkCount = modules.reduce(0) { $0 + ($1 ? 1 : 0) }
            let total = n * n
            let k = (abs(darkCount * 20 - total * 10) + total - 1) / total - 1
            result += max(0, k) * 10
            return result
    }

    private struct BitBuffer {
        var bytes: [UInt8] = []
        var count = 0

        mutating func append(_ value: Int, _ length: Int) {
            guard length > 0 else { return }
            for i in stride(from: length - 1, through: 0, by: -1) {
                if self.count % 8 == 0 { self.bytes.append(0) }
                if (value >> i) & 1 != 0 { self.bytes[self.bytes.count - 1] |= UInt8(0x80 >> (self.count % 8)) }
                self.count += 1
            }
        }
    }

    /// Reed-Solomon over GF(256) with the polynomial 0x11D, as QR codes use it.
    enum ReedSolomon {
        static func multiply(_ x: UInt8, _ y: UInt8) -> UInt8 {
            var z = 0
            for i in stride(from: 7, through: 0, by: -1) {
                z = (z << 1) ^ ((z >> 7) * 0x11D)
                z ^= ((Int(y) >> i) & 1) * Int(x)
            }
            return UInt8(z & 0xFF)
        }

        static func divisor(degree: Int) -> [UInt8] {
            var result = [UInt8](repeating: 0, count: degree)
            result[degree - 1] = 1
            var root: UInt8 = 1
            for _ in 0..<degree {
                for j in 0..<degree {
                    result[j] = self.multiply(result[j], root)
                    if j + 1 < degree { result[j] ^= result[j + 1] }
                }
                root = self.multiply(root, 0x02)
            }
            return result
        }

        static func remainder(_ data: [UInt8], divisor: [UInt8]) -> [UInt8] {
            var result = [UInt8](repeating: 0, count: divisor.count)
            for b in data {
                let factor = b ^ result.removeFirst()
                result.append(0)
                for i in 0..<result.count { result[i] ^= self.multiply(divisor[i], factor) }
            }
            return result
        }
    }
}
