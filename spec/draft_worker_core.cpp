#include "spec/draft_worker_core.hpp"

#include <algorithm>
#include <span>

#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"
#include "kernels/embedding.hpp"
#include "kernels/sampling.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "spec/chain_stop.hpp"
#include "spec/graph_times.hpp"
#include "spec/greedy_accept.hpp"

namespace aerie::spec {

SpecAlgorithm parse_spec_algorithm(const std::string& name) {
  if (name == "EAGLE") return SpecAlgorithm::kEagle;
  if (name == "EAGLE3") return SpecAlgorithm::kEagle3;
  if (name == "STANDALONE") return SpecAlgorithm::kStandalone;
  AERIE_FAIL("unknown speculative algorithm '" << name << "' (EAGLE, EAGLE3 or STANDALONE)");
}

DraftWorkerCore::DraftWorkerCore(SpecAlgorithm algorithm, std::unique_ptr<model::EagleHead> head,
                                 std::unique_ptr<model::LlamaModel> standalone, model::KvCache& draft_kv, const model::LlamaModel& target,
                                 int64_t max_requests, int64_t topk)
    : info_{.algorithm = algorithm, .topk = topk, .aux_layers = {}},
      head_(std::move(head)),
      standalone_(std::move(standalone)),
      kv_(draft_kv),
      target_(target),
      stream_(target.stream()),
      act_(target.act_dtype()),
      hidden_size_(target.config().hidden_size),
      max_requests_(max_requests),
      argmax_(target.stream().device()) {
  AERIE_CHECK(topk >= 1 && topk <= kernels::kMaxTopK, "--speculative-eagle-topk must be in [1, " << kernels::kMaxTopK << "], got " << topk);
  AERIE_CHECK(algorithm != SpecAlgorithm::kNone, "a draft worker needs a speculative algorithm");
  AERIE_CHECK(eagle() ? head_ != nullptr : standalone_ != nullptr, "the draft model does not match the algorithm");
  if (standalone_)
    AERIE_CHECK(standalone_->config().vocab_size == target.config().vocab_size,
                "a STANDALONE draft needs the target's vocabulary (" << target.config().vocab_size << " tokens), it has "
                                                                     << standalone_->config().vocab_size);
  if (head_ && algorithm == SpecAlgorithm::kEagle3)
    for (auto l : head_->config().aux_layers) info_.aux_layers.push_back(static_cast<int64_t>(l));
  // One row more than requests: the extend runner's padded requests write it.
  if (eagle()) hidden_pool_ = Buffer(stream_.device(), act_, {max_requests_ + 1, hidden_size_});
  for (int64_t r = max_requests_ - 1; r >= 0; --r) free_rows_.push_back(r);
}

void DraftWorkerCore::forget(uint64_t rid) {
  ahead_.round.drop(rid);
  auto it = state_.find(rid);
  if (it == state_.end()) return;
  if (it->second.hidden_row >= 0) free_rows_.push_back(it->second.hidden_row);
  state_.erase(it);
}

int64_t DraftWorkerCore::row_for(uint64_t rid) {
  auto& s = state_[rid];
  if (s.hidden_row < 0) {
    AERIE_CHECK(!free_rows_.empty(), "draft state for more than " << max_requests_ << " requests");
    s.hidden_row = free_rows_.back();
    free_rows_.pop_back();
  }
  return s.hidden_row;
}

TensorView DraftWorkerCore::forward(const model::ForwardBatch& b, const TensorView& in_hidden) {
  return eagle() ? head_->forward(b, in_hidden, kv_) : standalone_->forward(b, kv_);
}

std::vector<int32_t> DraftWorkerCore::run(const model::ForwardBatch& b, const TensorView& in_hidden) {
  const TensorView logits = forward(b, in_hidden);
  if (b.logit_rows.empty()) return {};
  auto ids = argmax_.argmax(logits, stream_);
  if (head_)
    for (auto& id : ids) id = head_->to_target(id);
  return ids;
}

DraftWorkerCore::TopRows DraftWorkerCore::run_top(const model::ForwardBatch& b, const TensorView& in_hidden, int64_t k) {
  const TensorView logits = forward(b, in_hidden);
  const int64_t rows = static_cast<int64_t>(b.logit_rows.size());
  TopRows out;
  if (rows == 0) return out;
  AERIE_CHECK(k <= logits.dim(1), "--speculative-eagle-topk " << k << " exceeds the draft vocabulary of " << logits.dim(1));
  // The logits are this forward's scratch: turn them into log-probabilities in place.
  AERIE_CHECK_STATUS(kernels::log_softmax({.logits = logits, .out = logits}, stream_));
  if (!top_values_.data() || top_values_.view().numel() < rows * k) {
    top_values_ = Buffer(stream_.device(), DType::kF32, {rows * k});
    top_ids_ = Buffer(stream_.device(), DType::kI32, {rows * k});
  }
  const TensorView values(top_values_.data(), DType::kF32, {rows, k}, stream_.device());
  const TensorView ids(top_ids_.data(), DType::kI32, {rows, k}, stream_.device());
  AERIE_CHECK_STATUS(kernels::topk({.x = logits, .values = values, .indices = ids}, stream_));
  out.tokens.resize(static_cast<size_t>(rows * k));
  out.logp.resize(static_cast<size_t>(rows * k));
  copy_async(out.tokens.data(), ids.data, out.tokens.size() * sizeof(int32_t), stream_);
  copy_async(out.logp.data(), values.data, out.logp.size() * sizeof(float), stream_);
  synchronize(stream_);
  if (head_)
    for (auto& id : out.tokens) id = head_->to_target(id);
  return out;
}

TensorView DraftWorkerCore::gather(const TensorView& table, const std::vector<int32_t>& rows) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t width = table.dim(1);
  for (int32_t r : rows) AERIE_CHECK(r >= 0 && r < table.dim(0), "draft hidden row " << r << " is outside " << table.describe());
  if (!gathered_.data() || gathered_.view().numel() < n * width) gathered_ = Buffer(stream_.device(), act_, {std::max<int64_t>(n, 1) * width});
  const TensorView ids = upload_ints(gather_ids_, rows, stream_);
  const TensorView out(gathered_.data(), act_, {n, width}, stream_.device());
  AERIE_CHECK_STATUS(kernels::embedding({.ids = ids, .table = table, .out = out}, stream_));
  return out;
}

