import Testing

@testable import HomebaseCrypto

@Suite struct SecureRandomTests {
    @Test func returnsTheRequestedNumberOfBytes() {
        #expect(SecureRandom.bytes(0) == [])
        #expect(SecureRandom.bytes(1).count == 1)
        #expect(SecureRandom.bytes(24).count == 24)
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
    }

    /// The pooled bytes: the requested length, never the same 40 bytes twice across pool refills, and spread
    /// over all byte values (a pool handing out zeros or repeats would fail).
    @Test func publicBytesAreFreshAcrossRefills() {
        #expect(SecureRandom.publicBytes(0) == [])
        var seen = Set<[UInt8]>()
        var counts = [Int](repeating: 0, count: 256)
        for _ in 0..<(3 * SecureRandom.poolBytes / 40 + 7) {
            let bytes = SecureRandom.publicBytes(40)
            #expect(bytes.count == 40)
            #expect(seen.insert(bytes).inserted)
            for b in bytes { counts[Int(b)] += 1 }
        }
        // ~12k bytes: each value expected ~48 times; none absent, none dominant.
        #expect(counts.allSatisfy { $0 > 5 && $0 < 150 })
    }

    @Test func uuidSetsVersionAndVariantBits() {
        #expect(
            SecureRandom.uuidString(fromRandom: [UInt8](repeating: 0, count: 16))
                == "00000000-0000-4000-8000-000000000000")
        #expect(
            SecureRandom.uuidString(fromRandom: [UInt8](repeating: 0xFF, count: 16))
                == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        #expect(SecureRandom.uuidString(fromRandom: Array(0..<16)) == "00010203-0405-4607-8809-0a0b0c0d0e0f")
    }

    @Test func randomUUIDsAreLowercaseV4AndDistinct() {
        var seen = Set<String>()
        for _ in 0..<100 {
            let uuid = SecureRandom.uuidString()
            let chars = Array(uuid)
            #expect(chars.count == 36)
            #expect([8, 13, 18, 23].allSatisfy { chars[$0] == "-" })
            #expect(chars[14] == "4")
            #expect("89ab".contains(chars[19]))
            #expect(uuid.replacingOccurrences(of: "-", with: "").allSatisfy { "0123456789abcdef".contains($0) })
            seen.insert(uuid)
        }
        #expect(seen.count == 100)
    }
}
