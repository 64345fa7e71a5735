import HomebaseCore
import Testing
@testable import HomebaseRouter

@Suite struct LLMRouterBannerTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var setup: @Sendable (Harness) throws -> Void
        var text: String
        var stale = false
        var testDescription: String { self.text }
    }

    static let cases: [Case] = [
        Case(setup: { try $0.radio(.apple) }, text: "On-device · floor"),
        Case(setup: { h in
            try h.radio(.community)
            try h.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        }, text: "On-device · qwen2.5:0.5b"),
        Case(setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 0)
        }, text: "External · qwen2.5:7b via Homebase"),
        Case(setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.verifiedEndpoint()
        }, text: "External · qwen2.5:7b on this computer"),
        Case(setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend)); h.joinedHomebase()
        }, text: "External · llama3.1:70b via Ana"),
        Case(setup: { h in
            try h.radio(.external); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joined.upsert(Fixture.joined(name: nil, lastHeardMs: h.now))
        }, text: "External · llama3.1:70b via b2b2b2b2"),
        Case(setup: { h in
            try h.radio(.external); try h.dropdown(.openai); try h.addKey("sk-one", .openai)
        }, text: "OpenAI · gpt-4o-mini"),
        Case(setup: { h in
            try h.radio(.external); try h.dropdown(.claude); try h.addKey("sk-ant-one", .anthropic)
        }, text: "Claude · claude-sonnet-4-5"),
        Case(setup: { h in
            try h.radio(.external); try h.select("qwen2.5:7b"); try h.advert(ageMs: 10 * Fixture.minute)
        }, text: "On-device · floor", stale: true),
        Case(setup: { h in
            try h.radio(.apple); try h.select("llama3.1:70b", host: .joined(Fixture.friend))
            h.joinedHomebase(ageMs: 24 * Fixture.hour)
        }, text: "On-device · floor", stale: true),
    ]

    @Test(arguments: Self.cases)
    func bannerNamesTheResolvedRoute(_ testCase: Case) throws {
        let harness = Harness()
        try testCase.setup(harness)
        let banner = harness.router.banner()
        #expect(banner.text == testCase.text)
        #expect(banner.staleNotice == (testCase.stale ? RouteBanner.staleText : nil))
    }

    @Test func staleTextIsTheSeedsWording() {
        #expect(RouteBanner.staleText == "Not heard from recently — inference falls back on-device until it's back.")
    }
}