namespace {

// `s` as a fixed-width extend runner takes it: its tokens, their slots and then `padding_slots`
// (where the rest of the width writes), the context before its first position, its hidden rows;
// its state row is given when the runner takes the batch.
spec::ExtendSeq at_width(const DraftExtendSeq& s, const std::vector<int32_t>& padding_slots) {
  spec::ExtendSeq f{.tokens = s.tokens, .first_position = s.first_position, .slots = s.slots,
                    .context = std::vector<int32_t>(s.context.begin(), s.context.begin() + s.first_position), .hidden_rows = s.hidden_rows,
                    .state_row = -1};
  f.slots.insert(f.slots.end(), padding_slots.begin(), padding_slots.end());
  return f;
}

}  // namespace

void DraftWorkerCore::extend(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden) {
  if (seqs.empty()) return;
  for (const auto& s : seqs) ahead_.round.drop(s.rid);
  if (extend_at_fixed_width(seqs, target_hidden) || extend_prompt_at_bucket_width(seqs, target_hidden)) return;
  model::ForwardBatch b;
  std::vector<const ExtendSeq*> kept;
  for (const auto& s : seqs) {
    AERIE_CHECK(!s.tokens.empty() && s.tokens.size() == s.slots.size(), "draft extend of request " << s.rid << ": tokens and slots disagree");
    AERIE_CHECK(static_cast<int64_t>(s.context.size()) == s.first_position + static_cast<int64_t>(s.tokens.size()),
                "draft extend of request " << s.rid << ": context covers " << s.context.size() << " positions");
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      b.input_ids.push_back(s.tokens[i]);
      b.positions.push_back(s.first_position + static_cast<int32_t>(i));
      b.out_cache_loc.push_back(s.slots[i]);
    }
    b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.kv_indices.insert(b.kv_indices.end(), s.context.begin(), s.context.end());
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    if (s.keep) {
      b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
      kept.push_back(&s);
    }
  }
  std::vector<int32_t> rows;
  if (eagle()) {
    AERIE_CHECK(target_hidden.defined(), "EAGLE draft extend needs the target's hidden states");
    for (const auto& s : seqs) {
      AERIE_CHECK(s.hidden_rows.size() == s.tokens.size(), "draft extend of request " << s.rid << ": one hidden row per token");
      rows.insert(rows.end(), s.hidden_rows.begin(), s.hidden_rows.end());
    }
  }
  // The target's hidden rows of each sequence, gathered in batch order.
  auto hidden_in = [&] { return eagle() ? gather(target_hidden, rows) : TensorView(); };
  if (chain_ || tree_) {  // with a runner: the state stays on the device
    std::vector<uint64_t> rids;
    for (const auto* k : kept) rids.push_back(k->rid);
    GraphTimes::run("draft extend (eager)", stream_, [&] { keep_state_on_device(b, forward(b, hidden_in()), rids); });
    return;
  }
  const TensorView in_hidden = hidden_in();
  std::vector<int32_t> next;
  TopRows top;
  if (info_.topk > 1) {
    top = run_top(b, in_hidden, info_.topk);
    for (size_t k = 0; k < kept.size(); ++k) next.push_back(top.tokens[k * static_cast<size_t>(info_.topk)]);
  } else {
    next = run(b, in_hidden);
  }
  const size_t hrow = static_cast<size_t>(hidden_size_) * dtype_size(act_);
  for (size_t k = 0; k < kept.size(); ++k) {
    const uint64_t rid = kept[k]->rid;
    const int64_t row = row_for(rid);
    state_[rid].next_token = next[k];
    if (info_.topk > 1) {
      const auto at = static_cast<std::ptrdiff_t>(k) * info_.topk;
      state_[rid].top_tokens.assign(top.tokens.begin() + at, top.tokens.begin() + at + info_.topk);
      state_[rid].top_logp.assign(top.logp.begin() + at, top.logp.begin() + at + info_.topk);
    }
    if (eagle()) {  // the head's output at the sequence's last token
      const TensorView out = head_->out_hidden();
      copy_async(static_cast<char*>(hidden_pool_.data()) + row * static_cast<int64_t>(hrow),
                 static_cast<const char*>(out.data) + static_cast<int64_t>(b.logit_rows[k]) * static_cast<int64_t>(hrow), hrow, stream_);
    }
  }
  synchronize(stream_);
}

