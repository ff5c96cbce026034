//===- Nccl.cpp - NCCL between processes on the CPU -----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// NCCL for the emulated CUDA backend, strict where NCCL's guarantees end:
//
// - Ranks are processes on one machine. The unique id names a fresh
//   directory; each rank listens on a Unix socket there and connects to
//   every other rank's. A reader thread per connection files what arrives
//   in a mailbox keyed by communicator, kind, sender and sequence number.
// - Point-to-point operations match by issue order per communicator and
//   peer, as NCCL's do. A send is a rendezvous: it runs when its stream
//   gets there, waits until the peer's matching receive runs, and only then
//   moves the data and completes. NCCL may finish small sends earlier; a
//   schedule that works here does not rely on that.
// - A group (ncclGroupStart/End) runs as one operation that progresses all
//   its transfers together; when its operations are on several streams,
//   each of them waits for the group, as NCCL joins them. Outside a group,
//   each operation is a group of its own.
// - Collectives gather at the communicator's rank 0, which reduces in rank
//   order and sends the result back.
// - ncclCommGetAsyncError reports a peer whose connection closed before
//   that peer destroyed its communicators, while an operation of the
//   communicator runs; ncclCommAbort ends the waits of its operations.
//
//===----------------------------------------------------------------------===//

#include "nccl.h"

#include "Internal.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace flexpipe::rt::cuda::emulation;

struct ncclComm {
  uint64_t id = 0;
  int rank = 0;
  std::vector<int> members; ///< the world rank of each rank
  /// Operations posted so far, per peer: their sequence numbers.
  std::vector<uint64_t> sent, received;
  uint64_t collectives = 0, splits = 0;
  std::atomic<bool> aborted{false};
  std::atomic<int> running{0}; ///< groups of its operations running now
  bool destroyed = false;
  int size() const { return static_cast<int>(members.size()); }
};

