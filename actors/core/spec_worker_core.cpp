#include "actors/core/spec_worker_core.hpp"

#include <algorithm>
#include <chrono>

#include "actors/core/forward_batch_of.hpp"
#include "spec/verify_batch.hpp"
#include "kernels/attention.hpp"
#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "spec/draft_tree.hpp"
#include "spec/greedy_accept.hpp"
#include "spec/tree_acceptor.hpp"

namespace aerie::core {

namespace {

std::vector<int32_t> range_of(const std::vector<int32_t>& v, int64_t begin, int64_t end) {
  return {v.begin() + begin, v.begin() + end};
}

// Milliseconds since `t`, and `t` moved to now.
double lap_ms(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - t).count();
  t = now;
  return ms;
}

}  // namespace

SpecWorkerCore::SpecWorkerCore(model::LlamaModel& target, model::KvCache& kv, spec::DraftPort& draft, int64_t max_batch, VerifyGraphOptions graphs)
    : target_(target), kv_(kv), draft_(draft), info_(draft.info()), sampler_(target.stream().device(), max_batch),
      argmax_(target.stream().device()), acceptor_(target.stream().device()), argmax_back_(target.stream()) {
  if (info_.eagle()) {
    model::HiddenCapture capture;
    if (info_.algorithm == spec::SpecAlgorithm::kEagle) capture.final_normed = true;
    else capture.aux_layers = info_.aux_layers;
    target_.set_hidden_capture(capture);
  }
  // After the capture is set: the graphs write the hidden states the draft reads.
  AERIE_CHECK(graphs.max_bs == 0 || graphs.tree == (info_.topk > 1),
              "verify graphs for " << (graphs.tree ? "trees" : "chains") << " with a draft of topk " << info_.topk);
  if (graphs.max_bs > 0 && graphs.tokens_per_request > 1 && target.stream().device() == Device::kCuda)
    verify_graphs_ = std::make_unique<spec::DecodeGraphRunner>(target, kv, std::min(graphs.max_bs, max_batch), graphs.max_context,
                                                               graphs.tokens_per_request, graphs.tree);
  if (graphs.prefill_max_tokens > 0 && target.stream().device() == Device::kCuda) {
    const int64_t max_context = std::min(target.config().max_position_embeddings, kv.shape().usable_tokens());
    prefill_graphs_ = std::make_unique<spec::PrefillGraphRunner>(target, kv, std::min(graphs.prefill_max_tokens, max_context), max_context);
  }
}

TensorView SpecWorkerCore::verify_forward(const model::ForwardBatch& b) {
  last_verify_replayed_ = verify_graphs_ && verify_graphs_->can_run(b);
  return last_verify_replayed_ ? verify_graphs_->replay(b) : forward_eagerly(target_, b, kv_, transport::ForwardMode::kVerify);
}


SpecWorkerCore::~SpecWorkerCore() { target_.set_hidden_capture({}); }

transport::BatchResult SpecWorkerCore::execute(const transport::BatchMessage& m) {
  // The host's turnaround since the last verify returned, when this is the next one.
  if (m.mode == transport::ForwardMode::kVerify && last_verify_returned_) {
    auto t = *last_verify_returned_;
    times_.add_turnaround(lap_ms(t));
  }
  last_verify_returned_.reset();
  // The last batch's draft extend reads the target's hidden states: it must be done (and
  // its error known) before this batch's target forward overwrites them. A verify's
  // proposal waits for it (propose() flushes), so the draft runs the two back to back.
  if (m.mode != transport::ForwardMode::kVerify) draft_.flush();
  if (!m.finished_rids.empty()) forget(m.finished_rids);
  const size_t seqs = m.qo_indptr.empty() ? 0 : m.qo_indptr.size() - 1;
  AERIE_CHECK(m.seq_rids.size() == seqs && (m.mode == transport::ForwardMode::kVerify || m.extra_slots.size() == seqs), "speculative batch " << m.step_id << ": per-sequence fields disagree");
  if (m.mode == transport::ForwardMode::kVerify) return verify(m);
  AERIE_CHECK(m.mode == transport::ForwardMode::kExtend, "speculative batches are EXTEND or VERIFY");
  AERIE_CHECK(m.lookahead_ids.size() == seqs, "speculative batch " << m.step_id << ": lookahead ids disagree");
  return extend(m);
}

