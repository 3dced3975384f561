#pragma once
// ForwardWorkspace: every buffer one forward touches, allocated once at fixed addresses so
// that a forward can be captured in a CUDA graph and replayed with new inputs. Inputs are
// staged in one host arena and uploaded with one copy; activations are sized for the
// largest batch the workspace was made for.
#include <cstdint>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/config.hpp"
#include "model/forward_batch.hpp"

namespace aerie::model {

struct ForwardCapacity {
  int64_t max_tokens = 0;      // new tokens per forward
  int64_t max_seqs = 0;        // sequences per forward
  int64_t max_kv_indices = 0;  // sum of context lengths
  int64_t max_logit_rows = 0;
  int64_t max_mask = 0;        // custom-mask entries (0: no custom masks)
  int max_splits = 1;          // attention KV splits
  // The capacity for `b` grown from this one: a dimension that does not fit grows to at
  // least twice its old size (so a stream of growing batches reallocates rarely); the
  // others stay (growing them all on every miss would compound).
  ForwardCapacity grown_for(const ForwardBatch& b, int splits) const;
};

// The sizes of one forward, as the kernels see them.
struct ForwardDims {
  int64_t tokens = 0, seqs = 0, logit_rows = 0;
  bool custom_mask = false;
  int num_splits = 1;
  bool logits_all_rows = false;  // logit_rows is 0, 1, ..., tokens - 1: no gather needed
  int attention_tokens_per_block = 1;  // see kernels/attention.hpp
};

class ForwardWorkspace {
 public:
  // config: the per-rank shape (heads and intermediate size of this TP rank; the whole
  // vocabulary, which the logits span). vocab_ranks: the ranks the LM head's rows are split
  // over (model/vocab_parallel.hpp), which sizes the logit scratch; 1: none needed.
  ForwardWorkspace(const LlamaConfig& config, ForwardCapacity capacity, Device device, DType act_dtype, int vocab_ranks = 1);
  const ForwardCapacity& capacity() const { return capacity_; }
  bool fits(const ForwardBatch& batch, int num_splits) const;

  // Writes the batch into the host arena and copies it to the device in stream order.
  void upload(const ForwardBatch& batch, const Stream& stream);
  // The same in two parts: the copies on `copy_stream` (a SideCopyStream's, whose end() the
  // caller enqueues before the forward), then, on the forward's stream, the future tokens'
  // resolution (which reads the table the work before it writes).
  void copy_in(const ForwardBatch& batch, const Stream& copy_stream);
  void resolve_future_tokens(const ForwardBatch& batch, const Stream& stream);
  // Both for a graph runner with one workspace: copy_in on `side` (begin / end), then the
  // resolution on `stream`; the runner marks `side` after the forward that reads the workspace.
  void upload_beside(const ForwardBatch& batch, SideCopyStream& side, const Stream& stream);

  // Device views of the inputs.
  TensorView ids(int64_t tokens) const { return ints_.view().slice_rows(off_ids_, off_ids_ + tokens); }
  TensorView positions(int64_t tokens) const { return ints_.view().slice_rows(off_pos_, off_pos_ + tokens); }
  TensorView slots(int64_t tokens) const { return ints_.view().slice_rows(off_slots_, off_slots_ + tokens); }
  TensorView qo_indptr(int64_t seqs) const { return ints_.view().slice_rows(off_qo_, off_qo_ + seqs + 1); }
  TensorView kv_indptr(int64_t seqs) const { return ints_.view().slice_rows(off_kvp_, off_kvp_ + seqs + 1); }
  TensorView mask_indptr(int64_t seqs) const { return ints_.view().slice_rows(off_maskp_, off_maskp_ + seqs + 1); }
  TensorView logit_rows(int64_t rows) const { return ints_.view().slice_rows(off_rows_, off_rows_ + rows); }
  // kv_indices spans the whole capacity: kernels read only what kv_indptr points at.
  TensorView kv_indices() const { return ints_.view().slice_rows(off_kv_, off_kv_ + capacity_.max_kv_indices); }
  TensorView mask() const { return mask_.view(); }

  // Activations, [tokens, ...] views of the max-size buffers.
  Buffer hidden, residual, normed, qkv, q, attn, gate_up, act, selected, logits, attn_partial;
  // Vocab-parallel LM head scratch (vocab_ranks > 1): this rank's logits and every rank's.
  Buffer shard_logits, gathered_logits;
  // Hidden states a speculative draft reads (LlamaModel's HiddenCapture), [max_tokens,
  // width]; allocated by the first forward that captures, so that a graph captured over
  // this workspace keeps writing where the model reads them after a replay.
  Buffer captured;

 private:
  ForwardCapacity capacity_;
  int64_t off_ids_, off_pos_, off_slots_, off_qo_, off_kvp_, off_maskp_, off_rows_, off_kv_, total_ints_;
  Buffer ints_;          // device arena of every i32 input
  Buffer mask_;          // device u8 custom mask
  StagingRing staging_;  // host arenas, same layout as ints_
  StagingRing mask_staging_;
};

}  // namespace aerie::model
