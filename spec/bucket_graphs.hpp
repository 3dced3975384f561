#pragma once
// BucketGraphs: what every graph runner (decode / verify, draft chain, draft tree, draft
// extend) keeps per batch-size bucket: the launch's schedule (spec/cuda_graph_buckets.hpp),
// each bucket's forward dims (attention splits and tokens per block fixed by its capture), and
// its executable CUDA graph, captured largest first as sglang does (later, smaller captures
// reuse the memory pool) and destroyed with the runner. Without graphs (the CPU,
// --disable-cuda-graph) a runner takes any batch up to max_bs and runs it eagerly.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/stream.hpp"
#include "model/forward_workspace.hpp"
#include "spec/cuda_graph_buckets.hpp"

namespace aerie::spec {

class BucketGraphs {
 public:
  // label: the runner's work in GraphTimes (aerie-bench). dims_for(bs): the forward dims of a
  // batch of bs requests (the runner's geometry).
  BucketGraphs(std::string label, int64_t max_bs, bool graphs, std::function<model::ForwardDims(int64_t)> dims_for);
  // The same over a schedule of the runner's own (its largest size is max_bs).
  BucketGraphs(std::string label, BucketSchedule schedule, bool graphs, std::function<model::ForwardDims(int64_t)> dims_for);
  ~BucketGraphs();
  BucketGraphs(const BucketGraphs&) = delete;
  BucketGraphs& operator=(const BucketGraphs&) = delete;

  bool graphs() const { return graphs_on_; }
  // The largest batch: the largest bucket with graphs, max_bs without.
  int64_t largest() const { return graphs_on_ ? schedule_.sizes().back() : max_bs_; }
  const std::vector<int64_t>& buckets() const { return schedule_.sizes(); }
  // The batch n requests run as: their bucket with graphs, n itself without; nothing when
  // none takes them (n < 1, above the largest, no exact bucket under --disable-cuda-graph-padding).
  std::optional<int64_t> batch_for(int64_t n) const;
  // The bucket n requests replay (-1: none, or no graphs).
  int64_t bucket_for(int64_t n) const;
  // A batch's dims: a bucket's as captured, else dims_for's.
  model::ForwardDims dims(int64_t bs) const;
  // The most attention splits any batch from 1 to largest() takes (fewer query blocks take
  // more splits, so the smallest batch, not the largest, sets a workspace's split count).
  int max_splits() const;
  // With graphs: for every bucket, largest first, prepare(bs) (upload a padding-only batch)
  // and capture enqueue(bs). Without: nothing.
  void capture(const Stream& stream, const std::function<void(int64_t)>& prepare, const std::function<void(int64_t)>& enqueue);
  // Runs a batch of bs (from batch_for) whose inputs are uploaded: replays its graph, or
  // calls enqueue(bs) without graphs (timed under the label when GraphTimes is on).
  void run(int64_t bs, const Stream& stream, const std::function<void(int64_t)>& enqueue) const;

 private:
  std::string label_;
  int64_t max_bs_;
  bool graphs_on_;
  BucketSchedule schedule_;
  std::function<model::ForwardDims(int64_t)> dims_for_;
  std::map<int64_t, model::ForwardDims> dims_;  // bucket -> dims (captured splits)
  std::map<int64_t, void*> graphs_;             // bucket -> executable graph
};

}  // namespace aerie::spec
