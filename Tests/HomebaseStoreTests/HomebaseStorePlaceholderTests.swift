import Testing
@testable import HomebaseStore

@Suite struct HomebaseStorePlaceholder {
    @Test func moduleLoads() {}
}
