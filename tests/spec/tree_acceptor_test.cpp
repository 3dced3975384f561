// TreeAcceptor (kernels::tree_accept through its CPU backend): greedy walks equal the host
// walk; sampled acceptance commits tokens distributed as the target's processed
// distribution whatever the draft proposes (chi-square at 99.9%); filters bound the bonus;
// a seeded request gets the same result in any batch; bad trees are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/chain_accept.hpp"
#include "kernels/error.hpp"
#include "spec/greedy_accept.hpp"
#include "spec/tree_acceptor.hpp"

using namespace aerie;
using namespace aerie::spec;

namespace {

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double mx = logits[0], z = 0;
  for (float x : logits) mx = std::max(mx, static_cast<double>(x));
  for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp((logits[i] - mx) / temperature));
  for (auto& x : p) x /= z;
  return p;
}

double chi_square(const std::vector<double>& counts, const std::vector<double>& probs, double n) {
  double chi = 0;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (probs[v] == 0) {
      EXPECT_EQ(counts[v], 0) << "token " << v << " must never be committed";
      continue;
    }
    const double e = probs[v] * n;
    chi += (counts[v] - e) * (counts[v] - e) / e;
  }
  return chi;
}

// `copies` copies of one tree, request i seeded i; logits rows repeated per copy.
struct Batch {
  std::vector<DraftTree> trees;
  std::vector<model::SamplingRow> rows;
  Buffer logits;
};
Batch replicate(const DraftTree& t, const std::vector<float>& logits, int64_t vocab, model::SamplingRow row, int copies) {
  Batch b{std::vector<DraftTree>(static_cast<size_t>(copies), t), {}, Buffer(Device::kCpu, DType::kF32, {copies * t.size(), vocab})};
  for (int i = 0; i < copies; ++i) {
    std::copy(logits.begin(), logits.end(), b.logits.view().ptr<float>() + i * t.size() * vocab);
    row.seed = 1000 + i;
    b.rows.push_back(row);
  }
  return b;
}

// Root with children 3 and 1 (tried in that order), each with one child: 3 -> 2, 1 -> 4.
DraftTree two_branches() {
  DraftTree t;
  t.tokens = {0, 3, 1, 2, 4};
  t.parents = {-1, 0, 0, 1, 2};
  return t;
}

}  // namespace

TEST(TreeAcceptor, GreedyWalkEqualsTheHostWalk) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t V = 50, B = 40;
  const DraftTree t = two_branches();
  Buffer logits(Device::kCpu, DType::kF32, {B * t.size(), V});
  for (int64_t i = 0; i < logits.view().numel(); ++i) logits.view().ptr<float>()[i] = nd(rng);
  // Make the drafts the argmax often enough that paths of every length occur.
  std::vector<DraftTree> trees(static_cast<size_t>(B), t);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t node = 0; node < t.size(); ++node)
      if (rng() % 3 != 0) {
        const auto kids = t.children(static_cast<int32_t>(node));
        if (kids.empty()) continue;
        const int32_t want = t.tokens[static_cast<size_t>(kids[rng() % kids.size()])];
        logits.view().ptr<float>()[(b * t.size() + node) * V + want] = 10.0f;
      }
  const std::vector<model::SamplingRow> rows(static_cast<size_t>(B));  // temperature 0
  TreeAcceptor acceptor(Device::kCpu);
  const auto got = acceptor.accept(logits.view(), trees, rows, Stream::cpu());
  size_t longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> argmax;
    for (int64_t node = 0; node < t.size(); ++node) {
      const float* row = logits.view().ptr<float>() + (b * t.size() + node) * V;
      argmax.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
    }
    const auto want = greedy_accept_tree(t, argmax);
    EXPECT_EQ(got[static_cast<size_t>(b)].path, want.path) << b;
    EXPECT_EQ(got[static_cast<size_t>(b)].bonus, want.bonus) << b;
    longest = std::max(longest, want.path.size());
  }
  EXPECT_EQ(longest, 2u);
}

TEST(TreeAcceptor, FirstTokenFollowsTheTargetWhateverTheTree) {
  const int64_t V = 5;
  const DraftTree t = two_branches();
  std::vector<float> logits(static_cast<size_t>(t.size() * V), 0.0f);
  const std::vector<float> root = {0.5f, 1.0f, -0.5f, 0.2f, 0.0f};
  std::copy(root.begin(), root.end(), logits.begin());
  const auto probs = softmax(root, 1.0);
  const int trials = 40000;
  Batch b = replicate(t, logits, V, {.temperature = 1.0f}, trials);
  TreeAcceptor acceptor(Device::kCpu);
  const auto acc = acceptor.accept(b.logits.view(), b.trees, b.rows, Stream::cpu());
  std::vector<double> count(static_cast<size_t>(V), 0.0);
  int accepted_first = 0;
  for (const auto& a : acc) {
    count[static_cast<size_t>(a.committed(t)[0])] += 1;
    accepted_first += a.path.empty() ? 0 : 1;
  }
  EXPECT_LT(chi_square(count, probs, trials), 18.47) << "chi-square, 4 degrees of freedom, 99.9% quantile";
  // Both children are tried: the acceptance rate is p(3) + p(1).
  EXPECT_NEAR(static_cast<double>(accepted_first) / trials, probs[3] + probs[1], 0.01);
}

