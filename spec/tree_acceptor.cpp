#include "spec/tree_acceptor.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/error.hpp"
#include "kernels/tree_accept.hpp"

namespace aerie::spec {

namespace {
// Byte layout for T trees of N nodes: seed, step (i64, first so 8-byte aligned); temperature,
// top_p, min_p (f32), top_k (i32); tokens, parents (i32, T x N); then the results: path
// (i32, T x N) and bonus (i32, T).
struct Layout {
  int64_t T, N;
  int64_t i64(int64_t a) const { return a * T * 8; }
  int64_t b4(int64_t a) const { return 2 * T * 8 + a * T * 4; }
  int64_t tokens() const { return b4(4); }
  int64_t parents() const { return tokens() + T * N * 4; }
  int64_t path() const { return parents() + T * N * 4; }
  int64_t bonus() const { return path() + T * N * 4; }
  int64_t bytes() const { return bonus() + T * 4; }
};
}  // namespace

void TreeAcceptor::reserve(int64_t trees, int64_t nodes) {
  if (trees <= trees_ && nodes <= nodes_) return;
  trees_ = std::max(trees, 2 * trees_);
  nodes_ = std::max(nodes, nodes_);
  const Layout l{trees_, nodes_};
  packed_ = Buffer(device_, DType::kU8, {l.bytes()});
  workspace_ = Buffer(device_, DType::kF32, {kernels::tree_accept_workspace_floats(trees_ * nodes_)});
  staging_ = HostStaging(device_, static_cast<size_t>(l.bytes()));
}

std::vector<TreeAcceptance> TreeAcceptor::accept(const TensorView& logits, std::span<const DraftTree> trees,
                                                 std::span<const model::SamplingRow> rows, const Stream& stream) {
  const auto T = static_cast<int64_t>(trees.size());
  AERIE_CHECK(rows.size() == trees.size(), "tree acceptance: " << rows.size() << " sampling rows for " << T << " trees");
  std::vector<TreeAcceptance> out(trees.size());
  if (T == 0) return out;
  const int64_t N = trees[0].size(), V = logits.dim(1);
  AERIE_CHECK(logits.dim(0) == T * N, "tree acceptance: logits " << logits.describe() << " for " << T << " trees of " << N << " nodes");
  reserve(T, N);
  // Packed for this batch's T and N (the buffers may be larger).
  const Layout l{T, N};
  char* h = staging_.as<char>();
  auto f32 = [&](int64_t a) { return reinterpret_cast<float*>(h + l.b4(a)); };
  auto i64 = [&](int64_t a) { return reinterpret_cast<int64_t*>(h + l.i64(a)); };
  auto* top_k = reinterpret_cast<int32_t*>(h + l.b4(3));
  auto* tokens = reinterpret_cast<int32_t*>(h + l.tokens());
  auto* parents = reinterpret_cast<int32_t*>(h + l.parents());
  for (int64_t s = 0; s < T; ++s) {
    const DraftTree& t = trees[static_cast<size_t>(s)];
    AERIE_CHECK(t.size() == N, "tree acceptance: tree " << s << " has " << t.size() << " nodes, the first " << N);
    t.validate();
    for (int64_t i = 1; i < N; ++i)
      AERIE_CHECK(t.tokens[static_cast<size_t>(i)] >= 0 && t.tokens[static_cast<size_t>(i)] < V,
                  "draft token " << t.tokens[static_cast<size_t>(i)] << " is outside the vocabulary of " << V);
    std::copy(t.tokens.begin(), t.tokens.end(), tokens + s * N);
    std::copy(t.parents.begin(), t.parents.end(), parents + s * N);
    const auto& r = rows[static_cast<size_t>(s)];
    i64(0)[s] = r.seed;
    i64(1)[s] = r.step;
    f32(0)[s] = r.temperature;
    f32(1)[s] = r.top_p;
    f32(2)[s] = r.min_p;
    top_k[s] = r.top_k;
  }
  copy_async(packed_.data(), h, static_cast<size_t>(l.path()), stream);
  char* d = static_cast<char*>(packed_.data());
  const Device dev = logits.device;
  auto per_tree = [&](int64_t offset, DType t) { return TensorView(d + offset, t, {T}, dev); };
  auto per_node = [&](int64_t offset) { return TensorView(d + offset, DType::kI32, {T, N}, dev); };
  AERIE_CHECK_STATUS(kernels::tree_accept({.logits = logits, .tokens = per_node(l.tokens()), .parents = per_node(l.parents()),
                                           .temperature = per_tree(l.b4(0), DType::kF32), .top_p = per_tree(l.b4(1), DType::kF32),
                                           .top_k = per_tree(l.b4(3), DType::kI32), .min_p = per_tree(l.b4(2), DType::kF32),
                                           .seed = per_tree(l.i64(0), DType::kI64), .step = per_tree(l.i64(1), DType::kI64),
                                           .path = per_node(l.path()), .bonus = per_tree(l.bonus(), DType::kI32),
                                           .workspace = workspace_.view().slice_rows(0, kernels::tree_accept_workspace_floats(T * N))},
                                          stream));
  copy_async(h + l.path(), d + l.path(), static_cast<size_t>(l.bytes() - l.path()), stream);
  synchronize(stream);
  const auto* path = reinterpret_cast<const int32_t*>(h + l.path());
  const auto* bonus = reinterpret_cast<const int32_t*>(h + l.bonus());
  for (int64_t s = 0; s < T; ++s) {
    auto& a = out[static_cast<size_t>(s)];
    for (int64_t i = 0; i < N && path[s * N + i] >= 0; ++i) a.path.push_back(path[s * N + i]);
    a.bonus = bonus[s];
  }
  return out;
}

}  // namespace aerie::spec
