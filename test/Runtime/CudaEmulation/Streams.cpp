//===- Streams.cpp - CUDA streams and events on host threads --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Each stream is a host thread that runs the stream's work in the order it
// was enqueued (kernels, products, copies, NCCL operations, event records
// and waits), while the host goes on: the host and the streams run side by
// side as they do with a GPU, so an ordering mistake between streams, or a
// transfer that waits for a peer forever, shows here as it would there.
//
// Streams share the GPU's hardware queues as CUDA maps them: there are
// CUDA_DEVICE_MAX_CONNECTIONS of them (hardwareQueues: 8 unless set to a
// positive integer, at most 32; read when the first stream is made), stream
// n goes to queue n mod that, and a queue
// starts its operations in the order they were enqueued: an operation
// starts once the one before it on its own stream has finished and, for an
// event wait, once the event's record has completed. Until it starts,
// everything behind it in the queue waits, of any stream (CUDA's false
// dependencies between streams that share a queue). Started operations run
// side by side.
//
// An event record is a token that its stream completes when it gets there;
// the event holds its latest token. cudaStreamWaitEvent waits for the token
// the event holds when it is called (CUDA's semantics: later records of the
// event do not change what an earlier wait waits for), and cudaEventQuery
// asks whether the latest token is complete.
//
//===----------------------------------------------------------------------===//

#include "Bootstrap.h"
#include "DeviceCode.h"
#include "Internal.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace flexpipe::rt::cuda::emulation;

namespace {

/// A record of an event: complete once its stream has reached it.
struct Token {
  bool done = false;
};

/// One operation of a stream.
struct Operation {
  cudaStream_t stream;
  std::function<void()> work;
  std::shared_ptr<Token> waitFor; ///< an event wait: no work, this token
  bool started = false;
};

/// A hardware queue: operations of its streams, in the order enqueued,
/// not started yet.
struct HardwareQueue {
  std::deque<std::shared_ptr<Operation>> waiting;
};

/// The scheduler's state, under one lock; made once and never destroyed
/// (streams' threads may outlive main).
struct Scheduler {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<HardwareQueue *> queues;
  std::set<cudaStream_t> streams; // every stream not destroyed
  size_t made = 0;                // streams made so far
};
Scheduler &scheduler() {
  static Scheduler *instance = new Scheduler;
  return *instance;
}

} // namespace

namespace {
void advance(HardwareQueue &queue);
} // namespace

struct CUstream_st {
  HardwareQueue *queue = nullptr;
  /// Its operations not finished, in order: the first may have started.
  std::deque<std::shared_ptr<Operation>> pending;
  bool stopping = false;
  std::thread worker;

  /// Runs the stream's operations as its queue starts them.
  void run() {
    Scheduler &state = scheduler();
    std::unique_lock<std::mutex> lock(state.mutex);
    while (true) {
      state.changed.wait(lock, [&] {
        return (stopping && pending.empty()) ||
               (!pending.empty() && pending.front()->started);
      });
      if (pending.empty())
        return;
      std::shared_ptr<Operation> op = pending.front();
      lock.unlock();
      if (op->work)
        op->work();
      lock.lock();
      pending.pop_front();
      advance(*queue);
      state.changed.notify_all();
    }
  }
};

