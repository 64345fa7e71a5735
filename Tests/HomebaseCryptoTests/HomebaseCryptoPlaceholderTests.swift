import Testing
@testable import HomebaseCrypto

@Suite struct HomebaseCryptoPlaceholder {
    @Test func moduleLoads() {}
}
