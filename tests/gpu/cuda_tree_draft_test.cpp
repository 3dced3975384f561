// kernels::tree_draft_begin / tree_draft_expand on the GPU equal the CPU reference: random
// frontiers and children with many exact ties (scores on a coarse grid) and NaNs, topk 2-8,
// every output compared (NaN scores as NaN), the paths written into the next forward's contexts included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "kernels/tree_draft.hpp"
#include "tests/test_util.hpp"

using namespace aerie;

namespace {

// Host buffers of one expansion's inputs and outputs; to_device() copies them all.
struct ExpandCase {
  int64_t batch, k, step, cols, ctx;
  std::vector<Buffer> host;  // child tokens, child logp, frontier x4, candidates x3, indptr, indices, next indptr, next indices
  ExpandCase(int64_t batch_, int64_t k_, int64_t step_, std::mt19937& rng) : batch(batch_), k(k_), step(step_) {
    cols = kernels::tree_draft_candidates(step + 1, k);
    const int64_t rows = batch * k;
    std::uniform_int_distribution<int> grid(-8, 0);
    auto ints = [&](std::initializer_list<int64_t> dims, int lo, int hi) {
      Buffer b(Device::kCpu, DType::kI32, dims);
      std::uniform_int_distribution<int> d(lo, hi);
      for (int64_t i = 0; i < b.view().numel(); ++i) b.view().ptr<int32_t>()[i] = d(rng);
      return b;
    };
    auto floats = [&](std::initializer_list<int64_t> dims) {
      Buffer b(Device::kCpu, DType::kF32, dims);
      for (int64_t i = 0; i < b.view().numel(); ++i) b.view().ptr<float>()[i] = rng() % 97 == 0 ? NAN : 0.5f * static_cast<float>(grid(rng));
      return b;
    };
    host.push_back(ints({rows, k}, 0, 999));
    host.push_back(floats({rows, k}));
    host.push_back(ints({rows}, 0, 999));
    host.push_back(floats({rows}));
    host.push_back(ints({rows}, 0, static_cast<int>(cols) - 1));
    host.push_back(ints({rows}, 0, 99));
    // Unwritten candidate cells keep -5 on both devices.
    host.push_back(ints({batch, cols}, -5, -5));
    Buffer scores(Device::kCpu, DType::kF32, {batch, cols});
    for (int64_t i = 0; i < scores.view().numel(); ++i) scores.view().ptr<float>()[i] = -5.0f;
    host.push_back(std::move(scores));
    host.push_back(ints({batch, cols}, -5, -5));
    // Contexts: node r of forward `step` holds 3 + r % 5 + step entries, the next forward's one more.
    ctx = 0;
    Buffer indptr(Device::kCpu, DType::kI32, {rows + 1}), next_indptr(Device::kCpu, DType::kI32, {rows + 1});
    indptr.view().ptr<int32_t>()[0] = next_indptr.view().ptr<int32_t>()[0] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      indptr.view().ptr<int32_t>()[r + 1] = indptr.view().ptr<int32_t>()[r] + static_cast<int32_t>(3 + r % 5 + step);
      next_indptr.view().ptr<int32_t>()[r + 1] = next_indptr.view().ptr<int32_t>()[r] + static_cast<int32_t>(3 + r % 5 + step + 1);
    }
    ctx = next_indptr.view().ptr<int32_t>()[rows];
    host.push_back(std::move(indptr));
    host.push_back(ints({ctx}, 1, 5000));
    host.push_back(std::move(next_indptr));
    host.push_back(ints({ctx}, 1, 5000));
  }
  kernels::TreeDraftExpandParams params(std::vector<Buffer>& b) const {
    return {.step = step, .child_tokens = b[0].view(), .child_logp = b[1].view(),
            .frontier = {.tokens = b[2].view(), .scores = b[3].view(), .nodes = b[4].view(), .sources = b[5].view()},
            .candidates = {.tokens = b[6].view(), .scores = b[7].view(), .parents = b[8].view()},
            .kv_indptr = b[9].view(), .kv_indices = b[10].view(), .next_kv_indptr = b[11].view(), .next_kv_indices = b[12].view()};
  }
};

std::vector<Buffer> copy_to(Device d, const std::vector<Buffer>& from) {
  std::vector<Buffer> out;
  for (const auto& b : from) {
    Buffer c(d, b.view().dtype, {b.view().numel()});
    c.copy_from_host(b.data(), b.nbytes());
    out.push_back(std::move(c));
  }
  return out;
}

