#!/usr/bin/env python3
"""Writes a Hugging Face Qwen3-MoE checkpoint with random BF16 weights, as transformers saves
one (config.json, model.safetensors with one tensor per expert), of the qwen3moe-2b preset's
shape by default: what bench/hf_moe_load.sh loads. Standard library only; the values are a
64 MiB block of random BF16 numbers of magnitude 2^-7..2^-5, each tensor a slice of it at a
random offset (norms are ones). --fp8 writes the attention and expert projections as the
"-FP8" releases do: F8_E4M3 codes (random, never NaN) with a float scale per 128 x 128 block
(`NAME_scale_inv`) and config.json's quantization_config; loom dequantizes them to BF16 at load.
  python3 bench/hf_moe_checkpoint.py /tmp/loom-hf/qwen3moe-2b
  python3 bench/hf_moe_checkpoint.py --fp8 /tmp/loom-hf/qwen3moe-2b-fp8
--gpt-oss writes gpt-oss as OpenAI publishes it (experts as MXFP4 `_blocks` and `_scales`,
the rest BF16) at the gpt-oss-1b preset's shape:
  python3 bench/hf_moe_checkpoint.py --gpt-oss /tmp/loom-hf/gpt-oss-1b
--gpt-oss-20b: the same at openai/gpt-oss-20b's shape (13.8 GB).
"""
import json
import os
import random
import struct
import sys

SHAPE = dict(hidden=1024, layers=16, heads=16, kv_heads=4, head_dim=128, experts=64, used=8,
             expert_ff=512, vocab=32000)


def tensors(s):
    """(name, shape) in the order written; shapes in torch order (rows, cols)."""
    H, D = s["hidden"], s["head_dim"]
    yield "model.embed_tokens.weight", [s["vocab"], H]
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [H]
        yield p + "post_attention_layernorm.weight", [H]
        yield p + "self_attn.q_proj.weight", [s["heads"] * D, H]
        yield p + "self_attn.k_proj.weight", [s["kv_heads"] * D, H]
        yield p + "self_attn.v_proj.weight", [s["kv_heads"] * D, H]
        yield p + "self_attn.o_proj.weight", [H, s["heads"] * D]
        yield p + "self_attn.q_norm.weight", [D]
        yield p + "self_attn.k_norm.weight", [D]
        yield p + "mlp.gate.weight", [s["experts"], H]
        for e in range(s["experts"]):
            yield p + f"mlp.experts.{e}.gate_proj.weight", [s["expert_ff"], H]
            yield p + f"mlp.experts.{e}.up_proj.weight", [s["expert_ff"], H]
            yield p + f"mlp.experts.{e}.down_proj.weight", [H, s["expert_ff"]]
    yield "model.norm.weight", [H]
    yield "lm_head.weight", [s["vocab"], H]


# gpt-oss as OpenAI publishes it, at the gpt-oss-1b preset's shape: experts as MXFP4 U8
# `_blocks` [X][R][G][16] and E8M0 `_scales` [X][R][G] (R output rows, G blocks of 32).
GPT_OSS = dict(hidden=1024, layers=12, heads=16, kv_heads=2, head_dim=64, experts=32, used=4,
               expert_ff=1024, vocab=32000, window=128)
# --gpt-oss-20b: openai/gpt-oss-20b's shape (13.8 GB; its start-up at the size users load).
GPT_OSS_20B = dict(hidden=2880, layers=24, heads=64, kv_heads=8, head_dim=64, experts=32, used=4,
                   expert_ff=2880, vocab=201088, window=128)


