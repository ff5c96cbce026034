//===- GradientSeparation.h - Split backward, stash and insert W -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The paper's bubble optimizer on compute-only programs. splitBackward turns
// every backward into an input gradient (I) followed by a weight gradient
// (W). separateGradients keeps each actor's order of forwards and input
// gradients and decides where the weight gradients go: a W is either fused
// (it runs right after its I) or stashed (it waits for the next bubble on its
// actor, and runs early only when a forward (or an input gradient) would
// otherwise exceed the memory bound, because a stashed W keeps its
// micro-batch's weight-gradient state alive: SimCosts::memoryEffect).
//
// Stash and insert: starting from every W fused, find the earliest bubble
// (an actor idle while its next forward or input gradient is not ready),
// follow the blocked item's dependency chain back across actors, and stash
// the fused weight gradients that ran on that chain while its items were
// ready, so that the chain's input gradients run earlier and release the
// blocked item. A change is kept when it shortens the iteration (or leaves it
// equal and finishes the actors' forwards and input gradients sooner). Once
// that finds nothing more, the search goes on with a second move per bubble:
// fuse the stashed W that waits through it (the W of the last I before it,
// which did not fit), filling the bubble and delaying the blocked item by
// what does not fit. The same search (both moves) also runs from stashing
// every W, and the better result is returned; it is never slower than the
// fused program, stashing every W, or the first phase alone.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_GRADIENTSEPARATION_H
#define FLEXPIPE_SCHEDULING_GRADIENTSEPARATION_H

#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class ThreadPoolInterface;
} // namespace llvm

namespace flexpipe::sched {

/// Replaces every Bwd by Igrad + Wgrad in place (the Igrad keeps the Bwd's
/// `source`). Returns the number of backwards split.
int64_t splitBackward(Program &program);

struct SeparationOptions {
  /// Peak activation memory allowed on every actor, in the units of
  /// SimCosts::activationBytes; 0: the peak of the program with every weight
  /// gradient fused (the schedule without separation), counted with each
  /// actor's static memory (SimCosts::staticBytes): an actor's static plus
  /// activation memory stays within the largest such sum of the fused
  /// program.
  double memoryBound = 0;
  /// Most stash-and-insert attempts (each one re-times the programs), all
  /// searches together: the one from every W fused, its continuation that
  /// also fills bubbles, and the one from every W stashed get in turn what
  /// the earlier ones left.
  int64_t maxRounds = 2000;
  /// Whether an attempt goes on from the best timing's state just before
  /// the first input gradient whose weight gradient it moves, instead of
  /// re-timing from the start: the same result (a unit test compares), in a
  /// fraction of the time when the bubbles tried are late (ZB-V at pp = 32,
  /// m = 256: 6x). Off only to check that.
  bool resume = true;
  /// Whether an attempt that stashes the same weight gradients as one made
  /// since the best last changed is counted without being run (it would
  /// re-time exactly as that one did): the same result (a unit test
  /// compares), 5x faster on ZB-H1 / ZB-V at pp = 16, m = 64. Off only to
  /// check that.
  bool shortcuts = true;
  /// Where attempts may run in parallel (programs of 2048 items or more):
  /// as many bubbles' attempts at once as the pool runs, the first better
  /// one in bubble order kept, so the result is that of one at a time.
  /// Null: one at a time on the caller's thread.
  llvm::ThreadPoolInterface *pool = nullptr;
};

struct SeparationResult {
  Program program;
  /// Iteration time and largest per-actor peak activation memory, fused
  /// (before) and separated (after), in the costs' units.
  double fusedTime = 0, time = 0;
  double fusedPeak = 0, peak = 0, memoryBound = 0;
  /// Weight gradients stashed, and which strategy won: "stash-and-insert"
  /// (the search from every W fused), "stash-all", "stash-all-and-insert"
  /// (the search from there changed it) or "fused" (nothing was faster, or
  /// as fast at a lower peak); a tie in time goes to the lower peak.
  int64_t stashed = 0;
  int64_t rounds = 0;
  std::string strategy;
};

/// The first op separateGradients cannot work on (a transfer, an
/// asynchronous collective, an exec or a wait), located at it; none for a
/// program of computations and blocking collectives.
std::optional<VerifyFailure> checkSeparable(const Program &program);

/// Re-orders the weight gradients of a compute-only, split program (no
/// transfers, collectives or registered instructions; run before
/// insertCommunication). Durations, activation sizes and message times come
/// from `costs`. Fails on a program it cannot work on (another op kind, a
/// missing forward or weight gradient) or a memory bound that the fused
/// program already exceeds.
llvm::Expected<SeparationResult>
separateGradients(const Program &program, const SimCosts &costs,
                  const SeparationOptions &options);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_GRADIENTSEPARATION_H
