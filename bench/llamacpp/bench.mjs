// llama-bench's pp/tg on node-llama-cpp's llama.cpp: pp = one n_prompt-token batch from an empty
// context, tg = n_gen single-token decodes from an empty context (random tokens, no sampling).
import {writeSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
const say = (s) => writeSync(1, s + "\n");
const [modelPath, threadsArg = "2", repsArg = "3", ppArg = "512", tgArg = "128", seqsArg = "0"] = process.argv.slice(2);
const [threads, reps, nPrompt, nGen, nSeqs] = [threadsArg, repsArg, ppArg, tgArg, seqsArg].map(Number);
const llama = await getLlama({gpu: false, build: "never", logLevel: process.env.NLC_DEBUG ? LlamaLogLevel.debug : LlamaLogLevel.warn});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: nPrompt + nGen + 16, batchSize: nPrompt, threads, sequences: Math.max(1, nSeqs)});
const seqs = Array.from({length: Math.max(1, nSeqs)}, () => context.getSequence());
const seq = seqs[0];
let seed = 12345;
const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 32000;
const randomToken = () => 1 + ((seed = (seed * 1103515245 + 12345) % 2147483648) % (vocab - 1));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pp = [], tg = [], tgb = [];
for (let r = 0; r <= reps; r++) {  // rep 0 warms up
  await seq.clearHistory();
  let t0 = performance.now();
  if (nPrompt > 0) await seq.evaluateWithoutGeneratingNewTokens(Array.from({length: nPrompt}, randomToken));
  const ppRate = nPrompt * 1000 / (performance.now() - t0);
  await seq.clearHistory();
  t0 = performance.now();
  for (let i = 0; i < nGen; i++) await seq.evaluateWithoutGeneratingNewTokens([randomToken()]);
  const tgRate = nGen * 1000 / (performance.now() - t0);
  let batchedRate = 0;
  if (nSeqs > 1) {  // every sequence decodes one token per step; the context batches them into one decode
    await Promise.all(seqs.map((s) => s.clearHistory()));
    t0 = performance.now();
    for (let i = 0; i < nGen; i++) await Promise.all(seqs.map((s) => s.evaluateWithoutGeneratingNewTokens([randomToken()])));
    batchedRate = nGen * nSeqs * 1000 / (performance.now() - t0);
  }
  if (r > 0) { pp.push(ppRate); tg.push(tgRate); tgb.push(batchedRate); }
  say(`rep ${r}: pp${nPrompt} ${ppRate.toFixed(1)} tok/s, tg${nGen} ${tgRate.toFixed(1)} tok/s` +
      (nSeqs > 1 ? `, tg${nGen}x${nSeqs} ${batchedRate.toFixed(1)} tok/s` : ""));
}
say(`llama.cpp ${modelPath} threads ${threads}: pp${nPrompt} ${median(pp).toFixed(1)} tok/s, tg${nGen} ${median(tg).toFixed(1)} tok/s` +
    (nSeqs > 1 ? `, tg${nGen}x${nSeqs} ${median(tgb).toFixed(1)} tok/s` : "") + ` (median of ${reps})`);
await context.dispose(); await model.dispose(); await llama.dispose();
