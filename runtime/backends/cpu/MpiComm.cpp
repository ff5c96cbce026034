//===- MpiComm.cpp - The CPU backend's communication over MPI -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Liveness (Timeout.h): every wait polls its requests and gives up after
// FLEXPIPE_TIMEOUT seconds without completion, naming the peer and the
// transfer; MPI_Abort then stops every rank. Collectives are the
// non-blocking kind for the same reason.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Comm.h"
#include "flexpipe/Runtime/Host.h"

#include "../MpiCheck.h"
#include "../Timeout.h"
#include "../Watchdog.h"
#include "flexpipe/Support/Layout.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
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
    // With more ranks than cores, Open MPI's launcher asks every MPI call
    // that finds nothing to do to yield the core. This rank's waits yield
    // by themselves (poll); a yield inside the completion test of a send
    // still in flight (releaseSent, after each forward) handed the core to
    // a neighbour for as long as it computed: 0.5-1.3 ms of a 8.7 ms
    // iteration per rank of the tiny GPT's vocabulary-parallel
    // bidirectional candidate over 4 ranks on 2 cores, 8.2 ms without.
    // Blocking calls then spin; the data-parallel all-reduce, the one in an
    // iteration, polls instead when ranks share cores.
    setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
    MPICHECK(MPI_Init(argc, argv));
    // Errors return codes (checked above) instead of aborting silently.
    MPICHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &count));
    if (std::string error = timeoutFromEnv(timeout); !error.empty())
      abort(error, 1);
    // More ranks on this node than cores: a waiting rank must give its core
    // to a computing one at once instead of spinning first.
    MPI_Comm node;
    {
      // Blocking collectives of every rank (this one, the replica and group
      // splits): one rank stopped in them held the others without a word.
      Watchdog::Scope scope(&watchdog, "in start-up (MPI_Comm_split_type)",
                            timeout);
      MPICHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me,
                                   MPI_INFO_NULL, &node));
    }
    MPICHECK(MPI_Comm_size(node, &nodeRanks));
    MPICHECK(MPI_Comm_free(&node));
    spinSeconds = nodeRanks > cores ? 0 : kSpinSeconds;
  }
  int rank() const override { return me; }
  void place(int64_t device) override {
    if (std::string error = bindSettingError(); !error.empty())
      abort(error, 1);
    const char *value = std::getenv("FLEXPIPE_BIND");
    if (nodeRanks <= cores || (value && std::string(value) == "none"))
      return;
    if (allowedCpus() < cores)
      return; // the launcher placed this rank
    if (std::string error = bindToCore(flexpipe::coreOf(device, cores));
        !error.empty())
      std::fprintf(stderr,
                   "flexpipe: rank %d: %s; it runs where the kernel "
                   "puts it\n",
                   me, error.c_str());
  }
  int size() const override { return count; }

  int64_t isend(const void *data, size_t bytes, int peer, int tag) override {
    MPI_Request &request = post({true, peer, tag});
    MPICHECK(MPI_Isend(data, messageCount(bytes), MPI_BYTE, peer, tag,
                       MPI_COMM_WORLD, &request));
    return static_cast<int64_t>(requests.size() - 1);
  }
  int64_t irecv(void *data, size_t bytes, int peer, int tag) override {
    MPI_Request &request = post({false, peer, tag});
    MPICHECK(MPI_Irecv(data, messageCount(bytes), MPI_BYTE, peer, tag,
                       MPI_COMM_WORLD, &request));
    return static_cast<int64_t>(requests.size() - 1);
  }
  void wait(int64_t handle) override {
    waitFor(&requests[handle], 1, &transfers[handle]);
  }
  bool completed(int64_t handle) override {
    // A completed request becomes MPI_REQUEST_NULL, which tests (and
    // waits) complete at once.
    int done = 0;
    MPICHECK(MPI_Test(&requests[handle], &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  void waitAll() override {
    waitFor(requests.data(), requests.size(), transfers.data());
    requests.clear();
    transfers.clear();
  }
  void setReplicaGroup(int colour) override {
    Watchdog::Scope scope(&watchdog,
                          "in start-up (MPI_Comm_split of the replica groups)",
                          timeout);
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
    Watchdog::Scope scope(
        &watchdog, "in start-up (MPI_Comm_split of the all-gather groups)",
        timeout);
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
      MPICHECK(MPI_Irecv(all + m * n, static_cast<int>(n), MPI_DOUBLE, m, tag,
                         comm, &post({false, -1, tag, m})));
      handles.push_back(static_cast<int64_t>(requests.size() - 1));
      MPICHECK(MPI_Isend(mine, static_cast<int>(n), MPI_DOUBLE, m, tag, comm,
                         &post({true, -1, tag, m})));
      handles.push_back(static_cast<int64_t>(requests.size() - 1));
    }
    return handles;
  }
  void allreduceReplicas(const std::vector<Floats> &parts) override {
    if (replicaCount <= 1)
      return;
    // One packed buffer: every ring step of the all-reduce is one message,
    // not one per tensor (which costs a wake-up each on a shared core).
    const size_t n = pack(parts, packed);
    // MPI's blocking all-reduce: its shared-memory algorithms beat the
    // non-blocking one's (28 MiB between 2 ranks: 11 against 26 ms), and
    // the watchdog keeps the liveness rule that polling keeps elsewhere.
    // With more ranks than cores a blocking call spins through its core's
    // turn (MpiComm()): the non-blocking one, polled, leaves the core to
    // the rank it shares it with.
    if (spinSeconds == 0) {
      MPI_Request request;
      MPICHECK(MPI_Iallreduce(MPI_IN_PLACE, packed.data(),
                              static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                              replicas, &request));
      waitCollective(request, "the data-parallel gradient all-reduce");
    } else {
      Watchdog::Scope scope(
          &watchdog, "in the data-parallel gradient all-reduce", timeout);
      MPICHECK(MPI_Allreduce(MPI_IN_PLACE, packed.data(), static_cast<int>(n),
                             MPI_FLOAT, MPI_SUM, replicas));
    }
    unpack(packed, parts, false);
  }
  void exchangeAdd(const std::vector<Floats> &parts, int peer,
                   int tag) override {
    const size_t n = pack(parts, packed);
    theirs.resize(n);
    MPI_Request pair[2];
    Transfer what[2] = {{false, peer, tag}, {true, peer, tag}};
    MPICHECK(MPI_Irecv(theirs.data(), static_cast<int>(n), MPI_FLOAT, peer, tag,
                       MPI_COMM_WORLD, &pair[0]));
    MPICHECK(MPI_Isend(packed.data(), static_cast<int>(n), MPI_FLOAT, peer, tag,
                       MPI_COMM_WORLD, &pair[1]));
    waitFor(pair, 2, what);
    unpack(theirs, parts, true);
  }
  void allreduceSum(double *data, size_t n) override {
    MPI_Request request;
    MPICHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE,
                            MPI_SUM, MPI_COMM_WORLD, &request));
    waitCollective(request, "an all-reduce of the ranks (losses, peak memory, "
                            "profile or the end of a checkpoint)");
  }
  void minMax(uint64_t value, uint64_t &min, uint64_t &max) override {
    unsigned long long v = value, lo = 0, hi = 0;
    MPI_Request request;
    MPICHECK(MPI_Iallreduce(&v, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN,
                            MPI_COMM_WORLD, &request));
    waitCollective(request, "a min/max agreement of the ranks (the schedule "
                            "hash or the checkpoint generation)");
    MPICHECK(MPI_Iallreduce(&v, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                            MPI_COMM_WORLD, &request));
    waitCollective(request, "a min/max agreement of the ranks (the schedule "
                            "hash or the checkpoint generation)");
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
    // Not under the watchdog: ranks that finish first wait here while rank
    // 0 writes the trace, profile and losses (and replica 0's ranks their
    // weights), however long that takes.
    if (replicas != MPI_COMM_NULL)
      MPI_Comm_free(&replicas);
    for (MPI_Comm &group : groups)
      MPI_Comm_free(&group);
    MPICHECK(MPI_Finalize());
  }