bool DraftWorkerCore::extend_at_fixed_width(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden) {
  if (!extend_runner_) return false;
  std::vector<spec::ExtendSeq> fixed;
  for (const auto& s : seqs) {
    if (!fits_an_extend_runner(s) || s.tokens.size() + s.spare_slots.size() != static_cast<size_t>(extend_runner_->width())) return false;
    fixed.push_back(at_width(s, s.spare_slots));
  }
  return run_extend_runner(*extend_runner_, seqs, fixed, target_hidden, TensorView());
}

bool DraftWorkerCore::fits_an_extend_runner(const ExtendSeq& s) const {
  return s.keep && !s.tokens.empty() && s.slots.size() == s.tokens.size() &&
         s.context.size() == static_cast<size_t>(s.first_position) + s.tokens.size() && (!eagle() || s.hidden_rows.size() == s.tokens.size());
}

bool DraftWorkerCore::extend_prompt_at_bucket_width(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden) {
  if (prompt_runners_.empty() || seqs.size() != 1) return false;
  const ExtendSeq& s = seqs.front();
  if (!fits_an_extend_runner(s) || !s.spare_slots.empty()) return false;
  const auto n = static_cast<int64_t>(s.tokens.size());
  const auto it = prompt_runners_.lower_bound(n);
  if (it == prompt_runners_.end() || (it->first != n && !spec::graph_bucket_policy().padding)) return false;
  // The padding tokens after the prompt write the dummy slot 0 (causal attention keeps them
  // from the prompt's tokens).
  std::vector<spec::ExtendSeq> fixed{at_width(s, std::vector<int32_t>(static_cast<size_t>(it->first - n), 0))};
  return run_extend_runner(*it->second, seqs, fixed, target_hidden, TensorView());
}

std::vector<int64_t> DraftWorkerCore::prompt_extend_widths() const {
  std::vector<int64_t> widths;
  for (const auto& [w, r] : prompt_runners_) widths.push_back(w);
  return widths;
}

bool DraftWorkerCore::run_extend_runner(spec::DraftExtendRunner& runner, const std::vector<ExtendSeq>& seqs, std::vector<spec::ExtendSeq>& fixed,
                                        const TensorView& target_hidden, const TensorView& verified_argmax) {
  // Rows are taken only once the batch is known to fit, so a refusal leaves no state behind.
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto it = state_.find(seqs[i].rid);
    fixed[i].state_row = static_cast<int32_t>(it != state_.end() && it->second.hidden_row >= 0 ? it->second.hidden_row : 0);
  }
  if (!runner.can_run(fixed)) return false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    fixed[i].state_row = static_cast<int32_t>(row_for(seqs[i].rid));
    state_[seqs[i].rid].on_device = true;
  }
  runner.run(fixed, eagle() ? target_hidden : TensorView(), verified_argmax);
  return true;
}

namespace {

// What a verified chain commits under the verify's argmax rows (the target worker's walk,
// spec::greedy_accept_tree): the accepted drafts' argmax, then the bonus token.
std::vector<int32_t> committed_of(const DraftExtendSeq& s, std::span<const int32_t> argmax) {
  const spec::DraftTree chain = spec::DraftTree::chain(s.tokens.front(), std::vector<int32_t>(s.tokens.begin() + 1, s.tokens.end()));
  return spec::greedy_accept_tree(chain, argmax).committed(chain);
}

}  // namespace

