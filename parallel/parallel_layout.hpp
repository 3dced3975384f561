#pragma once
// How the ranks of a launch split into groups (sglang's and Megatron's order): with
// --tp-size T and --dp-size D on T * D ranks, DP group g is ranks [g * T, (g + 1) * T) and
// they are its TP group; rank r has tp_rank r % T and dp_rank r / T. The ranks with the
// same tp_rank form a DP group (one per TP rank), used by DP attention and DP-wide
// exchanges. Without DP attention the attention-TP group is the TP group; with it, the
// T ranks of a replica are split into attention groups of T / D ranks (the DP-attention
// issue builds on this).
#include <memory>

#include "parallel/communicator.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

struct ParallelLayout {
  int tp_size = 1;
  int dp_size = 1;
  bool dp_attention = false;

  int world_size() const { return tp_size * dp_size; }
  int tp_rank(int world_rank) const { return world_rank % tp_size; }
  int dp_rank(int world_rank) const { return world_rank / tp_size; }
  // The world rank of TP rank 0 of DP group g (the rank that answers for the group).
  int group_leader(int dp_group) const { return dp_group * tp_size; }
  int attn_tp_size() const { return dp_attention ? tp_size / dp_size : tp_size; }
  // Throws aerie::Error with the fix when the layout does not fit a world of this size.
  void check(int world) const;
};

// This rank's groups. Every rank of the world makes them together (the splits are
// collective).
struct ParallelGroups {
  ParallelLayout layout;
  std::unique_ptr<ProcessGroup> tp;       // the ranks of this rank's replica
  std::unique_ptr<ProcessGroup> dp;       // the ranks with this rank's tp_rank
  std::unique_ptr<ProcessGroup> attn_tp;  // this rank's attention-TP group
};
ParallelGroups make_parallel_groups(ProcessGroup& world, const ParallelLayout& layout);

}  // namespace aerie::parallel