transport::BatchResult SpecWorkerCore::extend(const transport::BatchMessage& m) {
  transport::BatchResult r{.seq = 0, .step_id = m.step_id, .rids = m.rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  const model::ForwardBatch b = forward_batch_of(m);
  const TensorView logits =
      prefill_graphs_ && prefill_graphs_->can_run(b) ? prefill_graphs_->replay(b) : forward_eagerly(target_, b, kv_, m.mode);
  r.next_tokens = sampler_.sample(logits, sampling_rows_of(m), target_.stream());
  r.logprobs = logprobs_.read(logits, m.sampling, r.next_tokens, target_.stream());
  const TensorView hidden = info_.eagle() ? target_.captured_hidden() : TensorView();
  std::vector<spec::DraftExtendSeq> ext;
  size_t sampled = 0;
  for (size_t s = 0; s + 1 < m.qo_indptr.size(); ++s) {
    const int64_t q0 = m.qo_indptr[s], q1 = m.qo_indptr[s + 1];
    const bool final = m.lookahead_ids[s] < 0;
    int32_t next = m.lookahead_ids[s];
    if (final) {
      AERIE_CHECK(sampled < r.next_tokens.size() && m.rids[sampled] == m.seq_rids[s], "speculative batch: sampling rows out of order");
      next = r.next_tokens[sampled++];
    }
    spec::DraftExtendSeq e;
    e.rid = m.seq_rids[s];
    e.keep = final;
    e.first_position = m.positions[static_cast<size_t>(q0)];
    e.slots = range_of(m.out_cache_loc, q0, q1);
    e.context = range_of(m.kv_indices, m.kv_indptr[s], m.kv_indptr[s + 1]);
    if (info_.eagle()) {
      // Position p pairs the token at p + 1 with the target's hidden state at p.
      e.tokens = range_of(m.input_ids, q0 + 1, q1);
      e.tokens.push_back(next);
      for (int64_t q = q0; q < q1; ++q) e.hidden_rows.push_back(static_cast<int32_t>(q));
    } else {
      e.tokens = range_of(m.input_ids, q0, q1);
      if (final) {  // the sampled token too, at the position after the chunk
        AERIE_CHECK(m.extra_slots[s] >= 0, "speculative batch: no slot for the position after request " << e.rid << "'s prompt");
        e.tokens.push_back(next);
        e.slots.push_back(m.extra_slots[s]);
        e.context.push_back(m.extra_slots[s]);
      }
    }
    ext.push_back(std::move(e));
  }
  draft_.extend(ext, hidden);
  propose_ahead_after_prompts(m, ext);
  return r;
}

void SpecWorkerCore::propose_ahead_after_prompts(const transport::BatchMessage& m, const std::vector<spec::DraftExtendSeq>& ext) {
  bool all_final = true;
  for (size_t s = 0; s < ext.size(); ++s) {
    all_final = all_final && ext[s].keep;
    if (ext[s].keep) decoding_.insert(ext[s].rid);
  }
  // Only when the next verify is these requests and no others (batch 1 between requests,
  // or requests that start together), and once a verify has said how long the chains are.
  if (!info_.eagle() || info_.topk != 1 || chain_steps_ <= 0 || !all_final || ext.empty() || decoding_.size() != ext.size()) return;
  std::vector<spec::DraftProposeSeq> first(ext.size());
  for (size_t s = 0; s < ext.size(); ++s) {
    // The root is the sampled token (an EAGLE extend's last), at the position after the
    // prompt; its context the prompt's slots.
    const int32_t root = m.positions[static_cast<size_t>(m.qo_indptr[s + 1] - 1)] + 1;
    first[s] = {.rid = ext[s].rid, .first_position = root, .context = range_of(m.kv_indices, m.kv_indptr[s], m.kv_indptr[s + 1]),
                .root_token = ext[s].tokens.back()};
    if (static_cast<int32_t>(first[s].context.size()) != root) return;
  }
  draft_.propose_ahead(first, chain_steps_);
}

void SpecWorkerCore::forget(const std::vector<uint64_t>& rids) {
  for (uint64_t r : rids) decoding_.erase(r);
  draft_.forget(rids);
}

transport::BatchResult SpecWorkerCore::verify(const transport::BatchMessage& m) {
  const int64_t S = m.spec_steps, K = std::max<int32_t>(m.spec_topk, 1);
  const int64_t N_planned = K > 1 ? m.spec_draft_tokens : S + 1;  // nodes a request brings to the verify
  if (K == 1 && S > 0) chain_steps_ = S;
  const int64_t reserve = spec::verify_reserve(S, K, N_planned);
  const size_t B = m.seq_rids.size();
  AERIE_CHECK(N_planned >= 1 && m.sampling.size() == B && m.input_ids.size() == B * static_cast<size_t>(N_planned),
              "verify batch " << m.step_id << ": expected " << N_planned << " tokens and one sampling row per request");
  AERIE_CHECK(K == 1 || K == info_.topk, "verify batch " << m.step_id << " drafts with topk " << K << ", the draft worker was set up for " << info_.topk);
  transport::BatchResult r{.seq = 0, .step_id = m.step_id, .rids = m.seq_rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  // Each request's slots of positions [0, root + reserve): context, verified nodes, scratch.
  std::vector<std::vector<int32_t>> full(B);
  std::vector<int32_t> start(B);
  for (size_t s = 0; s < B; ++s) {
    AERIE_CHECK(m.qo_indptr[s + 1] - m.qo_indptr[s] == N_planned, "verify batch: request " << m.seq_rids[s] << " has the wrong token count");
    start[s] = m.positions[static_cast<size_t>(m.qo_indptr[s])];
    full[s] = range_of(m.kv_indices, m.kv_indptr[s], m.kv_indptr[s + 1]);
    AERIE_CHECK(static_cast<int64_t>(full[s].size()) == start[s] + reserve,
                "verify batch: request " << m.seq_rids[s] << "'s context is " << full[s].size() << " slots, expected " << start[s] + reserve);
  }
  // 1. Draft: a chain, or a tree with topk > 1.
  auto t = std::chrono::steady_clock::now();
  std::vector<spec::DraftProposeSeq> ps(B);
  for (size_t s = 0; s < B; ++s)
    ps[s] = {.rid = m.seq_rids[s], .first_position = start[s] + (info_.eagle() ? 0 : 1), .context = full[s],
             .root_token = m.input_ids[static_cast<size_t>(m.qo_indptr[s])]};
  // A chain drafted ahead and still on the device: the verify reads its tokens there, as
  // future-token ids into its table, so it is enqueued without waiting for them on the host.
  const std::optional<spec::DeviceChains> on_device = K == 1 && S > 0 ? draft_.chains_on_device(ps, S) : std::nullopt;
  std::vector<spec::DraftTree> trees;
  if (on_device) {
    std::vector<int32_t> roots;
    for (const auto& p : ps) roots.push_back(p.root_token);
    trees = spec::chains_naming_device_tokens(*on_device, roots, S);
  } else {
    trees = draft_.propose(ps, S, N_planned);
  }
  AERIE_CHECK(trees.size() == B, "the draft proposed " << trees.size() << " trees for " << B << " requests");
  // A chain the draft cut short (--speculative-chain-stop-probability) verifies fewer nodes,
  // as many for every request; the slots reserved past them stay unused this round.
  const int64_t N = K == 1 && !trees.empty() ? trees.front().size() : N_planned;
  AERIE_CHECK(N >= 1 && N <= N_planned, "the draft proposed chains of " << N << " nodes, at most " << N_planned << " were planned");
  // Request s's first row of the verify (its root's): N rows a request.
  const auto first_row = [N](size_t s) { return static_cast<int32_t>(static_cast<int64_t>(s) * N); };
  const double propose_ms = lap_ms(t);
  // 2. Verify every node in one target forward; a tree sees only its ancestors.
  std::vector<spec::VerifySequence> vs(B);
  for (size_t s = 0; s < B; ++s) {
    AERIE_CHECK(trees[s].size() == N, "request " << m.seq_rids[s] << "'s draft tree has " << trees[s].size() << " nodes, expected " << N);
    vs[s] = {.tree = &trees[s], .root_position = start[s], .slots = &full[s]};
  }
  model::ForwardBatch b = spec::verify_forward_batch(vs, K > 1);
  if (on_device) b.future_tokens = on_device->table;
  const TensorView logits = verify_forward(b);
  if (on_device) {  // the chains' tokens, now that the verify that reads them is enqueued
    trees = draft_.collect_chains();
    AERIE_CHECK(trees.size() == B, "the draft collected " << trees.size() << " chains for " << B << " requests");
    for (size_t s = 0; s < B; ++s)
      AERIE_CHECK(trees[s].size() == N, "request " << m.seq_rids[s] << "'s chain has " << trees[s].size() << " nodes, expected " << N);
  }
  // 3. Accept: greedy batches walk their trees on the host from the argmax of every row
  // (taken in the verify graph when one ran); with any sampled request the whole batch is
  // accepted on the device, so the logits stay there.
  const bool any_sampled = std::any_of(m.sampling.begin(), m.sampling.end(), [](const auto& x) { return x.temperature != 0.0f; });
  const TensorView hidden = info_.eagle() ? target_.captured_hidden() : TensorView();
  // A greedy batch of EAGLE chains: the draft extend is enqueued right behind the verify, its
  // committed tokens found on the device from the verify's argmax, so the device runs it as
  // soon as the verify ends while the host reads the argmax and accepts (the same walk).
  // (A chain's reserve, steps + 2 positions, holds its N = steps + 1 verified ones.)
  const bool extend_behind_verify = K == 1 && S > 0 && info_.eagle() && !any_sampled && !target_.dp_attention();
  std::vector<spec::TreeAcceptance> acc(B);
  if (any_sampled) {
    acc = acceptor_.accept(logits, trees, sampling_rows_of(m), target_.stream());
  } else if (extend_behind_verify) {
    const TensorView argmax = verify_argmax_on_device(logits);
    // Copied back beside the extend enqueued behind the verify (the host waits for the copy,
    // not for the extend, and before the next verify can overwrite the argmax).
    argmax_back_.mark();
    argmax_back_.copy(argmax.data, B * static_cast<size_t>(N) * sizeof(int32_t));
    std::vector<spec::DraftExtendSeq> verified(B);
    for (size_t s = 0; s < B; ++s) {
      auto& v = verified[s];
      v.rid = m.seq_rids[s];
      v.keep = true;
      v.tokens = trees[s].tokens;
      v.first_position = start[s];
      v.slots = range_of(full[s], start[s], start[s] + N);
      v.context = range_of(full[s], 0, start[s]);
      for (int64_t j = 0; j < N; ++j) v.hidden_rows.push_back(static_cast<int32_t>(first_row(s) + j));
    }
    draft_.extend_verified_chains(verified, argmax, hidden);
    const auto* host = argmax_back_.wait<int32_t>();
    for (size_t s = 0; s < B; ++s)
      acc[s] = spec::greedy_accept_tree(trees[s], std::span<const int32_t>(host + s * static_cast<size_t>(N), static_cast<size_t>(N)));
  } else {
    const std::vector<int32_t> argmax = last_verify_replayed_ ? verify_graphs_->last_greedy_tokens() : argmax_.argmax(logits, target_.stream());
    for (size_t s = 0; s < B; ++s)
      acc[s] = spec::greedy_accept_tree(trees[s], std::span<const int32_t>(argmax).subspan(s * static_cast<size_t>(N), static_cast<size_t>(N)));
  }
  const double verify_ms = lap_ms(t);
  // Log-probabilities of the committed tokens, for requests that asked: token k of a request
  // was chosen at the root (k = 0) or at its k-th accepted node, under that row's logits.
  if (std::any_of(m.sampling.begin(), m.sampling.end(), [](const auto& x) { return x.logprobs >= 0; })) {
    std::vector<int32_t> rows, tokens;
    std::vector<transport::SamplingRowMsg> asked;
    for (size_t s = 0; s < B; ++s) {
      const auto committed = acc[s].committed(trees[s]);
      for (size_t k = 0; k < committed.size(); ++k) {
        rows.push_back(first_row(s) + (k == 0 ? 0 : acc[s].path[k - 1]));
        tokens.push_back(committed[k]);
        asked.push_back(m.sampling[s]);
      }
    }
    r.logprobs = logprobs_.read(gather_logit_rows(logits, rows), asked, tokens, target_.stream());
  }
  // 4. A tree's accepted nodes move to the positions after the root (a chain's are there).
  if (K > 1) {
    std::vector<int32_t> src, dst;
    for (size_t s = 0; s < B; ++s)
      for (size_t k = 0; k < acc[s].path.size(); ++k) {
        const int32_t from = full[s][static_cast<size_t>(start[s] + acc[s].path[k])], to = full[s][static_cast<size_t>(start[s]) + k + 1];
        if (from != to) src.push_back(from), dst.push_back(to);
      }
    move_kv(src, dst);
  }
  // 5. The draft follows the committed tokens.
  const double accept_ms = lap_ms(t);
  std::vector<spec::DraftExtendSeq> ext(B);
  for (size_t s = 0; s < B; ++s) {
    const auto committed = acc[s].committed(trees[s]);
    const int64_t a = static_cast<int64_t>(committed.size()) - 1, n = start[s];
    r.next_tokens.insert(r.next_tokens.end(), committed.begin(), committed.end());
    r.token_counts.push_back(static_cast<int32_t>(a + 1));
    auto& e = ext[s];
    e.tokens = committed;
    if (extend_behind_verify) continue;  // the draft extends already, from the device's acceptance
    e.rid = m.seq_rids[s];
    e.keep = true;
    if (info_.eagle()) {  // positions n..n+a pair the committed tokens with the target's hidden states of the root and path
      e.first_position = static_cast<int32_t>(n);
      e.hidden_rows.push_back(first_row(s));
      for (int32_t node : acc[s].path) e.hidden_rows.push_back(first_row(s) + node);
    } else {  // the committed tokens at their own positions n+1..n+a+1
      e.first_position = static_cast<int32_t>(n + 1);
    }
    e.slots = range_of(full[s], e.first_position, e.first_position + a + 1);
    e.context = range_of(full[s], 0, e.first_position + a + 1);
    // The extend may run at width S + 1: its padding writes the draft's K/V at the reserved
    // positions after the committed ones (a tree's rejected nodes were there), which the next
    // proposal writes before it reads them.
    if (e.first_position + S + 1 <= static_cast<int64_t>(full[s].size()))
      e.spare_slots = range_of(full[s], e.first_position + a + 1, e.first_position + S + 1);
  }
  if (!extend_behind_verify) draft_.extend(ext, hidden);
  // The next round's chain, drafted ahead on the device while the result goes to the Scheduler
  // and the next verify is planned: its root is the last committed token, one position past
  // this round's commits (a draft that does not draft ahead ignores it).
  if (K == 1 && info_.eagle()) {
    std::vector<spec::DraftProposeSeq> next(B);
    for (size_t s = 0; s < B; ++s) {
      const int32_t root = start[s] + r.token_counts[s];
      next[s] = {.rid = m.seq_rids[s], .first_position = root, .context = range_of(full[s], 0, root), .root_token = ext[s].tokens.back()};
    }
    draft_.propose_ahead(next, S);
  }
  times_.rounds += 1;
  times_.chains_drafted_ahead += on_device ? 1 : 0;
  times_.propose_ms += propose_ms;
  times_.verify_ms += verify_ms;
  times_.accept_ms += accept_ms;
  times_.extend_ms += lap_ms(t);
  last_verify_returned_ = t;
  return r;
}

TensorView SpecWorkerCore::verify_argmax_on_device(const TensorView& logits) {
  if (last_verify_replayed_) return verify_graphs_->last_greedy_on_device();
  const int64_t rows = logits.dim(0);
  if (!eager_argmax_ || eager_argmax_out_.view().numel() < rows) {  // sized together
    eager_argmax_ = std::make_unique<spec::DeviceArgmax>(target_.stream().device(), rows);
    eager_argmax_out_ = Buffer(target_.stream().device(), DType::kI32, {rows});
  }
  const TensorView out = eager_argmax_out_.view().slice_rows(0, rows);
  eager_argmax_->run(logits, out, target_.stream());
  return out;
}

TensorView SpecWorkerCore::gather_logit_rows(const TensorView& logits, const std::vector<int32_t>& rows) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t V = logits.dim(1);
  const Device device = target_.stream().device();
  if (!committed_logits_.data() || committed_logits_.view().numel() < n * V) committed_logits_ = Buffer(device, DType::kF32, {n * V});
  const TensorView ids = upload_ints(logit_rows_, rows, target_.stream());
  const TensorView out(committed_logits_.data(), DType::kF32, {n, V}, device);
  AERIE_CHECK_STATUS(kernels::embedding({.ids = ids, .table = logits, .out = out}, target_.stream()));
  return out;
}

void SpecWorkerCore::move_kv(const std::vector<int32_t>& src, const std::vector<int32_t>& dst) {
  if (src.empty()) return;
  const auto n = static_cast<int64_t>(src.size());
  std::vector<int32_t> both(src);
  both.insert(both.end(), dst.begin(), dst.end());
  const TensorView all = upload_ints(move_slots_, both, target_.stream(), 256);
  const TensorView s = all.slice_rows(0, n), d = all.slice_rows(n, 2 * n);
  kernels::KvMoveParams moves{.src_slots = s, .dst_slots = d, .k_caches = {}, .v_caches = {}};
  for (int64_t layer = 0; layer < target_.config().num_layers; ++layer) moves.k_caches.push_back(kv_.k(layer)), moves.v_caches.push_back(kv_.v(layer));
  AERIE_CHECK_STATUS(kernels::kv_move(moves, target_.stream()));
}

}  // namespace aerie::core
