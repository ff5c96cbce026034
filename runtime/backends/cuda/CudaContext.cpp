//===- CudaContext.cpp - One rank's GPU: checks, stream, memory -----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "CudaContext.h"

#include "Bootstrap.h"

#include "../Timeout.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

namespace {

std::mutex fatalMutex;
std::function<void(const std::string &)> fatalHandler;
int fatalRank = -1;

/// cuBLAS's workspace (cuBLASLt's too): 32 MiB, what NVIDIA recommends for
/// Hopper. Set once so that cuBLAS never allocates while transfers are in
/// flight.
constexpr size_t kBlasWorkspaceBytes = 32u << 20;

/// A host wait polls its event every time and the progress (a query per
/// marker and transfer) every this many polls.
constexpr int kPollsPerProgressCheck = 64;

double secondsNow() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

void flexpipe::rt::cuda::setFatalHandler(
    std::function<void(const std::string &)> handler) {
  std::lock_guard<std::mutex> lock(fatalMutex);
  fatalHandler = std::move(handler);
}

void flexpipe::rt::cuda::setFatalRank(int rank) { fatalRank = rank; }

void flexpipe::rt::cuda::fatal(const std::string &message) {
  std::function<void(const std::string &)> handler;
  {
    std::lock_guard<std::mutex> lock(fatalMutex);
    handler = fatalHandler;
  }
  if (handler)
    handler(message);
  std::fflush(stdout);
  if (fatalRank >= 0)
    std::fprintf(stderr, "flexpipe: rank %d: %s\n", fatalRank, message.c_str());
  else
    std::fprintf(stderr, "flexpipe: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void flexpipe::rt::cuda::failedCall(const char *call, const char *file,
                                    int line, const std::string &why) {
  fatal(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
        ": " + why);
}

void flexpipe::rt::cuda::checkLaunch(const char *kernel, const char *file,
                                     int line) {
  const cudaError_t status = cudaGetLastError();
  // A poll of an event that had not completed is no launch error.
  if (status != cudaSuccess && status != cudaErrorNotReady)
    failedCall((std::string("launching ") + kernel).c_str(), file, line,
               std::string(cudaGetErrorName(status)) + ": " +
                   cudaGetErrorString(status));
}

CudaContext::CudaContext(int device, double timeout, MathMode math)
    : timeoutSeconds(timeout), mathMode(math) {
  CUDACHECK(cudaSetDevice(device));
  // Stream-ordered allocation (cudaMallocAsync) lets arrays be freed while
  // transfers are in flight without a device-wide synchronisation.
  int pools = 0;
  CUDACHECK(
      cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (!pools)
    fatal("CUDA device " + std::to_string(device) +
          " does not support stream-ordered memory pools (cudaMallocAsync), "
          "which the CUDA backend needs");
  CUDACHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  // Keep freed memory in the pool instead of returning it at every
  // synchronisation.
  uint64_t threshold = UINT64_MAX;
  CUDACHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                    &threshold));
  CUDACHECK(cudaStreamCreateWithFlags(&computeStream, cudaStreamNonBlocking));
  CUBLASCHECK(cublasCreate(&handle));
  CUBLASCHECK(cublasSetStream(handle, computeStream));
  // Products of fp32 arrays go through cublasGemmStridedBatchedEx with this
  // compute type: full fp32 by default (the CPU reference has no reduced
  // precision); on request TF32 tensor cores, which round the fp32 inputs to
  // 10-bit mantissas and sum in fp32. With bf16 the arrays are bf16 themselves
  // (CudaModel.cpp) and the products sum in fp32.
  compute = math == MathMode::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                   : CUBLAS_COMPUTE_32F;
  CUBLASCHECK(cublasLtCreate(&ltHandle));
  CUDACHECK(cudaMalloc(&workspace, kBlasWorkspaceBytes));
  CUBLASCHECK(cublasSetWorkspace(handle, workspace, kBlasWorkspaceBytes));
  syncEvent = makeEvent();
}

size_t CudaContext::blasWorkspaceBytes() const { return kBlasWorkspaceBytes; }

const cublasLtMatmulAlgo_t *CudaContext::blasLtAlgo(
    const LtKey &key,
    const std::function<std::optional<cublasLtMatmulAlgo_t>()> &choose) {
  auto it = ltAlgos.find(key);
  if (it == ltAlgos.end())
    it = ltAlgos.emplace(key, choose()).first;
  return it->second ? &*it->second : nullptr;
}

CudaContext::~CudaContext() {
  // Everything was synchronised by the executor's last collective; these
  // calls only release what is left.
  if (syncEvent)
    cudaEventDestroy(syncEvent);
  for (cudaEvent_t marker : pendingMarkers)
    cudaEventDestroy(marker);
  for (cudaEvent_t marker : freeMarkers)
    cudaEventDestroy(marker);
  if (handle)
    cublasDestroy(handle);
  if (ltHandle)
    cublasLtDestroy(ltHandle);
  if (workspace)
    cudaFree(workspace);
  if (computeStream)
    cudaStreamDestroy(computeStream);
}

cudaEvent_t CudaContext::makeEvent() {
  cudaEvent_t event = nullptr;
  CUDACHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void CudaContext::waitFor(cudaEvent_t event, const std::string &what) {
  ProgressDeadline deadline(timeoutSeconds, secondsNow(), progress());
  for (int polls = 0;; ++polls) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      failedCall("cudaEventQuery", __FILE__, __LINE__,
                 "while waiting for " + what + ": " + cudaGetErrorName(status) +
                     ": " + cudaGetErrorString(status));
    const double now = secondsNow();
    if (polls % kPollsPerProgressCheck == 0 &&
        deadline.expired(now, progress())) {
      std::string message = noProgressFor(deadline.idle(now)) +
                            " while waiting for " + what +
                            " (FLEXPIPE_TIMEOUT)";
      if (describePending)
        message += "; " + describePending();
      fatal(message);
    }
    // Spin briefly for short waits, then sleep to leave the CPU to others.
    if (polls < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void CudaContext::synchronize(const std::string &what) {
  CUDACHECK(cudaEventRecord(syncEvent, computeStream));
  waitFor(syncEvent, what);
}

void CudaContext::markProgress() {
  retireMarkers(); // their events can be recorded again
  cudaEvent_t marker;
  if (freeMarkers.empty()) {
    marker = makeEvent();
  } else {
    marker = freeMarkers.back();
    freeMarkers.pop_back();
  }
  CUDACHECK(cudaEventRecord(marker, computeStream));
  pendingMarkers.push_back(marker);
}

void CudaContext::retireMarkers() {
  while (!pendingMarkers.empty() && completed(pendingMarkers.front())) {
    freeMarkers.push_back(pendingMarkers.front());
    pendingMarkers.pop_front();
    ++markersDone;
  }
}

bool CudaContext::completed(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady)
    return false;
  CUDACHECK(status);
  return true;
}

size_t CudaContext::progress() {
  retireMarkers();
  return markersDone + (externalProgress ? externalProgress() : 0);
}

void CudaContext::noteAllocation() {
  uint64_t reserved = 0;
  CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent,
                                    &reserved));
  if (reserved <= largestReserved)
    return;
  // The pool grows rarely (it keeps what it reserves): a driver query then
  // is cheap enough.
  largestReserved = reserved;
  size_t free = 0, total = 0;
  CUDACHECK(cudaMemGetInfo(&free, &total));
  inUseAtPeak = total - free;
}

std::vector<std::pair<std::string, double>> CudaContext::measuredMemory() {
  uint64_t highWater = 0;
  CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh,
                                    &highWater));
  return {{"device memory reserved by the pool (high-water)",
           static_cast<double>(highWater)},
          {"device memory in use on the GPU at that peak (cudaMemGetInfo)",
           static_cast<double>(inUseAtPeak)}};
}