void DraftWorkerCore::extend_verified_chains(const std::vector<ExtendSeq>& seqs, const TensorView& verified_argmax, const TensorView& target_hidden) {
  if (seqs.empty()) return;
  const size_t n = seqs.front().tokens.size();
  for (const auto& s : seqs) {
    AERIE_CHECK(n >= 1 && s.tokens.size() == n && s.slots.size() == n && s.spare_slots.empty() &&
                    static_cast<int64_t>(s.context.size()) == s.first_position && (!eagle() || s.hidden_rows.size() == n),
                "verified chain of request " << s.rid << ": every request needs its " << n << " verified tokens, their slots"
                                             << (eagle() ? " and hidden rows" : "") << " and the context before them");
    ahead_.round.drop(s.rid);
  }
  AERIE_CHECK(verified_argmax.defined() && verified_argmax.dim(0) >= static_cast<int64_t>(seqs.size() * n),
              "verified chains: the verify's argmax has fewer than " << seqs.size() * n << " rows");
  if (extend_runner_ && !tree_ && extend_runner_->width() == static_cast<int64_t>(n) && std::all_of(seqs.begin(), seqs.end(), [](const auto& s) { return s.keep; })) {
    std::vector<spec::ExtendSeq> fixed;
    for (const auto& s : seqs)
      fixed.push_back({.tokens = s.tokens, .first_position = s.first_position, .slots = s.slots, .context = s.context, .hidden_rows = s.hidden_rows,
                       .state_row = -1});
    if (behind_extend_) behind_extend_->mark();  // the verify: the argmax copy follows it, not the extend
    if (run_extend_runner(*extend_runner_, seqs, fixed, target_hidden, verified_argmax.slice_rows(0, static_cast<int64_t>(seqs.size() * n)))) {
      if (behind_extend_ && drafts_ahead_behind(seqs)) propose_ahead_of_committed(seqs, read_back_committed(seqs, verified_argmax));
      return;
    }
  }
  // The argmax on the host, and the extend of what it commits.
  std::vector<int32_t> argmax(seqs.size() * n);
  copy_async(argmax.data(), verified_argmax.data, argmax.size() * sizeof(int32_t), stream_);
  synchronize(stream_);
  std::vector<ExtendSeq> committed;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ExtendSeq& s = seqs[i];
    const auto tokens = committed_of(s, std::span<const int32_t>(argmax).subspan(i * n, n));
    const auto k = static_cast<std::ptrdiff_t>(tokens.size());
    ExtendSeq e{.rid = s.rid, .tokens = tokens, .first_position = s.first_position, .slots = {s.slots.begin(), s.slots.begin() + k},
                .context = s.context, .hidden_rows = {}, .keep = s.keep, .spare_slots = {s.slots.begin() + k, s.slots.end()}};
    e.context.insert(e.context.end(), e.slots.begin(), e.slots.end());
    if (eagle()) e.hidden_rows.assign(s.hidden_rows.begin(), s.hidden_rows.begin() + k);
    committed.push_back(std::move(e));
  }
  extend(committed, target_hidden);
  if (behind_extend_ && drafts_ahead_behind(seqs)) {
    std::vector<std::vector<int32_t>> tokens;
    for (const ExtendSeq& e : committed) tokens.push_back(e.tokens);
    propose_ahead_of_committed(seqs, tokens);
  }
}

std::vector<spec::DraftTree> DraftWorkerCore::propose(const std::vector<ProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) {
  if (info_.topk > 1 && steps > 0) return propose_tree(seqs, steps, draft_tokens);
  std::optional<std::vector<std::vector<int32_t>>> ahead = take_ahead(seqs, steps);
  const auto drafts = ahead ? std::move(*ahead) : propose_chain(seqs, steps);
  std::vector<spec::DraftTree> trees;
  for (size_t i = 0; i < seqs.size(); ++i) trees.push_back(spec::DraftTree::chain(seqs[i].root_token, drafts[i]));
  return trees;
}

void DraftWorkerCore::forget(const std::vector<uint64_t>& rids) {
  for (uint64_t r : rids) forget(r);
}

void DraftWorkerCore::enable_draft_ahead(int64_t first_scratch_slot) {
  AERIE_CHECK(chain_ && eagle() && info_.topk == 1, "drafting ahead needs an EAGLE head's chain runner");
  AERIE_CHECK(first_scratch_slot > 0 && first_scratch_slot + draft_ahead_slots(max_requests_, chain_->steps()) <= kv_.shape().num_slots(),
              "the draft's KV cache of " << kv_.shape().num_slots() << " slots has no " << draft_ahead_slots(max_requests_, chain_->steps())
                                         << " scratch slots from " << first_scratch_slot);
  first_scratch_slot_ = first_scratch_slot;
}

DraftWorkerCore::~DraftWorkerCore() {
  try {
    settle_ahead();
  } catch (...) {  // a device error: the batch that ran it reported it
  }
}

void DraftWorkerCore::settle_ahead() {
  if (ahead_.pending) {
    ahead_.pending = false;
    ahead_.tokens = chain_->collect_proposal();
  }
}

