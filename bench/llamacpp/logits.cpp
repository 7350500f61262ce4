// llama.cpp's logits for token ids (a helper of bench/llamacpp_logits.sh, built against the
// llama.cpp tree vs_llamacpp.sh builds): loads GGUF, runs the ids as one batch with every row's
// logits, prints the largest absolute difference from a reference file of float32 rows
// [n][vocab] (Hugging Face transformers' or loom's logits) and how many rows have the
// reference's best token, then decodes `greedy` tokens by argmax and prints them. With
// LOGITS_OUT=FILE set, also writes llama.cpp's own rows there (float32 [n][vocab]).
//   llamacpp_logits MODEL.gguf REF.f32 VOCAB GREEDY ID...
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf REF.f32 VOCAB GREEDY ID...\n", argv[0]);
    return 2;
  }
  const int vocab = std::atoi(argv[3]), greedy = std::atoi(argv[4]);
  std::vector<llama_token> ids;
  for (int i = 5; i < argc; ++i) ids.push_back(std::atoi(argv[i]));
  const int n = static_cast<int>(ids.size());
  std::vector<float> ref(static_cast<size_t>(n) * vocab);
  std::ifstream f(argv[2], std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(ref.data()), ref.size() * sizeof(float))) {
    std::fprintf(stderr, "cannot read %d x %d floats from %s\n", n, vocab, argv[2]);
    return 2;
  }
  if (!std::getenv("LOGITS_VERBOSE"))
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    std::fprintf(stderr, "llama.cpp cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n + greedy + 8;
  cp.n_batch = cp.n_ubatch = n;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32;  // the reference is float32 throughout
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama.cpp cannot make a context for %s\n", argv[1]);
    return 1;
  }
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  double max_abs = 0, max_ref = 0;
  int argmax_agree = 0;  // rows whose best token is the reference's
  for (int i = 0; i < n; ++i) {
    const float* got = llama_get_logits_ith(ctx, i);
    const float* want = &ref[size_t(i) * vocab];
    for (int v = 0; v < vocab; ++v) {
      max_abs = std::max(max_abs, std::fabs(double(got[v]) - want[v]));
      max_ref = std::max(max_ref, std::fabs(double(want[v])));
    }
    argmax_agree +=
        std::max_element(got, got + vocab) - got == std::max_element(want, want + vocab) - want;
  }
  if (const char* path = std::getenv("LOGITS_OUT")) {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < n; ++i)
      out.write(reinterpret_cast<const char*>(llama_get_logits_ith(ctx, i)), vocab * sizeof(float));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
  }
  std::printf("max_abs_diff %.3g max_abs_logit %.3g argmax_agree %d of %d\ngreedy", max_abs,
              max_ref, argmax_agree, n);
  const float* last = llama_get_logits_ith(ctx, n - 1);
  for (int t = 0; t < greedy; ++t) {
    const llama_token next = static_cast<llama_token>(std::max_element(last, last + vocab) - last);
    std::printf(" %d", next);
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = next;
    one.pos[0] = n + t;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    if (llama_decode(ctx, one) != 0) {
      std::fprintf(stderr, "\nllama_decode failed at greedy token %d\n", t);
      return 1;
    }
    llama_batch_free(one);
    last = llama_get_logits_ith(ctx, 0);
  }
  std::printf("\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
