#pragma once
// aerie-bench kernels: each op of a decode step at a model's shapes, timed alone with device
// events, against the bytes it must move and the copy bandwidth measured in the same run.
#include <string>
#include <vector>

namespace aerie::launch {

struct KernelBenchOptions {
  std::string model_shape = "llama-3.1-8b";
  std::vector<int64_t> batch_sizes = {1, 8, 32, 128};
  int64_t context = 544;
  int reps = 50;
  int64_t tp_size = 1;  // time one TP rank's shard of each op
};

int run_kernel_bench(const KernelBenchOptions& options);

}  // namespace aerie::launch