void DraftWorkerCore::draft_ahead_behind_verified_chains(bool on) {
  static const bool turned_off = kernels::env_turned_off("AERIE_DRAFT_AHEAD_BEHIND_EXTEND");
  if (!on || turned_off) {
    behind_extend_.reset();
    return;
  }
  if (!behind_extend_)
    behind_extend_ = std::make_unique<ReadBackBeside>(stream_);
}

bool DraftWorkerCore::drafts_ahead_behind(const std::vector<ExtendSeq>& seqs) const {
  return first_scratch_slot_ >= 0 && chain_ && eagle() && static_cast<int64_t>(seqs.front().tokens.size()) - 1 == chain_->steps();
}

std::vector<std::vector<int32_t>> DraftWorkerCore::read_back_committed(const std::vector<ExtendSeq>& seqs, const TensorView& verified_argmax) {
  const size_t n = seqs.front().tokens.size();
  behind_extend_->copy(verified_argmax.data, seqs.size() * n * sizeof(int32_t));
  const auto* argmax = behind_extend_->wait<int32_t>();  // the verify's end and a small copy; the extend runs meanwhile
  std::vector<std::vector<int32_t>> committed;
  for (size_t i = 0; i < seqs.size(); ++i) committed.push_back(committed_of(seqs[i], std::span<const int32_t>(argmax + i * n, n)));
  return committed;
}

void DraftWorkerCore::propose_ahead_of_committed(const std::vector<ExtendSeq>& seqs, const std::vector<std::vector<int32_t>>& committed) {
  // The next root is each request's last committed token, one position past them; its context
  // the verified slots they took.
  std::vector<ProposeSeq> next;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ExtendSeq& s = seqs[i];
    const auto k = static_cast<std::ptrdiff_t>(committed[i].size());
    ProposeSeq p{.rid = s.rid, .first_position = s.first_position + static_cast<int32_t>(k), .context = s.context, .root_token = committed[i].back()};
    p.context.insert(p.context.end(), s.slots.begin(), s.slots.begin() + k);
    next.push_back(std::move(p));
  }
  propose_ahead(next, static_cast<int64_t>(seqs.front().tokens.size()) - 1);
}

void DraftWorkerCore::propose_ahead(const std::vector<ProposeSeq>& seqs, int64_t steps) {
  if (ahead_.pending && ahead_.given.empty() && ahead_.round.seqs.size() == seqs.size()) {
    // Already queued behind the extend for these requests, in this order: left as it is.
    const auto rows = ahead_.round.rows_for(seqs, steps);
    bool same = rows.has_value();
    for (size_t i = 0; same && i < rows->size(); ++i) same = (*rows)[i] == i;
    if (same) {
      ++ahead_already_queued_;
      return;
    }
  }
  settle_ahead();
  ahead_ = {};
  if (first_scratch_slot_ < 0 || seqs.empty() || steps != chain_->steps()) return;
  // Positions from first_position on write the draft's K/V to the request's state row's
  // scratch slots; the context before them is the request's own.
  std::vector<std::vector<int32_t>> contexts(seqs.size());
  std::vector<spec::ChainSeq> chain;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& s = seqs[i];
    auto it = state_.find(s.rid);
    if (it == state_.end() || static_cast<int64_t>(s.context.size()) < s.first_position) return;
    const int64_t row = it->second.hidden_row;
    contexts[i].assign(s.context.begin(), s.context.begin() + s.first_position);
    for (int64_t k = 0; k + 1 < steps; ++k) contexts[i].push_back(static_cast<int32_t>(first_scratch_slot_ + row * steps + k));
    chain.push_back({.first_position = s.first_position, .context = &contexts[i], .state_row = static_cast<int32_t>(row)});
  }
  if (!chain_->can_run(chain)) return;
  chain_->enqueue_proposal(chain);
  ahead_.round = DraftAheadRound::of(seqs, steps);
  ahead_.pending = true;
}

std::optional<std::vector<std::vector<int32_t>>> DraftWorkerCore::take_ahead(const std::vector<ProposeSeq>& seqs, int64_t steps) {
  if (ahead_.round.empty()) return std::nullopt;
  settle_ahead();
  std::optional<std::vector<std::vector<int32_t>>> out;
  if (const auto rows = ahead_.round.rows_for(seqs, steps)) {
    out.emplace();
    for (size_t r : *rows) out->push_back(ahead_.tokens[r]);
  }
  ++(out ? ahead_hits_ : ahead_misses_);
  ahead_ = {};
  return out;
}

std::optional<DeviceChains> DraftWorkerCore::chains_on_device(const std::vector<ProposeSeq>& seqs, int64_t steps) {
  // Only while its chain is still enqueued (its tokens where the device writes them); a miss
  // is left for propose() to count and replace.
  std::optional<DeviceChains> d = ahead_on_device();
  if (!d) return std::nullopt;
  const auto rows = ahead_.round.rows_for(seqs, steps);
  if (!rows) return std::nullopt;
  ahead_.given = *rows;
  for (const auto& s : seqs) ahead_.roots.push_back(s.root_token);
  for (size_t r : *rows) d->rows.push_back(static_cast<int32_t>(r));
  return d;
}

