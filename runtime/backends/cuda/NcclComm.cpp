//===- NcclComm.cpp - The CUDA backend's communication over NCCL ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Comm over NCCL, on device memory, without blocking the host:
//
// - One world communicator (host-side collectives: losses, the schedule
//   hash check, profiles) and one per replica group (the data-parallel
//   gradient all-reduce), both used on the compute stream.
// - One two-rank communicator and one CUDA stream per message channel
//   (sender, receiver, tag). NCCL has no tags and runs the operations of one
//   communicator one after another, and a send cannot complete before its
//   receive is posted; with one channel per tag and direction, each
//   channel's sends and receives come in the same order on both sides (the
//   order the schedule verifier checks), and a receive waiting on one
//   channel never holds up a send on another, which is MPI's semantics.
// - isend/irecv: the channel's stream waits for an event recorded on the
//   compute stream (the data is computed, the buffer allocated), runs
//   ncclSend/ncclRecv inside ncclGroupStart/End, and records a completion
//   event. wait(handle) makes the compute stream wait for that event; the
//   host never blocks. Buffers are freed on the compute stream after it has
//   waited (the executor frees a sent activation once its gradient is back,
//   a sent gradient at waitAll; docs/Runtime.md says why not on the
//   channel's stream).
// - Each transfer is its own NCCL group on its channel's stream, so that
//   every transfer progresses on its own, as the schedule verifier assumes
//   (docs/Rationale.md), except the mirrored pairs the lowering brackets
//   with groupStart / groupEnd: a send to a peer and the receive from it,
//   posted one after the other on both sides (1F1B's steady state). Those
//   go in one NCCL group, so that NCCL progresses both directions together;
//   each of the four would complete at the same moment alone, so the group
//   adds no wait. Fusing every run of posts into one group would make them
//   complete together, and the verifier finds that the interleaved, V-shape
//   and bidirectional schedules deadlock under that rule.
// - Connections are made at start-up (a warm-up exchange per channel, in
//   one global order, and warm-up all-reduces on the replica group), so no
//   NCCL call blocks on a peer later, nor allocates at the memory peak.
//
// Failure handling: host waits poll (CudaContext::waitFor) and give up after
// FLEXPIPE_TIMEOUT seconds without progress (no transfer and no compute
// marker completed), naming the transfers still pending; a watchdog
// thread polls ncclCommGetAsyncError and the liveness of ranks on the same
// machine, and stops the rank when either fails or a host call is stuck.
//
//===----------------------------------------------------------------------===//

#include "Bootstrap.h"
#include "CudaBackend.h"
#include "Kernels.h"

#include "flexpipe/Config.h"

#include <nccl.h>

#if FLEXPIPE_ENABLE_MPI
#include "../MpiCheck.h"
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include <unistd.h>

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

/// Every NCCL call is checked; a failure names call, file and line.
#define NCCLCHECK(call)                                                        \
  do {                                                                         \
    ncclResult_t status_ = (call);                                             \
    if (status_ != ncclSuccess)                                                \
      ::flexpipe::rt::cuda::failedCall(                                        \
          #call, __FILE__, __LINE__,                                           \
          std::string(ncclGetErrorString(status_)) + " (" +                    \
              ncclGetLastError(nullptr) + ")");                                \
  } while (0)

#if FLEXPIPE_ENABLE_MPI
#define MPICHECK(call) FLEXPIPE_MPI_CHECK(call, failedCall)
#endif

namespace {

/// Sizes of the warm-up messages: one small (NCCL's LL protocol) and one
/// large (Simple), so both kinds of buffers are connected at start-up.
constexpr size_t kWarmUpFloats[] = {256, 1 << 20};

ncclConfig_t blockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  return config;
}

