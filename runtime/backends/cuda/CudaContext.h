//===- CudaContext.h - One rank's GPU: checks, stream, memory ---*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What every part of the CUDA backend shares: check macros that name the
// call, file and line of every failed CUDA, cuBLAS and NCCL call (as
// nccl-tests' CUDACHECK/NCCLCHECK), the compute stream with its cuBLAS
// handle, device arrays from the stream-ordered allocator, and host waits
// that poll so that they can time out instead of hanging.
//
// Timeouts measure progress (Timeout.h's ProgressDeadline): a host wait may
// cover a whole iteration, so it gives up only when, for FLEXPIPE_TIMEOUT
// seconds, neither a marker on the compute stream (markProgress, after each
// stage computation) nor a transfer (setProgress: NcclComm's count of
// completed transfers) has completed.
//
// Measured memory: the pool keeps what it reserves (release threshold at its
// maximum), so its high-water mark of reserved bytes is what the rank holds
// on the GPU for its arrays; noteAllocation samples cudaMemGetInfo whenever
// the pool grows, i.e. at its peak.
//
// Memory discipline: arrays are allocated and freed on the compute stream
// (cudaMallocAsync / cudaFreeAsync). Another stream may use one only after
// waiting for an event recorded on the compute stream after the allocation,
// and the compute stream waits for that use before the array is freed
// (NcclComm does both), so no array is reused while a transfer touches it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H
#define FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H

#include "Bootstrap.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::rt::cuda {

/// Stops the rank: prints "flexpipe: rank R: MESSAGE" and runs the fatal
/// handler (NcclComm's abort once communication is up; exit(1) before).
[[noreturn]] void fatal(const std::string &message);
/// `handler` must not return. An empty one restores the default.
void setFatalHandler(std::function<void(const std::string &)> handler);
/// The rank fatal() names (-1: not known yet).
void setFatalRank(int rank);

[[noreturn]] void failedCall(const char *call, const char *file, int line,
                             const std::string &why);

} // namespace flexpipe::rt::cuda

/// Every CUDA runtime call is checked; a failure names call, file and line.
#define CUDACHECK(call)                                                        \
  do {                                                                         \
    cudaError_t status_ = (call);                                              \
    if (status_ != cudaSuccess)                                                \
      ::flexpipe::rt::cuda::failedCall(                                        \
          #call, __FILE__, __LINE__,                                           \
          std::string(cudaGetErrorName(status_)) + ": " +                      \
              cudaGetErrorString(status_));                                    \
  } while (0)

#define CUBLASCHECK(call)                                                      \
  do {                                                                         \
    cublasStatus_t status_ = (call);                                           \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::flexpipe::rt::cuda::failedCall(                                        \
          #call, __FILE__, __LINE__,                                           \
          std::string(cublasGetStatusName(status_)) + ": " +                   \
              cublasGetStatusString(status_));                                 \
  } while (0)

/// After a kernel launch: a bad configuration or a missing kernel image.
#define CUDALAUNCHCHECK(kernel)                                                \
  ::flexpipe::rt::cuda::checkLaunch(kernel, __FILE__, __LINE__)

namespace flexpipe::rt::cuda {

void checkLaunch(const char *kernel, const char *file, int line);

/// The GPU of this rank: the compute stream every computation, copy and
/// collective of the executor runs on, and the cuBLAS handle bound to it.
class CudaContext {
public:
  /// Selects `device`, creates the stream and the cuBLAS handle (its
  /// products computed as `math` says). Host waits give up after `timeout`
  /// seconds without progress.
  CudaContext(int device, double timeout, MathMode math = MathMode::Fp32);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  cudaStream_t stream() const { return computeStream; }
  cublasHandle_t blas() const { return handle; }
  /// The cuBLASLt handle (products with epilogues) and the workspace it
  /// shares with the cuBLAS handle (both run on the compute stream).
  cublasLtHandle_t blasLt() const { return ltHandle; }
  void *blasWorkspace() const { return workspace; }
  size_t blasWorkspaceBytes() const;
  /// The cuBLASLt algorithm for a product of this kind (the caller's key:
  /// its shape, transpositions, epilogue and whether it reads C), or null
  /// when cuBLASLt has none: `choose` (the heuristic) runs on the first use
  /// of a key only.
  using LtKey = std::array<int64_t, 6>;
  const cublasLtMatmulAlgo_t *blasLtAlgo(
      const LtKey &key,
      const std::function<std::optional<cublasLtMatmulAlgo_t>()> &choose);
  /// How cuBLAS computes this context's products of fp32 arrays.
  cublasComputeType_t computeType() const { return compute; }
  /// FLEXPIPE_CUDA_MATH: with Bf16, the model keeps its activations in bf16.
  MathMode math() const { return mathMode; }
  double timeout() const { return timeoutSeconds; }