TEST(TreeAcceptor, SecondTokenFollowsTheTargetAfterAnAcceptedDraft) {
  // A chain 0 -> 3 -> 2 at temperature 0.7; given the draft 3 was accepted, the next token
  // must follow node 1's distribution (the draft 2 accepted or a bonus drawn).
  const int64_t V = 6;
  const std::vector<int32_t> drafts = {3, 2};
  const DraftTree t = DraftTree::chain(0, drafts);
  const std::vector<float> root = {0.0f, 0.0f, 0.0f, 2.0f, 0.0f, 0.0f}, second = {0.3f, -1.0f, 0.8f, 0.0f, 1.2f, -0.4f};
  std::vector<float> logits(static_cast<size_t>(t.size() * V), 0.0f);
  std::copy(root.begin(), root.end(), logits.begin());
  std::copy(second.begin(), second.end(), logits.begin() + V);
  const int trials = 40000;
  Batch b = replicate(t, logits, V, {.temperature = 0.7f}, trials);
  TreeAcceptor acceptor(Device::kCpu);
  const auto acc = acceptor.accept(b.logits.view(), b.trees, b.rows, Stream::cpu());
  std::vector<double> count(static_cast<size_t>(V), 0.0);
  double n = 0;
  for (const auto& a : acc) {
    const auto c = a.committed(t);
    if (c[0] != 3) continue;
    count[static_cast<size_t>(c[1])] += 1;
    n += 1;
  }
  EXPECT_NEAR(n / trials, softmax(root, 0.7)[3], 0.01);
  EXPECT_LT(chi_square(count, softmax(second, 0.7), n), 20.52) << "chi-square, 5 degrees of freedom, 99.9% quantile";
}

TEST(TreeAcceptor, FiltersBoundWhatIsCommitted) {
  // The filters keep tokens 4 and 1; the draft 3 lies outside, so it is never accepted
  // and the bonus is 4 or 1 in proportion (chi-square at 99.9%, 1 degree of freedom).
  const int64_t V = 6;
  const std::vector<int32_t> drafts = {3};
  const DraftTree t = DraftTree::chain(0, drafts);
  const std::vector<float> root = {0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 0.2f};
  std::vector<float> logits(static_cast<size_t>(t.size() * V), 0.0f);
  std::copy(root.begin(), root.end(), logits.begin());
  const int trials = 20000;
  TreeAcceptor acceptor(Device::kCpu);
  for (auto row : {model::SamplingRow{.temperature = 1.0f, .top_k = 2}, model::SamplingRow{.temperature = 1.0f, .top_p = 0.6f},
                   model::SamplingRow{.temperature = 1.0f, .min_p = 0.6f}}) {
    Batch b = replicate(t, logits, V, row, trials);
    const auto acc = acceptor.accept(b.logits.view(), b.trees, b.rows, Stream::cpu());
    std::vector<double> count(static_cast<size_t>(V), 0.0);
    for (const auto& a : acc) {
      EXPECT_TRUE(a.path.empty());
      count[static_cast<size_t>(a.bonus)] += 1;
    }
    // softmax(root) = .087 .238 .032 .144 .392 .107: each filter keeps tokens 4 and 1 (top-k
    // 2; top-p 0.6 is reached at .392 + .238; min-p 0.6 x .392 = .235 excludes .144).
    auto p = softmax(root, 1.0);
    std::vector<bool> keep(static_cast<size_t>(V), false);
    keep[4] = keep[1] = true;
    double kept = 0;
    for (int64_t v = 0; v < V; ++v) kept += keep[static_cast<size_t>(v)] ? p[static_cast<size_t>(v)] : 0;
    for (int64_t v = 0; v < V; ++v) p[static_cast<size_t>(v)] = keep[static_cast<size_t>(v)] ? p[static_cast<size_t>(v)] / kept : 0;
    EXPECT_LT(chi_square(count, p, trials), 10.83) << "top_k " << row.top_k << " top_p " << row.top_p << " min_p " << row.min_p;
  }
}

