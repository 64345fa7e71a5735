import Foundation
import HomebaseCore
import Testing
@testable import HomebaseService

/// Issue 38, item 6: `RuntimeModelInfo` is composed of the advert's `AdvertPayload.Model` plus what only the
/// daemon knows. Its JSON (the daemon status in the state database, `/api/status`) stays the flat camelCase
/// record it was; these strings are what the record encoded to before the change.
@Suite struct RuntimeModelInfoCodingTests {
    static func full() -> RuntimeModelInfo {
        var m = RuntimeModelInfo(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B", quantization: "Q4_K_M",
                                 capabilities: ["completion", "tools"], contextLength: 8192, loaded: true,
                                 unknown: ["family"])
        m.trainedContextLength = 32768
        m.contextServed = true
        m.memoryBytes = 5_000_000_000
        m.vramBytes = 4_000_000_000
        m.unloadsAtMs = 1_765_000_000_000
        return m
    }

    static func cloud() -> RuntimeModelInfo {
        RuntimeModelInfo(tag: "gpt-oss:120b-cloud", family: "gptoss", parameterSize: "116.8B", quantization: "MXFP4",
                         capabilities: ["completion"], contextLength: nil, loaded: false, cloud: true)
    }

    static let fullJSON = #"{"capabilities":["completion","tools"],"cloud":false,"contextLength":8192,"contextServed":true,"family":"qwen2","loaded":true,"memoryBytes":5000000000,"parameterSize":"7.6B","quantization":"Q4_K_M","tag":"qwen2.5:7b","trainedContextLength":32768,"unknown":["family"],"unloadsAtMs":1765000000000,"vramBytes":4000000000}"#
    static let cloudJSON = #"{"capabilities":["completion"],"cloud":true,"contextServed":false,"family":"gptoss","loaded":false,"parameterSize":"116.8B","quantization":"MXFP4","tag":"gpt-oss:120b-cloud"}"#

    /// Sorted keys: Foundation's unsorted key order differs from run to run, so only sorted output is a fixed
    /// byte string; the keys and values are what is compared.
    static func encode(_ m: RuntimeModelInfo) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(m), as: UTF8.self)
    }

    @Test func encodesTheFlatRecordItAlwaysDid() throws {
        #expect(try Self.encode(Self.full()) == Self.fullJSON)
        #expect(try Self.encode(Self.cloud()) == Self.cloudJSON)
    }

    @Test func decodesWhatItEncodes() throws {
        for m in [Self.full(), Self.cloud()] {
            let decoded = try JSONDecoder().decode(RuntimeModelInfo.self, from: Data(try Self.encode(m).utf8))
            #expect(decoded == m)
        }
    }

    /// A report written before `cloud`, `contextServed` and the load details existed reads as a local model.
    @Test func decodesAnOldRecordWithoutCloud() throws {
        let old = #"{"tag":"llama3.2:3b","family":"llama","parameterSize":"3.2B","quantization":"Q4_K_M","capabilities":["completion"],"contextLength":4096,"loaded":true}"#
        let m = try JSONDecoder().decode(RuntimeModelInfo.self, from: Data(old.utf8))
        #expect(m == RuntimeModelInfo(tag: "llama3.2:3b", family: "llama", parameterSize: "3.2B",
                                      quantization: "Q4_K_M", capabilities: ["completion"], contextLength: 4096,
                                      loaded: true))
        #expect(!m.cloud)
        #expect(!m.contextServed)
        #expect(m.trainedContextLength == nil && m.memoryBytes == nil && m.unknown == nil)
    }

    @Test func aRecordMissingARequiredFieldIsRefused() {
        let truncated = #"{"tag":"llama3.2:3b","family":"llama","parameterSize":"3.2B","capabilities":["completion"],"loaded":true}"#
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(RuntimeModelInfo.self, from: Data(truncated.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(RuntimeModelInfo.self, from: Data(#"{"tag":"m","cloud":"yes"}"#.utf8))
        }
    }
}
