#!/usr/bin/env python3
"""The KV cache oversubscribed: concurrent requests need --oversubscribe times the KV blocks
the server has, so sequences are preempted (their blocks freed, recomputed later) all the time.
Every output must equal the output of the same request on an unconstrained server (greedy, and
seeded sampling, which draws from each request's own RNG), none may be stuck, and afterwards
every KV block is free.

  python3 tests/load/preemption.py --loom build/loom --requests 64 --oversubscribe 4
"""

import asyncio
import random
import re
import time

import loadlib


def main():
    p = loadlib.common_args(__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--prompt-tokens", type=int, default=40)
    # Long enough that a run lasts several times the spread of the clients' arrivals: with 40
    # tokens a run took ~20 ms, about as long as 16 asyncio clients take to connect, and one
    # run in ~30 saw a single preemption; with 88, 15-21 preemptions in 20 of 20 runs.
    p.add_argument("--max-tokens", type=int, default=88)
    p.add_argument("--oversubscribe", type=float, default=4.0,
                   help="KV tokens the load needs / KV tokens the constrained server has")
    p.add_argument("--max-num-batched-tokens", type=int, default=64)
    a = p.parse_args()
    rng = random.Random(a.seed)
    rep = loadlib.Report("KV cache oversubscribed %.1fx, %d requests" %
                         (a.oversubscribe, a.requests))

    bodies = []
    for i in range(a.requests):
        b = {"prompt": [rng.randrange(1, 200) for _ in range(a.prompt_tokens)],
             "max_tokens": a.max_tokens, "ignore_eos": True, "stream": True,
             "stream_options": {"include_usage": True}}
        if i % 2:  # seeded sampling: the request's own RNG must survive recomputation
            b.update({"temperature": 1.0, "seed": 1000 + i})
        else:
            b["temperature"] = 0.0
        bodies.append(b)
    max_len = a.prompt_tokens + a.max_tokens
    common = ["--max-model-len", max_len, "--max-num-seqs", a.requests,
              "--max-num-batched-tokens", a.max_num_batched_tokens]

    def run(srv):
        async def go():
            return await asyncio.gather(*[loadlib.stream_completion(srv.port, b, timeout=a.timeout)
                                          for b in bodies])
        before = srv.metrics()
        t0 = time.monotonic()
        results = asyncio.run(go())
        elapsed = time.monotonic() - t0
        m = srv.wait_idle()
        used, free = srv.kv_blocks()
        preempted = m.get("vllm:num_preemptions_total", 0) - before.get("vllm:num_preemptions_total", 0)
        return results, elapsed, int(preempted), used, free, m

    ref_srv = loadlib.LoomServer(a.loom, a.model, threads=a.threads, args=common).start()
    ref_srv.wait_ready()
    token_bytes = int(re.search(r"(\d+) bytes per token", ref_srv.log_text()).group(1))
    ref, ref_s, ref_pre, _, ref_free, _ = run(ref_srv)
    ref_srv.stop()

    need_tokens = a.requests * max_len
    gib = need_tokens * token_bytes / a.oversubscribe / float(1 << 30)
    srv = loadlib.LoomServer(a.loom, a.model, threads=a.threads,
                             args=common + ["--kv-cache-memory", "%.9f" % gib]).start()
    srv.wait_ready()
    out, out_s, pre, used, free, m = run(srv)

    def complete(r):
        return (r["status"] == 200 and not r["error"] and r["usage"] is not None and
                r["usage"]["completion_tokens"] == a.max_tokens)

    same = sum(1 for x, y in zip(ref, out) if complete(x) and complete(y) and x["text"] == y["text"])
    stuck = sum(1 for r in out if "timed out" in r["error"])
    ttfts = [r["ttft"] for r in out if r["ttft"] is not None]
    classes = loadlib.status_classes(out)
    rep.figure("KV tokens needed / held", "%d / %d (%d blocks)" % (
        need_tokens, (used + free) * 16, used + free))
    rep.figure("requests", len(out))
    rep.figure("failures", sum(1 for r in out if not complete(r)))
    rep.figure("2xx / 4xx / 5xx / no response", "%d / %d / %d / %d" % (
        classes["2xx"], classes["4xx"], classes["5xx"], classes["no response"]))
    rep.figure("preemptions (unconstrained)", ref_pre)
    rep.figure("preemptions (oversubscribed)", pre)
    rep.figure("outputs identical", "%d of %d" % (same, len(out)))
    rep.figure("wall time unconstrained (s)", "%.2f" % ref_s)
    rep.figure("wall time oversubscribed (s)", "%.2f" % out_s)
    rep.figure("TTFT p50 / p99 (ms)", "%.1f / %.1f" % (loadlib.percentile(ttfts, 50) * 1e3,
                                                      loadlib.percentile(ttfts, 99) * 1e3))
    rep.figure("KV blocks used / free after", "%d / %d" % (used, free))
    for x, y in zip(ref, out):
        if not (complete(x) and complete(y) and x["text"] == y["text"]):
            rep.figure("first mismatch", "%r | %r | %s" % (x["text"][:40], y["text"][:40], y["error"]))
            break
    rep.check(all(complete(r) for r in ref), "the unconstrained run completes every request")
    rep.check(ref_pre == 0, "the unconstrained run preempts nothing")
    rep.check(pre >= a.requests // 4, "the oversubscribed run preempts (at least %d times)" %
              (a.requests // 4))
    rep.check(stuck == 0, "no request is stuck")
    rep.check(same == len(out), "every output equals the unconstrained run's")
    rep.check(used == 0, "every KV block is free afterwards")
    rep.check(m.get("vllm:num_requests_running", -1) == 0 and
              m.get("vllm:num_requests_waiting", -1) == 0, "nothing runs or waits afterwards")
    rc = srv.stop()
    rep.check(rc == 0, "loom serve exits cleanly on SIGTERM (exit status %d)" % rc)
    rep.finish()


if __name__ == "__main__":
    main()