TEST(TreeAcceptor, ASeededRequestGetsTheSameResultInAnyBatch) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  const int64_t V = 300;
  const DraftTree t = two_branches();
  std::vector<float> mine(static_cast<size_t>(t.size() * V));
  for (auto& x : mine) x = nd(rng);
  const model::SamplingRow row{.temperature = 0.8f, .top_p = 0.9f, .top_k = 40, .seed = 77, .step = 12};
  TreeAcceptor acceptor(Device::kCpu);
  Batch alone = replicate(t, mine, V, row, 1);
  alone.rows[0] = row;
  const auto a = acceptor.accept(alone.logits.view(), alone.trees, alone.rows, Stream::cpu())[0];
  // The same request third in a batch of five, the others greedy or differently seeded.
  Buffer five(Device::kCpu, DType::kF32, {5 * t.size(), V});
  for (int64_t i = 0; i < five.view().numel(); ++i) five.view().ptr<float>()[i] = nd(rng);
  std::copy(mine.begin(), mine.end(), five.view().ptr<float>() + 2 * t.size() * V);
  std::vector<model::SamplingRow> rows = {{}, {.temperature = 1.0f, .seed = 5}, row, {.temperature = 0.5f, .seed = 77}, {}};
  const auto b = acceptor.accept(five.view(), std::vector<DraftTree>(5, t), rows, Stream::cpu())[2];
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.bonus, b.bonus);
}

TEST(TreeAcceptor, RefusesMalformedTrees) {
  const int64_t V = 5;
  TreeAcceptor acceptor(Device::kCpu);
  Buffer logits(Device::kCpu, DType::kF32, {2, V});
  const std::vector<model::SamplingRow> rows(1, model::SamplingRow{.temperature = 1.0f});
  const std::vector<int32_t> outside = {V};
  EXPECT_THROW(acceptor.accept(logits.view(), std::vector<DraftTree>{DraftTree::chain(0, outside)}, rows, Stream::cpu()), Error);
  DraftTree bad = DraftTree::chain(0, std::vector<int32_t>{1});
  bad.parents[1] = 1;
  EXPECT_THROW(acceptor.accept(logits.view(), std::vector<DraftTree>{bad}, rows, Stream::cpu()), Error);
  EXPECT_THROW(acceptor.accept(logits.view(), std::vector<DraftTree>{DraftTree::chain(0, std::vector<int32_t>{1, 2})}, rows, Stream::cpu()),
               Error);  // three nodes, two logits rows
}

// kernels::greedy_chain_accept (CPU backend): each request's drafts equal to the argmax of the
// row before them, up to the first that is not; the last committed row and every row's argmax
// as the tokens; a bucket's padded request gets its last row and zeros.
TEST(GreedyChainAccept, TakesEachRequestsMatchingDraftsThenPadsTheBucket) {
  // Three requests of n = 4 rows (root, three drafts), a bucket of 4.
  const std::vector<int32_t> drafts = {9, 5, 6, 7, /**/ 9, 5, 6, 7, /**/ 1, 2, 3, 4};
  const std::vector<int32_t> argmax = {5, 6, 7, 8, /**/ 5, 0, 7, 8, /**/ 0, 2, 3, 4};
  Buffer d(Device::kCpu, DType::kI32, {12}), a(Device::kCpu, DType::kI32, {12}), last(Device::kCpu, DType::kI32, {4}),
      tokens(Device::kCpu, DType::kI32, {16});
  std::copy(drafts.begin(), drafts.end(), static_cast<int32_t*>(d.data()));
  std::copy(argmax.begin(), argmax.end(), static_cast<int32_t*>(a.data()));
  ASSERT_TRUE(kernels::greedy_chain_accept(
                  {.drafts = d.view(), .argmax = a.view(), .tokens_per_request = 4, .last_rows = last.view(), .tokens = tokens.view()},
                  Stream::cpu())
                  .is_ok());
  const int32_t* l = static_cast<const int32_t*>(last.data());
  EXPECT_EQ(std::vector<int32_t>(l, l + 4), (std::vector<int32_t>{3, 5, 8, 15}));  // all three, one, none; the padded request's last row
  const int32_t* t = static_cast<const int32_t*>(tokens.data());
  std::vector<int32_t> want = argmax;
  want.insert(want.end(), 4, 0);
  EXPECT_EQ(std::vector<int32_t>(t, t + 16), want);
  // Too few argmax rows, or tokens not n per row: refused.
  EXPECT_THROW(kernels::greedy_chain_accept({.drafts = d.view(), .argmax = a.view().slice_rows(0, 8), .tokens_per_request = 4,
                                             .last_rows = last.view(), .tokens = tokens.view()},
                                            Stream::cpu()),
               Error);
  EXPECT_THROW(kernels::greedy_chain_accept({.drafts = d.view(), .argmax = a.view(), .tokens_per_request = 4, .last_rows = last.view(),
                                             .tokens = tokens.view().slice_rows(0, 12)},
                                            Stream::cpu()),
               Error);
}