class NcclComm final : public Comm {
public:
  NcclComm(std::shared_ptr<CudaContext> context, int rank, int ranks, bool mpi,
           const ncclUniqueId &id)
      : context(std::move(context)), me(rank), count(ranks), mpi(mpi) {
    setFatalHandler([this](const std::string &message) { abort(message, 1); });
    watchdog = std::make_unique<Watchdog>(
        [this] { return check(); },
        [this](const std::string &failure) { stopFromWatchdog(failure); });
    this->context->setDescribePending([this] { return describePending(); });
    this->context->setProgress([this] { return completedTransfers(); });
    {
      Watchdog::Scope scope(watchdog.get(),
                            "initialising NCCL (ncclCommInitRankConfig); did "
                            "every rank start?",
                            this->context->timeout());
      ncclConfig_t config = blockingConfig();
      NCCLCHECK(ncclCommInitRankConfig(&world, count, id, me, &config));
    }
    watch(world, "the world communicator");
    exchangeIdentities();
  }

  ~NcclComm() override {
    // finalize() or abort() ran before; nothing may call back into this.
    setFatalHandler({});
    context->setDescribePending({});
    context->setProgress({});
  }

  int rank() const override { return me; }
  int size() const override { return count; }

  int64_t isend(const void *data, size_t bytes, int peer, int tag) override {
    return post(true, const_cast<void *>(data), bytes, peer, tag);
  }
  int64_t irecv(void *data, size_t bytes, int peer, int tag) override {
    return post(false, data, bytes, peer, tag);
  }
  void wait(int64_t handle) override {
    if (handle < 0 || handle >= static_cast<int64_t>(handles.size()))
      abort("wait on unknown transfer " + std::to_string(handle), 1);
    if (grouping)
      abort("a wait inside a transfer group: its transfers start at the "
            "group's end",
            1);
    CUDACHECK(cudaStreamWaitEvent(context->stream(), handles[handle].done, 0));
  }
  void waitAll() override {
    for (const Transfer &t : handles)
      CUDACHECK(cudaStreamWaitEvent(context->stream(), t.done, 0));
    handles.clear();
    recycleEvents();
  }

  void setReplicaGroup(int colour) override;

  void openChannels(const std::vector<Channel> &all) override;

  void allreduceReplicas(const std::vector<Floats> &parts) override {
    if (replicaCount <= 1)
      return;
    // One NCCL group: NCCL fuses the tensors' all-reduces.
    NCCLCHECK(ncclGroupStart());
    for (const Floats &p : parts)
      NCCLCHECK(ncclAllReduce(p.data, p.data, p.count, ncclFloat32, ncclSum,
                              replicas, context->stream()));
    NCCLCHECK(ncclGroupEnd());
  }

  void exchangeAdd(const std::vector<Floats> &parts, int peer,
                   int tag) override {
    const Link &link = linkFor(true, peer, tag);
    size_t total = 0;
    for (const Floats &p : parts)
      total += p.count;
    DeviceArray<float> theirs(*context, total);
    NCCLCHECK(ncclGroupStart());
    size_t at = 0;
    for (const Floats &p : parts) {
      NCCLCHECK(ncclSend(p.data, p.count, ncclFloat32, link.peerInComm,
                         link.comm, context->stream()));
      NCCLCHECK(ncclRecv(theirs.get() + at, p.count, ncclFloat32,
                         link.peerInComm, link.comm, context->stream()));
      at += p.count;
    }
    NCCLCHECK(ncclGroupEnd());
    at = 0;
    for (const Floats &p : parts) {
      add(context->stream(), p.data, theirs.get() + at, p.data, p.count);
      at += p.count;
    }
  }

  void allreduceSum(double *data, size_t n) override {
    hostAllreduce(data, n, ncclFloat64, {ncclSum});
  }
  std::vector<std::pair<std::string, double>> measuredMemory() override {
    return context->measuredMemory();
  }
  void minMax(uint64_t value, uint64_t &min, uint64_t &max) override {
    uint64_t both[2] = {value, value};
    hostAllreduce(both, 2, ncclUint64, {ncclMin, ncclMax});
    min = both[0];
    max = both[1];
  }