std::optional<DeviceChains> DraftWorkerCore::ahead_on_device() const {
  if (!ahead_.pending || !ahead_.given.empty()) return std::nullopt;
  return DeviceChains{.table = chain_->pending_tokens(), .stride = chain_->pending_bucket(), .rows = {}};
}

std::vector<spec::DraftTree> DraftWorkerCore::collect_chains() {
  AERIE_CHECK(!ahead_.given.empty(), "collect_chains() without chains_on_device()");
  settle_ahead();
  std::vector<spec::DraftTree> trees;
  for (size_t i = 0; i < ahead_.given.size(); ++i) trees.push_back(spec::DraftTree::chain(ahead_.roots[i], ahead_.tokens[ahead_.given[i]]));
  ++ahead_hits_;
  ahead_ = {};
  return trees;
}

void DraftWorkerCore::enable_draft_runners(int64_t steps, int64_t max_bs, int64_t max_context, bool graphs, std::optional<bool> fixed_width_extend,
                                           int64_t prompt_graph_max_tokens) {
  AERIE_CHECK(state_.empty(), "the draft runners are enabled before any request reaches the draft");
  chain_.reset();
  tree_.reset();
  extend_runner_.reset();
  prompt_runners_.clear();
  if (steps < 2) return;
  const Device dev = stream_.device();
  const int64_t K = info_.topk;
  if (head_) {
    std::vector<int32_t> map(static_cast<size_t>(head_->vocab()));
    bool identity = true;
    for (size_t id = 0; id < map.size(); ++id) {
      map[id] = head_->to_target(static_cast<int32_t>(id));
      identity = identity && map[id] == static_cast<int32_t>(id);
    }
    if (!identity) {
      to_target_ = Buffer(dev, DType::kI32, {static_cast<int64_t>(map.size()), 1});
      to_target_.copy_from_host(map.data(), map.size() * 4);
    }
  }
  const TensorView to_target = to_target_.data() ? to_target_.view() : TensorView();
  const int64_t runner_bs = std::min(max_bs, max_requests_);
  const DraftNet net{head_.get(), standalone_.get()};
  const TensorView state_hidden = eagle() ? hidden_pool_.view() : TensorView();
  if (eagle()) extend_hidden_ = Buffer(dev, act_, {max_requests_, hidden_size_});  // the extend's kept hidden rows
  if (K > 1) {
    AERIE_CHECK(!head_ || K <= head_->vocab(), "--speculative-eagle-topk " << K << " exceeds the draft vocabulary of " << head_->vocab());
    top_tokens_pool_ = Buffer(dev, DType::kI32, {max_requests_ + 1, K});
    top_logp_pool_ = Buffer(dev, DType::kF32, {max_requests_ + 1, K});
    top_tokens_pool_.zero();
    top_logp_pool_.zero();
    extend_top_values_ = Buffer(dev, DType::kF32, {max_requests_, K});
    extend_top_ids_ = Buffer(dev, DType::kI32, {max_requests_, K});
    extend_top_tokens_ = Buffer(dev, DType::kI32, {max_requests_, K});
    tree_ = std::make_unique<spec::DraftTreeRunner>(
        net,
        spec::TreeStatePools{.hidden = state_hidden, .top_tokens = top_tokens_pool_.view(),
                             .top_logp = top_logp_pool_.view(), .padding_row = static_cast<int32_t>(max_requests_)},
        to_target, kv_, target_, steps, K, runner_bs, max_context, graphs);
  } else {
    next_pool_ = Buffer(dev, DType::kI32, {max_requests_ + 1});
    next_pool_.zero();
    extend_argmax_ = std::make_unique<spec::DeviceArgmax>(dev, max_requests_);
    extend_tokens_ = Buffer(dev, DType::kI32, {max_requests_, 1});
    chain_ = std::make_unique<spec::DraftChainRunner>(net, state_hidden, next_pool_.view(), to_target, kv_, target_, steps, runner_bs,
                                                      max_context, graphs);
  }
  // An extend runner of `width` tokens a request leaving a chain's next token in next_pool_ or
  // a tree's k best first tokens in the tree runner's pools.
  const auto extend_runner = [&](int64_t width, int64_t bs, const char* label) {
    const spec::ExtendTopkPools pools =
        K > 1 ? spec::ExtendTopkPools{.top_tokens = top_tokens_pool_.view(), .top_logp = top_logp_pool_.view()} : spec::ExtendTopkPools{};
    return std::make_unique<spec::DraftExtendRunner>(net, state_hidden, K > 1 ? TensorView() : next_pool_.view(), to_target, kv_, target_, width,
                                                     head_ ? head_->config().input_width() : 0, bs, max_context, graphs, pools, label);
  };
  // The extend after a chain or tree verify at its fixed width (a tree's committed path is at
  // most steps + 1 tokens); not under DP attention, whose forwards go through the step's padding plan.
  if (fixed_width_extend.value_or(graphs) && !target_.dp_attention()) extend_runner_ = extend_runner(steps + 1, runner_bs, "draft extend");
  if (prompt_graph_max_tokens > 0 && !target_.dp_attention())
    for (int64_t width : spec::prefill_graph_token_buckets(std::min(prompt_graph_max_tokens, max_context)))
      prompt_runners_[width] = extend_runner(width, 1, "draft prompt extend");
}

