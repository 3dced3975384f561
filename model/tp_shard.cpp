#include "model/tp_shard.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::model {

int64_t TpShard::real_vocab_rows(int64_t vocab) const {
  return std::clamp<int64_t>(vocab - first_vocab(vocab), 0, vocab_rows(vocab));
}

LlamaConfig TpShard::local(const LlamaConfig& c) const {
  LlamaConfig l = c;
  l.num_heads = heads(c);
  l.num_kv_heads = kv_heads(c);
  l.intermediate_size = intermediate(c);
  return l;
}

void TpShard::check_divisible(const LlamaConfig& c, int size, const std::string& what) {
  AERIE_CHECK(size >= 1, "--tp-size must be >= 1");
  if (size == 1) return;
  AERIE_CHECK(c.num_heads % size == 0, "--tp-size " << size << ": " << what << "'s " << c.num_heads
                                                    << " attention heads do not divide over " << size << " ranks");
  AERIE_CHECK(c.num_kv_heads % size == 0 || size % c.num_kv_heads == 0,
              "--tp-size " << size << ": " << what << "'s " << c.num_kv_heads << " KV heads neither divide over " << size
                           << " ranks nor replicate evenly onto them");
  AERIE_CHECK(c.intermediate_size % size == 0, "--tp-size " << size << ": " << what << "'s intermediate size " << c.intermediate_size
                                                            << " does not divide over " << size << " ranks");
  AERIE_CHECK(c.vocab_size >= size, "--tp-size " << size << ": " << what << "'s vocabulary of " << c.vocab_size << " is smaller than the TP group");
}

void TpShard::check_divisible(const LlamaConfig& c, int attn_size, int mlp_size, const std::string& what) {
  AERIE_CHECK(attn_size >= 1 && mlp_size >= attn_size, "the MLP's ranks must include the attention group's");
  if (attn_size > 1) {
    AERIE_CHECK(c.num_heads % attn_size == 0, "DP attention over groups of " << attn_size << " ranks: " << what << "'s " << c.num_heads
                                                                            << " attention heads do not divide over them");
    AERIE_CHECK(c.num_kv_heads % attn_size == 0 || attn_size % c.num_kv_heads == 0,
                "DP attention over groups of " << attn_size << " ranks: " << what << "'s " << c.num_kv_heads
                                               << " KV heads neither divide over them nor replicate evenly onto them");
  }
  AERIE_CHECK(c.intermediate_size % mlp_size == 0, "--tp-size " << mlp_size << ": " << what << "'s intermediate size " << c.intermediate_size
                                                                 << " does not divide over " << mlp_size << " ranks");
  AERIE_CHECK(c.vocab_size >= attn_size, what << "'s vocabulary of " << c.vocab_size << " is smaller than the attention-TP group");
}

}  // namespace aerie::model
