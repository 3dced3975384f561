#pragma once
// Batch-size buckets for CUDA-graph capture (sglang's schedule): 1..8, then steps of 2 to
// 32, of 4 to 64, of 8 to 256, capped at max_bs. A live batch replays the smallest
// captured bucket that holds it; larger batches run eagerly.
#include <cstdint>
#include <optional>
#include <vector>

namespace aerie::spec {

// The launch's choice for every graph of the process, with sglang's meaning: --cuda-graph-bs
// (capture exactly these batch sizes instead of the schedule) and --disable-cuda-graph-padding
// (replay a graph only for a batch of exactly its size; others run eagerly). Set once, before
// any graph is captured.
struct GraphBucketPolicy {
  std::vector<int64_t> sizes;  // empty: the schedule above
  bool padding = true;
};
// Throws aerie::Error on a size < 1.
void set_graph_bucket_policy(GraphBucketPolicy policy);
const GraphBucketPolicy& graph_bucket_policy();

// The schedule up to max_bs, or the policy's sizes up to max_bs (the schedule when none of
// them fits: a runner capped below the smallest given size, such as a verify's rows cap).
std::vector<int64_t> cuda_graph_bucket_sizes(int64_t max_bs);

// Token-count buckets of one request's prefill graphs (spec/prefill_graph_runner.hpp): 16, 32,
// 64, ... (powers of two), then max_tokens itself when it is not one; empty for max_tokens < 1.
// Throws aerie::Error above kPrefillGraphMaxTokens.
constexpr int64_t kPrefillGraphMaxTokens = 8192;
std::vector<int64_t> prefill_graph_token_buckets(int64_t max_tokens);

class BucketSchedule {
 public:
  explicit BucketSchedule(int64_t max_bs) : sizes_(cuda_graph_bucket_sizes(max_bs)), padding_(graph_bucket_policy().padding) {}
  // A runner's own schedule (the prefill graphs' token counts): exactly these sizes, which must
  // be ascending and >= 1 (aerie::Error otherwise), padded up to as `padding` says.
  BucketSchedule(std::vector<int64_t> sizes, bool padding);
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // The smallest bucket >= batch_size (== batch_size without padding), or nothing (run eagerly).
  std::optional<int64_t> bucket_for(int64_t batch_size) const;

 private:
  std::vector<int64_t> sizes_;
  bool padding_;
};

}  // namespace aerie::spec
