import Testing
@testable import RelayService

@Suite struct RelayServicePlaceholder {
    @Test func moduleLoads() {}
}
