import Testing
@testable import HomebaseService

@Suite struct HomebaseServicePlaceholder {
    @Test func moduleLoads() {}
}