namespace {

/// Starts the queue's operations in order while the first may start (the
/// caller holds the scheduler's lock and wakes the streams).
void advance(HardwareQueue &queue) {
  while (!queue.waiting.empty()) {
    Operation &op = *queue.waiting.front();
    if (op.stream->pending.front().get() != &op ||
        (op.waitFor && !op.waitFor->done))
      return;
    op.started = true;
    queue.waiting.pop_front();
  }
}

/// The queue of the next stream made.
HardwareQueue *nextQueue(Scheduler &state) {
  if (state.queues.empty()) {
    // The backend's reading (it warns by it): 0 or "abc" left CUDA's 8
    // there and made 1 queue here, and runs hung without its warning.
    const int count = flexpipe::rt::hardwareQueues(
        std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    for (int q = 0; q < count; ++q)
      state.queues.push_back(new HardwareQueue);
  }
  return state.queues[state.made++ % state.queues.size()];
}

/// Enqueues `op` on its stream and its stream's queue.
void submit(std::shared_ptr<Operation> op) {
  Scheduler &state = scheduler();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (op->stream->stopping)
    emulationError("work enqueued on a destroyed stream");
  HardwareQueue &queue = *op->stream->queue;
  op->stream->pending.push_back(op);
  queue.waiting.push_back(std::move(op));
  advance(queue);
  state.changed.notify_all();
}

void completeToken(Token &token) {
  Scheduler &state = scheduler();
  std::lock_guard<std::mutex> lock(state.mutex);
  token.done = true;
  for (HardwareQueue *queue : state.queues)
    advance(*queue); // an event wait may start now
  state.changed.notify_all();
}

bool tokenDone(const Token &token) {
  std::lock_guard<std::mutex> lock(scheduler().mutex);
  return token.done;
}

} // namespace

struct CUevent_st {
  std::mutex mutex;
  std::shared_ptr<Token> last; ///< the latest record; none yet: complete
};

void flexpipe::rt::cuda::emulation::enqueue(cudaStream_t stream,
                                            std::function<void()> work) {
  if (!stream) {
    work();
    return;
  }
  submit(std::make_shared<Operation>(
      Operation{stream, std::move(work), nullptr, false}));
}

void flexpipe::rt::cuda::emulation::drain(cudaStream_t stream) {
  if (!stream)
    return;
  Scheduler &state = scheduler();
  std::unique_lock<std::mutex> lock(state.mutex);
  state.changed.wait(lock, [&] { return stream->pending.empty(); });
}

void flexpipe::rt::cuda::emulation::drainAll() {
  Scheduler &state = scheduler();
  std::unique_lock<std::mutex> lock(state.mutex);
  state.changed.wait(lock, [&] {
    for (cudaStream_t stream : state.streams)
      if (!stream->pending.empty())
        return false;
    return true;
  });
}

void flexpipe::rt::cuda::emulation::launchOn(cudaStream_t stream,
                                             const void *kernel,
                                             unsigned blocks, unsigned threads,
                                             std::function<void()> body) {
  enqueue(stream, [=] { runGrid(kernel, blocks, threads, body); });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  Scheduler &state = scheduler();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    *stream = new CUstream_st;
    (*stream)->queue = nextQueue(state);
    state.streams.insert(*stream);
  }
  (*stream)->worker = std::thread([stream = *stream] { stream->run(); });
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  // CUDA lets the stream's work finish after the call returns; here the
  // call waits for it.
  Scheduler &state = scheduler();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.streams.erase(stream))
      emulationError("cudaStreamDestroy of a stream that does not exist");
    stream->stopping = true;
    state.changed.notify_all();
  }
  stream->worker.join();
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  // Waits already enqueued hold their tokens.
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto token = std::make_shared<Token>();
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->last = token;
  }
  enqueue(stream, [token] { completeToken(*token); });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::shared_ptr<Token> token;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    token = event->last;
  }
  return !token || tokenDone(*token) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  std::shared_ptr<Token> token;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    token = event->last;
  }
  if (!token)
    return cudaSuccess;
  if (!stream) {
    std::unique_lock<std::mutex> lock(scheduler().mutex);
    scheduler().changed.wait(lock, [&] { return token->done; });
    return cudaSuccess;
  }
  // The wait starts (and lets its queue go on) once the token is complete.
  submit(std::make_shared<Operation>(Operation{stream, {}, token, false}));
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t stream) {
  enqueue(stream, [=] {
    checkRange(pointer, bytes, "cudaMemsetAsync");
    std::memset(pointer, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  auto copy = [=](const void *from) {
    if (kind != cudaMemcpyDeviceToHost || isPinnedHost(dst))
      checkRange(dst, bytes, "cudaMemcpyAsync destination");
    if (kind != cudaMemcpyHostToDevice)
      checkRange(src, bytes, "cudaMemcpyAsync source");
    std::memcpy(dst, from, bytes);
  };
  switch (kind) {
  case cudaMemcpyHostToDevice:
    if (!isPinnedHost(src)) {
      // Pageable memory is staged at the call (CUDA's rule): the caller may
      // change or free it once the call returns.
      auto staged = std::make_shared<std::vector<char>>(
          static_cast<const char *>(src),
          static_cast<const char *>(src) + bytes);
      enqueue(stream, [=] { copy(staged->data()); });
      return cudaSuccess;
    }
    break;
  case cudaMemcpyDeviceToHost:
    if (!isPinnedHost(dst)) {
      // Into pageable memory the call returns once the copy is done.
      enqueue(stream, [=] { copy(src); });
      drain(stream);
      return cudaSuccess;
    }
    break;
  case cudaMemcpyDeviceToDevice:
    break;
  case cudaMemcpyHostToHost:
    return cudaErrorInvalidValue;
  }
  enqueue(stream, [=] { copy(src); });
  return cudaSuccess;
}
