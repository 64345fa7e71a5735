import Testing
@testable import HomebaseCore

@Suite struct HomebaseCorePlaceholder {
    @Test func moduleLoads() {}
}
