import Testing
@testable import HomebaseTransport

@Suite struct HomebaseTransportPlaceholder {
    @Test func moduleLoads() {}
}
