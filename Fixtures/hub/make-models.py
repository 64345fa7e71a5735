#!/usr/bin/env python3
"""Writes models.json: the hub-emulator's fixture list of mlx-community repos (see README.md).

Deterministic: the same script writes the same bytes. Names are real mlx-community repo ids (the org's
naming grammars, quant suffixes and awkward cases); metadata follows the shapes of the Hub's /api/models
listing with every expansion the catalog asks for, computed from each model's published parameter count.
"""
import hashlib, json, sys

# (name stem, params in billions, model_type, pipeline_tag, quant suffixes)
TEXT, VISION, ANY = "text-generation", "image-text-to-text", "any-to-any"
Q = ["4bit", "8bit", "bf16"]
Q5 = ["3bit", "4bit", "6bit", "8bit", "bf16"]
SERIES = [
    # Qwen 2.5 / 3 and variants
    *[(f"Qwen2.5-{s}-Instruct", p, "qwen2", TEXT, Q) for s, p in [("0.5B", .494), ("1.5B", 1.54), ("3B", 3.09), ("7B", 7.62), ("14B", 14.7), ("32B", 32.8), ("72B", 72.7)]],
    *[(f"Qwen2.5-Coder-{s}-Instruct", p, "qwen2", TEXT, ["4bit", "8bit"]) for s, p in [("0.5B", .494), ("1.5B", 1.54), ("3B", 3.09), ("7B", 7.62), ("14B", 14.7), ("32B", 32.8)]],
    *[(f"Qwen2.5-Math-{s}-Instruct", p, "qwen2", TEXT, ["4bit"]) for s, p in [("1.5B", 1.54), ("7B", 7.62)]],
    *[(f"Qwen2.5-{s}", p, "qwen2", TEXT, ["4bit"]) for s, p in [("0.5B", .494), ("1.5B", 1.54), ("7B", 7.62)]],
    *[(f"Qwen3-{s}", p, "qwen3", TEXT, Q5) for s, p in [("0.6B", .596), ("1.7B", 1.72), ("4B", 4.02), ("8B", 8.19), ("14B", 14.8), ("32B", 32.8)]],
    ("Qwen3-30B-A3B", 30.5, "qwen3_moe", TEXT, ["4bit", "4bit-DWQ", "8bit"]),
    ("Qwen3-4B-Thinking-2507", 4.02, "qwen3", TEXT, ["4bit", "8bit"]),
    ("Qwen3-4B-Instruct-2507", 4.02, "qwen3", TEXT, ["4bit", "8bit"]),
    ("Qwen1.5-0.5B-Chat", .464, "qwen2", TEXT, ["4bit"]),
    ("QwQ-32B", 32.8, "qwen2", TEXT, ["4bit", "8bit"]),
    *[(f"Qwen2-VL-{s}-Instruct", p, "qwen2_vl", VISION, Q) for s, p in [("2B", 2.21), ("7B", 8.29)]],
    *[(f"Qwen2.5-VL-{s}-Instruct", p, "qwen2_5_vl", VISION, Q) for s, p in [("3B", 3.75), ("7B", 8.29), ("32B", 33.5), ("72B", 73.4)]],
    *[(f"Qwen3-VL-{s}-Instruct", p, "qwen3_vl", VISION, ["4bit", "8bit"]) for s, p in [("4B", 4.44), ("8B", 8.77)]],
    ("Qwen2.5-Omni-7B", 10.7, "qwen2_5_omni", ANY, ["4bit"]),
    # Llama
    *[(f"Llama-3.2-{s}-Instruct", p, "llama", TEXT, Q) for s, p in [("1B", 1.24), ("3B", 3.21)]],
    *[(f"Llama-3.2-{s}", p, "llama", TEXT, ["4bit"]) for s, p in [("1B", 1.24), ("3B", 3.21)]],
    ("Llama-3.2-11B-Vision-Instruct", 10.7, "mllama", VISION, ["4bit", "8bit"]),
    ("Meta-Llama-3.1-8B-Instruct", 8.03, "llama", TEXT, Q),
    ("Meta-Llama-3.1-70B-Instruct", 70.6, "llama", TEXT, ["4bit"]),
    ("Meta-Llama-3-8B-Instruct", 8.03, "llama", TEXT, ["4bit", "8bit"]),
    ("Llama-3.3-70B-Instruct", 70.6, "llama", TEXT, ["3bit", "4bit", "8bit"]),
    ("CodeLlama-7b-Instruct-hf", 6.74, "llama", TEXT, ["4bit-MLX"]),
    ("CodeLlama-13b-Instruct-hf", 13.0, "llama", TEXT, ["4bit-MLX"]),
    ("Hermes-3-Llama-3.1-8B", 8.03, "llama", TEXT, ["4bit", "8bit"]),
    ("dolphin-2.9-llama3-8b", 8.03, "llama", TEXT, ["4bit"]),
    ("llava-1.5-7b", 7.06, "llava", VISION, ["4bit"]),
    # Gemma
    *[(f"gemma-2-{s}-it", p, "gemma2", TEXT, Q) for s, p in [("2b", 2.61), ("9b", 9.24), ("27b", 27.2)]],
    ("gemma-3-1b-it", 1.0, "gemma3_text", TEXT, ["4bit", "8bit", "bf16", "qat-4bit"]),
    *[(f"gemma-3-{s}-it", p, "gemma3", VISION, ["4bit", "8bit", "bf16", "qat-4bit"]) for s, p in [("4b", 4.3), ("12b", 12.2), ("27b", 27.4)]],
    *[(f"gemma-3-{s}-pt", p, "gemma3", VISION, ["4bit"]) for s, p in [("4b", 4.3), ("12b", 12.2)]],
    *[(f"gemma-3n-{s}-it", p, "gemma3n", ANY, ["4bit", "bf16"]) for s, p in [("E2B", 5.44), ("E4B", 7.85)]],
    ("paligemma-3b-mix-448", 2.92, "paligemma", VISION, ["8bit"]),
    ("codegemma-7b-it", 8.54, "gemma", TEXT, ["4bit", "8bit"]),
    # Phi
    ("Phi-3-mini-4k-instruct", 3.82, "phi3", TEXT, ["4bit", "8bit"]),
    ("Phi-3.5-mini-instruct", 3.82, "phi3", TEXT, ["4bit", "8bit", "bf16"]),
    ("Phi-3.5-vision-instruct", 4.15, "phi3_v", VISION, ["4bit"]),
    ("Phi-3.5-MoE-instruct", 41.9, "phimoe", TEXT, ["4bit"]),
    ("phi-4", 14.7, "phi3", TEXT, ["4bit", "8bit"]),
    ("Phi-4-mini-instruct", 3.84, "phi3", TEXT, ["4bit", "8bit"]),
    ("Phi-4-mini-reasoning", 3.84, "phi3", TEXT, ["4bit"]),
    # Mistral family
    ("Mistral-7B-Instruct-v0.3", 7.25, "mistral", TEXT, ["4bit", "8bit", "bf16"]),
    ("Mistral-7B-v0.1", 7.24, "mistral", TEXT, ["4bit"]),
    ("Mistral-Nemo-Instruct-2407", 12.2, "mistral", TEXT, ["4bit", "8bit"]),
    ("Mistral-Small-3.1-24B-Instruct-2503", 24.0, "mistral3", VISION, ["4bit", "8bit"]),
    ("Mistral-Small-24B-Instruct-2501", 23.6, "mistral", TEXT, ["4bit"]),
    ("Mixtral-8x7B-Instruct-v0.1", 46.7, "mixtral", TEXT, ["4bit"]),
    ("Ministral-8B-Instruct-2410", 8.02, "mistral", TEXT, ["4bit"]),
    ("pixtral-12b", 12.7, "llava", VISION, ["4bit", "8bit"]),
    ("Devstral-Small-2505", 23.6, "mistral", TEXT, ["4bit"]),
    ("Magistral-Small-2506", 23.6, "mistral", TEXT, ["4bit"]),
    ("Codestral-22B-v0.1", 22.2, "mistral", TEXT, ["4bit"]),
    # DeepSeek
    *[(f"DeepSeek-R1-Distill-Qwen-{s}", p, "qwen2", TEXT, ["4bit", "8bit"]) for s, p in [("1.5B", 1.78), ("7B", 7.62), ("14B", 14.8), ("32B", 32.8)]],
    ("DeepSeek-R1-Distill-Llama-8B", 8.03, "llama", TEXT, ["4bit"]),
    ("DeepSeek-Coder-V2-Lite-Instruct", 15.7, "deepseek_v2", TEXT, ["4bit"]),
    ("deepseek-vl2-small", 16.1, "deepseek_vl_v2", VISION, ["4bit"]),
    # Small ones
    *[(f"SmolLM2-{s}-Instruct", p, "llama", TEXT, ["", "4bit", "8bit"]) for s, p in [("135M", .135), ("360M", .362), ("1.7B", 1.71)]],
    ("SmolLM3-3B", 3.08, "smollm3", TEXT, ["4bit", "8bit"]),
    ("SmolVLM-Instruct", 2.25, "idefics3", VISION, ["4bit", "bf16"]),
    ("SmolVLM2-2.2B-Instruct-mlx", 2.25, "smolvlm", VISION, [""]),
    ("SmolVLM2-500M-Video-Instruct-mlx", .507, "smolvlm", VISION, [""]),
    ("granite-3.3-2b-instruct", 2.53, "granite", TEXT, ["4bit"]),
    ("granite-3.3-8b-instruct", 8.17, "granite", TEXT, ["4bit"]),
    ("OLMo-2-1124-7B-Instruct", 7.3, "olmo2", TEXT, ["4bit"]),
    ("EXAONE-3.5-2.4B-Instruct", 2.41, "exaone", TEXT, ["4bit"]),
    ("internlm2_5-7b-chat", 7.74, "internlm2", TEXT, ["4bit"]),
    ("GLM-4-9B-0414", 9.4, "glm4", TEXT, ["4bit"]),
    ("GLM-4.1V-9B-Thinking", 10.3, "glm4v", VISION, ["4bit"]),
    ("LFM2-1.2B", 1.17, "lfm2", TEXT, ["4bit", "8bit"]),
    ("LFM2-VL-1.6B", 1.58, "lfm2_vl", VISION, ["4bit", "8bit"]),
    ("gpt-oss-20b", 20.9, "gpt_oss", TEXT, ["MXFP4-Q8"]),
    ("gpt-oss-120b", 117.0, "gpt_oss", TEXT, ["MXFP4-Q8"]),
    ("Kimi-VL-A3B-Thinking-2506", 16.4, "kimi_vl", VISION, ["4bit"]),
    ("FastVLM-0.5B", .76, "llava_qwen2", VISION, ["bf16"]),
    ("aya-expanse-8b", 8.03, "cohere", TEXT, ["4bit"]),
    ("c4ai-command-r-v01", 35.0, "cohere", TEXT, ["4bit"]),
    ("Falcon3-7B-Instruct", 7.46, "llama", TEXT, ["4bit"]),
    ("Nemotron-Mini-4B-Instruct", 4.19, "nemotron", TEXT, ["4bit"]),
    ("stablelm-2-zephyr-1_6b", 1.64, "stablelm", TEXT, ["4bit"]),
    ("OpenELM-3B-Instruct", 3.04, "openelm", TEXT, ["4bit"]),
    ("starcoder2-7b", 7.17, "starcoder2", TEXT, ["4bit"]),
    ("Llama-3.1-Nemotron-Nano-8B-v1", 8.03, "llama", TEXT, ["4bit"]),
    ("ERNIE-4.5-0.3B-PT", .36, "ernie4_5", TEXT, ["bf16"]),
    ("dbrx-instruct", 132.0, "dbrx", TEXT, ["4bit"]),
    ("mamba-2.8b-hf", 2.77, "mamba", TEXT, ["f32"]),
    ("Florence-2-large-ft", .77, "florence2", VISION, ["bf16"]),
    # Under other tags: the three queries never return these.
    ("whisper-large-v3-turbo", .809, "whisper", "automatic-speech-recognition", [""]),
    ("whisper-large-v3-mlx", 1.54, "whisper", "automatic-speech-recognition", [""]),
    ("Kokoro-82M", .082, "kokoro", "text-to-speech", ["bf16", "4bit"]),
    ("bge-small-en-v1.5", .033, "bert", "feature-extraction", ["bf16"]),
    ("all-MiniLM-L6-v2", .023, "bert", "sentence-similarity", ["4bit"]),
    ("nomicai-modernbert-embed-base", .149, "modernbert", "feature-extraction", ["8bit"]),
]


