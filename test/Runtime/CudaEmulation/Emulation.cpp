//===- Emulation.cpp - CUDA runtime, cuBLAS and warps on the CPU ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Device memory is host memory with guard bytes on both sides. New and
// freed memory is filled with NaN bytes, so a kernel that leaves an output
// element unwritten, or reads freed memory, turns the loss into NaN. Freed
// blocks stay quarantined (never reused) until the process ends; guard
// bytes are checked when a block is freed.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"
#include "DeviceCode.h"

#include "cublas_v2.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace flexpipe::rt::cuda::emulation;

namespace {

[[noreturn]] void emulationError(const std::string &message) {
  std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
  std::abort();
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5, kPoisonByte = 0xFF;

struct Allocation {
  size_t bytes;
  bool device;
  bool pooled = false; ///< from the default pool (cudaMallocAsync)
};
std::map<char *, Allocation> live; // user pointer -> allocation
std::vector<char *> quarantine;    // freed blocks (their base pointers)

/// The default pool: bytes of live arrays, and bytes reserved from the
/// device, in whole 2 MiB chunks, which it keeps (release threshold at its
/// maximum) and reuses without fragmentation.
constexpr size_t kPoolChunk = 2u << 20;
size_t poolUsed = 0, poolUsedHigh = 0, poolReserved = 0;
/// Device bytes outside the pool (cudaMalloc), and the emulated GPU's size.
size_t deviceOutsidePool = 0;
constexpr size_t kDeviceBytes = size_t(80) << 30;

void *allocate(size_t bytes, bool device) {
  char *base = static_cast<char *>(std::malloc(bytes + 2 * kGuard));
  if (!base)
    return nullptr;
  std::memset(base, kGuardByte, kGuard);
  std::memset(base + kGuard, kPoisonByte, bytes);
  std::memset(base + kGuard + bytes, kGuardByte, kGuard);
  live[base + kGuard] = {bytes, device};
  return base + kGuard;
}

cudaError_t release(void *pointer, bool device) {
  auto it = live.find(static_cast<char *>(pointer));
  if (it == live.end() || it->second.device != device)
    emulationError("free of a pointer that is not a live " +
                   std::string(device ? "device" : "host") + " allocation");
  char *user = it->first;
  const size_t bytes = it->second.bytes;
  for (size_t i = 0; i < kGuard; ++i)
    if (static_cast<unsigned char>(user[-1 - static_cast<long>(i)]) !=
            kGuardByte ||
        static_cast<unsigned char>(user[bytes + i]) != kGuardByte)
      emulationError("a write before or after an allocation of " +
                     std::to_string(bytes) + " bytes");
  std::memset(user, kPoisonByte, bytes);
  if (it->second.pooled)
    poolUsed -= bytes;
  else if (device)
    deviceOutsidePool -= bytes;
  live.erase(it);
  quarantine.push_back(user - kGuard);
  return cudaSuccess;
}

/// Checks that [pointer, pointer + bytes) lies in one live allocation.
void checkRange(const void *pointer, size_t bytes, const char *what) {
  if (bytes == 0)
    return;
  const char *p = static_cast<const char *>(pointer);
  auto it = live.upper_bound(const_cast<char *>(p));
  if (it == live.begin())
    emulationError(std::string(what) + ": not in an allocation");
  --it;
  if (p < it->first || p + bytes > it->first + it->second.bytes)
    emulationError(std::string(what) + ": " + std::to_string(bytes) +
                   " bytes at offset " + std::to_string(p - it->first) +
                   " of an allocation of " + std::to_string(it->second.bytes));
}

//===----------------------------------------------------------------------===//
// Warps
//===----------------------------------------------------------------------===//

constexpr size_t kStackBytes = 256 * 1024;

struct Lane {
  LaneState state;
  ucontext_t context;
  bool finished = false, waiting = false;
  unsigned char slot[16];
};

struct Warp {
  ucontext_t scheduler;
  Lane lanes[32];
  int count = 0, current = 0;
  const std::function<void()> *body = nullptr;
  bool fibers = false;
  std::vector<std::vector<char>> stacks;
} warp;

/// Kernels seen to use shuffles or __syncwarp: these run with fibers.
std::set<const void *> warpKernels, plainKernels;
const void *runningKernel = nullptr;
bool barrierSeen = false;

void laneEntry() {
  (*warp.body)();
  warp.lanes[warp.current].finished = true;
  // Returning continues at uc_link, the scheduler.
}

/// Runs the current warp's lanes as fibers until every lane has finished.
void runFibers() {
  if (warp.stacks.empty())
    warp.stacks.assign(32, std::vector<char>(kStackBytes));
  for (int l = 0; l < warp.count; ++l) {
    Lane &lane = warp.lanes[l];
    getcontext(&lane.context);
    lane.context.uc_stack.ss_sp = warp.stacks[l].data();
    lane.context.uc_stack.ss_size = kStackBytes;
    lane.context.uc_link = &warp.scheduler;
    makecontext(&lane.context, laneEntry, 0);
  }
  while (true) {
    for (int l = 0; l < warp.count; ++l) {
      Lane &lane = warp.lanes[l];
      if (lane.finished)
        continue;
      warp.current = l;
      lane.waiting = false;
      swapcontext(&warp.scheduler, &lane.context);
    }
    int finished = 0;
    for (int l = 0; l < warp.count; ++l)
      finished += warp.lanes[l].finished;
    if (finished == warp.count)
      return;
    if (finished > 0)
      emulationError("divergent warp: some lanes returned while others wait "
                     "at a shuffle or __syncwarp");
  }
}

} // namespace

LaneState &flexpipe::rt::cuda::emulation::lane() {
  return warp.lanes[warp.current].state;
}

int flexpipe::rt::cuda::emulation::laneId() {
  return static_cast<int>(lane().thread.x % 32);
}

void flexpipe::rt::cuda::emulation::warpBarrier() {
  if (!warp.fibers) {
    // A kernel first seen without warp operations now has one: remember
    // it (its later launches use fibers) and stop, since this launch
    // cannot be redone.
    warpKernels.insert(runningKernel);
    emulationError("a kernel used a warp operation on its second launch "
                   "only; make warp operations unconditional");
  }
  if (warp.count != 32)
    emulationError("a warp operation in a warp of " +
                   std::to_string(warp.count) + " lanes");
  barrierSeen = true;
  Lane &self = warp.lanes[warp.current];
  self.waiting = true;
  swapcontext(&self.context, &warp.scheduler);
}

void flexpipe::rt::cuda::emulation::deposit(const void *value, size_t bytes) {
  std::memcpy(warp.lanes[warp.current].slot, value, bytes);
}

void flexpipe::rt::cuda::emulation::fetch(int source, void *value,
                                          size_t bytes) {
  if (source < 0 || source >= warp.count)
    emulationError("a shuffle from lane " + std::to_string(source));
  std::memcpy(value, warp.lanes[source].slot, bytes);
}

void flexpipe::rt::cuda::emulation::runGrid(const void *kernel, unsigned blocks,
                                            unsigned threads,
                                            const std::function<void()> &body) {
  if (blocks == 0 || threads == 0 || threads > 1024)
    emulationError("a launch of " + std::to_string(blocks) + " x " +
                   std::to_string(threads) + " threads");
  runningKernel = kernel;
  // The first launch of a kernel runs with fibers and tells whether it
  // meets other lanes; kernels that never do run lane after lane.
  const bool known = plainKernels.count(kernel) || warpKernels.count(kernel);
  warp.fibers = !known || warpKernels.count(kernel);
  barrierSeen = false;
  warp.body = &body;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned first = 0; first < threads; first += 32) {
      warp.count = static_cast<int>(std::min(32u, threads - first));
      for (int l = 0; l < warp.count; ++l) {
        Lane &lane = warp.lanes[l];
        lane.state = {
            {first + l, 0, 0}, {b, 0, 0}, {threads, 1, 1}, {blocks, 1, 1}};
        lane.finished = lane.waiting = false;
      }
      if (!warp.fibers) {
        for (int l = 0; l < warp.count; ++l) {
          warp.current = l;
          body();
        }
        continue;
      }
      runFibers();
    }
  if (!known)
    (barrierSeen ? warpKernels : plainKernels).insert(kernel);
}

