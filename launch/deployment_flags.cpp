#include "launch/cli_checks.hpp"
#include "launch/deployment_flags.hpp"

#include <algorithm>


#include "kernels/error.hpp"
#include "spec/cuda_graph_buckets.hpp"

namespace aerie::launch {

void add_deployment_flags(CLI::App& app, DeploymentOptions& d, const std::string& max_total_tokens_help) {
  app.add_option("--model-path,--model", d.model_path, "Hugging Face model folder (config.json + safetensors) or a llama GGUF file");
  app.add_option("--load-format", d.load_format, "auto: read the checkpoint; dummy: seeded random weights")
      ->check(CLI::IsMember({"auto", "dummy"}));
  app.add_option("--model-shape", d.model_shape, "with --load-format dummy and no --model-path: tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b");
  app.add_option("--random-seed", d.random_seed, "seed of the dummy weights");
  app.add_option("--device", d.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", d.dtype, "weight dtype: auto (the checkpoint's), f32, bf16, f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "float32", "bfloat16", "float16", "half", "float"}));
  app.add_option("--context-length", d.context_length, "the longest prompt + output a request may have (default: the model's)")
      ->check(launch::kNonNegative);
  app.add_option("--tp-size,--tp", d.tp_size,
                 "tensor-parallel ranks per DP group (under mpirun, one GPU per rank); with --enable-dp-attention, all the ranks")
      ->check(launch::kPositive);
  app.add_flag("--enable-dp-attention", d.enable_dp_attention,
               "DP attention (sglang's): --dp-size groups of --tp-size / --dp-size ranks run attention on their own batches, the MLP "
               "runs over all --tp-size ranks in lock-step (mpirun -np <tp-size>)");
  app.add_flag("--disable-custom-all-reduce", d.disable_custom_all_reduce,
               "CUDA tensor parallelism: NCCL for every all-reduce (default: a one-shot NVLink kernel for bf16 ones up to 2 MB)");
  app.add_option("--dp-size,--dp", d.dp_size, "data-parallel replicas, or DP-attention groups (one Scheduler each; under mpirun)")
      ->check(launch::kPositive);
  app.add_option("--watchdog-timeout", d.watchdog_timeout_s,
                 "seconds a step may take before its ranks count as stuck: every request then fails with 503 and the launch ends "
                 "(exit code 3)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--heartbeat-timeout", d.heartbeat_timeout_s,
                 "under mpirun: seconds without a heartbeat (or at once, when its connection closes) before a rank counts as lost")
      ->check(CLI::Range(0.2, 3600.0));
  app.add_option("--log-level", d.log_level, "debug, info, warning or error (default: AERIE_LOG_LEVEL, else warning)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  app.add_option("--max-running-requests", d.max_running_requests, "requests decoded together per replica")->check(launch::kPositive);
  app.add_option("--max-total-tokens", d.max_total_tokens, "KV pool size in tokens per replica (" + max_total_tokens_help + ")")
      ->check(launch::kNonNegative);
  app.add_option("--mem-fraction-static", d.mem_fraction_static, "CUDA: share of device memory for weights + KV pool")
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--chunked-prefill-size", d.chunked_prefill_size, "prompt tokens per iteration (longer prompts are chunked)")
      ->check(launch::kPositive);
  app.add_option("--page-size", d.page_size, "tokens per KV page")->check(launch::kPositive);
  app.add_option("--cuda-graph-max-bs", d.cuda_graph_max_bs, "capture decode CUDA graphs up to this batch size")->check(launch::kPositive);
  app.add_flag("--disable-cuda-graph", d.disable_cuda_graph, "run every step eagerly");
  app.add_option("--prefill-cuda-graph-max-tokens", d.prefill_cuda_graph_max_tokens,
                 "CUDA: one request's prefill (a prompt or a chunk of one) of up to this many new tokens replays a CUDA graph "
                 "captured at 16, 32, 64, ... tokens (0: prefills run eagerly)")
      ->check(CLI::Range(int64_t{0}, spec::kPrefillGraphMaxTokens));
  app.add_flag("--enable-deterministic-inference", d.enable_deterministic_inference,
               "batch-invariant kernels (sglang's flag; vLLM's VLLM_BATCH_INVARIANT): each row of a forward is computed the same "
               "way, bit for bit, whatever shares its batch, so a greedy answer does not depend on the other requests, and greedy "
               "speculative chains answer as plain decoding at every batch size; slower (docs/deterministic-inference.md)");
  app.add_flag("--disable-overlap-schedule", d.disable_overlap_schedule,
               "plan each batch only after the last one's result (default: the next batch is planned while the last runs)");
  app.add_flag("--enable-spec-overlap", d.enable_spec_overlap,
               "speculative decoding: plan each verify before the last one's accept lengths are known (sglang's spec v2; "
               "off: one verify in flight)");
  app.add_option("--draft-ahead", d.draft_ahead,
                 "EAGLE chains: draft the next round on the device right after each verify, while the result goes back: auto (on "
                 "CUDA), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("--disable-cuda-graph-padding", d.disable_cuda_graph_padding,
               "replay a CUDA graph only for a batch of exactly its size (no padding up to a bucket); others run eagerly");
  app.add_option("--speculative-algorithm", d.speculative_algorithm, "speculative decoding: EAGLE, EAGLE3 or STANDALONE (default: off)")
      ->check(CLI::IsMember({"EAGLE", "EAGLE3", "STANDALONE"}));
  app.add_option("--speculative-draft-model-path", d.speculative_draft_model_path,
                 "the EAGLE head or STANDALONE draft model folder (with --load-format dummy: optional, random weights)");
  app.add_option("--speculative-token-map", d.speculative_token_map,
                 "EAGLE: the hot target tokens the head drafts from (a JSON array of ids or a .safetensors tensor)");
  app.add_option("--speculative-num-steps", d.speculative_num_steps, "draft tokens proposed per verify (chain depth)")
      ->check(CLI::Range(1, 32));
  app.add_option("--speculative-eagle-topk", d.speculative_eagle_topk, "branching per draft step (1: chain drafting, > 1: tree drafting)")
      ->check(CLI::Range(1, 64));
  app.add_option("--speculative-num-draft-tokens", d.speculative_num_draft_tokens,
                 "tokens per verify, the root included (topk 1: always steps + 1; tree default: steps * topk + 1)")
      ->check(launch::kNonNegative);
  app.add_option("--speculative-draft-tensor-parallel-size", d.speculative_draft_tp_size,
                 "EAGLE heads under TP: 1 keeps the head whole on every rank; the TP size (default) shards it like the target")
      ->check(launch::kNonNegative);
  app.add_option("--speculative-draft-model-quantization", d.speculative_draft_model_quantization,
                 "fp8: FP8 E4M3 copies of the EAGLE head's weights, a scale per row, made at load: draft products of up to "
                 "16 rows read half the bytes; w8a8_int8 (CPU with AMX-INT8): Q8_0 copies over int8 activations, the target's products "
                 "as they are (either way output tokens are still the target's; acceptance may move a little)")
      ->check(CLI::IsMember({"fp8", "w8a8_int8"}));
  app.add_option("--speculative-chain-stop-probability", d.speculative_chain_stop_probability,
                 "chains (topk 1) on the CPU: stop drafting once the draft's own probability that every token so far is accepted "
                 "(the product of its tokens' softmax probabilities) falls below this on average over the batch's requests, and verify "
                 "the shorter chain; --speculative-num-steps is then the longest chain (0: off, every chain that long; SmolLM2's shipped head on a "
                 "2-core CPU: 5 steps and 0.3)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--speculative-disable-batch-size", d.speculative_disable_batch_size,
                 "above this many running requests, verify without draft tokens (0: never)")
      ->check(launch::kNonNegative);
  app.add_option("--draft-worker", d.draft_worker,
                 "where the draft runs: actor (its own DraftWorker thread), in-process (the target worker's thread), or auto "
                 "(actor on CUDA, in-process on the CPU, where a second thread's compute pool slowed the verifies)")
      ->check(CLI::IsMember({"auto", "actor", "in-process"}));
}

void check_deployment_flags(DeploymentOptions& d) {
  AERIE_CHECK(d.load_format == "dummy" || !d.model_path.empty(), "--model-path is required unless --load-format dummy");
  AERIE_CHECK(!d.enable_dp_attention || (d.dp_size > 1 && d.tp_size % d.dp_size == 0),
              "--enable-dp-attention needs --dp-size > 1 dividing --tp-size (got --tp-size " << d.tp_size << " --dp-size " << d.dp_size << ")");
  AERIE_CHECK(d.speculative_draft_tp_size == 0 || d.speculative_draft_tp_size == 1 || d.speculative_draft_tp_size == d.tp_size,
              "--speculative-draft-tensor-parallel-size must be 1 or the --tp-size (" << d.tp_size << ")");
  AERIE_CHECK(d.speculative_draft_tp_size != 1 || d.tp_size == 1 || d.speculative_algorithm == "EAGLE" || d.speculative_algorithm == "EAGLE3",
              "--speculative-draft-tensor-parallel-size 1 is for EAGLE heads; a STANDALONE draft runs sharded like the target");
  AERIE_CHECK(d.speculative_chain_stop_probability == 0.0 || !d.speculative_algorithm.empty(),
              "--speculative-chain-stop-probability cuts draft chains: it needs --speculative-algorithm");
  if (d.speculative_algorithm.empty()) return;
  AERIE_CHECK(d.load_format == "dummy" || !d.speculative_draft_model_path.empty(),
              "--speculative-algorithm " << d.speculative_algorithm << " needs --speculative-draft-model-path");
  AERIE_CHECK(d.speculative_token_map.empty() || d.speculative_algorithm == "EAGLE",
              "--speculative-token-map is for --speculative-algorithm EAGLE (an EAGLE3 head carries its own d2t map)");
  const int64_t S = d.speculative_num_steps, K = d.speculative_eagle_topk;
  AERIE_CHECK(d.speculative_chain_stop_probability == 0.0 || (K == 1 && S >= 2),
              "--speculative-chain-stop-probability cuts chains: it needs --speculative-eagle-topk 1 and --speculative-num-steps >= 2");
  if (K == 1) {  // as sglang: with topk 1 the verify holds the chain and the token before it
    d.speculative_num_draft_tokens = S + 1;
    return;
  }
  if (d.speculative_num_draft_tokens == 0) d.speculative_num_draft_tokens = S * K + 1;
  // The tree's nodes are chosen among topk first tokens and topk x topk per further step.
  const int64_t most = 1 + K + (S - 1) * K * K;
  AERIE_CHECK(d.speculative_num_draft_tokens >= 2 && d.speculative_num_draft_tokens <= std::min<int64_t>(most, 1024),
              "--speculative-num-draft-tokens " << d.speculative_num_draft_tokens << " must be in [2, " << std::min<int64_t>(most, 1024)
                                                << "] with --speculative-num-steps " << S << " and --speculative-eagle-topk " << K);
}

}  // namespace aerie::launch