// Whether a device buffer holds what the host one holds: bit for bit, except that any NaN
// equals any NaN (the GPU's sums give the canonical NaN, the CPU's keep the input's payload).
bool same_contents(const Buffer& gpu, const Buffer& cpu, const Stream& stream) {
  std::vector<char> back(static_cast<size_t>(gpu.nbytes()));
  copy_async(back.data(), gpu.data(), back.size(), stream);
  synchronize(stream);
  if (cpu.view().dtype != DType::kF32) return std::memcmp(back.data(), cpu.data(), back.size()) == 0;
  const auto* g = reinterpret_cast<const float*>(back.data());
  const float* c = cpu.view().ptr<float>();
  for (int64_t i = 0; i < cpu.view().numel(); ++i)
    if (!(std::isnan(g[i]) && std::isnan(c[i])) && std::memcmp(&g[i], &c[i], sizeof(float)) != 0) return false;
  return true;
}

}  // namespace

TEST(CudaTreeDraft, ExpandsAsTheCpuDoes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(23);
  OwnedStream stream(Device::kCuda);
  for (const int64_t k : {2, 4, 8})
    for (const int64_t step : {1, 3}) {
      ExpandCase c(37, k, step, rng);
      std::vector<Buffer> cpu = copy_to(Device::kCpu, c.host);
      std::vector<Buffer> gpu = copy_to(Device::kCuda, c.host);
      // The copies are flat: give them the case's shapes again.
      auto shaped = [&](std::vector<Buffer>& b) {
        auto p = c.params(b);
        const int64_t rows = c.batch * k;
        p.child_tokens = p.child_tokens.reshape({rows, k});
        p.child_logp = p.child_logp.reshape({rows, k});
        for (auto* t : {&p.candidates.tokens, &p.candidates.scores, &p.candidates.parents}) *t = t->reshape({c.batch, c.cols});
        return p;
      };
      ASSERT_TRUE(kernels::tree_draft_expand(shaped(cpu), Stream::cpu()).is_ok());
      ASSERT_TRUE(kernels::tree_draft_expand(shaped(gpu), stream.get()).is_ok());
      synchronize(stream.get());
      for (size_t i = 0; i < cpu.size(); ++i)
        EXPECT_TRUE(same_contents(gpu[i], cpu[i], stream.get())) << "buffer " << i << " topk " << k << " step " << step;
    }
}

TEST(CudaTreeDraft, BeginsAsTheCpuDoes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(29);
  OwnedStream stream(Device::kCuda);
  const int64_t batch = 19, k = 4, pool_rows = 33, cols = kernels::tree_draft_candidates(3, k);
  std::vector<Buffer> host;
  auto add = [&](DType dt, std::initializer_list<int64_t> dims, int hi) {
    Buffer b(Device::kCpu, dt, dims);
    for (int64_t i = 0; i < b.view().numel(); ++i) {
      if (dt == DType::kF32) b.view().ptr<float>()[i] = -0.25f * static_cast<float>(rng() % 40);
      else b.view().ptr<int32_t>()[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(hi));
    }
    host.push_back(std::move(b));
  };
  add(DType::kI32, {batch}, pool_rows);
  add(DType::kI32, {pool_rows, k}, 1000);
  add(DType::kF32, {pool_rows, k}, 0);
  for (int i = 0; i < 4; ++i) add(i == 1 ? DType::kF32 : DType::kI32, {batch * k}, 7);
  for (int i = 0; i < 3; ++i) add(i == 1 ? DType::kF32 : DType::kI32, {batch, cols}, 7);
  std::vector<Buffer> cpu = copy_to(Device::kCpu, host), gpu = copy_to(Device::kCuda, host);
  auto params = [&](std::vector<Buffer>& b) {
    return kernels::TreeDraftBeginParams{
        .rows = b[0].view(), .top_tokens = b[1].view().reshape({pool_rows, k}), .top_logp = b[2].view().reshape({pool_rows, k}),
        .frontier = {.tokens = b[3].view(), .scores = b[4].view(), .nodes = b[5].view(), .sources = b[6].view()},
        .candidates = {.tokens = b[7].view().reshape({batch, cols}), .scores = b[8].view().reshape({batch, cols}),
                       .parents = b[9].view().reshape({batch, cols})}};
  };
  ASSERT_TRUE(kernels::tree_draft_begin(params(cpu), Stream::cpu()).is_ok());
  ASSERT_TRUE(kernels::tree_draft_begin(params(gpu), stream.get()).is_ok());
  synchronize(stream.get());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(same_contents(gpu[i], cpu[i], stream.get())) << "buffer " << i;
}
