#!/usr/bin/env python3
"""Many concurrent streaming clients over loopback, a share of them hanging up at random
moments (while queued, in prefill, mid-decode). Every other stream must complete with exactly
max_tokens tokens (ignore_eos); afterwards nothing runs or waits, every KV block is free and the
server's RSS is within --rss-tolerance of where it stood after a warm-up burst.

  python3 tests/load/concurrent_disconnect.py --loom build/loom --clients 256
"""

import asyncio
import random
import time

import loadlib


def main():
    p = loadlib.common_args(__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=256)
    p.add_argument("--hang-up-share", type=float, default=0.3)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--prompt-tokens", type=int, default=24)
    p.add_argument("--max-num-seqs", type=int, default=32,
                   help="serve flag: fewer than --clients, so that many requests queue")
    p.add_argument("--rss-tolerance", type=float, default=0.05)
    a = p.parse_args()
    rng = random.Random(a.seed)
    rep = loadlib.Report("%d concurrent streams, %.0f%% hanging up" %
                         (a.clients, 100 * a.hang_up_share))

    srv = loadlib.LoomServer(a.loom, a.model, threads=a.threads,
                             args=["--max-num-seqs", a.max_num_seqs, "--max-model-len",
                                   a.prompt_tokens + a.max_tokens + 16]).start()
    rep.figure("time to ready (s)", "%.2f" % srv.wait_ready())
    rss_start = srv.rss_kib()

    def body(i):
        prompt = [rng.randrange(1, 200) for _ in range(a.prompt_tokens)]
        return {"prompt": prompt, "max_tokens": a.max_tokens, "ignore_eos": True,
                "temperature": 1.0, "seed": i, "stream": True,
                "stream_options": {"include_usage": True}}

    async def burst(plan):
        return await asyncio.gather(*[
            loadlib.stream_completion(srv.port, body(i), timeout=a.timeout, **kw)
            for i, kw in enumerate(plan)])

    # Warm-up: the same burst shape without hang-ups, so that the RSS compared afterwards
    # already includes what any burst of this size allocates once (I/O buffers, arenas).
    asyncio.run(burst([{}] * a.clients))
    srv.wait_idle()
    rss_before = srv.rss_kib()

    gen_before = srv.metrics().get("vllm:generation_tokens_total", 0)
    plan = []
    for i in range(a.clients):
        if rng.random() >= a.hang_up_share:
            plan.append({})
        elif rng.random() < 0.5:  # during the first ~half second: mostly queued or in prefill
            plan.append({"hang_up_after_s": rng.uniform(0.0, 0.5)})
        else:
            plan.append({"hang_up_after_chunks": rng.randrange(1, a.max_tokens)})
    t0 = time.monotonic()
    results = asyncio.run(burst(plan))
    elapsed = time.monotonic() - t0
    m = srv.wait_idle(timeout=30)
    used, free = srv.kv_blocks()
    rss_after = srv.rss_kib()

    kept = [r for r in results if not r["hung_up"]]
    hung = [r for r in results if r["hung_up"]]
    ok = [r for r in kept if r["status"] == 200 and not r["error"] and r["usage"] and
          r["usage"]["completion_tokens"] == a.max_tokens and r["finish_reason"] == "length"]
    ttfts = [r["ttft"] for r in kept if r["ttft"] is not None]
    classes = loadlib.status_classes(kept)
    rep.figure("requests", len(results))
    rep.figure("hung up before first token", sum(r["hung_up"] == "before first token" for r in hung))
    rep.figure("hung up mid-decode", sum(r["hung_up"] == "mid-decode" for r in hung))
    rep.figure("completed streams", "%d of %d kept" % (len(ok), len(kept)))
    rep.figure("failures", len(kept) - len(ok))
    rep.figure("2xx / 4xx / 5xx / no response", "%d / %d / %d / %d" % (
        classes["2xx"], classes["4xx"], classes["5xx"], classes["no response"]))
    rep.figure("TTFT p50 / p99 (ms)", "%.1f / %.1f" % (loadlib.percentile(ttfts, 50) * 1e3,
                                                      loadlib.percentile(ttfts, 99) * 1e3))
    rep.figure("wall time (s)", "%.2f" % elapsed)
    rep.figure("aborted (server count)", int(m.get('vllm:request_success_total{finished_reason="abort"}', 0)))
    rep.figure("generated tokens (server)", "%d of %d asked" % (
        m.get("vllm:generation_tokens_total", 0) - gen_before, a.clients * a.max_tokens))
    rep.figure("KV blocks used / free", "%d / %d" % (used, free))
    rep.figure("running / waiting after", "%d / %d" % (m.get("vllm:num_requests_running", -1),
                                                     m.get("vllm:num_requests_waiting", -1)))
    rep.figure("RSS start / before / after (MiB)", "%.1f / %.1f / %.1f" % (
        rss_start / 1024, rss_before / 1024, rss_after / 1024))
    for r in kept:
        if r not in ok:
            rep.figure("failed stream", {k: r[k] for k in ("status", "error", "usage",
                                                          "finish_reason", "chunks")})
            break
    rep.check(len(ok) == len(kept), "every stream that stayed completes with %d tokens" % a.max_tokens)
    rep.check(len(hung) > 0, "some clients hung up")
    rep.check(used == 0 and free > 0, "every KV block is free afterwards")
    rep.check(m.get("vllm:num_requests_running", -1) == 0, "vllm:num_requests_running is 0")
    rep.check(m.get("vllm:num_requests_waiting", -1) == 0, "vllm:num_requests_waiting is 0")
    rep.check(abs(rss_after - rss_before) <= a.rss_tolerance * rss_before,
              "RSS within %.0f%% of its value before the load" % (100 * a.rss_tolerance))
    rc = srv.stop()
    rep.check(rc == 0, "loom serve exits cleanly on SIGTERM (exit status %d)" % rc)
    rep.finish()


if __name__ == "__main__":
    main()
