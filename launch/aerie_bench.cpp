// aerie-bench: benchmarks. `one-batch` measures prefill and decode of one static batch
// against the bandwidth floor measured in the same run (tensor-parallel under mpirun with
// --tp-size); `kernels` times each op of a decode step; `collectives` times all-reduces
// across GPUs; `serving` is an HTTP load generator for a running server; `speculative` the
// parts of a speculative round; `cpu-gemm` the CPU small-batch product alone; `gemm-tuning` what
// new row counts of a model's products cost while cuBLASLt's algorithms are chosen.
#include <CLI/CLI.hpp>
#include <iostream>

#include "kernels/error.hpp"
#include "launch/cli_checks.hpp"
#include "launch/bench/bench_gemm_tuning.hpp"
#include "launch/bench/bench_kernels.hpp"
#include "launch/bench/bench_collectives.hpp"
#include "launch/bench/bench_cpu_gemm.hpp"
#include "launch/bench/bench_one_batch.hpp"
#include "launch/bench/bench_serving.hpp"
#include "launch/bench/bench_speculative.hpp"

int main(int argc, char** argv) {
  using namespace aerie::launch;
  CLI::App app{"aerie-bench: Aerie's benchmarks"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.require_subcommand(1);
  OneBatchOptions ob;
  auto* one = app.add_subcommand("one-batch", "prefill and decode latency of one static batch, against the HBM floor");
  one->add_option("--model-path", ob.model_path, "Hugging Face model folder or a llama GGUF file");
  one->add_option("--load-format", ob.load_format, "auto or dummy (seeded random weights)")->check(CLI::IsMember({"auto", "dummy"}));
  one->add_option("--model-shape", ob.model_shape, "with dummy weights: tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b");
  one->add_option("--device", ob.device, "cuda or cpu")->check(CLI::IsMember({"cpu", "cuda"}));
  one->add_option("--dtype", ob.dtype, "weight dtype: auto (bf16 on CUDA, f32 on the CPU, what aerie-serve runs there), bf16, f16, f32; CPU activations are f32")
      ->check(CLI::IsMember({"auto", "bf16", "f16", "f32"}));
  one->add_option("--batch-size", ob.batch_sizes, "batch sizes to run")->delimiter(',');
  one->add_option("--input-len", ob.input_len, "prompt tokens per request")->check(aerie::launch::kPositive);
  one->add_option("--output-len", ob.output_len, "decode steps")->check(CLI::Range(2, 100000));
  one->add_option("--graph-context", ob.graph_context,
                  "the longest context the decode graphs are captured for (it fixes their attention splits; aerie-serve "
                  "captures them for the model's whole context); 0: input + output length")
      ->check(aerie::launch::kNonNegative);
  one->add_option("--cuda-graph", ob.cuda_graph, "decode with graphs: on, off or both")->check(CLI::IsMember({"on", "off", "both"}));
  one->add_option("--json", ob.json_path, "also write the results as JSON here");
  one->add_option("--seed", ob.seed, "seed of the dummy weights and prompts");
  one->add_option("--tp-size", ob.tp_size, "tensor-parallel ranks (run under mpirun -np N, one GPU each)")->check(aerie::launch::kPositive);
  one->add_flag("--disable-custom-all-reduce", ob.disable_custom_all_reduce, "TP on CUDA: NCCL for every all-reduce");
  KernelBenchOptions kb;
  auto* kern = app.add_subcommand("kernels", "each op of a decode step alone, at a model's shapes (CUDA)");
  kern->add_option("--model-shape", kb.model_shape, "tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b");
  kern->add_option("--batch-size", kb.batch_sizes, "batch sizes to run")->delimiter(',');
  kern->add_option("--context", kb.context, "context length of every sequence")->check(aerie::launch::kPositive);
  kern->add_option("--reps", kb.reps, "timed repetitions per op")->check(aerie::launch::kPositive);
  kern->add_option("--tp-size", kb.tp_size, "time one tensor-parallel rank's shard of each op")->check(aerie::launch::kPositive);
  GemmTuningBenchOptions tb;
  auto* tune = app.add_subcommand("gemm-tuning", "a model's products at every row count from --min-rows to --max-rows (random order): "
                                                 "the first call of each (cuBLASLt's algorithm chosen), soon afterwards, and once each has "
                                                 "recurred AERIE_GEMM_LT_RETUNE_AFTER times (default 256: borrowed algorithms retimed) (CUDA); "
                                                 "AERIE_GEMM_LT_BUCKETS=0 times every new row count instead of sharing by bucket");
  tune->add_option("--model-shape", tb.model_shape, "tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b")->capture_default_str();
  tune->add_option("--min-rows", tb.min_rows, "fewest rows")->check(aerie::launch::kPositive)->capture_default_str();
  tune->add_option("--max-rows", tb.max_rows, "most rows")->check(aerie::launch::kPositive)->capture_default_str();
  tune->add_option("--seed", tb.seed, "seed of the row counts' order")->capture_default_str();
  tune->add_option("--reps", tb.reps, "timed repetitions per row count afterwards")->check(aerie::launch::kPositive)->capture_default_str();
  tune->add_option("--json", tb.json_path, "also write every row count's times as JSON here");
  CollectiveBenchOptions cb;
  auto* coll = app.add_subcommand("collectives", "all-reduce time over the GPUs of an mpirun launch: NCCL and the IPC one-shot kernel");
  coll->add_option("--rows", cb.rows, "message sizes, in rows of --hidden bf16 values")->delimiter(',');
  coll->add_option("--hidden", cb.hidden, "values per row")->check(aerie::launch::kPositive);
  coll->add_option("--calls", cb.calls, "all-reduces per timed run (and per graph)")->check(aerie::launch::kPositive);
  coll->add_option("--reps", cb.reps, "timed runs")->check(aerie::launch::kPositive);
  coll->add_option("--json", cb.json_path, "also write the results as JSON here");
  CpuGemmBenchOptions gb;
  auto* cgemm = app.add_subcommand("cpu-gemm", "the CPU small-batch product (decode and verify rows) alone, per instruction set (and GGUF blocks over int8 activations on AMX: amx-i8), against one row");
  cgemm->add_option("--rows", gb.rows, "activation rows, 1 to 16 (the first is the ratio's baseline)")->delimiter(',');
  cgemm->add_option("--k", gb.k, "columns of the weights (the products' input width)")->delimiter(',');
  cgemm->add_option("--megabytes", gb.megabytes, "f32 weights per product, MiB (above the caches); blocks take the same shape")->check(aerie::launch::kPositive);
  cgemm->add_option("--n", gb.n, "weight rows (default: from --megabytes)")->check(aerie::launch::kPositive);
  cgemm->add_option("--weights", gb.weights, "f32, bf16, q4_0, q4_1, q8_0: the weights in f32 or bf16, or as GGUF blocks of their shape (comma-separated)")->delimiter(',');
  cgemm->add_option("--reps", gb.reps, "timed runs; the fastest counts")->check(aerie::launch::kPositive);
  cgemm->add_option("--json", gb.json_path, "also write the results as JSON here");
  ServingBenchOptions sb;
  auto* serve = app.add_subcommand("serving", "HTTP load generator against a running server (sglang's bench_serving result block)");
  serve->add_option("--base-url", sb.base_url, "server address, e.g. http://127.0.0.1:30000 (default: --host and --port)");
  serve->add_option("--host", sb.host, "server host");
  serve->add_option("--port", sb.port, "server port")->check(CLI::Range(1, 65535));
  serve->add_option("--backend", sb.backend, "sglang (POST /generate) or openai (POST /v1/completions)")
      ->check(CLI::IsMember({"sglang", "openai"}));
  serve->add_option("--dataset-name", sb.dataset_name, "random (token ids) or file")->check(CLI::IsMember({"random", "file"}));
  serve->add_option("--dataset-path", sb.dataset_path,
                    "file dataset: JSON lines {\"prompt\": text or ids, \"output_len\": n}, or a ShareGPT JSON list");
  serve->add_option("--num-prompts", sb.num_prompts, "requests to send")->check(aerie::launch::kPositive);
  serve->add_option("--random-input-len", sb.random_input_len, "prompt tokens (random dataset)")->check(aerie::launch::kPositive);
  serve->add_option("--random-output-len", sb.random_output_len, "output tokens per request (file dataset: the default)")
      ->check(aerie::launch::kPositive);
  serve->add_option("--random-range-ratio", sb.random_range_ratio, "lengths are drawn from [len * ratio, len]")->check(CLI::Range(0.0, 1.0));
  serve->add_option("--request-rate", sb.request_rate, "requests per second, Poisson arrivals (inf: all at once)");
  serve->add_option("--max-concurrency", sb.max_concurrency, "requests in flight at most (0: no cap)")->check(aerie::launch::kNonNegative);
  serve->add_option("--seed", sb.seed, "seed of the dataset and the arrivals");
  serve->add_option("--output-file", sb.output_file, "write the result as JSON here");
  serve->add_flag("--disable-progress", sb.disable_progress, "no progress display");
  serve->add_option("--timeout", sb.timeout_s, "seconds a request may take")->check(aerie::launch::kPositive);
  SpecBenchOptions spb;
  auto* specb = app.add_subcommand("speculative", "draft step, verify, whole round (its stages and the device time in each graph) and throughput of speculative decoding vs a plain step");
  specb->add_option("--model-shape", spb.model_shape, "tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b (random weights)");
  specb->add_option("--device", spb.device, "cuda or cpu")->check(CLI::IsMember({"cpu", "cuda"}));
  specb->add_option("--dtype", spb.dtype, "bf16 or f16 on CUDA")->check(CLI::IsMember({"bf16", "f16"}));
  specb->add_option("--algorithm", spb.algorithms, "EAGLE3, EAGLE, STANDALONE (self-draft)")->delimiter(',');
  specb->add_option("--batch-size", spb.batch_sizes, "batch sizes")->delimiter(',');
  specb->add_option("--speculative-num-steps", spb.num_steps, "draft steps per verify (chain: draft tokens)")->check(CLI::Range(1, 32));
  specb->add_option("--speculative-eagle-topk", spb.topk, "branching per draft step (> 1: tree drafting)")->check(CLI::Range(1, 64));
  specb->add_option("--speculative-num-draft-tokens", spb.draft_tokens, "tree: tokens per verify (default steps * topk + 1)")
      ->check(aerie::launch::kNonNegative);
  specb->add_option("--temperature", spb.temperature, "the requests' sampling temperature (> 0: verifies accept by rejection sampling)")
      ->check(CLI::Range(0.0f, 2.0f))
      ->capture_default_str();
  specb->add_option("--draft-vocab", spb.draft_vocab,
                    "EAGLE3: the random head's draft vocabulary (published Llama-3.1-8B heads: 32000; 0: the target's)")
      ->check(aerie::launch::kNonNegative);
  specb->add_option("--gemv-max-rows", spb.gemv_max_rows, "CUDA: rows up to which matmuls use Aerie's GEMV instead of cuBLAS (default: built-in, 16)")
      ->check(CLI::Range(0, 16));
  specb->add_flag("!--no-draft-actor", spb.draft_actor, "run the draft in-process instead of behind its DraftWorker actor");
  specb->add_flag("!--no-verify-graphs", spb.verify_graphs, "CUDA: run verifies (chains and trees) eagerly instead of replaying captured graphs");
  specb->add_option("--draft-runner,--draft-chain", spb.draft_chain,
                    "drafts (chains and trees): runner (one device-side sequence of the draft forwards, a CUDA graph per bucket, as "
                    "served), steps (a host round trip per draft forward) or both")
      ->check(CLI::IsMember({"runner", "steps", "both"}))
      ->capture_default_str();
  specb->add_option("--input-len", spb.input_len, "prompt tokens per request")->check(aerie::launch::kPositive);
  specb->add_option("--graph-context", spb.graph_context,
                    "the longest context the verify and draft graphs are captured for (it fixes their attention splits; "
                    "aerie-serve captures them for the model's whole context); 0: what the rounds need")
      ->check(aerie::launch::kNonNegative);
  specb->add_option("--rounds", spb.rounds, "timed rounds")->check(aerie::launch::kPositive);
  specb->add_option("--json", spb.json_path, "also write the results as JSON here");
  specb->add_option("--tp-size", spb.tp_size, "tensor-parallel ranks (run under mpirun -np N, one GPU each)")->check(aerie::launch::kPositive);
  specb->add_option("--speculative-draft-model-quantization", spb.draft_quantizations,
                    "EAGLE heads' weights, each a variant of the run: none (as loaded) and/or fp8 (FP8 E4M3, a scale per row)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  specb->add_option("--cpu-head-dtype", spb.cpu_head_dtype,
                    "CPU: the random EAGLE heads' weights, bf16 (as a shipped bf16 head is kept; widened exactly in the product) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  specb->add_option("--speculative-draft-tensor-parallel-size", spb.draft_tp_size,
                    "EAGLE heads under TP: 1 keeps the head whole on every rank (default: sharded like the target)")
      ->check(aerie::launch::kNonNegative);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*one) {
      AERIE_CHECK(ob.load_format == "dummy" || !ob.model_path.empty(), "--model-path is required unless --load-format dummy");
      for (auto b : ob.batch_sizes) AERIE_CHECK(b > 0, "batch sizes must be positive");
      return run_one_batch(ob);
    }
    if (*kern) return run_kernel_bench(kb);
    if (*tune) return run_gemm_tuning_bench(tb);
    if (*coll) return run_collective_bench(cb);
    if (*cgemm) return run_cpu_gemm_bench(gb);
    if (*serve) return run_serving_bench(sb);
    if (*specb) return run_spec_bench(spb);
  } catch (const std::exception& e) {
    std::cerr << "aerie-bench: error: " << aerie::client_message(e) << "\n";
    return 2;
  }
  return 0;
}
