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
// An event record is a token that its stream completes when it gets there;
// the event holds its latest token. cudaStreamWaitEvent waits for the token
// the event holds when it is called (CUDA's semantics: later records of the
// event do not change what an earlier wait waits for), and cudaEventQuery
// asks whether the latest token is complete.
//
//===----------------------------------------------------------------------===//

#include "DeviceCode.h"
#include "Internal.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace flexpipe::rt::cuda::emulation;

struct CUstream_st {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  bool busy = false, stopping = false;
  std::thread worker;

  CUstream_st() : worker([this] { run(); }) {}

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return; // stopping, and nothing left
      std::function<void()> work = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      work();
      lock.lock();
      busy = false;
      changed.notify_all();
    }
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return queue.empty() && !busy; });
  }
};

namespace {

std::mutex streamsMutex;
std::set<cudaStream_t> streams; // every stream not destroyed

/// A record of an event: complete once its stream has reached it.
struct Token {
  bool done = false;
};
std::mutex tokenMutex;
std::condition_variable tokenDone;

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
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->stopping)
    emulationError("work enqueued on a destroyed stream");
  stream->queue.push_back(std::move(work));
  stream->changed.notify_all();
}

void flexpipe::rt::cuda::emulation::drain(cudaStream_t stream) {
  if (stream)
    stream->drain();
}

void flexpipe::rt::cuda::emulation::drainAll() {
  std::vector<cudaStream_t> all;
  {
    std::lock_guard<std::mutex> lock(streamsMutex);
    all.assign(streams.begin(), streams.end());
  }
  for (cudaStream_t stream : all)
    stream->drain();
}

void flexpipe::rt::cuda::emulation::launchOn(cudaStream_t stream,
                                             const void *kernel,
                                             unsigned blocks, unsigned threads,
                                             std::function<void()> body) {
  enqueue(stream, [=] { runGrid(kernel, blocks, threads, body); });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st;
  std::lock_guard<std::mutex> lock(streamsMutex);
  streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  // CUDA lets the stream's work finish after the call returns; here the
  // call waits for it.
  {
    std::lock_guard<std::mutex> lock(streamsMutex);
    if (!streams.erase(stream))
      emulationError("cudaStreamDestroy of a stream that does not exist");
  }
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stopping = true;
    stream->changed.notify_all();
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
  enqueue(stream, [token] {
    std::lock_guard<std::mutex> lock(tokenMutex);
    token->done = true;
    tokenDone.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::shared_ptr<Token> token;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    token = event->last;
  }
  if (!token)
    return cudaSuccess;
  std::lock_guard<std::mutex> lock(tokenMutex);
  return token->done ? cudaSuccess : cudaErrorNotReady;
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
  enqueue(stream, [token] {
    std::unique_lock<std::mutex> lock(tokenMutex);
    tokenDone.wait(lock, [&] { return token->done; });
  });
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
