#pragma once
// aerie-bench one-batch: prefill and decode latency of one static batch, as sglang's
// bench_one_batch measures it, next to the HBM bandwidth floor measured in the same run.
// With --tp-size T under `mpirun -np T`, the model runs tensor-parallel over the ranks (one
// GPU each) and the floor is one GPU's: its shard's bytes over its bandwidth.
#include <string>
#include <vector>

namespace aerie::launch {

struct OneBatchOptions {
  std::string model_path;
  std::string load_format = "auto";
  std::string model_shape = "llama-3.1-8b";
  std::string device = "cuda";
  std::string dtype = "auto";  // bf16 on CUDA, f32 on the CPU
  std::vector<int64_t> batch_sizes = {1, 8, 32, 128};
  int64_t input_len = 512;
  int64_t output_len = 32;
  // The longest context the decode graphs are captured for (fixes their attention splits);
  // 0: input_len + output_len. aerie-serve captures them for the model's whole context.
  int64_t graph_context = 0;
  std::string cuda_graph = "both";  // on | off | both
  std::string json_path;            // write results here too
  uint64_t seed = 0;
  int64_t tp_size = 1;
  bool disable_custom_all_reduce = false;
};

int run_one_batch(const OneBatchOptions& options);

}  // namespace aerie::launch