namespace {

thread_local std::string lastError;

ncclResult_t failure(ncclResult_t result, const std::string &message) {
  lastError = message;
  return result;
}

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Transport: sockets between the processes and the mailbox
//===----------------------------------------------------------------------===//

enum Kind : uint32_t {
  kReady = 1,        ///< a receive runs: the sender may send
  kData = 2,         ///< a send's data
  kContribution = 3, ///< a rank's part of a collective, to rank 0
  kResult = 4,       ///< a collective's result, from rank 0
};

struct Header {
  uint64_t comm;
  uint32_t kind;
  int32_t from; ///< world rank
  uint64_t seq;
  uint64_t bytes;
};

using Key = std::tuple<uint64_t, uint32_t, int, uint64_t>;

/// Writes or reads all of `bytes` through `fd`; false when it closed.
bool transferAll(int fd, const void *data, size_t bytes, bool write) {
  char *p = static_cast<char *>(const_cast<void *>(data));
  while (bytes > 0) {
    const ssize_t n =
        write ? ::send(fd, p, bytes, MSG_NOSIGNAL) : ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}
bool writeAll(int fd, const void *data, size_t bytes) {
  return transferAll(fd, data, bytes, true);
}
bool readAll(int fd, void *data, size_t bytes) {
  return transferAll(fd, data, bytes, false);
}

/// This process's connections to the other ranks of the world. Made once
/// and never destroyed: reader threads may outlive main.
class Transport {
public:
  Transport(std::string directory, int rank, int ranks)
      : directory(std::move(directory)), me(rank), outgoing(ranks, -1),
        sendLocks(ranks), gone(ranks, false) {}

  ncclResult_t start();
  /// Sends a frame to world rank `to`.
  void post(int to, const Header &header, const void *payload);
  /// Waits for the frame `key` and moves its payload into `payload`;
  /// false when `comm` is aborted first.
  bool take(const Key &key, std::vector<char> &payload, const ncclComm &comm);
  /// Whether the frame `key` has arrived (then takes it).
  bool tryTake(const Key &key, std::vector<char> &payload);
  /// Waits until a frame arrives or `comm` is aborted.
  void waitForArrival(const ncclComm &comm, uint64_t seen);
  uint64_t arrivals() {
    std::lock_guard<std::mutex> lock(mutex);
    return arrived;
  }
  void wakeAll() {
    std::lock_guard<std::mutex> lock(mutex);
    ++arrived;
    changed.notify_all();
  }
  /// Whether a member of `comm` closed its connection unexpectedly.
  bool peerGone(const ncclComm &comm) {
    std::lock_guard<std::mutex> lock(mutex);
    for (int r : comm.members)
      if (r != me && gone[r])
        return true;
    return false;
  }
  void shutDown();
  int rank() const { return me; }
  int ranks() const { return static_cast<int>(outgoing.size()); }

private:
  std::string socketPath(int rank) const {
    return directory + "/rank" + std::to_string(rank);
  }
  void accept();
  void read(int fd);

  std::string directory;
  int me;
  int listener = -1;
  std::vector<int> outgoing;
  std::vector<std::mutex> sendLocks;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<Key, std::vector<char>> mailbox;
  uint64_t arrived = 0;
  std::vector<bool> gone;
  bool closing = false;
};

Transport *transport = nullptr;

ncclResult_t Transport::start() {
  listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string own = socketPath(me);
  if (listener < 0 || own.size() >= sizeof(address.sun_path))
    return failure(ncclSystemError, "cannot make a socket at " + own);
  std::strcpy(address.sun_path, own.c_str());
  if (::bind(listener, reinterpret_cast<sockaddr *>(&address),
             sizeof(address)) != 0 ||
      ::listen(listener, ranks()) != 0)
    return failure(ncclSystemError,
                   "cannot listen at " + own + ": " + std::strerror(errno));
  std::thread([this] { accept(); }).detach();
  // Connect to every other rank, waiting for it to listen (NCCL's
  // initialisation also waits for every rank).
  for (int r = 0; r < ranks(); ++r) {
    if (r == me)
      continue;
    sockaddr_un peer{};
    peer.sun_family = AF_UNIX;
    std::strcpy(peer.sun_path, socketPath(r).c_str());
    while (true) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0)
        return failure(ncclSystemError, "socket() failed");
      if (::connect(fd, reinterpret_cast<sockaddr *>(&peer), sizeof(peer)) ==
          0) {
        const int32_t hello = me;
        if (!writeAll(fd, &hello, sizeof(hello)))
          return failure(ncclSystemError,
                         "cannot greet rank " + std::to_string(r));
        outgoing[r] = fd;
        break;
      }
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return ncclSuccess;
}

void Transport::accept() {
  for (int accepted = 0; accepted < ranks() - 1; ++accepted) {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0)
      return;
    std::thread([this, fd] { read(fd); }).detach();
  }
  ::close(listener);
  ::unlink(socketPath(me).c_str());
}

void Transport::read(int fd) {
  int32_t from = -1;
  if (!readAll(fd, &from, sizeof(from)) || from < 0 || from >= ranks())
    emulationError("NCCL: a connection without a rank");
  while (true) {
    Header header;
    std::vector<char> payload;
    bool ok = readAll(fd, &header, sizeof(header));
    if (ok) {
      payload.resize(header.bytes);
      ok = readAll(fd, payload.data(), payload.size());
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (!ok) {
      gone[from] = !closing; // a peer that ends its run closes too
      changed.notify_all();
      ::close(fd);
      return;
    }
    mailbox[{header.comm, header.kind, header.from, header.seq}] =
        std::move(payload);
    ++arrived;
    changed.notify_all();
  }
}

void Transport::post(int to, const Header &header, const void *payload) {
  std::lock_guard<std::mutex> lock(sendLocks[to]);
  if (!writeAll(outgoing[to], &header, sizeof(header)) ||
      !writeAll(outgoing[to], payload, header.bytes)) {
    std::lock_guard<std::mutex> state(mutex);
    gone[to] = !closing;
    changed.notify_all();
  }
}

bool Transport::tryTake(const Key &key, std::vector<char> &payload) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = mailbox.find(key);
  if (it == mailbox.end())
    return false;
  payload = std::move(it->second);
  mailbox.erase(it);
  return true;
}

bool Transport::take(const Key &key, std::vector<char> &payload,
                     const ncclComm &comm) {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    auto it = mailbox.find(key);
    if (it != mailbox.end()) {
      payload = std::move(it->second);
      mailbox.erase(it);
      return true;
    }
    if (comm.aborted)
      return false;
    changed.wait(lock);
  }
}

void Transport::waitForArrival(const ncclComm &comm, uint64_t seen) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return arrived != seen || comm.aborted; });
}

void Transport::shutDown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    closing = true;
  }
  ::unlink(socketPath(me).c_str());
  ::rmdir(directory.c_str()); // the last rank to leave removes it
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