  /// A fresh event without timing (cudaEventDisableTiming).
  cudaEvent_t makeEvent();
  /// Whether `event` has completed (cudaEventQuery); an error stops the
  /// rank.
  static bool completed(cudaEvent_t event);
  /// Returns when `event` has completed. Polls: after the timeout without
  /// progress it stops the rank with `what` and the pending transfers
  /// (setDescribePending).
  void waitFor(cudaEvent_t event, const std::string &what);
  /// Records a progress marker on the compute stream: the work issued so
  /// far. Host waits count its completion as progress.
  void markProgress();
  /// Completed pieces of work: markers plus what the function given to
  /// setProgress counts (NcclComm: transfers). Never decreases.
  size_t progress();
  void setProgress(std::function<size_t()> completed) {
    externalProgress = std::move(completed);
  }
  /// Returns when all work on the compute stream so far has finished.
  void synchronize(const std::string &what);
  /// Reports transfers that have not completed, for timeout messages.
  void setDescribePending(std::function<std::string()> describe) {
    describePending = std::move(describe);
  }

  /// After each allocation from the pool: when the pool has grown beyond
  /// its largest size so far, samples the GPU's memory in use.
  void noteAllocation();
  /// What was measured, (what, bytes), for Comm::measuredMemory: the pool's
  /// high-water mark of reserved bytes and the GPU's memory in use (all its
  /// processes, cudaMemGetInfo) when the pool reached it.
  std::vector<std::pair<std::string, double>> measuredMemory();

private:
  double timeoutSeconds;
  MathMode mathMode;
  cudaStream_t computeStream = nullptr;
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t ltHandle = nullptr;
  std::map<LtKey, std::optional<cublasLtMatmulAlgo_t>> ltAlgos;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  void *workspace = nullptr;
  cudaEvent_t syncEvent = nullptr;
  std::function<std::string()> describePending;
  cudaMemPool_t pool = nullptr;
  uint64_t largestReserved = 0; ///< the pool's reserved bytes, largest seen
  size_t inUseAtPeak = 0;       ///< cudaMemGetInfo's used bytes then
  /// Progress markers recorded and not yet seen complete, in stream order
  /// (the compute stream completes them in that order), and completed ones
  /// to record again. A marker is never re-recorded before it completes: a
  /// ring of 64 dropped the oldest when the host ran further ahead (one
  /// actor, 30 micro-batches), and waits then saw no progress while the GPU
  /// worked through them. The events in use are bounded by the run-ahead.
  std::deque<cudaEvent_t> pendingMarkers;
  std::vector<cudaEvent_t> freeMarkers;
  size_t markersDone = 0;
  /// Counts the pending markers at the front that have completed.
  void retireMarkers();
  std::function<size_t()> externalProgress;
};

/// `count` values of T in device memory, allocated and freed in order on
/// the context's compute stream. Move-only.
template <typename T> class DeviceArray {
public:
  DeviceArray() = default;
  DeviceArray(CudaContext &context, size_t count, bool zero = false)
      : context(&context), count(count) {
    if (count == 0)
      return;
    void *memory = nullptr;
    CUDACHECK(cudaMallocAsync(&memory, bytes(), context.stream()));
    context.noteAllocation();
    pointer = static_cast<T *>(memory);
    if (zero)
      CUDACHECK(cudaMemsetAsync(pointer, 0, bytes(), context.stream()));
  }
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray &&other) noexcept { *this = std::move(other); }
  DeviceArray &operator=(DeviceArray &&other) noexcept {
    if (this != &other) {
      reset();
      context = other.context;
      pointer = std::exchange(other.pointer, nullptr);
      count = std::exchange(other.count, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  T *get() const { return pointer; }
  size_t size() const { return count; }
  size_t bytes() const { return count * sizeof(T); }
  explicit operator bool() const { return pointer != nullptr; }
  void reset() {
    if (pointer)
      CUDACHECK(cudaFreeAsync(pointer, context->stream()));
    pointer = nullptr;
    count = 0;
  }
  /// A copy, made on the compute stream.
  DeviceArray clone() const {
    DeviceArray copy(*context, count);
    if (count)
      CUDACHECK(cudaMemcpyAsync(copy.pointer, pointer, bytes(),
                                cudaMemcpyDeviceToDevice, context->stream()));
    return copy;
  }

private:
  CudaContext *context = nullptr;
  T *pointer = nullptr;
  size_t count = 0;
};

/// `count` values of T in page-locked host memory (for asynchronous
/// copies). Allocate only while no transfer is in flight: cudaMallocHost
/// and cudaFreeHost may synchronise the device.
template <typename T> class PinnedArray {
public:
  PinnedArray() = default;
  explicit PinnedArray(size_t count) : count(count) {
    if (count == 0)
      return;
    void *memory = nullptr;
    CUDACHECK(cudaMallocHost(&memory, count * sizeof(T)));
    pointer = static_cast<T *>(memory);
  }
  ~PinnedArray() {
    if (pointer)
      CUDACHECK(cudaFreeHost(pointer));
  }
  PinnedArray(PinnedArray &&other) noexcept { *this = std::move(other); }
  PinnedArray &operator=(PinnedArray &&other) noexcept {
    if (this != &other) {
      if (pointer)
        CUDACHECK(cudaFreeHost(pointer));
      pointer = std::exchange(other.pointer, nullptr);
      count = std::exchange(other.count, 0);
    }
    return *this;
  }
  PinnedArray(const PinnedArray &) = delete;
  PinnedArray &operator=(const PinnedArray &) = delete;

  T *get() const { return pointer; }
  size_t size() const { return count; }

private:
  T *pointer = nullptr;
  size_t count = 0;
};

} // namespace flexpipe::rt::cuda

#endif // FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H
