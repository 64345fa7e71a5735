import FoundationEssentials
import HomebaseCore

/// Ways a harness reads its input. Most inputs are `control bytes || payload`: the control bytes choose the
/// parser's limits and where the payload is cut, so that the fuzzer explores those along with the bytes.
enum FuzzInput {
    /// The payload cut into pieces, as reads from a socket might cut it; `seed` chooses the cuts, so the
    /// fuzzer controls them. Seed 0 is one piece; otherwise piece lengths come from a generator seeded with
    /// it, up to 1 to 128 bytes (the low bits pick the scale), and never so short that there are more than
    /// about 256 pieces: cutting a long input into single bytes costs more executions than it finds.
    static func pieces(_ bytes: ArraySlice<UInt8>, seed: UInt8) -> [ArraySlice<UInt8>] {
        guard seed != 0 else { return [bytes] }
        let scales = [1, 2, 3, 8, 16, 40, 128, 7]
        let scale = max(scales[Int(seed & 0x07)], bytes.count / 128)
        var rng = SplitMix(seed: UInt64(seed))
        var out: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let length = 1 + Int(rng.next() % UInt64(scale))
            let end = min(bytes.endIndex, start + length)
            out.append(bytes[start..<end])
            start = end
        }
        if out.isEmpty { out.append(bytes) }
        return out
    }

    /// One byte at a time: the finest cut.
    static func bytewise(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        bytes.indices.map { bytes[$0..<($0 + 1)] }
    }

    /// Cut after every line end (`\n`, or `\r` not followed by `\n`): no read holds two line ends. For a line
    /// parser that refuses a read whole when a line in it is too long, this delivers what one byte at a time
    /// would (a read that fails holds one line, which completes nothing before it), at a fraction of the cost;
    /// it is the reference the other cuts are compared with.
    static func lines(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            i += 1
            if byte == UInt8(ascii: "\n") || (byte == UInt8(ascii: "\r") && (i == bytes.endIndex || bytes[i] != UInt8(ascii: "\n"))) {
                out.append(bytes[start..<i])
                start = i
            }
        }
        if start < bytes.endIndex { out.append(bytes[start...]) }
        return out
    }

    /// A limit chosen by a control byte: small values, where boundaries are cheap to reach, and 255 for the
    /// production default.
    static func limit(_ byte: UInt8, small: Int, production: Int) -> Int {
        byte == 255 ? production : 1 + Int(byte) % small
    }
}

/// SplitMix64: a tiny deterministic generator for cut points.
struct SplitMix {
    private var state: UInt64

    init(seed: UInt64) { self.state = seed }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Reading `Fixtures/` for seeds (Fixtures/ is outside every target; found from this file's path, as the tests do).
enum FixtureFiles {
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Sources/FuzzHarnesses/FuzzInput.swift
        return parts.joined(separator: "/") + "/Fixtures"
    }()

    /// A file's bytes; empty when it cannot be read (seeds are a starting point, never a requirement).
    static func bytes(_ name: String) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: Self.root + "/" + name) else { return [] }
        return Array(data)
    }

    /// The `vectors` array of a vector file, as JSON nodes.
    static func vectors(_ name: String) -> [JSONNode] {
        let bytes = Self.bytes(name)
        let node = bytes.withUnsafeBufferPointer { try? JSONNode.parse($0) }
        return node?["vectors"]?.arrayValue ?? []
    }

    /// Every string found under `key` at any depth of a vector (`inputs.json`, `hex`, ...).
    static func strings(_ key: String, in node: JSONNode) -> [String] {
        switch node {
        case .object(let members):
            return members.flatMap { member -> [String] in
                if member.key == key, let s = member.value.stringValue { return [s] }
                return Self.strings(key, in: member.value)
            }
        case .array(let items):
            return items.flatMap { Self.strings(key, in: $0) }
        default:
            return []
        }
    }

    /// Hex strings under `key` in every vector of a file, decoded.
    static func hexValues(_ key: String, in file: String) -> [[UInt8]] {
        Self.vectors(file).flatMap { Self.strings(key, in: $0) }.compactMap { Hex.decode($0) }
    }

    /// UTF-8 strings under `key` in every vector of a file.
    static func textValues(_ key: String, in file: String) -> [[UInt8]] {
        Self.vectors(file).flatMap { Self.strings(key, in: $0) }.map { Array($0.utf8) }
    }

    /// The files in `Fixtures/<directory>`, sorted by name; empty when there is no such directory.
    static func files(in directory: String) -> [(name: String, bytes: [UInt8])] {
        let path = Self.root + "/" + directory
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return [] }
        return names.sorted().compactMap { name in
            guard !name.hasPrefix("."), let data = FileManager.default.contents(atPath: path + "/" + name) else {
                return nil
            }
            return (name, Array(data))
        }
    }
}

extension Array where Element == UInt8 {
    /// `control || self`: a fixture as a seed for a target whose input starts with control bytes.
    func prefixed(_ control: UInt8...) -> [UInt8] { control + self }
}
