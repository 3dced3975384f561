// aerie-bench: benchmarks. `one-batch` measures prefill and decode of one static batch
// against the bandwidth floor measured in the same run.
#include <CLI/CLI.hpp>
#include <iostream>

#include "kernels/error.hpp"
#include "launch/bench_kernels.hpp"
#include "launch/bench_one_batch.hpp"

int main(int argc, char** argv) {
  using namespace aerie::launch;
  CLI::App app{"aerie-bench: Aerie's benchmarks"};
  app.require_subcommand(1);
  OneBatchOptions ob;
  auto* one = app.add_subcommand("one-batch", "prefill and decode latency of one static batch, against the HBM floor");
  one->add_option("--model-path", ob.model_path, "Hugging Face model folder");
  one->add_option("--load-format", ob.load_format, "auto or dummy (seeded random weights)")->check(CLI::IsMember({"auto", "dummy"}));
  one->add_option("--model-shape", ob.model_shape, "with dummy weights: tiny, llama-3.2-1b, llama-3.1-8b");
  one->add_option("--device", ob.device, "cuda or cpu")->check(CLI::IsMember({"cpu", "cuda"}));
  one->add_option("--dtype", ob.dtype, "weight/activation dtype on CUDA: bf16 or f16")->check(CLI::IsMember({"bf16", "f16", "f32"}));
  one->add_option("--batch-size", ob.batch_sizes, "batch sizes to run")->delimiter(',');
  one->add_option("--input-len", ob.input_len, "prompt tokens per request")->check(CLI::PositiveNumber);
  one->add_option("--output-len", ob.output_len, "decode steps")->check(CLI::Range(2, 100000));
  one->add_option("--cuda-graph", ob.cuda_graph, "decode with graphs: on, off or both")->check(CLI::IsMember({"on", "off", "both"}));
  one->add_option("--json", ob.json_path, "also write the results as JSON here");
  one->add_option("--seed", ob.seed, "seed of the dummy weights and prompts");
  KernelBenchOptions kb;
  auto* kern = app.add_subcommand("kernels", "each op of a decode step alone, at a model's shapes (CUDA)");
  kern->add_option("--model-shape", kb.model_shape, "tiny, llama-3.2-1b, llama-3.1-8b");
  kern->add_option("--batch-size", kb.batch_sizes, "batch sizes to run")->delimiter(',');
  kern->add_option("--context", kb.context, "context length of every sequence")->check(CLI::PositiveNumber);
  kern->add_option("--reps", kb.reps, "timed repetitions per op")->check(CLI::PositiveNumber);
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
  } catch (const std::exception& e) {
    std::cerr << "aerie-bench: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
