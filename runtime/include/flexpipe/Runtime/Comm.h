//===- Comm.h - What a runtime backend provides -----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The executor is backend-neutral; a backend moves bytes between ranks (the
// activations of a Device's buffers) and floats in its collectives. One
// implementation per folder under runtime/backends (cpu: MPI on host memory,
// cuda: NCCL on device memory, Device.h's buffers).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_COMM_H
#define FLEXPIPE_RUNTIME_COMM_H

#include "flexpipe/Runtime/Schedule.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace flexpipe::rt {

class Comm {
public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Posts a transfer of `bytes` bytes and returns a handle for wait(). A
  /// send's buffer must stay alive until its wait; messages with the same
  /// (peer, tag) arrive in the order they were sent; a receive's size must
  /// be its send's.
  virtual int64_t isend(const void *data, size_t bytes, int peer, int tag) = 0;
  virtual int64_t irecv(void *data, size_t bytes, int peer, int tag) = 0;
  virtual void wait(int64_t handle) = 0;
  /// Whether transfer `handle` has finished, without blocking: a send's
  /// buffer may then be released before its wait. False where the backend
  /// cannot tell (the buffer is then kept until wait or waitAll).
  virtual bool completed(int64_t handle) { return false; }
  /// Brackets transfers posted together (a send and the receive from the
  /// same peer, mirrored there) that the backend may start as one (NCCL:
  /// one ncclGroupStart / End; MPI's requests progress on their own, so
  /// nothing). No wait inside; groups do not nest.
  virtual void groupStart() {}
  virtual void groupEnd() {}
  /// Waits for every transfer still outstanding and forgets all handles.
  virtual void waitAll() = 0;
  /// Collective over all ranks, once: ranks passing the same `colour` form
  /// this rank's replica group (the data-parallel copies of its actor).
  virtual void setReplicaGroup(int colour) = 0;
  /// Where this rank's process runs, once its place in the job is known:
  /// `device` is flexpipe::deviceOf(actor, replica, dp), which is also the
  /// rank (flexpipe::rankOf: rank r runs on device r). When a node has
  /// more ranks than cores, the MPI backend binds the process to core
  /// flexpipe::coreOf(device, cores), the placement the cost model prices,
  /// unless the launcher already bound it or FLEXPIPE_BIND=none; the
  /// others run where their launcher put them. The executor calls it for
  /// ranks without threads (a rank with threads keeps all the cores).
  virtual void place(int64_t device) {}
  /// One FIFO channel of messages (flexpipe/Runtime/Schedule.h).
  using Channel = MessageChannel;
  /// Collective over all ranks, once, after setReplicaGroup, with the same
  /// list everywhere. Backends without tags (NCCL) open one channel for each;
  /// MPI needs nothing.
  virtual void openChannels(const std::vector<Channel> &channels) {}
  /// Collective over all ranks, once per call, in the same order everywhere:
  /// opens a communicator for each of `groups` (disjoint lists of ranks;
  /// member i of a group is the rank it lists at i). Returns the handle of
  /// this rank's group for iallGather, or -1 when it is in none.
  virtual int openGroups(const std::vector<std::vector<int>> &groups) {
    abort("this backend has no group collectives", 1);
    return -1;
  }
  /// Posts an all-gather in group `group`: `count` doubles from each member,
  /// member i's in all[i * count, (i + 1) * count), this rank's own copied
  /// there at once. Instances with different tags may be in flight together
  /// and match by tag, not by order. `mine` and `all` must live until the
  /// returned handles are waited for.
  virtual std::vector<int64_t> iallGather(int group, const double *mine,
                                          size_t count, double *all, int tag) {
    abort("this backend has no group collectives", 1);
    return {};
  }
  /// A run of floats in the backend's memory (a gradient tensor).
  struct Floats {
    float *data;
    size_t count;
  };
  /// Sums every buffer of `parts` over the replica group, as one collective
  /// (one message per ring step, not one per tensor).
  virtual void allreduceReplicas(const std::vector<Floats> &parts) = 0;
  /// Adds `peer`'s copy of every buffer of `parts` to this rank's,
  /// exchanging both ways in one message each way.
  virtual void exchangeAdd(const std::vector<Floats> &parts, int peer,
                           int tag) = 0;
  virtual void allreduceSum(double *data, size_t count) = 0;
  /// The smallest and largest value over all ranks.
  virtual void minMax(uint64_t value, uint64_t &min, uint64_t &max) = 0;
  /// Device memory this rank's backend measured, for the run's summary
  /// beside the executor's logical peak: (what, bytes) pairs, the same list
  /// of `what` on every rank; empty when the backend measures nothing (its
  /// memory is the process's own, as on the CPU).
  virtual std::vector<std::pair<std::string, double>> measuredMemory() {
    return {};
  }
  /// Stops every rank with `code` after printing `message`.
  [[noreturn]] virtual void abort(const std::string &message, int code) = 0;
  virtual void finalize() = 0;
};

/// FLEXPIPE_BIND: unset or empty (as FLEXPIPE_TIMEOUT: the default),
/// "cores" (bind where ranks outnumber cores) or "none"; the error for any
/// other value, "" otherwise. Checked on every backend and with any
/// --threads, not only where a rank would bind.
inline std::string bindSettingError() {
  const char *value = std::getenv("FLEXPIPE_BIND");
  if (!value || !*value || std::string(value) == "cores" ||
      std::string(value) == "none")
    return {};
  return std::string("FLEXPIPE_BIND is '") + value +
         "'; expected 'cores' or 'none'";
}

/// The CPU backend: MPI point-to-point and collectives. Initialises MPI.
std::unique_ptr<Comm> makeMpiComm(int *argc, char ***argv);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_COMM_H