size_t flexpipe::rt::cuda::emulation::liveDeviceAllocations() {
  size_t count = 0;
  for (const auto &[pointer, allocation] : live)
    count += allocation.device;
  return count;
}

//===----------------------------------------------------------------------===//
// CUDA runtime
//===----------------------------------------------------------------------===//

struct CUstream_st {};
struct CUevent_st {};
struct CUmemPoolHandle_st {};
struct cublasContext {};

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  }
  return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t error) {
  return cudaGetErrorName(error);
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr, int) {
  *value = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int) {
  static CUmemPoolHandle_st thePool;
  *pool = &thePool;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) {
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr attr,
                                    void *value) {
  uint64_t &out = *static_cast<uint64_t *>(value);
  switch (attr) {
  case cudaMemPoolAttrReservedMemCurrent:
  case cudaMemPoolAttrReservedMemHigh:
    out = poolReserved; // never released
    return cudaSuccess;
  case cudaMemPoolAttrUsedMemCurrent:
    out = poolUsed;
    return cudaSuccess;
  case cudaMemPoolAttrUsedMemHigh:
    out = poolUsedHigh;
    return cudaSuccess;
  case cudaMemPoolAttrReleaseThreshold:
    break;
  }
  return cudaErrorInvalidValue;
}
cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  *total = kDeviceBytes;
  *free = kDeviceBytes - poolReserved - deviceOutsidePool;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  *pointer = allocate(bytes, true);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  deviceOutsidePool += bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void *pointer) { return release(pointer, true); }
cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t) {
  *pointer = allocate(bytes, true);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  live[static_cast<char *>(*pointer)].pooled = true;
  poolUsed += bytes;
  poolUsedHigh = std::max(poolUsedHigh, poolUsed);
  poolReserved = std::max(poolReserved, (poolUsed + kPoolChunk - 1) /
                                            kPoolChunk * kPoolChunk);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void *pointer, cudaStream_t) {
  return cudaFree(pointer);
}
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t) {
  checkRange(pointer, bytes, "cudaMemsetAsync");
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t) {
  if (kind != cudaMemcpyDeviceToHost)
    checkRange(dst, bytes, "cudaMemcpyAsync destination");
  if (kind != cudaMemcpyHostToDevice)
    checkRange(src, bytes, "cudaMemcpyAsync source");
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  *pointer = allocate(bytes, false);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *pointer) { return release(pointer, false); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *workspace,
                                  size_t bytes) {
  checkRange(workspace, bytes, "cublasSetWorkspace");
  return CUBLAS_STATUS_SUCCESS;
}

/// `x` rounded to `mantissa` explicit bits, to nearest even (what TF32 and
/// bf16 tensor cores take of an fp32 input).
static float roundMantissa(float x, int mantissa) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u)
    return x; // infinity or NaN
  const int dropped = 23 - mantissa;
  const uint32_t half = 1u << (dropped - 1);
  const uint32_t odd = (bits >> dropped) & 1u;
  bits = (bits + half - 1 + odd) & ~((1u << dropped) - 1);
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// C = alpha op(A) op(B) + beta C, column-major, as cuBLAS defines it (C is
/// not read when beta is 0), for fp32 arrays.
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void *alphaPtr, const void *aPtr,
                            cudaDataType_t aType, int lda, const void *bPtr,
                            cudaDataType_t bType, int ldb, const void *betaPtr,
                            void *cPtr, cudaDataType_t cType, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (aType != CUDA_R_32F || bType != CUDA_R_32F || cType != CUDA_R_32F ||
      m < 0 || n < 0 || k < 0 || lda < std::max(1, ta ? k : m) ||
      ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float *a = static_cast<const float *>(aPtr),
              *b = static_cast<const float *>(bPtr);
  const float alpha = *static_cast<const float *>(alphaPtr),
              beta = *static_cast<const float *>(betaPtr);
  float *c = static_cast<float *>(cPtr);
  const int mantissa = computeType == CUBLAS_COMPUTE_32F_FAST_TF32   ? 10
                       : computeType == CUBLAS_COMPUTE_32F_FAST_16BF ? 7
                                                                     : 23;
  if (m == 0 || n == 0)
    return CUBLAS_STATUS_SUCCESS;
  // The footprints: A is (ta ? m : k) columns of lda, B (tb ? k : n) of ldb.
  auto footprint = [](int columns, int ld, int rows) {
    return (static_cast<size_t>(columns - 1) * ld + rows) * sizeof(float);
  };
  if (k > 0) {
    checkRange(a, footprint(ta ? m : k, lda, ta ? k : m), "cublasGemmEx A");
    checkRange(b, footprint(tb ? k : n, ldb, tb ? n : k), "cublasGemmEx B");
  }
  checkRange(c, footprint(n, ldc, m), "cublasGemmEx C");
  // The fast compute types take rounded copies of the inputs.
  std::vector<float> roundedA, roundedB;
  if (mantissa < 23 && k > 0) {
    auto rounded = [&](const float *x, size_t bytes, std::vector<float> &to) {
      to.assign(x, x + bytes / sizeof(float));
      for (float &value : to)
        value = roundMantissa(value, mantissa);
      return to.data();
    };
    a = rounded(a, footprint(ta ? m : k, lda, ta ? k : m), roundedA);
    b = rounded(b, footprint(tb ? k : n, ldb, tb ? n : k), roundedB);
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float sum = 0;
      for (int l = 0; l < k; ++l) {
        const float x = ta ? a[l + static_cast<size_t>(i) * lda]
                           : a[i + static_cast<size_t>(l) * lda];
        const float y = tb ? b[j + static_cast<size_t>(l) * ldb]
                           : b[l + static_cast<size_t>(j) * ldb];
        sum += x * y;
      }
      float &out = c[i + static_cast<size_t>(j) * ldc];
      out = beta == 0 ? alpha * sum : alpha * sum + beta * out;
    }
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
                                         : "CUBLAS_STATUS_INVALID_VALUE";
}
const char *cublasGetStatusString(cublasStatus_t status) {
  return cublasGetStatusName(status);
}