def gpt_oss_tensors(s):
    """(name, dtype, shape) in the order written; shapes in torch order."""
    H, D, X, F = s["hidden"], s["head_dim"], s["experts"], s["expert_ff"]
    yield "model.embed_tokens.weight", "BF16", [s["vocab"], H]
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", "BF16", [H]
        yield p + "post_attention_layernorm.weight", "BF16", [H]
        for proj, rows, cols in (("q", s["heads"] * D, H), ("k", s["kv_heads"] * D, H),
                                 ("v", s["kv_heads"] * D, H), ("o", H, s["heads"] * D)):
            yield p + f"self_attn.{proj}_proj.weight", "BF16", [rows, cols]
            yield p + f"self_attn.{proj}_proj.bias", "BF16", [rows]
        yield p + "self_attn.sinks", "BF16", [s["heads"]]
        yield p + "mlp.router.weight", "BF16", [X, H]
        yield p + "mlp.router.bias", "BF16", [X]
        yield p + "mlp.experts.gate_up_proj_blocks", "U8", [X, 2 * F, H // 32, 16]
        yield p + "mlp.experts.gate_up_proj_scales", "E8M0", [X, 2 * F, H // 32]
        yield p + "mlp.experts.gate_up_proj_bias", "BF16", [X, 2 * F]
        yield p + "mlp.experts.down_proj_blocks", "U8", [X, H, F // 32, 16]
        yield p + "mlp.experts.down_proj_scales", "E8M0", [X, H, F // 32]
        yield p + "mlp.experts.down_proj_bias", "BF16", [X, H]
    yield "model.norm.weight", "BF16", [H]
    yield "lm_head.weight", "BF16", [s["vocab"], H]


def gpt_oss_config(s):
    return {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"], "num_local_experts": s["experts"],
        "num_experts_per_tok": s["used"], "experts_per_token": s["used"],
        "intermediate_size": s["expert_ff"], "vocab_size": s["vocab"], "rms_norm_eps": 1e-5,
        "sliding_window": s["window"],
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                        for i in range(s["layers"])],
        "rope_theta": 150000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "original_max_position_embeddings": 4096,
                         "truncate": False},
        "attention_bias": True, "tie_word_embeddings": False, "hidden_act": "silu",
        "swiglu_limit": 7.0, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
        "quantization_config": {"quant_method": "mxfp4"},
    }


def write_tiled(f, src, n, at):
    """n bytes of src from offset `at`, wrapping to its start."""
    while n > 0:
        piece = src[at:at + n]
        f.write(piece)
        n -= len(piece)
        at = 0


def random_bf16_block(n_bytes, rng):
    block = bytearray(rng.randbytes(n_bytes))
    # High byte of each little-endian BF16: the sign, then exponent 120 or 121 (bit 0 of the
    # exponent is the low byte's top bit): |x| in [2^-7, 2^-5).
    high = bytes(b & 0x80 | 0x3C for b in range(256))
    block[1::2] = bytes(block[1::2]).translate(high)
    return bytes(block)


def is_fp8(name, shape, fp8):
    return fp8 and len(shape) == 2 and name.endswith("_proj.weight")


def random_fp8_block(n_bytes, rng):
    # Any code but the two NaNs (S.1111.111).
    return bytes(rng.randbytes(n_bytes)).translate(
        bytes(b ^ 1 if b & 0x7F == 0x7F else b for b in range(256)))


def write_gpt_oss(out, s):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(gpt_oss_config(s), f, indent=2)
    header, offset, order = {}, 0, []
    for name, dtype, shape in gpt_oss_tensors(s):
        n = 1
        for d in shape:
            n *= d
        n *= 2 if dtype == "BF16" else 1
        header[name] = {"dtype": "U8" if dtype == "E8M0" else dtype, "shape": shape,
                        "data_offsets": [offset, offset + n]}
        offset += n
        order.append((name, dtype, shape, n))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    rng = random.Random(42)
    block = random_bf16_block(64 << 20, rng)
    codes = rng.randbytes(64 << 20)  # any byte is two E2M1 codes
    scale = bytes([127 - 6]) * (1 << 20)  # 2^-6: codes up to 6 give weights up to ~0.1
    ones = struct.pack("<H", 0x3F80) * 65536
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, dtype, shape, n in order:
            if dtype == "E8M0" or name.endswith("norm.weight"):
                src = scale if dtype == "E8M0" else ones
            else:
                src = codes if dtype == "U8" else block
            write_tiled(f, src, n, rng.randrange(0, (len(src) - n) // 2) * 2 if len(src) > n else 0)
    print(f"{out}: {offset / 2**30:.2f} GiB, gpt-oss with MXFP4 experts")


def main():
    args = sys.argv[1:]
    for flag, shape in (("--gpt-oss", GPT_OSS), ("--gpt-oss-20b", GPT_OSS_20B)):
        if flag in args:
            return write_gpt_oss([a for a in args if a != flag][0], shape)
    fp8 = "--fp8" in args
    out = [a for a in args if a != "--fp8"][0]
    s = SHAPE
    os.makedirs(out, exist_ok=True)
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"], "num_experts": s["experts"],
        "num_experts_per_tok": s["used"], "moe_intermediate_size": s["expert_ff"],
        "intermediate_size": 3 * s["hidden"], "decoder_sparse_step": 1, "mlp_only_layers": [],
        "norm_topk_prob": True, "vocab_size": s["vocab"], "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "max_position_embeddings": 32768, "hidden_act": "silu",
        "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "bfloat16",
        "bos_token_id": 1, "eos_token_id": 2,
    }
    if fp8:
        config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128],
                                         "activation_scheme": "dynamic", "fmt": "e4m3"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    header, offset, order = {}, 0, []
    def add(name, dtype, shape, n):
        nonlocal offset
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
        order.append((name, dtype, shape, n))

    for name, shape in tensors(s):
        elements = shape[0] * (shape[1] if len(shape) > 1 else 1)
        if is_fp8(name, shape, fp8):
            add(name, "F8_E4M3", shape, elements)
            blocks = [(shape[0] + 127) // 128, (shape[1] + 127) // 128]
            add(name + "_scale_inv", "F32", blocks, 4 * blocks[0] * blocks[1])
        else:
            add(name, "BF16", shape, 2 * elements)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    rng = random.Random(42)
    block = random_bf16_block(64 << 20, rng)
    codes = random_fp8_block(64 << 20, rng)
    ones = struct.pack("<H", 0x3F80) * 65536
    # Codes up to 448 times 2^-14: weights up to ~0.03, as the BF16 values.
    scales = struct.pack("<f", 2.0**-14) * 65536
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, dtype, shape, n in order:
            if len(shape) == 1 or dtype == "F32":
                f.write((ones if len(shape) == 1 else scales)[:n])
                continue
            src = codes if dtype == "F8_E4M3" else block
            write_tiled(f, src, n, rng.randrange(0, len(src) // 2) * 2)
    print(f"{out}: {offset / 2**30:.2f} GiB of {'FP8' if fp8 else 'BF16'} weights")


if __name__ == "__main__":
    main()
