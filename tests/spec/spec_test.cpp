#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include <chrono>
#include <thread>

#include "spec/bucket_graphs.hpp"
#include "spec/cuda_graph_buckets.hpp"
#include "spec/graph_times.hpp"
#include "spec/draft_tree.hpp"
#include "spec/greedy_accept.hpp"

using namespace aerie;
using namespace aerie::spec;

TEST(CudaGraphBuckets, FollowsSglangSchedule) {
  auto s = cuda_graph_bucket_sizes(256);
  EXPECT_EQ(s.size(), 8u + 12u + 7u + 24u);  // 1..8, 10..32 by 2, 40..64 by 4, 72..256 by 8
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.begin() + 10), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12}));
  EXPECT_EQ(s.back(), 256);
  EXPECT_EQ(cuda_graph_bucket_sizes(20).back(), 20);
  EXPECT_EQ(cuda_graph_bucket_sizes(33).back(), 32);
  EXPECT_THROW(cuda_graph_bucket_sizes(0), Error);
}

TEST(CudaGraphBuckets, PicksTheSmallestBucketThatFits) {
  BucketSchedule b(64);
  EXPECT_EQ(*b.bucket_for(1), 1);
  EXPECT_EQ(*b.bucket_for(9), 10);
  EXPECT_EQ(*b.bucket_for(33), 40);
  EXPECT_EQ(*b.bucket_for(64), 64);
  EXPECT_FALSE(b.bucket_for(65));  // eager
  EXPECT_FALSE(b.bucket_for(0));
}

// sglang's --cuda-graph-bs and --disable-cuda-graph-padding: exactly the given sizes (sorted,
// deduplicated, capped per runner; the schedule when none fits the cap), and without padding
// only batches of exactly a captured size replay.
TEST(CudaGraphBuckets, FollowTheLaunchsPolicy) {
  struct Restore {
    ~Restore() { set_graph_bucket_policy({}); }
  } restore;
  set_graph_bucket_policy({.sizes = {16, 1, 4, 4}, .padding = true});
  BucketSchedule padded(64);
  EXPECT_EQ(padded.sizes(), (std::vector<int64_t>{1, 4, 16}));
  EXPECT_EQ(*padded.bucket_for(3), 4);
  EXPECT_FALSE(padded.bucket_for(17));
  EXPECT_EQ(BucketSchedule(8).sizes(), (std::vector<int64_t>{1, 4}));  // a runner capped at 8
  set_graph_bucket_policy({.sizes = {16}, .padding = true});
  EXPECT_EQ(BucketSchedule(8).sizes(), cuda_graph_bucket_sizes(8));  // none fits: the schedule
  set_graph_bucket_policy({.sizes = {}, .padding = false});
  BucketSchedule exact(64);
  EXPECT_EQ(*exact.bucket_for(8), 8);
  EXPECT_FALSE(exact.bucket_for(9));  // the schedule has 10: padding would be needed
  EXPECT_EQ(*exact.bucket_for(10), 10);
  EXPECT_THROW(set_graph_bucket_policy({.sizes = {0, 4}, .padding = true}), Error);
}

// One request's prefill graphs (spec/prefill_graph_runner.hpp) are captured at powers of two
// from 16 tokens, and at the largest size asked for; a prompt pads up to the next.
TEST(CudaGraphBuckets, PrefillTokenBucketsArePowersOfTwoUpToTheLargest) {
  EXPECT_EQ(prefill_graph_token_buckets(256), (std::vector<int64_t>{16, 32, 64, 128, 256}));
  EXPECT_EQ(prefill_graph_token_buckets(100), (std::vector<int64_t>{16, 32, 64, 100}));
  EXPECT_EQ(prefill_graph_token_buckets(8), (std::vector<int64_t>{8}));
  EXPECT_TRUE(prefill_graph_token_buckets(0).empty());
  EXPECT_THROW(prefill_graph_token_buckets(kPrefillGraphMaxTokens + 1), Error);
  const BucketSchedule tokens(prefill_graph_token_buckets(100), /*padding=*/true);
  EXPECT_EQ(*tokens.bucket_for(1), 16);
  EXPECT_EQ(*tokens.bucket_for(17), 32);
  EXPECT_EQ(*tokens.bucket_for(65), 100);
  EXPECT_FALSE(tokens.bucket_for(101));
  const BucketSchedule exact(prefill_graph_token_buckets(100), /*padding=*/false);
  EXPECT_FALSE(exact.bucket_for(17));
  EXPECT_EQ(*exact.bucket_for(32), 32);
  EXPECT_THROW(BucketSchedule({}, true), Error);
  EXPECT_THROW(BucketSchedule({32, 16}, true), Error);
  EXPECT_THROW(BucketSchedule({16, 16}, true), Error);
  EXPECT_THROW(BucketSchedule({0, 16}, true), Error);
}