struct Operation {
  enum Type { Send, Recv, AllReduce, AllGather } type = Send;
  ncclComm *comm = nullptr;
  cudaStream_t stream = nullptr;
  const void *input = nullptr;
  void *output = nullptr;
  size_t count = 0;
  ncclDataType_t dataType = ncclUint8;
  ncclRedOp_t op = ncclSum;
  int peer = 0;      ///< the peer's rank in comm (Send, Recv)
  uint64_t seq = 0;  ///< per peer and direction, or per communicator
  bool host = false; ///< buffers in host memory (ncclCommSplit's gather)
  size_t bytes() const { return count * typeBytes(dataType); }
};

Operation operation(Operation::Type type, ncclComm *comm, cudaStream_t stream,
                    const void *input, void *output, size_t count,
                    ncclDataType_t dataType) {
  Operation op;
  op.type = type;
  op.comm = comm;
  op.stream = stream;
  op.input = input;
  op.output = output;
  op.count = count;
  op.dataType = dataType;
  return op;
}

Header headerFor(const Operation &op, Kind kind, size_t bytes) {
  return {op.comm->id, kind, transport->rank(), op.seq, bytes};
}

template <typename T> T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
  case ncclSum:
    return a + b;
  case ncclProd:
    return a * b;
  case ncclMax:
    return std::max(a, b);
  case ncclMin:
    return std::min(a, b);
  }
  return a;
}

template <typename T>
void reduceInto(char *into, const char *from, size_t count, ncclRedOp_t op) {
  for (size_t i = 0; i < count; ++i) {
    T a, b;
    std::memcpy(&a, into + i * sizeof(T), sizeof(T));
    std::memcpy(&b, from + i * sizeof(T), sizeof(T));
    a = combine(a, b, op);
    std::memcpy(into + i * sizeof(T), &a, sizeof(T));
  }
}

void reduce(char *into, const char *from, const Operation &op) {
  switch (op.dataType) {
  case ncclFloat32:
    return reduceInto<float>(into, from, op.count, op.op);
  case ncclFloat64:
    return reduceInto<double>(into, from, op.count, op.op);
  case ncclInt32:
    return reduceInto<int32_t>(into, from, op.count, op.op);
  case ncclUint32:
    return reduceInto<uint32_t>(into, from, op.count, op.op);
  case ncclInt64:
    return reduceInto<int64_t>(into, from, op.count, op.op);
  case ncclUint64:
    return reduceInto<uint64_t>(into, from, op.count, op.op);
  default:
    emulationError("NCCL: a reduction of a type the emulation does not add");
  }
}

/// A collective: contributions to rank 0, the result back.
void runCollective(const Operation &op) {
  ncclComm &comm = *op.comm;
  const size_t in = op.bytes();
  const size_t out = op.type == Operation::AllGather ? in * comm.size() : in;
  if (!op.host)
    checkRange(op.input, in, "NCCL collective input");
  std::vector<char> result;
  if (comm.rank != 0) {
    transport->post(comm.members[0], headerFor(op, kContribution, in),
                    op.input);
    if (!transport->take({comm.id, kResult, comm.members[0], op.seq}, result,
                         comm))
      return; // aborted
  } else {
    result.assign(static_cast<const char *>(op.input),
                  static_cast<const char *>(op.input) + in);
    result.resize(out);
    std::vector<char> part;
    for (int r = 1; r < comm.size(); ++r) {
      if (!transport->take({comm.id, kContribution, comm.members[r], op.seq},
                           part, comm))
        return;
      if (part.size() != in)
        emulationError("NCCL: ranks disagree on a collective's size");
      if (op.type == Operation::AllGather)
        std::memcpy(result.data() + r * in, part.data(), in);
      else
        reduce(result.data(), part.data(), op);
    }
    for (int r = 1; r < comm.size(); ++r)
      transport->post(comm.members[r], headerFor(op, kResult, out),
                      result.data());
  }
  if (result.size() != out)
    emulationError("NCCL: a collective's result has the wrong size");
  if (!op.host)
    checkRange(op.output, out, "NCCL collective output");
  std::memcpy(op.output, result.data(), out);
}

