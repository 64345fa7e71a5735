import Testing

@testable import HomebaseCore

@Suite struct Base64Tests {
    /// RFC 4648 §10 test vectors, both directions.
    @Test(arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(plain: String, encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    /// All 256 byte values and both `+` and `/` survive a round trip, at every length modulo 3.
    @Test func roundTripsAllBytes() {
        let bytes = (0..<256).map { UInt8($0) }
        for count in 250...256 {
            let slice = Array(bytes[0..<count])
            #expect(Base64.decode(Base64.encode(slice)) == slice)
        }
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    }

    /// Strict decoding: each of these is not the canonical encoding of anything and must give nil.
    @Test(arguments: [
        "Zg=",  // length not a multiple of 4
        "Zg",  // unpadded
        "Z===",  // three padding characters
        "====",  // padding only
        "Zg==Zg==",  // padding before the end
        "Zm=v",  // padding followed by data
        "Zh==",  // non-zero unused bits (canonical form is Zg==)
        "Zm9=",  // non-zero unused bits (canonical form is Zm8=)
        "Zm9v\n",  // whitespace
        "Zm 9",  // space inside
        "Zm9-",  // URL-safe alphabet is not accepted
        "Zm9_",
        "Zmé",  // non-ASCII (4 UTF-8 bytes, so only the alphabet check can reject it)
    ])
    func rejectsNonCanonicalInput(_ input: String) {
        #expect(Base64.decode(input) == nil)
    }
}