// Without graphs (the CPU) a runner's work runs eagerly; GraphTimes, when on, times it under
// the runner's label with the host clock, and collect() starts afresh.
TEST(GraphTimes, TimesEachRunnersWorkUnderItsLabelWhileOn) {
  OwnedStream stream(Device::kCpu);
  BucketGraphs verify("verify", 4, /*graphs=*/false, [](int64_t bs) { return model::ForwardDims{.tokens = bs, .seqs = bs}; });
  BucketGraphs chain("draft chain", 4, /*graphs=*/false, [](int64_t bs) { return model::ForwardDims{.tokens = bs, .seqs = bs}; });
  int runs = 0;
  auto work = [&](int64_t) {
    ++runs;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  };
  GraphTimes::collect();
  verify.run(2, stream.get(), work);  // off: runs, not timed
  EXPECT_TRUE(GraphTimes::collect().empty());
  GraphTimes::enable(true);
  verify.run(2, stream.get(), work);
  verify.run(1, stream.get(), work);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the device idle between two runners
  chain.run(3, stream.get(), work);
  verify.run(1, stream.get(), work);
  GraphTimes::enable(false);
  std::map<std::string, GraphGap> gaps;
  const auto t = GraphTimes::collect(&gaps);
  EXPECT_EQ(runs, 5);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at("verify").runs, 3);
  EXPECT_EQ(t.at("draft chain").runs, 1);
  EXPECT_GE(t.at("verify").ms, 9.0);
  EXPECT_GE(t.at("draft chain").ms, 3.0);
  // Each run's gap to the run before it, under both labels in order.
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_EQ(gaps.at("verify -> verify").count, 1);
  EXPECT_EQ(gaps.at("verify -> draft chain").count, 1);
  EXPECT_EQ(gaps.at("draft chain -> verify").count, 1);
  EXPECT_GE(gaps.at("verify -> draft chain").median_ms, 5.0);
  EXPECT_DOUBLE_EQ(gaps.at("verify -> draft chain").mean_ms, gaps.at("verify -> draft chain").median_ms);
  EXPECT_TRUE(GraphTimes::collect(&gaps).empty());
  EXPECT_TRUE(gaps.empty());
}

TEST(GraphTimes, AGapsMedianIsTheMiddleRunsAndItsMeanCarriesTheRareLongOne) {
  OwnedStream stream(Device::kCpu);
  BucketGraphs verify("verify", 4, /*graphs=*/false, [](int64_t bs) { return model::ForwardDims{.tokens = bs, .seqs = bs}; });
  BucketGraphs extend("draft extend", 4, /*graphs=*/false, [](int64_t bs) { return model::ForwardDims{.tokens = bs, .seqs = bs}; });
  auto nothing = [](int64_t) {};
  GraphTimes::collect();
  GraphTimes::enable(true);
  for (int pause_ms : {1, 30, 1}) {  // one round waits for a prefill, say
    verify.run(1, stream.get(), nothing);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    extend.run(1, stream.get(), nothing);
  }
  GraphTimes::enable(false);
  std::map<std::string, GraphGap> gaps;
  GraphTimes::collect(&gaps);
  const GraphGap& g = gaps.at("verify -> draft extend");
  EXPECT_EQ(g.count, 3);
  EXPECT_GE(g.median_ms, 1.0);
  EXPECT_GE(g.mean_ms, 32.0 / 3);
  EXPECT_EQ(gaps.at("draft extend -> verify").count, 2);
  // The summary itself, on fixed gaps (the clock above only bounds them from below).
  const GraphGap fixed = GraphGap::of({1.0, 30.0, 1.5});
  EXPECT_EQ(fixed.count, 3);
  EXPECT_DOUBLE_EQ(fixed.median_ms, 1.5);
  EXPECT_DOUBLE_EQ(fixed.mean_ms, 32.5 / 3);
  EXPECT_DOUBLE_EQ(GraphGap::of({4.0, 2.0}).median_ms, 3.0);
  EXPECT_EQ(GraphGap::of({}).count, 0);
}