/// Runs a group: every receive says it is ready, then sends go as their
/// receives become ready and receives complete as their data arrives, all
/// together; then the collectives, in order.
void runGroup(const std::vector<Operation> &ops) {
  for (const Operation &op : ops)
    ++op.comm->running;
  std::vector<const Operation *> pending;
  for (const Operation &op : ops)
    if (op.type == Operation::Recv) {
      transport->post(op.comm->members[op.peer], headerFor(op, kReady, 0),
                      nullptr);
      pending.push_back(&op);
    } else if (op.type == Operation::Send) {
      pending.push_back(&op);
    }
  std::vector<char> payload;
  while (!pending.empty()) {
    const uint64_t seen = transport->arrivals();
    for (auto it = pending.begin(); it != pending.end();) {
      const Operation &op = **it;
      const int peer = op.comm->members[op.peer];
      const bool send = op.type == Operation::Send;
      if (op.comm->aborted) {
        it = pending.erase(it);
        continue;
      }
      if (!transport->tryTake(
              {op.comm->id, send ? kReady : kData, peer, op.seq}, payload)) {
        ++it;
        continue;
      }
      if (send) {
        checkRange(op.input, op.bytes(), "ncclSend data");
        transport->post(peer, headerFor(op, kData, op.bytes()), op.input);
      } else {
        if (payload.size() != op.bytes())
          emulationError("NCCL: a send of " + std::to_string(payload.size()) +
                         " bytes met a receive of " +
                         std::to_string(op.bytes()));
        checkRange(op.output, op.bytes(), "ncclRecv buffer");
        std::memcpy(op.output, payload.data(), payload.size());
      }
      it = pending.erase(it);
    }
    if (!pending.empty())
      transport->waitForArrival(*pending.front()->comm, seen);
  }
  for (const Operation &op : ops)
    if (op.type == Operation::AllReduce || op.type == Operation::AllGather)
      runCollective(op);
  for (const Operation &op : ops)
    --op.comm->running;
}

/// Enqueues a group on its streams: one stream runs it; the others wait
/// until it has run.
void launch(std::vector<Operation> ops) {
  std::vector<cudaStream_t> streams;
  for (const Operation &op : ops)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end())
      streams.push_back(op.stream);
  if (streams.size() == 1) {
    enqueue(streams[0], [ops = std::move(ops)] { runGroup(ops); });
    return;
  }
  struct Join {
    std::mutex mutex;
    std::condition_variable changed;
    size_t arrived = 0;
    bool done = false;
  };
  auto join = std::make_shared<Join>();
  auto shared = std::make_shared<std::vector<Operation>>(std::move(ops));
  const size_t needed = streams.size();
  for (cudaStream_t stream : streams)
    enqueue(stream, [join, shared, needed] {
      std::unique_lock<std::mutex> lock(join->mutex);
      if (++join->arrived == needed) {
        lock.unlock();
        runGroup(*shared);
        lock.lock();
        join->done = true;
        join->changed.notify_all();
        return;
      }
      join->changed.wait(lock, [&] { return join->done; });
    });
}

thread_local int groupDepth = 0;
thread_local std::vector<Operation> grouped;

ncclResult_t submit(Operation op) {
  if (!op.comm || op.comm->destroyed)
    return failure(ncclInvalidArgument, "an operation on no communicator");
  if (op.type == Operation::Send || op.type == Operation::Recv) {
    if (op.peer < 0 || op.peer >= op.comm->size() || op.peer == op.comm->rank)
      return failure(ncclInvalidArgument, "peer " + std::to_string(op.peer) +
                                              " in a communicator "
                                              "of " +
                                              std::to_string(op.comm->size()));
    op.seq = (op.type == Operation::Send ? op.comm->sent
                                         : op.comm->received)[op.peer]++;
  } else {
    op.seq = op.comm->collectives++;
  }
  if (typeBytes(op.dataType) == 0)
    return failure(ncclInvalidArgument, "an unknown data type");
  if (groupDepth > 0)
    grouped.push_back(op);
  else
    launch({op});
  return ncclSuccess;
}

ncclComm *makeComm(uint64_t id, int rank, std::vector<int> members) {
  auto *comm = new ncclComm;
  comm->id = id;
  comm->rank = rank;
  comm->sent.assign(members.size(), 0);
  comm->received.assign(members.size(), 0);
  comm->members = std::move(members);
  return comm;
}

uint64_t mix(uint64_t a, uint64_t b) {
  a ^= b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2);
  return a * 0xff51afd7ed558ccdull;
}

} // namespace