  [[noreturn]] void abort(const std::string &message, int code) override {
    std::fflush(stdout);
    std::fprintf(stderr, "flexpipe: rank %d: %s\n", me, message.c_str());
    std::fflush(stderr);
    // A failure while aborting (a check in here) must not recurse.
    static std::atomic<bool> aborting{false};
    if (aborting.exchange(true))
      std::_Exit(code);
    if (watchdog)
      watchdog->quiet();
    std::vector<std::pair<ncclComm_t, std::string>> comms;
    {
      std::lock_guard<std::mutex> lock(watchedMutex);
      comms.swap(watched);
    }
    {
      // ncclCommAbort should not block; if it does, the watchdog ends it.
      Watchdog::Scope scope(watchdog.get(), "aborting NCCL", 10);
      for (auto &[comm, what] : comms)
        ncclCommAbort(comm);
    }
#if FLEXPIPE_ENABLE_MPI
    if (mpi)
      MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::_Exit(code);
  }

  void finalize() override;

private:
  /// A channel this rank takes part in.
  struct Link {
    Channel channel;
    size_t order;   ///< its index in the global channel list
    int peer;       ///< the other rank (world numbering)
    int peerInComm; ///< the other rank in `comm` (0 or 1)
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  /// A posted transfer.
  struct Transfer {
    cudaEvent_t done;
    int peer;
    bool send;
    bool counted = false; ///< seen complete by completedTransfers
  };

  /// A transfer of `bytes` bytes (ncclUint8: fp32 or bf16 alike).
  int64_t post(bool send, void *data, size_t bytes, int peer, int tag);
  void groupStart() override;
  void groupEnd() override;
  const Link &linkFor(bool send, int peer, int tag);
  /// How many transfers have been seen complete: the progress that resets
  /// the host's wait timeout.
  size_t completedTransfers();
  ncclComm_t split(int colour, const char *what);
  void watch(ncclComm_t comm, const std::string &what) {
    std::lock_guard<std::mutex> lock(watchedMutex);
    watched.push_back({comm, what});
  }
  template <typename T>
  void hostAllreduce(T *data, size_t n, ncclDataType_t type,
                     std::initializer_list<ncclRedOp_t> ops);
  void exchangeIdentities();
  std::string check();
  std::string describePending();
  [[noreturn]] void stopFromWatchdog(const std::string &failure);
  cudaEvent_t takeEvent();
  void recycleEvents();

