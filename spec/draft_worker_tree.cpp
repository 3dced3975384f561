// DraftWorkerCore::propose_tree: sglang's EAGLE tree drafting (topk > 1). The state holds
// each request's topk best first tokens; every further step runs one draft forward over
// the topk frontier nodes of every request, each as its own one-token sequence whose
// context is the request's committed context plus the scratch rows of its own path, and
// keeps the topk best of the topk x topk expansions as the next frontier. Scores are float
// sums in the order kernels::tree_draft_expand makes them, so the tree runner
// (spec/draft_tree_runner.hpp), which takes every proposal it can, picks the same trees.
#include <algorithm>
#include <numeric>

#include "spec/draft_worker_core.hpp"
#include "kernels/error.hpp"

namespace aerie::spec {

namespace {

struct FrontierNode {
  int32_t candidate = 0;          // index in the request's candidate list
  float score = 0.0f;             // cumulative draft log-probability
  std::vector<int32_t> path;      // scratch slots of its ancestors' draft rows
  int32_t hidden_source = -1;     // EAGLE: row of the hidden state its forward reads
};

}  // namespace

std::vector<spec::DraftTree> DraftWorkerCore::propose_tree(const std::vector<ProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) {
  const int64_t K = info_.topk;
  const size_t B = seqs.size();
  AERIE_CHECK(steps >= 1 && draft_tokens >= 2, "tree drafting needs steps >= 1 and at least two draft tokens");
  if (auto trees = propose_tree_on_device(seqs, steps, draft_tokens)) return std::move(*trees);
  fetch_state(seqs);  // drafting step by step: the first tokens on the host
  std::vector<std::vector<spec::DraftCandidate>> candidates(B);
  std::vector<std::vector<FrontierNode>> frontier(B);
  for (size_t i = 0; i < B; ++i) {
    const auto& s = seqs[i];
    auto it = state_.find(s.rid);
    AERIE_CHECK(it != state_.end(), "no draft state for request " << s.rid << " (its prefill did not reach the draft)");
    const State& st = it->second;
    AERIE_CHECK(static_cast<int64_t>(st.top_tokens.size()) == K, "request " << s.rid << "'s draft state has no top-" << K << " tokens");
    AERIE_CHECK(static_cast<int64_t>(s.context.size()) >= s.first_position + (steps - 1) * K,
                "draft context of request " << s.rid << " has no room for " << (steps - 1) * K << " scratch rows");
    for (int64_t k = 0; k < K; ++k) {
      const auto c = static_cast<int32_t>(candidates[i].size());
      candidates[i].push_back({.score = st.top_logp[static_cast<size_t>(k)], .token = st.top_tokens[static_cast<size_t>(k)], .parent = -1});
      frontier[i].push_back({.candidate = c, .score = st.top_logp[static_cast<size_t>(k)], .path = {}, .hidden_source = static_cast<int32_t>(st.hidden_row)});
    }
  }
  for (int64_t j = 1; j < steps; ++j) {
    model::ForwardBatch b;
    std::vector<int32_t> hidden_rows;
    std::vector<std::vector<int32_t>> own_slot(B);
    for (size_t i = 0; i < B; ++i) {
      const auto& s = seqs[i];
      for (size_t f = 0; f < frontier[i].size(); ++f) {
        const FrontierNode& node = frontier[i][f];
        const int32_t slot = s.context[static_cast<size_t>(s.first_position + (j - 1) * K + static_cast<int64_t>(f))];
        own_slot[i].push_back(slot);
        b.input_ids.push_back(candidates[i][static_cast<size_t>(node.candidate)].token);
        b.positions.push_back(s.first_position + static_cast<int32_t>(j - 1));
        b.out_cache_loc.push_back(slot);
        b.kv_indices.insert(b.kv_indices.end(), s.context.begin(), s.context.begin() + s.first_position);
        b.kv_indices.insert(b.kv_indices.end(), node.path.begin(), node.path.end());
        b.kv_indices.push_back(slot);
        b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
        b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()));
        b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
        hidden_rows.push_back(node.hidden_source);
      }
    }
    for (auto& r : b.logit_rows) --r;  // the row just pushed
    TensorView in_hidden;
    if (eagle()) {
      // Step 1 reads the requests' state rows; later steps the rows of the forward before.
      const TensorView table = j == 1 ? hidden_pool_.view() : head_->out_hidden();
      in_hidden = gather(table, hidden_rows);
    }
    const TopRows top = run_top(b, in_hidden, K);
    size_t row = 0;
    for (size_t i = 0; i < B; ++i) {
      struct Expansion {
        float score;
        size_t parent;  // frontier index
        size_t row;     // forward row of the parent
        int32_t token;
      };
      std::vector<Expansion> ex;
      for (size_t f = 0; f < frontier[i].size(); ++f, ++row)
        for (int64_t k = 0; k < K; ++k) {
          const size_t at = row * static_cast<size_t>(K) + static_cast<size_t>(k);
          ex.push_back({frontier[i][f].score + top.logp[at], f, row, top.tokens[at]});
        }
      std::vector<FrontierNode> next;
      std::vector<size_t> order(ex.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return ex[a].score > ex[c].score; });
      std::vector<int32_t> candidate_of(ex.size());
      for (size_t e = 0; e < ex.size(); ++e) {  // every expansion is a candidate, in creation order
        candidate_of[e] = static_cast<int32_t>(candidates[i].size());
        candidates[i].push_back({.score = ex[e].score, .token = ex[e].token, .parent = frontier[i][ex[e].parent].candidate});
      }
      for (size_t r = 0; r < order.size() && static_cast<int64_t>(next.size()) < K; ++r) {
        const Expansion& e = ex[order[r]];
        FrontierNode n{.candidate = candidate_of[order[r]], .score = e.score, .path = frontier[i][e.parent].path, .hidden_source = static_cast<int32_t>(e.row)};
        n.path.push_back(own_slot[i][e.parent]);
        next.push_back(std::move(n));
      }
      frontier[i] = std::move(next);
    }
  }
  std::vector<spec::DraftTree> trees;
  for (size_t i = 0; i < B; ++i) trees.push_back(spec::select_draft_tree(seqs[i].root_token, candidates[i], draft_tokens - 1));
  return trees;
}

std::optional<std::vector<spec::DraftTree>> DraftWorkerCore::propose_tree_on_device(const std::vector<ProposeSeq>& seqs, int64_t steps,
                                                                                     int64_t draft_tokens) {
  if (!tree_ || steps != tree_->steps()) return std::nullopt;
  std::vector<spec::TreeSeq> tree_seqs;
  for (const auto& s : seqs) {
    auto it = state_.find(s.rid);
    AERIE_CHECK(it != state_.end(), "no draft state for request " << s.rid << " (its prefill did not reach the draft)");
    tree_seqs.push_back({.first_position = s.first_position, .context = &s.context, .state_row = static_cast<int32_t>(it->second.hidden_row)});
  }
  if (!tree_->can_run(tree_seqs)) return std::nullopt;
  const auto candidates = tree_->propose(tree_seqs);
  std::vector<spec::DraftTree> trees;
  for (size_t i = 0; i < seqs.size(); ++i) trees.push_back(spec::select_draft_tree(seqs[i].root_token, candidates[i], draft_tokens - 1));
  return trees;
}

}  // namespace aerie::spec
