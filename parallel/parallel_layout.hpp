#pragma once
// How the ranks of a launch split into groups (sglang's and Megatron's order).
//
// Without DP attention, --tp-size T and --dp-size D run D replicas of TP T on T * D ranks:
// DP group g is ranks [g * T, (g + 1) * T) and they are its TP group; rank r has tp_rank
// r % T and dp_rank r / T. The ranks with the same tp_rank form a "peer" group (one rank
// per replica). The attention-TP group is the TP group.
//
// With DP attention (--enable-dp-attention, sglang's meaning), the same flags run on T
// ranks: the MLP (and with it the TP group) spans all T ranks, while attention runs
// data-parallel over D groups of A = T / D ranks: DP group g is ranks [g * A, (g + 1) * A),
// its attention-TP group, each with its own Scheduler, batch and KV cache. The peer group
// of rank r is the D ranks with r's attention-TP rank (r % A), one per DP group: the
// DP-attention gathers run over it (parallel/dp_padding.hpp).
#include <memory>

#include "parallel/communicator.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

struct ParallelLayout {
  int tp_size = 1;
  int dp_size = 1;
  bool dp_attention = false;

  int world_size() const { return dp_attention ? tp_size : tp_size * dp_size; }
  // Ranks of one DP group: its TP group, or under DP attention its attention-TP group.
  int group_size() const { return dp_attention ? tp_size / dp_size : tp_size; }
  int attn_tp_size() const { return group_size(); }
  int tp_rank(int world_rank) const { return dp_attention ? world_rank : world_rank % tp_size; }
  int dp_rank(int world_rank) const { return world_rank / group_size(); }
  int attn_tp_rank(int world_rank) const { return world_rank % group_size(); }
  // The world rank of the first rank of DP group g (the rank that answers for the group).
  int group_leader(int dp_group) const { return dp_group * group_size(); }
  // Throws aerie::Error with the fix when the layout does not fit a world of this size.
  void check(int world) const;
};

// This rank's groups. Every rank of the world makes them together (the splits are
// collective).
struct ParallelGroups {
  ParallelLayout layout;
  std::unique_ptr<ProcessGroup> tp;       // the ranks the MLP is split over (a replica; all ranks under DP attention)
  std::unique_ptr<ProcessGroup> dp;       // the peer group: one rank per DP group, this rank's attention-TP rank
  std::unique_ptr<ProcessGroup> attn_tp;  // this rank's attention-TP group (its DP group's ranks)
};
ParallelGroups make_parallel_groups(ProcessGroup& world, const ParallelLayout& layout);

}  // namespace aerie::parallel