//===----------------------------------------------------------------------===//
// The API
//===----------------------------------------------------------------------===//

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t) { return lastError.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/flexpipe-nccl-XXXXXX";
  if (pattern.size() + 16 >= sizeof(id->internal))
    return failure(ncclSystemError, "TMPDIR is too long for a socket path");
  if (!::mkdtemp(pattern.data()))
    return failure(ncclSystemError, "cannot make a directory for the sockets");
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, pattern.c_str(), pattern.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int ranks,
                                    ncclUniqueId id, int rank, ncclConfig_t *) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return failure(ncclInvalidArgument, "rank " + std::to_string(rank) +
                                            " of " + std::to_string(ranks));
  if (transport)
    return failure(ncclInvalidUsage,
                   "the emulation makes one world communicator per process");
  const std::string directory(id.internal,
                              strnlen(id.internal, sizeof(id.internal)));
  if (directory.empty())
    return failure(ncclInvalidArgument, "an empty unique id");
  transport = new Transport(directory, rank, ranks);
  if (ncclResult_t result = transport->start(); result != ncclSuccess)
    return result;
  std::vector<int> members(ranks);
  for (int r = 0; r < ranks; ++r)
    members[r] = r;
  uint64_t hash = 0;
  for (char c : directory)
    hash = mix(hash, static_cast<unsigned char>(c));
  *comm = makeComm(hash, rank, std::move(members));
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int colour, int key,
                           ncclComm_t *newComm, ncclConfig_t *) {
  if (!comm || comm->destroyed)
    return failure(ncclInvalidArgument, "a split of no communicator");
  if (groupDepth > 0)
    return failure(ncclInvalidUsage, "ncclCommSplit inside a group");
  // Every rank's colour and key, gathered on the calling thread (a split
  // blocks the host until every rank of `comm` has called it).
  const int32_t mine[2] = {colour, key};
  std::vector<int32_t> all(2 * comm->size());
  Operation gather = operation(Operation::AllGather, comm, nullptr, mine,
                               all.data(), 2, ncclInt32);
  gather.host = true;
  gather.seq = comm->collectives++;
  runCollective(gather);
  const uint64_t split = comm->splits++;
  *newComm = nullptr;
  if (colour == NCCL_SPLIT_NOCOLOR)
    return ncclSuccess;
  std::vector<std::pair<int32_t, int>> chosen; // (key, rank in comm)
  for (int r = 0; r < comm->size(); ++r)
    if (all[2 * r] == colour)
      chosen.push_back({all[2 * r + 1], r});
  std::sort(chosen.begin(), chosen.end());
  std::vector<int> members;
  int rank = -1;
  for (const auto &[k, r] : chosen) {
    if (r == comm->rank)
      rank = static_cast<int>(members.size());
    members.push_back(comm->members[r]);
  }
  *newComm = makeComm(mix(mix(comm->id, split), static_cast<uint64_t>(colour)),
                      rank, std::move(members));
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm)
    return failure(ncclInvalidArgument, "no communicator");
  *count = comm->size();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm || comm->destroyed)
    return failure(ncclInvalidArgument, "a destroyed communicator");
  // Operations still on streams may hold it: it is marked, not freed.
  comm->destroyed = true;
  if (comm->size() == transport->ranks())
    transport->shutDown(); // the world: peers may leave now
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  comm->aborted = true;
  transport->wakeAll();
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *result) {
  if (!comm)
    return failure(ncclInvalidArgument, "no communicator");
  // As NCCL's proxy, it notices a closed connection while it uses it.
  *result = comm->running > 0 && transport->peerGone(*comm) ? ncclRemoteError
                                                            : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return failure(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth == 0 && !grouped.empty()) {
    std::vector<Operation> ops;
    ops.swap(grouped);
    launch(std::move(ops));
  }
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *data, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  Operation op =
      operation(Operation::Send, comm, stream, data, nullptr, count, type);
  op.peer = peer;
  return submit(op);
}

ncclResult_t ncclRecv(void *data, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  Operation op =
      operation(Operation::Recv, comm, stream, nullptr, data, count, type);
  op.peer = peer;
  return submit(op);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  Operation o =
      operation(Operation::AllReduce, comm, stream, send, recv, count, type);
  o.op = op;
  return submit(o);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(
      operation(Operation::AllGather, comm, stream, send, recv, count, type));
}
