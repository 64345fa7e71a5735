import CSodium
import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// Both implementations behind `SHA256Hasher`: the SHA extensions (skipped, and shown as skipped, on a CPU without
/// them) and libsodium, the fallback everywhere else.
@Suite struct SHA256Tests {
    static let hasSHAExtensions = SHA256.Implementation.shaExtensions.isAvailable

    // MARK: NIST vectors (FIPS 180-2 Appendix B, NIST CSRC examples)

    @Test(.enabled(if: Self.hasSHAExtensions, "CPU without the SHA extensions"))
    func nistVectorsWithSHAExtensions() {
        Self.checkNISTVectors(.shaExtensions)
    }

    @Test func nistVectorsWithLibsodium() {
        Self.checkNISTVectors(.libsodium)
    }

    static func checkNISTVectors(_ implementation: SHA256.Implementation) {
        func hex(_ message: [UInt8]) -> String {
            let hasher = SHA256Hasher(implementation: implementation)
            hasher.update(message)
            return Hex.encode(hasher.finalize())
        }
        #expect(hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // 448 bits: the padding no longer fits the block, so it takes a second one.
        #expect(hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // 896 bits.
        #expect(hex(Array(("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                           + "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu").utf8))
                == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        #expect(hex([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    // MARK: Differential against libsodium's one-shot crypto_hash_sha256

    @Test(.enabled(if: Self.hasSHAExtensions, "CPU without the SHA extensions"))
    func matchesLibsodiumWithSHAExtensions() {
        Self.checkAgainstLibsodium(.shaExtensions)
    }

    @Test func matchesLibsodiumWithLibsodium() {
        Self.checkAgainstLibsodium(.libsodium)
    }

    /// Every length 0…200 in one piece (each padding case around one and two blocks), then 3,000 random messages of
    /// 0…5,000 bytes cut into up to 6 pieces at random points, fed alternately as collections and raw buffers.
    static func checkAgainstLibsodium(_ implementation: SHA256.Implementation) {
        var seeds = SystemRandomNumberGenerator()
        let seed = seeds.next() as UInt64
        var random = SplitMix64(seed: seed)
        let pool = (0..<5_000).map { _ in UInt8.random(in: .min ... .max, using: &random) }

        for length in 0...200 {
            let message = Array(pool[..<length])
            let hasher = SHA256Hasher(implementation: implementation)
            hasher.update(message)
            #expect(hasher.finalize() == Self.libsodiumHash(message), "length \(length)")
        }
        var failures = 0
        for _ in 0..<3_000 where failures < 5 {
            let message = pool[..<Int.random(in: 0...pool.count, using: &random)]
            let cuts = (0..<Int.random(in: 0...5, using: &random)).map { _ in
                Int.random(in: 0...message.count, using: &random)
            }.sorted()
            let hasher = SHA256Hasher(implementation: implementation)
            var start = 0
            for (i, end) in (cuts + [message.count]).enumerated() {
                if i.isMultiple(of: 2) {
                    hasher.update(message[start..<end])
                } else {
                    message[start..<end].withUnsafeBytes { hasher.update(raw: $0) }
                }
                start = end
            }
            let matches = hasher.finalize() == Self.libsodiumHash(Array(message))
            if !matches { failures += 1 }
            #expect(matches, "seed \(seed): length \(message.count), cuts \(cuts)")
        }
    }

    static func libsodiumHash(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let rc = crypto_hash_sha256(&out, message, UInt64(message.count))
        precondition(rc == 0)
        return out
    }

    // MARK: Choice of implementation

    /// CPUID (leaf 7, EBX bit 29, with SSSE3 and SSE4.1) agrees with the kernel's view of the CPU, so a machine with
    /// the instructions uses them and one without never executes them.
    @Test func detectionAgreesWithTheKernel() throws {
        #if arch(x86_64) && os(Linux)
        let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flagsLine = try #require(cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") })
        let flags = Set(flagsLine.split(separator: " ").map(String.init))
        let kernelSays = flags.isSuperset(of: ["sha_ni", "ssse3", "sse4_1"])
        #expect(SHA256.Implementation.shaExtensions.isAvailable == kernelSays)
        #expect(SHA256.fastest == (kernelSays ? .shaExtensions : .libsodium))
        #else
        #expect(!SHA256.Implementation.shaExtensions.isAvailable)
        #endif
    }

    @Test func piecesHashLikeTheWhole() {
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = SHA256Hasher()
        var i = 0
        for size in [1, 63, 64, 65, 4096, 31_000] {
            hasher.update(data[i..<min(i + size, data.count)])
            i += size
        }
        data[i...].withUnsafeBytes { hasher.update(raw: $0) }
        #expect(hasher.finalize() == SHA256.hash(data))
    }
}

/// A seeded generator, so a failing random case can be named by its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
