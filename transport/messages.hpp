#pragma once
// The messages that cross process boundaries: plain aggregates (ids, lengths, token ids,
// sampling parameters), serialised with cereal into checked frames. No pointers, no
// polymorphic types, no tensors.
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace aerie::transport {

enum class MessageKind : uint16_t { kBatch = 1, kBatchResult = 2, kShutdown = 3, kHeartbeat = 4 };

enum class ForwardMode : int32_t { kIdle = 0, kExtend = 1, kDecode = 2, kMixed = 3, kVerify = 4 };

struct SamplingRowMsg {
  float temperature = 0.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = -1;
  int64_t seed = 0;
  int64_t step = 0;
  int32_t logprobs = -1;  // -1: none; 0: the sampled token's log-probability; k > 0: also the k most likely
  template <class Archive>
  void serialize(Archive& ar) {
    ar(temperature, top_p, min_p, top_k, seed, step, logprobs);
  }
  bool operator==(const SamplingRowMsg&) const = default;
};

// Log-probabilities of one sampled position under the model's own distribution (the
// log-softmax of the raw logits, before temperature or truncation).
struct TokenLogprobs {
  float logprob = 0.0f;             // of the sampled token
  std::vector<int32_t> top_ids;     // the most likely tokens, most likely first (when asked)
  std::vector<float> top_logprobs;  // their log-probabilities
  template <class Archive>
  void serialize(Archive& ar) {
    ar(logprob, top_ids, top_logprobs);
  }
  bool operator==(const TokenLogprobs&) const = default;
};

// One forward for one rank group: everything every rank needs to run the same step, KV
// slots included (the scheduler allocates them; no rank allocates on its own).
struct BatchMessage {
  uint64_t seq = 0;      // per channel, increasing by one
  uint64_t step_id = 0;  // the scheduler's iteration number
  ForwardMode mode = ForwardMode::kIdle;
  std::vector<uint64_t> rids;          // [batch]
  std::vector<int32_t> input_ids;      // [tokens] (negative: a future token, see future_slots)
  std::vector<int32_t> positions;      // [tokens]
  std::vector<int32_t> out_cache_loc;  // [tokens]
  std::vector<int32_t> qo_indptr;      // [batch + 1]
  std::vector<int32_t> kv_indptr;      // [batch + 1]
  std::vector<int32_t> kv_indices;     // [kv_indptr.back()]
  std::vector<int32_t> logit_rows;     // [batch]
  std::vector<SamplingRowMsg> sampling;  // [batch]
  // DP attention (parallel/dp_padding.hpp): the step's plan, the same in every group's
  // message. global_num_tokens: every DP group's tokens (empty without DP attention).
  std::vector<int64_t> global_num_tokens;
  int32_t bucket = 0;                 // requests of the bucket every rank replays or pads to (0: eager)
  int32_t dp_padding = 0;             // 1: MAX_LEN, 2: SUM_LEN (0: no DP attention)
  int32_t dp_tokens_per_request = 1;  // what each request of the bucket brings (1 decode, spec_draft_tokens verify)
  // Speculative decoding (empty / -1 otherwise). A speculative engine's batches are EXTEND
  // (the draft runs over the same chunks) or VERIFY; an IDLE batch has no tokens (mode says
  // which, never these fields). A VERIFY batch has spec_draft_tokens tokens per sequence (the
  // last committed token, then room for the spec_steps drafts the worker proposes: spec_steps
  // + 1 for a chain; 0 drafts above --speculative-disable-batch-size) and its kv_indices cover
  // the positions [0, root + spec::verify_reserve(...)): the verified tokens' context and the
  // slots the draft and the compaction may use.
  int32_t spec_steps = -1;         // VERIFY: draft steps
  int32_t spec_topk = 1;           // > 1: tree drafting
  int32_t spec_draft_tokens = -1;  // VERIFY: tokens per sequence
  std::vector<uint64_t> seq_rids;       // [sequences] every sequence's request
  std::vector<int32_t> lookahead_ids;   // [sequences] EXTEND: the token after the chunk, -1 when it samples
  std::vector<int32_t> extra_slots;     // [sequences] the slot of the position after the last input token
  std::vector<uint64_t> finished_rids;  // requests ended since the last batch: the worker drops their draft state
  // Logit adjustments before sampling (penalties, logit_bias, min_new_tokens;
  // kernels/logit_adjust.hpp): entry e changes logit [adjust_rows[e], adjust_ids[e]], the row
  // being the index among this batch's sampled rows. Empty for most batches.
  std::vector<int32_t> adjust_rows, adjust_ids;
  std::vector<float> adjust_bias, adjust_rep, adjust_add;
  // Overlap scheduling (actors/core/future_tokens.hpp): [rids] the future slot where the
  // worker keeps each sampled row's token for a batch planned before this one's result came
  // back (-1: none), empty when the Scheduler does not plan ahead. Such a later batch names
  // the token by a negative input id, future_token_ref(slot).
  std::vector<int32_t> future_slots;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(seq, step_id, mode, rids, input_ids, positions, out_cache_loc, qo_indptr, kv_indptr, kv_indices, logit_rows, sampling,
       global_num_tokens, bucket, dp_padding, dp_tokens_per_request, spec_steps, spec_topk, spec_draft_tokens, seq_rids, lookahead_ids, extra_slots, finished_rids, adjust_rows, adjust_ids, adjust_bias, adjust_rep, adjust_add,
       future_slots);
  }
  bool operator==(const BatchMessage&) const = default;
};

// What comes back: one sampled token per request of the batch, or an error.
struct BatchResult {
  uint64_t seq = 0;
  uint64_t step_id = 0;
  std::vector<uint64_t> rids;
  std::vector<int32_t> next_tokens;
  std::vector<TokenLogprobs> logprobs;  // [batch] when any row asked for them, else empty
  std::vector<int32_t> token_counts;    // VERIFY: tokens each request committed (next_tokens is their concatenation)
  std::string error;  // empty when the step ran
  // The worker's device (core::ForwardTimeline): how long this batch kept it busy, and how
  // long it stood idle since the previous batch ended.
  double forward_seconds = 0;
  double gap_seconds = 0;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(seq, step_id, rids, next_tokens, logprobs, token_counts, error, forward_seconds, gap_seconds);
  }
  bool operator==(const BatchResult&) const = default;
};

struct Shutdown {
  uint64_t seq = 0;
  std::string reason;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(seq, reason);
  }
  bool operator==(const Shutdown&) const = default;
};

// Liveness (launch/heartbeat.hpp): sent about every 0.5 s each way between rank 0 and every
// other rank on channels of their own, so a lost or stopped peer is noticed in seconds.
struct Heartbeat {
  uint64_t seq = 0;
  int32_t rank = 0;  // the sender's
  template <class Archive>
  void serialize(Archive& ar) {
    ar(seq, rank);
  }
  bool operator==(const Heartbeat&) const = default;
};

template <class T>
constexpr MessageKind kind_of();
template <>
constexpr MessageKind kind_of<BatchMessage>() { return MessageKind::kBatch; }
template <>
constexpr MessageKind kind_of<BatchResult>() { return MessageKind::kBatchResult; }
template <>
constexpr MessageKind kind_of<Shutdown>() { return MessageKind::kShutdown; }
template <>
constexpr MessageKind kind_of<Heartbeat>() { return MessageKind::kHeartbeat; }

}  // namespace aerie::transport