TEST(GreedyAccept, AcceptsTheMatchingPrefixPlusTheBonusToken) {
  // Three requests, three draft tokens each, as chains under the root 0.
  const std::vector<std::vector<int32_t>> drafts = {{5, 6, 7}, {5, 9, 7}, {1, 2, 3}};
  const std::vector<std::vector<int32_t>> target = {{5, 6, 7, 8}, {5, 6, 7, 8}, {4, 2, 3, 4}};
  const std::vector<std::vector<int32_t>> committed = {{5, 6, 7, 8}, {5, 6}, {4}};
  for (size_t r = 0; r < drafts.size(); ++r) {
    const auto tree = DraftTree::chain(0, drafts[r]);
    const auto a = greedy_accept_tree(tree, target[r]);
    EXPECT_EQ(a.committed(tree), committed[r]) << "request " << r;
    EXPECT_EQ(a.path.size() + 1, committed[r].size());
  }
  EXPECT_THROW(greedy_accept_tree(DraftTree::chain(0, drafts[0]), std::vector<int32_t>{5, 6, 7}), Error);  // one argmax per node
}

namespace {
// root(0) -> a(1) -> c(3)
//         -> b(2) -> d(4) -> e(5)
DraftTree sample_tree() {
  DraftTree t;
  t.tokens = {100, 10, 20, 30, 40, 50};
  t.parents = {-1, 0, 0, 1, 2, 4};
  t.validate();
  return t;
}
}  // namespace

TEST(DraftTree, DepthsChildrenAndMask) {
  const auto t = sample_tree();
  EXPECT_EQ(t.depths(), (std::vector<int32_t>{0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(t.children(0), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t.children(2), (std::vector<int32_t>{4}));
  EXPECT_TRUE(t.children(3).empty());
  std::vector<uint8_t> mask;
  append_tree_mask(t, 2, mask);  // two prefix keys
  ASSERT_EQ(mask.size(), 6u * 8u);
  const std::vector<uint8_t> row5 = {1, 1, 1, 0, 1, 0, 1, 1};  // prefix, root, b, d, e
  EXPECT_EQ(std::vector<uint8_t>(mask.begin() + 5 * 8, mask.end()), row5);
  const std::vector<uint8_t> row3 = {1, 1, 1, 1, 0, 1, 0, 0};  // prefix, root, a, c
  EXPECT_EQ(std::vector<uint8_t>(mask.begin() + 3 * 8, mask.begin() + 4 * 8), row3);
  DraftTree bad = t;
  bad.parents[3] = 4;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(DraftTree, GreedyWalksTheMatchingBranch) {
  const auto t = sample_tree();
  // The target wants b after the root, then d, then e, then 7.
  auto a = greedy_accept_tree(t, std::vector<int32_t>{20, 0, 40, 0, 50, 7});
  EXPECT_EQ(a.path, (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(a.committed(t), (std::vector<int32_t>{20, 40, 50, 7}));
  // It wants a, then something a's children lack.
  a = greedy_accept_tree(t, std::vector<int32_t>{10, 31, 0, 0, 0, 0});
  EXPECT_EQ(a.committed(t), (std::vector<int32_t>{10, 31}));
  // Nothing matches at the root.
  a = greedy_accept_tree(t, std::vector<int32_t>{99, 0, 0, 0, 0, 0});
  EXPECT_EQ(a.committed(t), (std::vector<int32_t>{99}));
}

TEST(DraftTree, SelectionKeepsTheBestCandidatesWithTheirParents) {
  // Step 0: tokens 1 (-0.1), 2 (-1.0); step 1 expands both: 1->3 (-0.2), 1->4 (-2.0), 2->5 (-1.1), 2->6 (-3.0).
  const std::vector<DraftCandidate> c = {{-0.1, 1, -1}, {-1.0, 2, -1}, {-0.2, 3, 0}, {-2.0, 4, 0}, {-1.1, 5, 1}, {-3.0, 6, 1}};
  const auto t = select_draft_tree(9, c, 4);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{9, 1, 2, 3, 5}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 0, 1, 2}));
  // Ties keep the earlier candidate (a parent before its child of equal score).
  const std::vector<DraftCandidate> tie = {{0.0, 1, -1}, {-5.0, 2, -1}, {0.0, 3, 0}};
  EXPECT_EQ(select_draft_tree(9, tie, 2).tokens, (std::vector<int32_t>{9, 1, 3}));
  EXPECT_EQ(select_draft_tree(9, tie, 10).size(), 4);  // at most every candidate
}

TEST(DraftTree, VerifyReserveCoversNodesScratchAndExtend) {
  EXPECT_EQ(verify_reserve(3, 1, 4), 5);   // chain: steps + 2
  EXPECT_EQ(verify_reserve(0, 1, 1), 2);   // speculation paused: the token and the next
  EXPECT_EQ(verify_reserve(5, 8, 64), 64); // the tree's nodes
  EXPECT_EQ(verify_reserve(5, 8, 16), 33); // the draft's 4 x 8 scratch rows, one past the root
  EXPECT_EQ(verify_reserve(6, 2, 4), 11);  // 5 x 2 scratch rows
}

