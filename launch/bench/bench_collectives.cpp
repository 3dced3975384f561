#include "launch/bench/bench_collectives.hpp"

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "kernels/buffer.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "launch/bench/bench_timing.hpp"
#include "launch/tp_context.hpp"

namespace aerie::launch {

namespace {

// Microseconds per call of `op`: `calls` back to back, eagerly or replayed from one graph.
double us_per_call(const std::function<void()>& op, int64_t calls, int64_t reps, bool graph, const Stream& s) {
  void* g = nullptr;
  if (graph) {
    op();  // warm-up outside the capture
    synchronize(s);
    cuda_runtime::begin_capture(s.handle());
    for (int64_t i = 0; i < calls; ++i) op();
    g = cuda_runtime::end_capture(s.handle());
  }
  void* e0 = cuda_runtime::create_event();
  void* e1 = cuda_runtime::create_event();
  std::vector<double> runs;
  for (int64_t r = 0; r < reps + 1; ++r) {
    cuda_runtime::record_event(e0, s.handle());
    if (g) cuda_runtime::launch_graph(g, s.handle());
    else
      for (int64_t i = 0; i < calls; ++i) op();
    cuda_runtime::record_event(e1, s.handle());
    const double ms = cuda_runtime::elapsed_ms(e0, e1);
    if (r > 0) runs.push_back(ms * 1e3 / static_cast<double>(calls));
  }
  cuda_runtime::destroy_event(e0);
  cuda_runtime::destroy_event(e1);
  if (g) cuda_runtime::destroy_graph(g);
  return bench::median(runs);
}

}  // namespace

int run_collective_bench(const CollectiveBenchOptions& o) {
  TpContext tp = make_tp_context(nullptr, nullptr, Device::kCuda, 0);
  AERIE_CHECK(tp.world->size() > 1, "run under mpirun -np 2 or more");
  auto nccl = parallel::make_communicator(*tp.world, Device::kCuda, {.custom_all_reduce = false});
  auto& ipc = *tp.tp;
  OwnedStream stream(Device::kCuda);
  const Stream& s = stream.get();
  const bool report = tp.rank0();
  nlohmann::json results = nlohmann::json::array();
  if (report)
    std::printf("all-reduce over %d GPUs, bf16, %lld calls per graph; ipc: Aerie's communicator (the IPC kernel for bf16 up to 2 MB)\n"
                "%6s %10s %10s %11s %10s %11s %6s\n",
                tp.world->size(), static_cast<long long>(o.calls), "rows", "bytes", "nccl_us", "nccl_graph", "ipc_us", "ipc_graph", "same");
  for (int64_t rows : o.rows) {
    const int64_t n = rows * o.hidden;
    Buffer a(Device::kCuda, DType::kBF16, {n}), b(Device::kCuda, DType::kBF16, {n});
    // Each rank's own values; the two sums must match bit for bit (two ranks: one rounding).
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = float_to_bf16(static_cast<float>((i * 7 + tp.world->rank() * 13) % 97) / 31.0f);
    a.copy_from_host(h.data(), a.nbytes());
    b.copy_from_host(h.data(), b.nbytes());
    nccl->all_reduce_sum(a.view(), s);
    ipc.all_reduce_sum(b.view(), s);
    std::vector<uint16_t> ha(h.size()), hb(h.size());
    synchronize(s);
    a.copy_to_host(ha.data(), a.nbytes());
    b.copy_to_host(hb.data(), b.nbytes());
    const bool same = ha == hb;
    auto on_a = [&] { nccl->all_reduce_sum(a.view(), s); };
    auto on_b = [&] { ipc.all_reduce_sum(b.view(), s); };
    const double nccl_eager = us_per_call(on_a, o.calls, o.reps, false, s);
    const double nccl_graph = us_per_call(on_a, o.calls, o.reps, true, s);
    const double ipc_eager = us_per_call(on_b, o.calls, o.reps, false, s);
    const double ipc_graph = us_per_call(on_b, o.calls, o.reps, true, s);
    if (report)
      std::printf("%6lld %10lld %10.2f %11.2f %10.2f %11.2f %6s\n", static_cast<long long>(rows), static_cast<long long>(n * 2), nccl_eager,
                  nccl_graph, ipc_eager, ipc_graph, same ? "yes" : "NO");
    results.push_back({{"rows", rows}, {"bytes", n * 2}, {"nccl_us", nccl_eager}, {"nccl_graph_us", nccl_graph}, {"ipc_us", ipc_eager},
                       {"ipc_graph_us", ipc_graph}, {"same_sums", same}});
    // Two ranks round one sum; more ranks may round NCCL's partial sums differently.
    AERIE_CHECK(same || tp.world->size() > 2, "the IPC all-reduce and NCCL disagree at " << rows << " rows");
  }
  if (report && !o.json_path.empty())
    std::ofstream(o.json_path) << nlohmann::json{{"ranks", tp.world->size()}, {"hidden", o.hidden}, {"results", results}}.dump(2) << "\n";
  return 0;
}

}  // namespace aerie::launch