void DraftWorkerCore::set_chain_stop_probability(double p) {
  AERIE_CHECK(p >= 0.0 && p <= 1.0, "--speculative-chain-stop-probability must be in [0, 1], got " << p);
  if (p > 0.0) {
    AERIE_CHECK(info_.topk == 1 && chain_ && !chain_->graphs() && stream_.device() == Device::kCpu,
                "--speculative-chain-stop-probability cuts chains (topk 1) drafted eagerly on the CPU: the host reads each step's "
                "logits before the next, which a CUDA graph does not stop for");
    AERIE_CHECK(!extend_runner_ && prompt_runners_.empty(), "a chain stop needs the draft's extends eager (the first token's probability comes from them)");
    AERIE_CHECK(first_scratch_slot_ < 0, "a chain stop and drafting ahead do not go together (a chain drafted ahead runs every step)");
  }
  chain_stop_probability_ = p;
}

void DraftWorkerCore::keep_state_on_device(const model::ForwardBatch& b, const TensorView& logits, const std::vector<uint64_t>& kept) {
  const auto n = static_cast<int64_t>(kept.size());
  if (n == 0) return;
  AERIE_CHECK(n <= max_requests_, "draft state for more than " << max_requests_ << " requests");
  const Device dev = stream_.device();
  std::vector<int32_t> rows;
  for (uint64_t rid : kept) {
    rows.push_back(static_cast<int32_t>(row_for(rid)));
    state_[rid].on_device = true;
  }
  const TensorView row_ids = upload_ints(extend_rows_, rows, stream_);
  const TensorView to_target = to_target_.data() ? to_target_.view() : TensorView();
  if (info_.topk > 1) {  // a tree's state: the k best first tokens and their log-probabilities
    const int64_t K = info_.topk;
    const TensorView values(extend_top_values_.data(), DType::kF32, {n, K}, dev);
    const TensorView ids(extend_top_ids_.data(), DType::kI32, {n, K}, dev);
    const TensorView tokens(extend_top_tokens_.data(), DType::kI32, {n, K}, dev);
    AERIE_CHECK_STATUS(kernels::log_softmax({.logits = logits, .out = logits}, stream_));  // the forward's scratch
    AERIE_CHECK_STATUS(kernels::topk({.x = logits, .values = values, .indices = ids}, stream_));
    spec::draft_ids_to_target(ids.reshape({n * K}), to_target, tokens.reshape({n * K, 1}), stream_);
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = tokens, .rows = row_ids, .out = top_tokens_pool_.view()}, stream_));
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = values, .rows = row_ids, .out = top_logp_pool_.view()}, stream_));
  } else {
    const TensorView tokens(extend_tokens_.data(), DType::kI32, {n, 1}, dev);
    extend_argmax_->run(logits, tokens, stream_, to_target);  // target ids, through the draft vocabulary's map
    if (chain_stop_probability_ > 0.0) {  // the first draft token's probability, for the chain's stop (on the host: a CPU run)
      AERIE_CHECK(logits.dtype == DType::kF32 && logits.dim(0) == n, "a chain stop reads the extend's f32 logits, a row per kept request");
      const std::vector<float> p = spec::top_token_probabilities(logits.ptr<float>(), n, logits.dim(1));
      for (int64_t k = 0; k < n; ++k) state_[kept[static_cast<size_t>(k)]].next_probability = p[static_cast<size_t>(k)];
    }
    const TensorView pool(next_pool_.data(), DType::kI32, {max_requests_, 1}, dev);
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = tokens, .rows = row_ids, .out = pool}, stream_));
  }
  if (eagle()) {  // the head's output at each kept sequence's last token, to its state row
    const TensorView at = upload_ints(extend_logit_rows_, b.logit_rows, stream_);
    const TensorView picked(extend_hidden_.data(), act_, {n, hidden_size_}, dev);
    AERIE_CHECK_STATUS(kernels::embedding({.ids = at, .table = head_->out_hidden(), .out = picked}, stream_));
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = picked, .rows = row_ids, .out = hidden_pool_.view()}, stream_));
  }
}

