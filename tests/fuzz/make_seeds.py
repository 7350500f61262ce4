#!/usr/bin/env python3
"""Writes the generated part of the seed corpora (tests/fuzz/corpus/): tiny Hugging Face
checkpoints shrunk from tests/data/hf_reference (every dimension of 32 or more divided by 8, one
layer, random float32 weights), GGUF files written here from the spec (ggml docs/gguf.md: a
SentencePiece and a byte-level BPE vocabulary, metadata of every type), and one seed per
tokenizer fixture. The GGUF model seed is `loom convert` of the shrunken llama checkpoint,
made by run with --loom. The hand-written seeds (templates, request bodies, schemas) are
committed as they are. Python 3, standard library only; deterministic (fixed seed)."""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
rng = random.Random(17)


def shrink_dim(d):
    return d // 8 if d >= 32 else d


def safetensors_bytes(tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def shrunk_checkpoint(arch):
    d = os.path.join(DATA, "hf_reference", arch)
    cfg = json.load(open(os.path.join(d, "config.json")))
    for k in ("hidden_size", "intermediate_size", "moe_intermediate_size", "head_dim",
              "vocab_size", "shared_expert_intermediate_size"):
        if isinstance(cfg.get(k), int):
            cfg[k] = shrink_dim(cfg[k]) if k != "head_dim" else max(2, cfg[k] // 8)
    cfg["num_hidden_layers"] = 1
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:1]
    raw = open(os.path.join(d, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    tensors = {}
    for name, info in sorted(header.items()):
        if name == "__metadata__" or ".layers." in name and ".layers.0." not in name:
            continue
        shape = [shrink_dim(x) for x in info["shape"]]
        count = 1
        for x in shape:
            count *= x
        data = struct.pack("<%df" % count, *[rng.uniform(-1, 1) for _ in range(count)])
        tensors[name] = ("F32", shape, data)
    return cfg, tensors


# --- GGUF (v3, little-endian) ---
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)


def g_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def g_val(t, v):
    fmt = {T_U8: "B", T_I8: "b", T_U16: "H", T_I16: "h", T_U32: "I", T_I32: "i", T_F32: "f",
           T_BOOL: "?", T_U64: "Q", T_I64: "q", T_F64: "d"}
    if t == T_STR:
        return g_str(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(g_val(et, x) for x in items)
    return struct.pack("<" + fmt[t], v)


def gguf_bytes(kv, tensors=()):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, (t, v) in kv:
        out += g_str(k) + struct.pack("<I", t) + g_val(t, v)
    off, datas = 0, []
    for name, ggml_type, ne, data in tensors:
        out += g_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", ggml_type, off)
        datas.append(data + b"\0" * (-len(data) % 32))
        off += len(datas[-1])
    out += b"\0" * (-len(out) % 32)
    return out + b"".join(datas)


def spm_vocab():
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    toks += ["\u2581", "\u2581the", "\u2581a", "he", "llo", "\u2581hello", "wor", "ld", "\u2581w"]
    types = [2, 3, 3] + [6] * 256 + [1] * 9
    scores = [0.0] * 259 + [-float(i) for i in range(9)]
    return [("general.architecture", (T_STR, "llama")),
            ("tokenizer.ggml.model", (T_STR, "llama")),
            ("tokenizer.ggml.tokens", (T_ARR, (T_STR, toks))),
            ("tokenizer.ggml.scores", (T_ARR, (T_F32, scores))),
            ("tokenizer.ggml.token_type", (T_ARR, (T_I32, types))),
            ("tokenizer.ggml.bos_token_id", (T_U32, 1)),
            ("tokenizer.ggml.eos_token_id", (T_U32, 2)),
            ("tokenizer.ggml.add_bos_token", (T_BOOL, True))]


def bpe_vocab():
    byte_chars = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(161, 173)]
    byte_chars += [chr(c) for c in range(174, 256)]
    byte_chars += [chr(256 + i) for i in range(256 - len(byte_chars))]
    toks = byte_chars + ["\u0120t", "he", "\u0120the", "ll", "\u0120hello", "<|endoftext|>"]
    merges = ["\u0120 t", "h e", "\u0120t he", "l l"]
    types = [1] * (len(toks) - 1) + [3]
    return [("general.architecture", (T_STR, "gpt2")),
            ("tokenizer.ggml.model", (T_STR, "gpt2")),
            ("tokenizer.ggml.pre", (T_STR, "qwen2")),
            ("tokenizer.ggml.tokens", (T_ARR, (T_STR, toks))),
            ("tokenizer.ggml.token_type", (T_ARR, (T_I32, types))),
            ("tokenizer.ggml.merges", (T_ARR, (T_STR, merges))),
            ("tokenizer.ggml.eos_token_id", (T_U32, len(toks) - 1)),
            ("tokenizer.chat_template", (T_STR, "{% for m in messages %}{{ m.content }}{% endfor %}"))]


def every_type():
    return [("general.architecture", (T_STR, "llama")),
            ("a.u8", (T_U8, 200)), ("a.i8", (T_I8, -5)), ("a.u16", (T_U16, 60000)),
            ("a.i16", (T_I16, -30000)), ("a.u32", (T_U32, 4000000000)), ("a.i32", (T_I32, -7)),
            ("a.f32", (T_F32, 1.5)), ("a.bool", (T_BOOL, True)), ("a.str", (T_STR, "h\u00e9")),
            ("a.u64", (T_U64, 2 ** 63)), ("a.i64", (T_I64, -2 ** 40)), ("a.f64", (T_F64, 2.5)),
            ("a.arr", (T_ARR, (T_U16, [1, 2, 3]))),
            ("general.alignment", (T_U32, 64))]


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", help="a built loom binary: adds `loom convert` of a checkpoint")
    args = ap.parse_args()
    for arch in ("llama", "qwen3_moe", "gpt_oss"):
        cfg, tensors = shrunk_checkpoint(arch)
        st = safetensors_bytes(tensors, {"format": "pt"})
        write("safetensors", arch + ".safetensors", st)
        write("hf_config", arch + "_tiny", json.dumps(cfg, indent=1).encode() +
              b"\n--safetensors--\n" + st)
        if args.loom and arch == "llama":
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "config.json"), "w") as f:
                    json.dump(cfg, f)
                with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
                    f.write(st)
                out = os.path.join(tmp, "tiny.gguf")
                subprocess.run([args.loom, "convert", tmp, out], check=True)
                shutil.copy(out, os.path.join(CORPUS, "gguf", "llama_tiny_converted.gguf"))
    # Real config.json files, as shipped (every architecture of tests/data/hf_reference).
    for arch in sorted(os.listdir(os.path.join(DATA, "hf_reference"))):
        p = os.path.join(DATA, "hf_reference", arch, "config.json")
        if os.path.exists(p):
            write("hf_config", arch + "_config.json", open(p, "rb").read())
    write("safetensors", "f16_bf16.safetensors", safetensors_bytes({
        "a": ("F16", [2, 3], bytes(12)), "b": ("BF16", [3], bytes(6)),
        "c": ("I64", [1], bytes(8)), "d": ("F32", [], bytes(4))}))
    write("gguf", "vocab_spm.gguf", gguf_bytes(spm_vocab()))
    write("gguf", "vocab_bpe.gguf", gguf_bytes(bpe_vocab()))
    write("gguf", "every_type.gguf", gguf_bytes(every_type(), [
        ("t.f32", 0, [4, 2], struct.pack("<8f", *range(8))),
        ("t.q8_0", 8, [32], struct.pack("<e", 0.5) + bytes(range(32)))]))
    # Tokenizer seeds: [vocabulary index][flags] + a test case of that vocabulary's fixture.
    vocabs = ["llama-spm", "gpt-2", "qwen3", "phi-3", "falcon", "deepseek-llm"]
    for i, v in enumerate(vocabs):
        cases = open(os.path.join(DATA, "vocab", "ggml-vocab-%s.gguf.inp" % v), "rb").read()
        cases = [c.strip(b"\n") for c in cases.split(b"\n__ggml_vocab_test__\n")]
        for j in (3, 11, len(cases) - 2):
            write("tokenizer", "%s_%d" % (v, j), bytes([i, (j * 5) & 31]) + cases[j])
    write("tokenizer", "hf_qwen3_special", bytes([6, 3]) +
          "<|im_start|>user\nh\u00e9llo \U0001F600<|im_end|>\n<think>".encode())
    write("tokenizer", "invalid_utf8", bytes([0, 1]) + b"a\xff\xfe\xc3(\xed\xa0\x80\xf4\x90\x80\x80z")


if __name__ == "__main__":
    main()
