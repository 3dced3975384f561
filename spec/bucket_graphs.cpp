#include "spec/bucket_graphs.hpp"

#include <algorithm>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "spec/graph_capture.hpp"
#include "spec/graph_times.hpp"

namespace aerie::spec {

BucketGraphs::BucketGraphs(std::string label, int64_t max_bs, bool graphs, std::function<model::ForwardDims(int64_t)> dims_for)
    : BucketGraphs(std::move(label), BucketSchedule(max_bs), graphs, std::move(dims_for)) {
  max_bs_ = max_bs;
}

BucketGraphs::BucketGraphs(std::string label, BucketSchedule schedule, bool graphs, std::function<model::ForwardDims(int64_t)> dims_for)
    : label_(std::move(label)), max_bs_(schedule.sizes().back()), graphs_on_(graphs), schedule_(std::move(schedule)), dims_for_(std::move(dims_for)) {
  AERIE_CHECK(max_bs_ >= 1, "a graph runner needs a batch of at least one");
  if (graphs_on_)
    for (int64_t bs : schedule_.sizes()) dims_[bs] = dims_for_(bs);
}

BucketGraphs::~BucketGraphs() {
  for (auto& [bs, g] : graphs_) cuda_runtime::destroy_graph(g);
}

std::optional<int64_t> BucketGraphs::batch_for(int64_t n) const {
  if (n < 1 || n > largest()) return std::nullopt;
  return graphs_on_ ? schedule_.bucket_for(n) : std::optional<int64_t>(n);
}

int64_t BucketGraphs::bucket_for(int64_t n) const {
  if (!graphs_on_) return -1;
  const auto b = schedule_.bucket_for(n);
  return b ? *b : -1;
}

model::ForwardDims BucketGraphs::dims(int64_t bs) const {
  const auto it = dims_.find(bs);
  return it != dims_.end() ? it->second : dims_for_(bs);
}

int BucketGraphs::max_splits() const {
  int splits = 1;
  for (int64_t bs = 1; bs <= largest(); ++bs) splits = std::max(splits, dims(bs).num_splits);
  return splits;
}

void BucketGraphs::capture(const Stream& stream, const std::function<void(int64_t)>& prepare, const std::function<void(int64_t)>& enqueue) {
  if (!graphs_on_) return;
  AERIE_CHECK(stream.device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  for (auto it = schedule_.sizes().rbegin(); it != schedule_.sizes().rend(); ++it) {
    const int64_t bs = *it;
    prepare(bs);
    graphs_[bs] = capture_graph(stream, [&] { enqueue(bs); });
  }
  synchronize(stream);
}

void BucketGraphs::run(int64_t bs, const Stream& stream, const std::function<void(int64_t)>& enqueue) const {
  void* graph = nullptr;
  if (graphs_on_) {
    const auto it = graphs_.find(bs);
    AERIE_CHECK(it != graphs_.end(), "no CUDA graph was captured for a batch of " << bs);
    graph = it->second;
  }
  auto launch = [&] {
    if (graph) cuda_runtime::launch_graph(graph, stream.handle());
    else enqueue(bs);
  };
  if (GraphTimes::enabled()) GraphTimes::run(label_, stream, launch);
  else launch();  // the serving path: no timing, no std::function
}

}  // namespace aerie::spec
