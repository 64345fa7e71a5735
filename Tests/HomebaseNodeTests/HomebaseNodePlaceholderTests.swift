import Testing
@testable import HomebaseNode

@Suite struct HomebaseNodePlaceholder {
    @Test func moduleLoads() {}
}