private:
  /// Copies `parts` one after another into `into`; returns the count.
  static size_t pack(const std::vector<Floats> &parts,
                     std::vector<float> &into) {
    size_t n = 0;
    for (const Floats &p : parts)
      n += p.count;
    into.resize(n);
    float *at = into.data();
    for (const Floats &p : parts)
      at = std::copy(p.data, p.data + p.count, at);
    return n;
  }
  /// Copies (or with `add`, adds) `from` back into `parts`.
  static void unpack(const std::vector<float> &from,
                     const std::vector<Floats> &parts, bool add) {
    const float *at = from.data();
    for (const Floats &p : parts) {
      for (size_t i = 0; i < p.count; ++i)
        p.data[i] = add ? p.data[i] + at[i] : at[i];
      at += p.count;
    }
  }
  std::vector<float> packed, theirs; // reused between iterations

  /// What a request moves, for the message when it never completes.
  struct Transfer {
    bool send;
    int peer; ///< world rank, or -1 with `member` of a group
    int tag;
    int member = -1;
  };
  /// An MPI count of `bytes` bytes; a message of 2 GiB or more stops the
  /// rank with what to change.
  int messageCount(size_t bytes) {
    if (bytes > static_cast<size_t>(INT_MAX))
      abort("a message of " + std::to_string(bytes) +
                " bytes is larger than one MPI message of bytes carries "
                "(2 GiB); use smaller micro-batches or more stages",
            1);
    return static_cast<int>(bytes);
  }
  MPI_Request &post(Transfer what) {
    requests.emplace_back();
    transfers.push_back(what);
    return requests.back();
  }
  /// Calls `test` until it reports completion; after `timeout` seconds
  /// without that, stops every rank with `describe()`, what it waited for.
  template <typename Test, typename Describe>
  void poll(Test test, Describe describe) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point last = Clock::now();
    double waited = 0;
    while (!test()) {
      const Clock::time_point now = Clock::now();
      const double step = std::chrono::duration<double>(now - last).count();
      last = now;
      // Polls come every 50 us at most: a gap of a second is time this
      // process did not run (the job stopped with SIGSTOP/SIGTSTP, Slurm's
      // suspend), not time a peer failed to answer in. Counted, a job
      // suspended for longer than FLEXPIPE_TIMEOUT died when resumed. Such
      // a gap counts 0.1 s, not nothing: a node where every poll comes a
      // second late still times out, 10x later.
      waited += step < 1.0 ? step : 0.1;
      if (waited > timeout)
        abort(noProgressFor(waited) + " (FLEXPIPE_TIMEOUT) waiting for " +
                  describe(),
              1);
      // Spin while the wait is short, then leave the core to others.
      if (spinSeconds == 0)
        std::this_thread::yield();
      else if (waited >= spinSeconds)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  /// Waits for `n` requests, naming the first one still pending on timeout.
  void waitFor(MPI_Request *list, size_t n, const Transfer *what) {
    poll(
        [&] {
          int done = 0;
          MPICHECK(MPI_Testall(static_cast<int>(n), list, &done,
                               MPI_STATUSES_IGNORE));
          return done != 0;
        },
        [&] {
          size_t first = 0;
          for (int one = 1; first + 1 < n; ++first) {
            MPICHECK(MPI_Test(&list[first], &one, MPI_STATUS_IGNORE));
            if (!one)
              break;
          }
          const Transfer &t = what[first];
          const std::string peer = t.peer >= 0
                                       ? "rank " + std::to_string(t.peer)
                                       : "member " + std::to_string(t.member) +
                                             " of a stage's group";
          return std::string(t.send ? "the send to " : "the message from ") +
                 peer + " (tag " + std::to_string(t.tag) + "); " + peer +
                 " may have stopped, hung or died";
        });
  }
  void waitCollective(MPI_Request &request, const char *what) {
    poll(
        [&] {
          int done = 0;
          MPICHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
          return done != 0;
        },
        [&] {
          return std::string(what) +
                 "; another rank may have stopped, hung or died";
        });
  }

  int me = 0, count = 1;
  /// Ranks on this node and the node's cores.
  int nodeRanks = 1;
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double timeout = kDefaultTimeout;
  /// How long a wait spins before it sleeps between polls (0: yield at
  /// every poll, oversubscribed). A rank with a core of its own gains
  /// nothing by sleeping in a pipeline's waits, and each sleep ends up to
  /// ~0.1 ms after its message came: with a spin of 10000 polls (under
  /// 1 ms), the tiny GPT's vocabulary-parallel 2-rank candidates, whose
  /// ranks wait 1.5-2.5 ms for each backward, ran 15-17% slower than
  /// spinning through (docs/Runtime.md).
  static constexpr double kSpinSeconds = 0.1;
  double spinSeconds = kSpinSeconds;
  std::vector<MPI_Request> requests;
  std::vector<Transfer> transfers; // parallel to requests
  MPI_Comm replicas = MPI_COMM_NULL;
  /// Stops this rank when a blocking call outlasts `timeout`. From its own
  /// thread MPI may not be called: the rank exits, and the launcher stops
  /// the others.
  Watchdog watchdog{nullptr, [this](const std::string &failure) {
                      std::fprintf(stderr, "flexpipe: rank %d: %s\n", me,
                                   failure.c_str());
                      std::fflush(stderr);
                      std::_Exit(1);
                    }};
  int replicaCount = 1;
  std::vector<MPI_Comm> groups; // openGroups, by handle
};

} // namespace

std::unique_ptr<Comm> flexpipe::rt::makeMpiComm(int *argc, char ***argv) {
  return std::make_unique<MpiComm>(argc, argv);
}