  std::shared_ptr<CudaContext> context;
  int me, count;
  bool mpi;
  ncclComm_t world = nullptr, replicas = nullptr;
  int replicaCount = 1;
  std::vector<Link> links;
  std::map<std::tuple<int, int, int>, size_t> linkIndex; // (from, to, tag)
  std::vector<Transfer> handles;  ///< since the last waitAll
  std::vector<Transfer> inFlight; ///< posted, not yet seen complete
  /// Inside groupStart / groupEnd: the handles posted so far, with their
  /// channel's stream, whose completion events groupEnd records.
  bool grouping = false;
  std::vector<std::pair<size_t, cudaStream_t>> grouped;
  size_t transfersDone = 0;       ///< counted by completedTransfers
  std::vector<cudaEvent_t> freeEvents;
  std::vector<ProcessId> peers;
  ProcessId self;
  // Device and page-locked scratch for host-side collectives.
  DeviceArray<unsigned char> scratch;
  PinnedArray<unsigned char> pinned;
  std::mutex watchedMutex;
  std::vector<std::pair<ncclComm_t, std::string>> watched;
  std::unique_ptr<Watchdog> watchdog;
};

ncclComm_t NcclComm::split(int colour, const char *what) {
  Watchdog::Scope scope(watchdog.get(), what, context->timeout());
  ncclConfig_t config = blockingConfig();
  ncclComm_t comm = nullptr;
  NCCLCHECK(ncclCommSplit(world, colour, me, &comm, &config));
  return comm;
}

void NcclComm::setReplicaGroup(int colour) {
  replicas = split(colour, "splitting the replica groups (ncclCommSplit)");
  NCCLCHECK(ncclCommCount(replicas, &replicaCount));
  watch(replicas, "the replica group's communicator");
  if (replicaCount <= 1)
    return;
  // NCCL connects a communicator's buffers at its first operations. Without
  // this, the gradient all-reduce would connect at the end of iteration 0,
  // when the memory pool is at its peak, and a missing peer would show only
  // then. Both sizes, so that both protocols connect. (The world
  // communicator's first all-reduces, of a few values each, come before
  // this: the schedule hash check.)
  DeviceArray<float> buffer(*context, kWarmUpFloats[1], true);
  Watchdog::Scope scope(watchdog.get(),
                        "connecting the replica group (warm-up all-reduce)",
                        context->timeout());
  for (size_t n : kWarmUpFloats)
    NCCLCHECK(ncclAllReduce(buffer.get(), buffer.get(), n, ncclFloat32, ncclSum,
                            replicas, context->stream()));
  context->synchronize("the replica group's warm-up all-reduce");
}

void NcclComm::openChannels(const std::vector<Channel> &all) {
  const int mine = static_cast<int>(
      std::count_if(all.begin(), all.end(), [&](const Channel &c) {
        return c.from == me || c.to == me;
      }));
  if (std::string error = tooManyChannels(mine); !error.empty())
    abort("this rank " + error, 1);
  // Rounds of disjoint channels: one ncclCommSplit (collective over all
  // ranks) makes every channel of a round.
  std::vector<int> round(all.size(), -1);
  int rounds = 0;
  for (bool left = true; left; ++rounds) {
    left = false;
    std::vector<bool> busy(count, false);
    for (size_t i = 0; i < all.size(); ++i) {
      if (round[i] >= 0)
        continue;
      const Channel &c = all[i];
      if (c.from < 0 || c.to < 0 || c.from >= count || c.to >= count ||
          c.from == c.to)
        abort("channel " + std::to_string(c.from) + " -> " +
                  std::to_string(c.to) + " names no pair of ranks",
              1);
      if (busy[c.from] || busy[c.to]) {
        left = true;
        continue;
      }
      round[i] = rounds;
      busy[c.from] = busy[c.to] = true;
    }
  }
  for (int r = 0; r < rounds; ++r) {
    int colour = NCCL_SPLIT_NOCOLOR;
    size_t mine = all.size();
    for (size_t i = 0; i < all.size(); ++i)
      if (round[i] == r && (all[i].from == me || all[i].to == me)) {
        colour = static_cast<int>(i);
        mine = i;
      }
    ncclComm_t comm = split(colour, "opening NCCL channels (ncclCommSplit)");
    if (mine == all.size())
      continue;
    Link link;
    link.channel = all[mine];
    link.order = mine;
    link.peer = all[mine].from == me ? all[mine].to : all[mine].from;
    link.peerInComm = link.peer < me ? 0 : 1; // split ranks by world rank
    link.comm = comm;
    CUDACHECK(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
    links.push_back(link);
    watch(comm, "the channel with rank " + std::to_string(link.peer));
  }
  std::sort(links.begin(), links.end(),
            [](const Link &a, const Link &b) { return a.order < b.order; });
  if (const std::string warning =
          sharedQueueWarning(static_cast<int>(links.size()) + 1,
                             std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
      !warning.empty())
    std::fprintf(stderr, "flexpipe: rank %d: warning: %s\n", me,
                 warning.c_str());
  for (size_t i = 0; i < links.size(); ++i) {
    const Channel &c = links[i].channel;
    linkIndex[{c.from, c.to, c.tag}] = i;
  }
  // Warm-up: both directions of every channel, in the global order (the
  // first unfinished channel is first on both its ranks), so that NCCL
  // connects everything now and never waits for a peer inside a call later.
  DeviceArray<float> buffer(*context, 2 * kWarmUpFloats[1], true);
  context->synchronize("allocating the warm-up buffer");
  for (const Link &link : links)
    for (size_t n : kWarmUpFloats) {
      Watchdog::Scope scope(watchdog.get(),
                            "connecting an NCCL channel (warm-up)",
                            context->timeout());
      NCCLCHECK(ncclGroupStart());
      NCCLCHECK(ncclSend(buffer.get(), n, ncclFloat32, link.peerInComm,
                         link.comm, link.stream));
      NCCLCHECK(ncclRecv(buffer.get() + kWarmUpFloats[1], n, ncclFloat32,
                         link.peerInComm, link.comm, link.stream));
      NCCLCHECK(ncclGroupEnd());
      cudaEvent_t done = takeEvent();
      CUDACHECK(cudaEventRecord(done, link.stream));
      context->waitFor(done, "the warm-up exchange with rank " +
                                 std::to_string(link.peer));
      freeEvents.push_back(done);
    }
}

const NcclComm::Link &NcclComm::linkFor(bool send, int peer, int tag) {
  const int from = send ? me : peer, to = send ? peer : me;
  auto it = linkIndex.find({from, to, tag});
  if (it == linkIndex.end())
    it = linkIndex.find({std::min(from, to), std::max(from, to), tag});
  if (it == linkIndex.end() || (it->first != std::make_tuple(from, to, tag) &&
                                !links[it->second].channel.both))
    abort("no NCCL channel from rank " + std::to_string(from) + " to rank " +
              std::to_string(to) + " with tag " + std::to_string(tag) +
              "; the executor's channel list misses it",
          1);
  return links[it->second];
}

int64_t NcclComm::post(bool send, void *data, size_t bytes, int peer, int tag) {
  const Link &link = linkFor(send, peer, tag);
  // The channel's stream starts after what the compute stream has done so
  // far: the data is computed and the buffer allocated.
  cudaEvent_t ready = takeEvent();
  CUDACHECK(cudaEventRecord(ready, context->stream()));
  CUDACHECK(cudaStreamWaitEvent(link.stream, ready, 0));
  freeEvents.push_back(ready); // reusable: the wait is enqueued
  {
    Watchdog::Scope scope(watchdog.get(), "posting an NCCL transfer",
                          context->timeout());
    NCCLCHECK(ncclGroupStart());
    if (send)
      NCCLCHECK(ncclSend(data, bytes, ncclUint8, link.peerInComm, link.comm,
                         link.stream));
    else
      NCCLCHECK(ncclRecv(data, bytes, ncclUint8, link.peerInComm, link.comm,
                         link.stream));
    NCCLCHECK(ncclGroupEnd());
  }
  const Transfer transfer{takeEvent(), peer, send};
  handles.push_back(transfer);
  if (grouping) {
    // NCCL enqueues the group's operations at its ncclGroupEnd: their
    // completion events are recorded then.
    grouped.push_back({handles.size() - 1, link.stream});
    return static_cast<int64_t>(handles.size()) - 1;
  }
  CUDACHECK(cudaEventRecord(transfer.done, link.stream));
  inFlight.push_back(transfer);
  return static_cast<int64_t>(handles.size()) - 1;
}

void NcclComm::groupStart() {
  if (grouping)
    abort("a transfer group started inside another; groups do not nest", 1);
  grouping = true;
  NCCLCHECK(ncclGroupStart());
}

void NcclComm::groupEnd() {
  if (!grouping)
    abort("a transfer group ended that was not started", 1);
  grouping = false;
  {
    Watchdog::Scope scope(watchdog.get(), "posting a group of NCCL transfers",
                          context->timeout());
    NCCLCHECK(ncclGroupEnd());
  }
  for (const auto &[handle, stream] : grouped) {
    CUDACHECK(cudaEventRecord(handles[handle].done, stream));
    inFlight.push_back(handles[handle]);
  }
  grouped.clear();
}

size_t NcclComm::completedTransfers() {
  for (Transfer &t : inFlight)
    if (!t.counted && CudaContext::completed(t.done)) {
      t.counted = true;
      ++transfersDone;
    }
  return transfersDone;
}

cudaEvent_t NcclComm::takeEvent() {
  if (freeEvents.empty())
    return context->makeEvent();
  cudaEvent_t event = freeEvents.back();
  freeEvents.pop_back();
  return event;
}

void NcclComm::recycleEvents() {
  // An event may be recorded again once complete: the streams that waited
  // for it took their dependency when cudaStreamWaitEvent was called.
  std::vector<Transfer> pending;
  for (const Transfer &t : inFlight) {
    if (!CudaContext::completed(t.done)) {
      pending.push_back(t);
      continue;
    }
    transfersDone += !t.counted;
    freeEvents.push_back(t.done);
  }
  inFlight = std::move(pending);
}

template <typename T>
void NcclComm::hostAllreduce(T *data, size_t n, ncclDataType_t type,
                             std::initializer_list<ncclRedOp_t> ops) {
  const size_t bytes = n * sizeof(T);
  if (scratch.size() < bytes) {
    // Only while nothing is in flight: the executor's host collectives come
    // after the end-of-iteration wait.
    context->synchronize("growing the collective buffers");
    scratch =
        DeviceArray<unsigned char>(*context, std::max<size_t>(bytes, 4096));
    pinned = PinnedArray<unsigned char>(scratch.size());
  }
  std::memcpy(pinned.get(), data, bytes);
  cudaStream_t stream = context->stream();
  CUDACHECK(cudaMemcpyAsync(scratch.get(), pinned.get(), bytes,
                            cudaMemcpyHostToDevice, stream));
  // One operation per element range: ops[i] reduces element i when there
  // are several (minMax), the whole array otherwise.
  T *values = reinterpret_cast<T *>(scratch.get());
  NCCLCHECK(ncclGroupStart());
  size_t i = 0;
  for (ncclRedOp_t op : ops) {
    const size_t first = ops.size() == 1 ? 0 : i,
                 length = ops.size() == 1 ? n : 1;
    NCCLCHECK(ncclAllReduce(values + first, values + first, length, type, op,
                            world, stream));
    ++i;
  }
  NCCLCHECK(ncclGroupEnd());
  CUDACHECK(cudaMemcpyAsync(pinned.get(), scratch.get(), bytes,
                            cudaMemcpyDeviceToHost, stream));
  context->synchronize("a collective over all ranks");
  std::memcpy(data, pinned.get(), bytes);
}

void NcclComm::exchangeIdentities() {
  self = thisProcess();
  const uint64_t mine[3] = {self.host, self.pid, self.start};
  DeviceArray<uint64_t> all(*context, 3 * count, true);
  PinnedArray<uint64_t> host(3 * count);
  std::memcpy(host.get() + 3 * me, mine, sizeof(mine));
  cudaStream_t stream = context->stream();
  CUDACHECK(cudaMemcpyAsync(all.get() + 3 * me, host.get() + 3 * me,
                            sizeof(mine), cudaMemcpyHostToDevice, stream));
  NCCLCHECK(ncclAllGather(all.get() + 3 * me, all.get(), 3, ncclUint64, world,
                          stream));
  CUDACHECK(cudaMemcpyAsync(host.get(), all.get(), all.bytes(),
                            cudaMemcpyDeviceToHost, stream));
  context->synchronize("exchanging process ids");
  std::vector<ProcessId> found(count);
  for (int r = 0; r < count; ++r)
    found[r] = {host.get()[3 * r], host.get()[3 * r + 1],
                host.get()[3 * r + 2]};
  std::lock_guard<std::mutex> lock(watchedMutex);
  peers = std::move(found);
}

std::string NcclComm::check() {
  std::lock_guard<std::mutex> lock(watchedMutex);
  for (auto &[comm, what] : watched) {
    ncclResult_t result = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &result) == ncclSuccess &&
        result != ncclSuccess && result != ncclInProgress)
      return "NCCL reported an error on " + what + ": " +
             ncclGetErrorString(result) + "; a peer rank may have died";
  }
  for (size_t r = 0; r < peers.size(); ++r)
    if (static_cast<int>(r) != me && peers[r].host == self.host &&
        !processRunning(peers[r]))
      return "rank " + std::to_string(r) + " (pid " +
             std::to_string(peers[r].pid) + " on this machine) has exited";
  return {};
}

std::string NcclComm::describePending() {
  std::string sends, receives;
  for (const Transfer &t : inFlight) {
    if (cudaEventQuery(t.done) != cudaErrorNotReady)
      continue;
    std::string &list = t.send ? sends : receives;
    const std::string rank = std::to_string(t.peer);
    if (list.find(" " + rank + ",") == std::string::npos)
      list += " " + rank + ",";
  }
  auto ranks = [](std::string list) {
    list.pop_back();
    return list;
  };
  std::string text;
  if (!receives.empty())
    text += "receives from rank(s)" + ranks(receives) + " have not completed";
  if (!sends.empty())
    text += std::string(text.empty() ? "" : "; ") + "sends to rank(s)" +
            ranks(sends) + " have not completed";
  return text.empty() ? "no transfer is pending (a collective may be)"
                      : text + "; is that rank alive?";
}

void NcclComm::stopFromWatchdog(const std::string &failure) {
  // On the watchdog thread, while the main thread may be inside NCCL: no
  // NCCL call here; the process exit releases the GPU and closes the
  // sockets, which the peers' NCCL notices.
  std::fflush(stdout);
  std::fprintf(stderr, "flexpipe: rank %d: %s; stopping\n", me,
               failure.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void NcclComm::finalize() {
  // Once every rank is here, ranks may exit at will: stop watching them.
  double one = 1;
  allreduceSum(&one, 1);
  watchdog->quiet();
  {
    std::lock_guard<std::mutex> lock(watchedMutex);
    watched.clear();
  }
  {
    Watchdog::Scope scope(watchdog.get(), "destroying NCCL communicators",
                          context->timeout());
    for (Link &link : links) {
      NCCLCHECK(ncclCommDestroy(link.comm));
      CUDACHECK(cudaStreamDestroy(link.stream));
    }
    links.clear();
    linkIndex.clear();
    if (replicas)
      NCCLCHECK(ncclCommDestroy(replicas));
    NCCLCHECK(ncclCommDestroy(world));
    replicas = world = nullptr;
  }
  recycleEvents();
  for (cudaEvent_t event : freeEvents)
    CUDACHECK(cudaEventDestroy(event));
  freeEvents.clear();
  scratch.reset();
  context->setDescribePending({});
  context->setProgress({});
  watchdog.reset();
  setFatalHandler({});
#if FLEXPIPE_ENABLE_MPI
  if (mpi)
    MPICHECK(MPI_Finalize());
#endif
}

//===----------------------------------------------------------------------===//
// Start-up
//===----------------------------------------------------------------------===//

#if FLEXPIPE_ENABLE_MPI
constexpr bool kWithMpi = true;
#else
constexpr bool kWithMpi = false;
#endif

/// Whether other ranks use this rank's GPU, `device` of the `devices` it
/// sees, and so the NCCL_HOSTID to set: under MPI every rank tells the
/// others its machine and its GPU's PCI bus id (sharedGpu), otherwise the
/// machine's rank count against `devices` decides (sharedGpuByCount).
SharedGpu planSharedGpu(const LaunchEnv &env, int device, int devices) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const char *current = std::getenv("NCCL_HOSTID");
#if FLEXPIPE_ENABLE_MPI
  if (env.mpi) {
    // Fixed-size records from every rank, whatever NCCL_HOSTID says: a
    // collective needs them all.
    struct Record {
      char host[256];
      char busId[64];
    };
    Record mine = {};
    std::memcpy(mine.host, host, sizeof(host));
    CUDACHECK(
        cudaDeviceGetPCIBusId(mine.busId, sizeof(mine.busId) - 1, device));
    std::vector<Record> records(env.world);
    MPICHECK(MPI_Allgather(&mine, sizeof(Record), MPI_BYTE, records.data(),
                           sizeof(Record), MPI_BYTE, MPI_COMM_WORLD));
    std::vector<GpuUse> all;
    for (const Record &r : records)
      all.push_back({std::string(r.host, strnlen(r.host, sizeof(r.host))),
                     std::string(r.busId, strnlen(r.busId, sizeof(r.busId)))});
    return sharedGpu(all, env.rank, current);
  }
#endif
  (void)device;
  return sharedGpuByCount(env, devices, host, current);
}

} // namespace

std::unique_ptr<Comm>
flexpipe::rt::cuda::startNccl(int *argc, char ***argv,
                              std::shared_ptr<CudaContext> &context) {
  LaunchEnv env;
  if (std::string error = readLaunchEnv(
          [](const char *name) { return std::getenv(name); }, kWithMpi, env);
      !error.empty())
    fatal(error);
  // Kernels load when the context is made, not at their first launch: a
  // lazy load may wait for the whole device, and so for an NCCL kernel that
  // waits for a peer (CUDA's lazy-loading caveats). A user's choice stays.
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  // A hardware queue per stream (compute, one per channel) where CUDA's
  // default of 8 would make streams share them; a user's number stays. A
  // value that is none (empty, 0: `export CUDA_DEVICE_MAX_CONNECTIONS=$X`
  // with X unset) left CUDA's 8, and 16 streams hung.
  if (const char *queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      !isQueueCount(queues)) {
    if (queues)
      std::fprintf(stderr,
                   "flexpipe: CUDA_DEVICE_MAX_CONNECTIONS='%s' is no positive "
                   "number of hardware queues; using %d\n",
                   queues, kDeviceConnections);
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS",
             std::to_string(kDeviceConnections).c_str(), 1);
  }

#if FLEXPIPE_ENABLE_MPI
  if (env.mpi) {
    MPICHECK(MPI_Init(argc, argv));
    MPICHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &env.rank));
    MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &env.world));
    MPI_Comm local;
    MPICHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, env.rank,
                                 MPI_INFO_NULL, &local));
    MPICHECK(MPI_Comm_rank(local, &env.localRank));
    MPICHECK(MPI_Comm_size(local, &env.localWorld));
    MPICHECK(MPI_Comm_free(&local));
    setFatalHandler([rank = env.rank](const std::string &message) {
      std::fflush(stdout);
      std::fprintf(stderr, "flexpipe: rank %d: %s\n", rank, message.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    });
  }
