//===- Layout.h - Where a job's ranks run -----------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The placement rules that the cost model prices and the runtime follows:
// which device (a node's slot, in order) runs replica r's actor a, which
// rank runs it (the same number: rank r is device r), and which core a
// device's rank takes when a node has more ranks than cores. Header-only,
// so that the scheduling library, the runtime, flexpipe-compile and
// flexpipe-profile share them without a link dependency.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SUPPORT_LAYOUT_H
#define FLEXPIPE_SUPPORT_LAYOUT_H

#include <cstdint>

namespace flexpipe {

/// The device of replica `replica`'s actor `actor` when `dp` replicas of the
/// pipeline run side by side: actor * dp + replica (Megatron-LM's order: the
/// data-parallel groups, whose gradient all-reduce moves the most bytes, are
/// neighbours), so replica 0's actor a is device a * dp.
inline int64_t deviceOf(int64_t actor, int64_t replica, int64_t dp) {
  return actor * dp + replica;
}

/// The rank (the launcher's process number: MPI's, torchrun's RANK, Slurm's
/// task) of replica `replica`'s actor `actor`: its device, so that rank r
/// runs on device r and a launcher that fills nodes in rank order places
/// the ranks as the cost model prices them. With dp = 1, rank a is actor a.
/// actorOfRank and replicaOfRank invert it; the runtime, the launchers
/// flexpipe-compile writes and flexpipe-reference all number ranks so.
inline int64_t rankOf(int64_t actor, int64_t replica, int64_t dp) {
  return deviceOf(actor, replica, dp);
}
/// The actor that rank `rank` runs: rank / dp (ranks a * dp to a * dp +
/// dp - 1 run actor a).
inline int64_t actorOfRank(int64_t rank, int64_t dp) { return rank / dp; }
/// The data-parallel replica that rank `rank` belongs to: rank mod dp.
inline int64_t replicaOfRank(int64_t rank, int64_t dp) { return rank % dp; }

/// The core (0 .. cores - 1) of `device`'s rank when the ranks of a node
/// outnumber its `cores`: round robin over the devices. With dp replicas on
/// as many cores, a core holds one replica's actors, which take turns as
/// the pipeline hands work along, instead of the same actor of two
/// replicas, which compute at the same moments (pp 2 x dp 2 on 2 cores:
/// 0.43 against 0.80 s per iteration of the hidden-256 GPT).
inline int64_t coreOf(int64_t device, int64_t cores) {
  return cores > 0 ? device % cores : 0;
}

} // namespace flexpipe

#endif // FLEXPIPE_SUPPORT_LAYOUT_H
