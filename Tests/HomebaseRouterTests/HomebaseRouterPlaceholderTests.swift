import Testing
@testable import HomebaseRouter

@Suite struct HomebaseRouterPlaceholder {
    @Test func moduleLoads() {}
}
