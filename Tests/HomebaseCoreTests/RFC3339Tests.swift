import Testing
@testable import HomebaseCore

@Suite struct RFC3339Tests {
    @Test(arguments: [
        ("1970-01-01T00:00:00Z", UInt64(0)),
        ("2024-06-04T14:38:31.83753-07:00", UInt64(1_717_537_111_837)),
        ("2024-06-04T21:38:31.837Z", UInt64(1_717_537_111_837)),
        ("2000-02-29T12:00:00+05:30", UInt64(951_805_800_000)),
        ("2318-06-27T07:13:20.123456789+00:00", UInt64(10_997_104_400_123)),  // a pinned model's 2318
        ("2026-12-07t13:05:00z", UInt64(1_796_648_700_000)),
    ])
    func parsesOllamasTimes(text: String, ms: UInt64) {
        #expect(RFC3339.milliseconds(text) == ms)
    }

    @Test(arguments: [
        "", "2024-06-04", "2024-06-04T14:38:31", "2024-13-04T14:38:31Z", "2024-06-04T24:00:00Z",
        "2024-06-04T14:38:31.Z", "2024-06-04T14:38:31.1234567890Z", "2024-06-04T14:38:31+7:00",
        "2024-06-04T14:38:31Zjunk", "1969-12-31T23:59:59Z", "2024-06-04T14:38:31+25:00", "x024-06-04T14:38:31Z",
        "0001-01-01T00:00:00Z", String(repeating: "9", count: 200),
    ])
    func refusesAnythingElse(text: String) {
        #expect(RFC3339.milliseconds(text) == nil)
    }
}
