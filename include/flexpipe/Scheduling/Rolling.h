//===- Rolling.h - Loops from an actor's straight-line calls ----*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Loop rolling for the rank programs. An actor's program is a straight list
// of runtime calls, one per instruction, and its steady state repeats a few
// calls with micro-batches that advance by a constant step. Written out, a
// schedule of 20,000 micro-batches made C++ functions that took the host
// compiler eight minutes each (-O2, 2.3 GB); as loops they take as long as
// any other. rollLoops finds those repeats; the lowering writes each as a
// counted loop whose body computes the calls' arguments from the trip.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_ROLLING_H
#define FLEXPIPE_SCHEDULING_ROLLING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace flexpipe::sched {

/// One call as loop rolling sees it. Calls of one `shape` (the caller's
/// number for a callee with its fixed arguments: names, whether it returns
/// a token) differ only in `values`, their integer arguments.
struct RollCall {
  uint32_t shape = 0;
  llvm::SmallVector<int64_t, 4> values;
  /// The call whose token this one takes (a wait), or -1.
  int64_t tokenFrom = -1;
};

/// `trips` repetitions of calls [begin, begin + period): in trip j, call
/// begin + j * period + q is call begin + q with each value advanced by
/// j times its step (the difference between trips 1 and 0).
struct RolledLoop {
  size_t begin = 0, period = 0, trips = 0;
};

/// The loops of `calls`, in order and disjoint, each of at least
/// `minTrips` trips and of a period up to `maxPeriod` calls. At each call
/// the loop that covers the most calls from there is taken (the shortest
/// period on a tie), else the call stays as it is. A token stays within
/// its trip: a loop holds a call that takes a token only with the call that
/// makes it, in the same trip, and the other way round.
std::vector<RolledLoop> rollLoops(llvm::ArrayRef<RollCall> calls,
                                  size_t maxPeriod = 256, size_t minTrips = 3);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_ROLLING_H