void DraftWorkerCore::fetch_state(const std::vector<ProposeSeq>& seqs) {
  bool any = false;
  for (const auto& s : seqs)
    if (auto it = state_.find(s.rid); it != state_.end()) any = any || it->second.on_device;
  if (!any) return;
  const int64_t K = info_.topk;
  std::vector<int32_t> next, top_tokens;
  std::vector<float> top_logp;
  if (K > 1) {
    top_tokens.resize(static_cast<size_t>(top_tokens_pool_.view().numel()));
    top_logp.resize(top_tokens.size());
    copy_async(top_tokens.data(), top_tokens_pool_.data(), top_tokens.size() * 4, stream_);
    copy_async(top_logp.data(), top_logp_pool_.data(), top_logp.size() * 4, stream_);
  } else {
    next.resize(static_cast<size_t>(max_requests_));
    copy_async(next.data(), next_pool_.data(), next.size() * 4, stream_);
  }
  synchronize(stream_);
  for (const auto& s : seqs)
    if (auto it = state_.find(s.rid); it != state_.end() && it->second.on_device) {
      State& st = it->second;
      const auto row = static_cast<size_t>(st.hidden_row);
      if (K > 1) {
        const auto at = static_cast<std::ptrdiff_t>(row * static_cast<size_t>(K));
        st.top_tokens.assign(top_tokens.begin() + at, top_tokens.begin() + at + K);
        st.top_logp.assign(top_logp.begin() + at, top_logp.begin() + at + K);
        st.next_token = st.top_tokens.front();
      } else {
        st.next_token = next[row];
      }
      st.on_device = false;
    }
}

std::vector<std::vector<int32_t>> DraftWorkerCore::propose_chain(const std::vector<ProposeSeq>& seqs, int64_t steps) {
  std::vector<std::vector<int32_t>> drafts(seqs.size());
  if (steps <= 0 || seqs.empty()) return drafts;
  if (chain_ && steps == chain_->steps()) {
    std::vector<spec::ChainSeq> chain;
    for (const auto& s : seqs) {
      auto it = state_.find(s.rid);
      AERIE_CHECK(it != state_.end(), "no draft state for request " << s.rid << " (its prefill did not reach the draft)");
      chain.push_back({.first_position = s.first_position, .context = &s.context, .state_row = static_cast<int32_t>(it->second.hidden_row)});
    }
    if (chain_->can_run(chain)) {
      if (chain_stop_probability_ <= 0.0) return chain_->propose(chain);
      std::vector<float> first;
      for (const auto& s : seqs) first.push_back(state_.at(s.rid).next_probability);
      spec::ChainStop stop(chain_stop_probability_, first);
      return chain_->propose_while(chain, stop);
    }
  }
  fetch_state(seqs);  // drafting step by step: the next tokens on the host
  const int64_t B = static_cast<int64_t>(seqs.size());
  const size_t hrow = static_cast<size_t>(hidden_size_) * dtype_size(act_);
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto it = state_.find(seqs[i].rid);
    AERIE_CHECK(it != state_.end(), "no draft state for request " << seqs[i].rid << " (its prefill did not reach the draft)");
    drafts[i].push_back(it->second.next_token);
    AERIE_CHECK(static_cast<int64_t>(seqs[i].context.size()) >= seqs[i].first_position + steps - 1,
                "draft context of request " << seqs[i].rid << " is too short");
  }
  if (eagle() && steps > 1) {  // the first forward reads each request's state hidden
    std::vector<int32_t> rows;
    for (const auto& s : seqs) rows.push_back(static_cast<int32_t>(state_.at(s.rid).hidden_row));
    gather(hidden_pool_.view(), rows);
  }
  for (int64_t j = 1; j < steps; ++j) {
    model::ForwardBatch b;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto& s = seqs[i];
      const int32_t pos = s.first_position + static_cast<int32_t>(j - 1);
      b.input_ids.push_back(drafts[i].back());
      b.positions.push_back(pos);
      b.out_cache_loc.push_back(s.context[static_cast<size_t>(pos)]);
      b.qo_indptr.push_back(static_cast<int32_t>(i + 1));
      b.kv_indices.insert(b.kv_indices.end(), s.context.begin(), s.context.begin() + pos + 1);
      b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
      b.logit_rows.push_back(static_cast<int32_t>(i));
    }
    TensorView in_hidden;
    if (eagle()) in_hidden = TensorView(gathered_.data(), act_, {B, hidden_size_}, stream_.device());
    const auto next = run(b, in_hidden);
    for (size_t i = 0; i < seqs.size(); ++i) drafts[i].push_back(next[i]);
    if (eagle() && j + 1 < steps)  // the next forward reads this one's output
      copy_async(gathered_.data(), head_->out_hidden().data, static_cast<size_t>(B) * hrow, stream_);
  }
  return drafts;
}

}  // namespace aerie::spec
