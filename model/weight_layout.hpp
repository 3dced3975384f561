#pragma once
// How checkpoint tensors become Aerie's weight layouts, shared by the Llama model and the
// EAGLE draft heads: dtype conversion into device buffers, q/k rows reordered so rotary
// pairs are adjacent, gate/up rows interleaved, and seeded random buffers for dummy weights.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/buffer.hpp"
#include "model/config.hpp"
#include "model/safetensors.hpp"
#include "model/tp_shard.hpp"

namespace aerie::model {

// Copies host tensors, converted to `dtype`, into consecutive rows of one new buffer; with
// pad_to_rows, zero rows follow up to that many (a vocab shard's tail).
Buffer concat_rows(const std::vector<TensorView>& parts, Device device, DType dtype, int64_t pad_to_rows = 0);
// Rows [begin, begin + count) of a host tensor: a view, no copy (an mmap reads only them).
TensorView row_range(const TensorView& t, int64_t begin, int64_t count);
// Columns [begin, begin + count) of a 2-D host tensor, copied into `storage`; returns its view.
TensorView column_range(const TensorView& t, int64_t begin, int64_t count, std::vector<unsigned char>& storage);
// A rank's part of a buffer made whole (seeded random weights are drawn whole, then cut, so
// every TP size gets the same model): the given row ranges, one after another, of columns
// [col_begin, col_begin + col_count) (col_count 0: all), zero rows appended up to
// pad_to_rows. 1-D buffers are one column. Returns `full` itself when that is all of it.
struct RowRange {
  int64_t begin = 0, count = 0;
};
Buffer cut_block(Buffer full, const std::vector<RowRange>& rows, int64_t col_begin = 0, int64_t col_count = 0, int64_t pad_to_rows = 0);
// The rows of the vocabulary a shard holds, of a [vocab, hidden] host table, padded.
Buffer vocab_shard_of(const TensorView& table, const TpShard& shard, Device device, DType dtype);
// The same of a whole [vocab, hidden] buffer.
Buffer vocab_shard_of(Buffer full, const TpShard& shard);
Buffer copy_of(const TensorView& t, Device device, DType dtype);
// The rows of a q or k projection reordered so that each head's rotation pairs are
// adjacent (rope_kv_write.hpp). Returns a view of `storage`.
TensorView pair_adjacent_rows(const TensorView& t, int64_t head_dim, std::vector<unsigned char>& storage);
// Rows of a and b alternating: the merged gate/up projection (kernels/silu_mul.hpp).
Buffer interleave_rows(const TensorView& a, const TensorView& b, Device device, DType dtype);
// Throws naming the file and tensor unless it is F32, BF16 or F16.
void check_float_tensor(const CheckpointReader& ckpt, const std::string& name, const TensorView& t);
// Reads a checkpoint tensor by name, checked against the expected shape.
using TensorGetter = std::function<TensorView(const std::string& name, std::initializer_list<int64_t> shape)>;
// The attention and MLP projections of one decoder layer (Hugging Face names under
// `prefix`: self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj)
// in Aerie's layouts: q/k/v merged with rotation pairs adjacent, gate/up interleaved; the
// shard's heads and MLP rows only (model/tp_shard.hpp). `layer` is the global shape.
// in_width: what q/k/v read (the hidden size, or 2x for an EAGLE3 midlayer).
struct LayerProjections {
  Buffer qkv, o_proj, post_norm, gate_up, down;
};
LayerProjections load_layer_projections(const TensorGetter& get, const std::string& prefix, const LlamaConfig& layer, int64_t in_width,
                                        Device device, DType dtype, const TpShard& shard = {});
// The row ranges of a merged [q + 2kv, in] projection (or its bias) that a shard holds.
std::vector<RowRange> qkv_rows_of(const LlamaConfig& layer, const TpShard& shard);
// N(0, std) (or `constant` when std is 0) drawn by Philox on the buffer's device.
Buffer random_buffer(uint64_t seed, std::vector<int64_t> shape, float std, Device device, DType dtype, float constant = 0.0f);

}  // namespace aerie::model