def repo_name(stem, quant):
    return stem if not quant else f"{stem}-{quant}"


def bits_of(quant):
    for b in (2, 3, 4, 5, 6, 8):
        if quant.startswith(f"{b}bit") or quant.startswith(f"qat-{b}bit"):
            return b
    if quant.startswith("MXFP4"):
        return 4
    return None


def params_block(billions, quant):
    """The safetensors expansion: dtype counts as the Hub computes them for an MLX build."""
    n = int(billions * 1e9)
    bits = bits_of(quant)
    if bits is None:
        dtype = "F32" if quant in ("f32", "fp32") else "F16" if quant in ("fp16", "f16") else "BF16"
        return {"parameters": {dtype: n}, "total": n}
    quantized = int(n * 0.97)
    u32 = quantized * bits // 32                       # packed weights
    bf16 = quantized * 2 // 64 + (n - quantized)       # group scales and biases, norms
    return {"parameters": {"BF16": bf16, "U32": u32}, "total": bf16 + u32}


def digest(*parts):
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def entry(stem, billions, model_type, tag, quant, index):
    rid = f"mlx-community/{repo_name(stem, quant)}"
    h = digest(rid)
    month = 1 + index % 12
    e = {
        "_id": h[:24],
        "id": rid,
        "author": "mlx-community",
        "sha": digest("sha", rid)[:40],
        "lastModified": f"2025-{month:02d}-{1 + index % 27:02d}T{index % 24:02d}:00:00.000Z",
        "createdAt": f"2024-{month:02d}-{1 + index % 27:02d}T10:00:00.000Z",
        "private": False,
        "gated": False,
        "disabled": False,
        "downloads": int(h[:6], 16) % 200000,
        "likes": int(h[6:10], 16) % 400,
        "library_name": "mlx",
        "pipeline_tag": tag,
        "tags": ["mlx", "safetensors", model_type, tag, "conversational", "license:apache-2.0", "region:us"],
        "config": {"architectures": [f"{model_type.title().replace('_', '')}ForCausalLM"], "model_type": model_type,
                   "tokenizer_config": {"eos_token": "<|im_end|>"}},
        "safetensors": params_block(billions, quant),
    }
    if bits_of(quant):
        e["config"]["quantization_config"] = {"group_size": 64, "bits": bits_of(quant)}
    # Real gaps, deterministically spread: some repos have no safetensors block (the Hub did not compute it), a few
    # no model_type, a few no pipeline_tag (then only the model_type or the name can say "vision").
    if int(h[10:12], 16) % 7 == 0:
        del e["safetensors"]
    if int(h[12:14], 16) % 23 == 0:
        e["config"] = {"architectures": e["config"]["architectures"]}
    if int(h[14:16], 16) % 29 == 0 and tag in (TEXT, VISION, ANY):
        del e["pipeline_tag"]
    return e


def main():
    out = []
    for stem, billions, model_type, tag, quants in SERIES:
        for quant in quants:
            out.append(entry(stem, billions, model_type, tag, quant, len(out)))
    out.sort(key=lambda e: -e["downloads"])
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    print(f"{len(out)} repos", file=sys.stderr)


main()
