/// Deterministic "model output": a hash of the prompt seeds a word generator, so the same prompt always gets
/// the same answer. Tokens are words, each after the first with a leading space, as real tokenisers split.
public struct TextGenerator: Sendable {
    /// The tokens of the full answer (before any `max_tokens` cut).
    public let tokens: [String]
    /// Hash of the prompt; also seeds ids.
    public let seed: UInt64

    public init(prompt: String, minTokens: Int = 12, maxTokens: Int = 48) {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in prompt.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01B3
        }
        self.seed = h
        var rng = SplitMix64(state: h)
        let count = minTokens + Int(rng.next() % UInt64(max(1, maxTokens - minTokens + 1)))
        var out: [String] = []
        out.reserveCapacity(count)
        for i in 0..<count {
            var word = Self.words[Int(rng.next() % UInt64(Self.words.count))]
            if i == 0 { word = word.prefix(1).uppercased() + word.dropFirst() }
            if i == count - 1 { word += "." } else if rng.next() % 9 == 0 { word += "," }
            out.append(i == 0 ? word : " " + word)
        }
        self.tokens = out
    }

    /// Counts words roughly as a tokenizer would for prompt_eval_count.
    public static func estimateTokens(_ text: String) -> Int {
        max(1, text.split(whereSeparator: { $0 == " " || $0 == "\n" }).count)
    }

    static let words = [
        "the", "model", "answers", "quietly", "from", "home", "over", "a", "relay", "that", "sees", "only",
        "ciphertext", "and", "every", "token", "arrives", "in", "order", "while", "the", "phone", "waits",
        "patiently", "for", "light", "river", "stone", "mountain", "signal", "garden", "window", "paper",
        "bright", "steady", "small", "large", "clear", "simple", "answer", "question", "because", "then",
        "later", "today", "system", "network", "local", "remote", "friend", "share", "model", "weather",
    ]
}

/// SplitMix64: a tiny, well-mixed deterministic generator (Steele et al., 2014).
struct SplitMix64: Sendable {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
