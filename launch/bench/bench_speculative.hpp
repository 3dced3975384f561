#pragma once
// aerie-bench speculative: the parts of a speculative round at a model shape, each timed
// alone and against a plain decode step measured in the same run: a draft forward, a draft
// extend over steps + 1 tokens, a target verify of num_draft_tokens tokens per request; and
// a whole round as the engine runs it (plan + draft + verify +
// accept + draft extend + commit, through the DraftWorker actor as aerie-serve runs it; the
// plain step likewise includes planning and commit), and decode
// throughput with and without speculation. Chain (topk 1) or tree drafting. Random
// weights: EAGLE / EAGLE3 heads accept little, so their rounds show cost, not speed-up; the
// STANDALONE self-draft (the target as its own draft) accepts every token. With --tp-size N
// under `mpirun -np N` everything runs tensor-parallel (rank 0 reports).
#include <string>
#include <vector>

namespace aerie::launch {

struct SpecBenchOptions {
  std::string model_shape = "llama-3.1-8b";
  std::string device = "cuda";
  std::string dtype = "bf16";
  std::vector<std::string> algorithms = {"EAGLE3", "EAGLE", "STANDALONE"};
  std::vector<int64_t> batch_sizes = {1, 8, 32};
  int64_t num_steps = 3;  // draft steps per verify (a chain's num_draft_tokens = steps + 1)
  int64_t topk = 1;       // > 1: tree drafting
  int64_t draft_tokens = 0;  // tree: nodes per verify (0: steps * topk + 1)
  // The requests' sampling temperature (plain steps and rounds alike): 0 greedy, > 0
  // sampled, so verifies accept by rejection sampling on the device.
  float temperature = 0.0f;
  int gemv_max_rows = -1;    // CUDA: GEMV/cuBLAS threshold (-1: built-in)
  // EAGLE3's random head: rows of its LM head (the published Llama-3.1-8B heads draft from
  // 32000 tokens; 0: the target's whole vocabulary).
  int64_t draft_vocab = 32000;
  bool draft_actor = true;   // the round goes through the DraftWorker actor, as served
  bool verify_graphs = true; // CUDA: verifies (chains and trees) replay captured graphs, as served
  // Drafts: "runner" (the device-side chain or tree, spec/draft_chain_runner.hpp and
  // spec/draft_tree_runner.hpp, as served; a graph per bucket on CUDA), "steps" (a forward and
  // a host round trip per draft step), or "both" (each, same run).
  std::string draft_chain = "both";
  int64_t input_len = 512;
  // The longest context the verify and draft graphs are captured for (fixes their attention
  // splits); 0: what the rounds need. aerie-serve captures them for the model's whole context.
  int64_t graph_context = 0;
  int64_t rounds = 20;    // timed rounds per configuration
  std::string json_path;
  uint64_t seed = 0;
  int64_t tp_size = 1;        // under mpirun -np N: target and draft tensor-parallel over N GPUs
  int64_t draft_tp_size = 0;  // EAGLE heads: 1 whole on every rank, else sharded like the target
  // EAGLE heads' weights, each a variant of the same run: "none" (as loaded) and/or "fp8"
  // (--speculative-draft-model-quantization fp8, labelled +fp8).
  std::vector<std::string> draft_quantizations = {"none"};
  // CPU: the random EAGLE heads' weight dtype: "bf16" (how a shipped bf16 head is kept on the
  // CPU, launch/draft_builder.hpp) or "f32".
  std::string cpu_head_dtype = "bf16";
};

int run_spec_bench(const SpecBenchOptions& options);

}  // namespace aerie::launch