#endif
  setFatalRank(env.rank);

  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0)
    fatal(std::string("no usable CUDA device: ") +
          (status != cudaSuccess
               ? std::string("cudaGetDeviceCount failed: ") +
                     cudaGetErrorName(status) + ": " +
                     cudaGetErrorString(status)
               : std::string("cudaGetDeviceCount found none")) +
          ". The CUDA backend needs an NVIDIA GPU and its driver; on "
          "machines without one, compile with --backend=cpu");
  const int device = env.localRank % devices;
  context = std::make_shared<CudaContext>(device, env.timeout, env.math);
  if (env.math != MathMode::Fp32 && env.rank == 0)
    std::fprintf(stderr, "flexpipe: %s (FLEXPIPE_CUDA_MATH=%s)\n",
                 env.math == MathMode::Tf32
                     ? "matrix products on TF32 tensor cores"
                     : "mixed precision: bf16 activations and products, "
                       "fp32 master weights and Adam",
                 mathModeName(env.math));
  // Before NCCL reads the environment (its first call).
  const SharedGpu shared = planSharedGpu(env, device, devices);
  if (!shared.hostId.empty())
    ::setenv("NCCL_HOSTID", shared.hostId.c_str(), 1);
  if (!shared.message.empty())
    std::fprintf(stderr, "flexpipe: %s\n", shared.message.c_str());

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (env.rank == 0)
    NCCLCHECK(ncclGetUniqueId(&id));
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t *>(&id),
                             reinterpret_cast<uint8_t *>(&id) + sizeof(id));
#if FLEXPIPE_ENABLE_MPI
  if (env.mpi)
    MPICHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
#endif
  if (!env.mpi && env.world > 1) {
    const std::string error =
        env.rank == 0 ? publishId(env.idFile, env.runId, env.world, bytes)
                      : awaitId(env.idFile, env.runId, env.world, sizeof(id),
                                env.timeout, bytes);
    if (!error.empty())
      fatal(error);
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  auto comm =
      std::make_unique<NcclComm>(context, env.rank, env.world, env.mpi, id);
  // Every rank has read the file: the world communicator needs all ranks.
  if (!env.mpi && env.world > 1 && env.rank == 0)
    std::remove(env.idFile.c_str());
  return comm;
}
