//===- MpiComm.cpp - The CPU backend's communication over MPI -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Comm.h"

#include "../MpiCheck.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace flexpipe::rt;

namespace {

/// A failed MPI call stops every rank.
void mpiFailed(const char *call, const char *file, int line,
               const std::string &text) {
  std::fprintf(stderr, "flexpipe: %s failed at %s:%d: %s\n", call, file, line,
               text.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

} // namespace

#define MPICHECK(call) FLEXPIPE_MPI_CHECK(call, mpiFailed)

namespace {

class MpiComm final : public Comm {
public:
  MpiComm(int *argc, char ***argv) {
    MPICHECK(MPI_Init(argc, argv));
    // Errors return codes (checked above) instead of aborting silently.
    MPICHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &count));
  }
  int rank() const override { return me; }
  int size() const override { return count; }

  int64_t isend(const float *data, size_t n, int peer, int tag) override {
    requests.emplace_back();
    MPICHECK(MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag,
                       MPI_COMM_WORLD, &requests.back()));
    return static_cast<int64_t>(requests.size() - 1);
  }
  int64_t irecv(float *data, size_t n, int peer, int tag) override {
    requests.emplace_back();
    MPICHECK(MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag,
                       MPI_COMM_WORLD, &requests.back()));
    return static_cast<int64_t>(requests.size() - 1);
  }
  void wait(int64_t handle) override {
    MPICHECK(MPI_Wait(&requests[handle], MPI_STATUS_IGNORE));
  }
  void waitAll() override {
    if (!requests.empty())
      MPICHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                           MPI_STATUSES_IGNORE));
    requests.clear();
  }
  void setReplicaGroup(int colour) override {
    MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, colour, me, &replicas));
    MPICHECK(MPI_Comm_size(replicas, &replicaCount));
  }
  int openGroups(const std::vector<std::vector<int>> &list) override {
    int colour = MPI_UNDEFINED, key = 0;
    for (size_t g = 0; g < list.size(); ++g)
      for (size_t i = 0; i < list[g].size(); ++i)
        if (list[g][i] == me) {
          colour = static_cast<int>(g);
          key = static_cast<int>(i);
        }
    MPI_Comm comm = MPI_COMM_NULL;
    MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, colour, key, &comm));
    if (comm == MPI_COMM_NULL)
      return -1;
    MPICHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    groups.push_back(comm);
    return static_cast<int>(groups.size() - 1);
  }
  std::vector<int64_t> iallGather(int group, const double *mine, size_t n,
                                  double *all, int tag) override {
    // Point-to-point within the group's communicator rather than
    // MPI_Iallgather: collectives match in the order they are posted, and a
    // schedule may post two asynchronous all-gathers of one group in
    // different orders on different members.
    MPI_Comm comm = groups[group];
    int self = 0, members = 0;
    MPICHECK(MPI_Comm_rank(comm, &self));
    MPICHECK(MPI_Comm_size(comm, &members));
    std::copy(mine, mine + n, all + self * n);
    std::vector<int64_t> handles;
    for (int m = 0; m < members; ++m) {
      if (m == self)
        continue;
      requests.emplace_back();
      MPICHECK(MPI_Irecv(all + m * n, static_cast<int>(n), MPI_DOUBLE, m, tag,
                         comm, &requests.back()));
      handles.push_back(static_cast<int64_t>(requests.size() - 1));
      requests.emplace_back();
      MPICHECK(MPI_Isend(mine, static_cast<int>(n), MPI_DOUBLE, m, tag, comm,
                         &requests.back()));
      handles.push_back(static_cast<int64_t>(requests.size() - 1));
    }
    return handles;
  }
  void allreduceReplicas(float *data, size_t n) override {
    if (replicaCount <= 1)
      return;
    MPICHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT,
                           MPI_SUM, replicas));
  }
  void exchangeAdd(float *data, size_t n, int peer, int tag) override {
    std::vector<float> theirs(n);
    MPICHECK(MPI_Sendrecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag,
                          theirs.data(), static_cast<int>(n), MPI_FLOAT, peer,
                          tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (size_t i = 0; i < n; ++i)
      data[i] += theirs[i];
  }
  void allreduceSum(double *data, size_t n) override {
    MPICHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE,
                           MPI_SUM, MPI_COMM_WORLD));
  }
  void minMax(uint64_t value, uint64_t &min, uint64_t &max) override {
    unsigned long long v = value, lo = 0, hi = 0;
    MPICHECK(MPI_Allreduce(&v, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN,
                           MPI_COMM_WORLD));
    MPICHECK(MPI_Allreduce(&v, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                           MPI_COMM_WORLD));
    min = lo;
    max = hi;
  }
  [[noreturn]] void abort(const std::string &message, int code) override {
    std::fprintf(stderr, "flexpipe: rank %d: %s\n", me, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }
  void finalize() override {
    if (replicas != MPI_COMM_NULL)
      MPI_Comm_free(&replicas);
    for (MPI_Comm &group : groups)
      MPI_Comm_free(&group);
    MPICHECK(MPI_Finalize());
  }

private:
  int me = 0, count = 1;
  std::vector<MPI_Request> requests;
  MPI_Comm replicas = MPI_COMM_NULL;
  int replicaCount = 1;
  std::vector<MPI_Comm> groups; // openGroups, by handle
};

} // namespace

std::unique_ptr<Comm> flexpipe::rt::makeMpiComm(int *argc, char ***argv) {
  return std::make_unique<MpiComm>(argc, argv);
}
