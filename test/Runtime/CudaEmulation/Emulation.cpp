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
// bytes are checked when a block is freed. Streams and events are in
// Streams.cpp, NCCL in Nccl.cpp; cuBLAS's products run on their streams.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"
#include "DeviceCode.h"
#include "Internal.h"

#include "cublasLt.h"
#include "cublas_v2.h"
#include "cuda_bf16.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace flexpipe::rt::cuda::emulation;

void flexpipe::rt::cuda::emulation::emulationError(const std::string &message) {
  std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
  std::abort();
}

namespace {

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5, kPoisonByte = 0xFF;

struct Allocation {
  size_t bytes;
  bool device;
  bool pooled = false; ///< from the default pool (cudaMallocAsync)
  /// Still counted as used: cudaFreeAsync gives a pool block back at the
  /// call (work enqueued after it on the stream may reuse it) and poisons
  /// it when the stream gets there.
  bool counted = true;
};
/// Guards the allocations and the pool's counts: the host allocates, and
/// streams free (cudaFreeAsync) and check ranges.
std::recursive_mutex memoryMutex;
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
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
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
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
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
  if (it->second.counted && it->second.pooled)
    poolUsed -= bytes;
  else if (it->second.counted && device)
    deviceOutsidePool -= bytes;
  live.erase(it);
  quarantine.push_back(user - kGuard);
  return cudaSuccess;
}

} // namespace

void flexpipe::rt::cuda::emulation::checkRange(const void *pointer,
                                               size_t bytes, const char *what) {
  if (bytes == 0)
    return;
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
  const char *p = static_cast<const char *>(pointer);
  auto it = live.upper_bound(const_cast<char *>(p));
  if (it == live.begin())
    emulationError(std::string(what) + ": not in an allocation");
  --it;
  if (p >= it->first + it->second.bytes)
    emulationError(std::string(what) + ": " + std::to_string(bytes) +
                   " bytes not in a live allocation (freed already?)");
  if (p + bytes > it->first + it->second.bytes)
    emulationError(std::string(what) + ": " + std::to_string(bytes) +
                   " bytes at offset " + std::to_string(p - it->first) +
                   " of an allocation of " + std::to_string(it->second.bytes));
}

bool flexpipe::rt::cuda::emulation::isPinnedHost(const void *pointer) {
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
  auto it = live.upper_bound(static_cast<char *>(const_cast<void *>(pointer)));
  if (it == live.begin())
    return false;
  --it;
  return !it->second.device &&
         static_cast<const char *>(pointer) < it->first + it->second.bytes;
}

namespace {

//===----------------------------------------------------------------------===//
// Warps
//===----------------------------------------------------------------------===//

// Lanes are Boost.Context fibers: a switch saves and restores registers
// only (ucontext's also changes the signal mask, a system call each time,
// which made up most of the emulation's time).
namespace fibers = boost::context;

constexpr size_t kStackBytes = 256 * 1024;

/// Gives a lane's fiber the lane's own stack, made once per thread.
struct LaneStack {
  char *base;
  fibers::stack_context allocate() {
    fibers::stack_context stack;
    stack.size = kStackBytes;
    stack.sp = base + kStackBytes;
    return stack;
  }
  void deallocate(fibers::stack_context &) noexcept {}
};

struct Lane {
  LaneState state;
  fibers::fiber fiber; ///< where the lane goes on, while it waits
  bool finished = false, waiting = false;
  unsigned char slot[16];
};

struct Warp {
  fibers::fiber scheduler; ///< where a waiting lane returns to
  Lane lanes[32];
  int count = 0, current = 0;
  const std::function<void()> *body = nullptr;
  bool fibers = false;
  std::vector<std::vector<char>> stacks;
};
/// Each stream's thread runs its kernels' warps.
thread_local Warp warp;

/// Kernels seen to use shuffles or __syncwarp: these run with fibers.
thread_local std::set<const void *> warpKernels, plainKernels;
thread_local const void *runningKernel = nullptr;
thread_local bool barrierSeen = false;

/// Runs the current warp's lanes as fibers until every lane has finished.
void runFibers() {
  if (warp.stacks.empty())
    warp.stacks.assign(32, std::vector<char>(kStackBytes));
  for (int l = 0; l < warp.count; ++l)
    warp.lanes[l].fiber =
        fibers::fiber(std::allocator_arg, LaneStack{warp.stacks[l].data()},
                      [](fibers::fiber &&scheduler) {
                        warp.scheduler = std::move(scheduler);
                        (*warp.body)();
                        warp.lanes[warp.current].finished = true;
                        return std::move(warp.scheduler);
                      });
  while (true) {
    for (int l = 0; l < warp.count; ++l) {
      Lane &lane = warp.lanes[l];
      if (lane.finished)
        continue;
      warp.current = l;
      lane.waiting = false;
      lane.fiber = std::move(lane.fiber).resume();
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
  warp.lanes[warp.current].waiting = true;
  warp.scheduler = std::move(warp.scheduler).resume();
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
  drainAll();
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
  size_t count = 0;
  for (const auto &[pointer, allocation] : live)
    count += allocation.device;
  return count;
}

//===----------------------------------------------------------------------===//
// CUDA runtime
//===----------------------------------------------------------------------===//

struct CUmemPoolHandle_st {};
struct cublasContext {
  cudaStream_t stream = nullptr;
};

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
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  static const char busId[] = "0000:00:00.0";
  if (device != 0 || !pciBusId || len < static_cast<int>(sizeof(busId)))
    return cudaErrorInvalidValue;
  std::memcpy(pciBusId, busId, sizeof(busId));
  return cudaSuccess;
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
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
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
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
  *total = kDeviceBytes;
  *free = kDeviceBytes - poolReserved - deviceOutsidePool;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
  *pointer = allocate(bytes, true);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  deviceOutsidePool += bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void *pointer) {
  drainAll(); // cudaFree synchronises the device
  return release(pointer, true);
}
cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t) {
  std::lock_guard<std::recursive_mutex> lock(memoryMutex);
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
cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream) {
  {
    std::lock_guard<std::recursive_mutex> lock(memoryMutex);
    auto it = live.find(static_cast<char *>(pointer));
    if (it == live.end() || !it->second.pooled || !it->second.counted)
      emulationError("cudaFreeAsync of a pointer that is not a live "
                     "cudaMallocAsync allocation");
    poolUsed -= it->second.bytes;
    it->second.counted = false;
  }
  enqueue(stream, [pointer] { release(pointer, true); });
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  *pointer = allocate(bytes, false);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *pointer) {
  drainAll(); // as cudaFree
  return release(pointer, false);
}
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
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
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

namespace {

/// GELU, tanh approximation, and its derivative: what cuBLASLt's GELU
/// epilogues compute (it documents GELU; PyTorch's fallback for the same
/// fused product applies the tanh form).
float geluTanh(float x) {
  return 0.5f * x *
         (1 + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
float geluTanhGrad(float x) {
  const float c = 0.7978845608028654f;
  const float t = std::tanh(c * (x + 0.044715f * x * x * x));
  return 0.5f * (1 + t) +
         0.5f * x * (1 - t * t) * c * (1 + 3 * 0.044715f * x * x);
}

/// An element of a matrix of `type` (fp32 or bf16) as float, and back
/// (bf16 rounded to nearest even).
size_t elementBytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }
float readElement(const void *base, cudaDataType_t type, size_t index) {
  if (type == CUDA_R_16BF)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]);
  return static_cast<const float *>(base)[index];
}
void writeElement(void *base, cudaDataType_t type, size_t index, float value) {
  if (type == CUDA_R_16BF)
    static_cast<__nv_bfloat16 *>(base)[index] = __float2bfloat16(value);
  else
    static_cast<float *>(base)[index] = value;
}

/// One product of column-major matrices, as cuBLAS and cuBLASLt define it:
/// D = alpha op(A) op(B) + beta C (+ bias[i] on row i of D), op(A) m x k,
/// op(B) k x n, in fp32 whatever the types (fp32 or bf16; bias and aux of
/// D's type); C is not read when beta is 0 and may be D. Then, with `aux`,
/// cuBLASLt's GELU epilogues: `geluAux` keeps that value in aux and writes
/// its GELU to D, else D is the value times GELU' at aux. fp32 inputs are
/// rounded as `computeType`'s tensor cores round them. Checks sizes, leading
/// dimensions and every footprint.
struct Product {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void *d = nullptr, *aux = nullptr;
  cudaDataType_t aType = CUDA_R_32F, bType = CUDA_R_32F, cType = CUDA_R_32F,
                 dType = CUDA_R_32F;
  bool geluAux = false;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0, ldaux = 0;
  cublasComputeType_t computeType = CUBLAS_COMPUTE_32F;

  /// What the call returns: sizes and leading dimensions.
  cublasStatus_t check() const {
    auto atLeast = [](int64_t ld, int64_t rows) {
      return ld >= std::max<int64_t>(1, rows);
    };
    if (m < 0 || n < 0 || k < 0 || !atLeast(lda, ta ? k : m) ||
        !atLeast(ldb, tb ? n : k) || !atLeast(ldc, m) || !atLeast(ldd, m))
      return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
  }

  /// Checks the footprints and computes D; on the product's stream.
  void run(const char *who) const {
    if (m == 0 || n == 0)
      return;
    const std::string name = who;
    // The footprint of `columns` columns of `rows` rows, `ld` apart.
    auto footprint = [](int64_t columns, int64_t ld, int64_t rows,
                        cudaDataType_t type) {
      return (static_cast<size_t>(columns - 1) * ld + rows) *
             elementBytes(type);
    };
    const int mantissa = computeType == CUBLAS_COMPUTE_32F_FAST_TF32   ? 10
                         : computeType == CUBLAS_COMPUTE_32F_FAST_16BF ? 7
                                                                       : 23;
    // The inputs as float, rounded as the fast compute types round them.
    auto widened = [&](const void *x, cudaDataType_t type, size_t bytes,
                       std::vector<float> &to) {
      to.resize(bytes / elementBytes(type));
      for (size_t i = 0; i < to.size(); ++i)
        to[i] = mantissa < 23 ? roundMantissa(readElement(x, type, i), mantissa)
                              : readElement(x, type, i);
      return to.data();
    };
    std::vector<float> wideA, wideB;
    const float *inA = nullptr, *inB = nullptr;
    if (k > 0) {
      const size_t aBytes = footprint(ta ? m : k, lda, ta ? k : m, aType),
                   bBytes = footprint(tb ? k : n, ldb, tb ? n : k, bType);
      checkRange(a, aBytes, (name + " A").c_str());
      checkRange(b, bBytes, (name + " B").c_str());
      inA = widened(a, aType, aBytes, wideA);
      inB = widened(b, bType, bBytes, wideB);
    }
    if (beta != 0)
      checkRange(c, footprint(n, ldc, m, cType), (name + " C").c_str());
    checkRange(d, footprint(n, ldd, m, dType), (name + " D").c_str());
    if (bias)
      checkRange(bias, m * elementBytes(dType), (name + " bias").c_str());
    if (aux)
      checkRange(aux, footprint(n, ldaux, m, dType), (name + " aux").c_str());
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          const float x = ta ? inA[l + static_cast<size_t>(i) * lda]
                             : inA[i + static_cast<size_t>(l) * lda];
          const float y = tb ? inB[j + static_cast<size_t>(l) * ldb]
                             : inB[l + static_cast<size_t>(j) * ldb];
          sum += x * y;
        }
        float value = alpha * sum;
        if (beta != 0)
          value +=
              beta * readElement(c, cType, i + static_cast<size_t>(j) * ldc);
        if (bias)
          value += readElement(bias, dType, i);
        if (aux) {
          const size_t at = i + static_cast<size_t>(j) * ldaux;
          if (geluAux)
            writeElement(aux, dType, at, value);
          value = geluAux ? geluTanh(value)
                          : value * geluTanhGrad(readElement(aux, dType, at));
        }
        writeElement(d, dType, i + static_cast<size_t>(j) * ldd, value);
      }
  }

  /// Checks the call and enqueues the product on `stream`.
  cublasStatus_t enqueueOn(cudaStream_t stream, const char *who) const {
    if (cublasStatus_t status = check(); status != CUBLAS_STATUS_SUCCESS)
      return status;
    enqueue(stream, [product = *this, who] { product.run(who); });
    return CUBLAS_STATUS_SUCCESS;
  }
};

} // namespace

/// C_i = alpha op(A_i) op(B_i) + beta C_i for the `count` matrices of each
/// operand, `stride` elements apart, column-major: A and B both fp32 or
/// both bf16, C fp32 or of their type. Each is one product on the stream.
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *a, cudaDataType_t aType,
    int lda, long long strideA, const void *b, cudaDataType_t bType, int ldb,
    long long strideB, const void *beta, void *c, cudaDataType_t cType, int ldc,
    long long strideC, int count, cublasComputeType_t computeType,
    cublasGemmAlgo_t) {
  if (aType != bType || (cType != CUDA_R_32F && cType != aType) ||
      (aType == CUDA_R_16BF && computeType != CUBLAS_COMPUTE_32F) || count < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  Product p;
  p.ta = transa == CUBLAS_OP_T;
  p.tb = transb == CUBLAS_OP_T;
  p.m = m, p.n = n, p.k = k;
  p.alpha = *static_cast<const float *>(alpha);
  p.beta = *static_cast<const float *>(beta);
  p.aType = aType, p.bType = bType, p.cType = p.dType = cType;
  p.lda = lda, p.ldb = ldb, p.ldc = p.ldd = ldc;
  p.computeType = computeType;
  auto offset = [](const void *x, cudaDataType_t type, long long elements) {
    return static_cast<const char *>(x) + elements * elementBytes(type);
  };
  for (int i = 0; i < count; ++i) {
    p.a = offset(a, aType, i * strideA);
    p.b = offset(b, bType, i * strideB);
    p.d = const_cast<char *>(offset(c, cType, i * strideC));
    p.c = p.d;
    if (cublasStatus_t status =
            p.enqueueOn(handle->stream, "cublasGemmStridedBatchedEx");
        status != CUBLAS_STATUS_SUCCESS)
      return status;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLASLt: a descriptor holds the compute type and the attributes set; a
// layout the type, rows, columns and leading dimension.
struct cublasLtContext {};
struct cublasLtMatmulDescOpaque {
  cublasComputeType_t computeType;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;
};
std::map<int, size_t> ltEpilogueCalls; // cublasLtMatmul calls by epilogue
std::set<int> refusedEpilogues;        // refuseLtEpilogue
struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (scaleType != CUDA_R_32F)
    return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque{computeType};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t bytes) {
  auto set = [&](auto &field) {
    if (bytes != sizeof(field))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return set(desc->transa);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return set(desc->transb);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return set(desc->epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return set(desc->bias);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return set(desc->aux);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return set(desc->auxLd);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

struct cublasLtMatmulPreferenceOpaque {
  size_t maxWorkspace = 0;
};
cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  *pref = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
    size_t bytes) {
  if (attribute != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ||
      bytes != sizeof(pref->maxWorkspace))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&pref->maxWorkspace, value, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

/// The product cublasLtMatmul runs, from its descriptor and layouts (op(A)
/// must be D's rows x the inner size, op(B) the inner size x D's columns, C
/// shaped as D); false when they do not fit.
bool ltProduct(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t aDesc,
               cublasLtMatrixLayout_t bDesc, cublasLtMatrixLayout_t cDesc,
               cublasLtMatrixLayout_t dDesc, Product &p) {
  // One type for every matrix: fp32, or bf16 summed in fp32.
  for (cublasLtMatrixLayout_t layout : {aDesc, bDesc, cDesc, dDesc})
    if (layout->type != dDesc->type ||
        (layout->type != CUDA_R_32F && layout->type != CUDA_R_16BF))
      return false;
  if (dDesc->type == CUDA_R_16BF && desc->computeType != CUBLAS_COMPUTE_32F)
    return false;
  p.aType = p.bType = p.cType = p.dType = dDesc->type;
  p.ta = desc->transa == CUBLAS_OP_T;
  p.tb = desc->transb == CUBLAS_OP_T;
  const int64_t aRows = p.ta ? aDesc->cols : aDesc->rows,
                aCols = p.ta ? aDesc->rows : aDesc->cols,
                bRows = p.tb ? bDesc->cols : bDesc->rows,
                bCols = p.tb ? bDesc->rows : bDesc->cols;
  const bool biased = desc->epilogue == CUBLASLT_EPILOGUE_BIAS ||
                      desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
             gelu = desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
                    desc->epilogue == CUBLASLT_EPILOGUE_DGELU;
  // GELU's input: D's shape, a leading dimension divisible by 8.
  if (aRows != static_cast<int64_t>(dDesc->rows) || aCols != bRows ||
      bCols != static_cast<int64_t>(dDesc->cols) ||
      cDesc->rows != dDesc->rows || cDesc->cols != dDesc->cols ||
      (biased && !desc->bias) ||
      (gelu && (!desc->aux || desc->auxLd % 8 != 0 ||
                desc->auxLd < static_cast<int64_t>(dDesc->rows))))
    return false;
  p.m = aRows, p.n = bCols, p.k = aCols;
  p.bias = biased ? desc->bias : nullptr;
  p.aux = gelu ? desc->aux : nullptr;
  p.ldaux = desc->auxLd;
  p.geluAux = desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  p.lda = aDesc->ld, p.ldb = bDesc->ld, p.ldc = cDesc->ld, p.ldd = dDesc->ld;
  p.computeType = desc->computeType;
  return true;
}

} // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t aDesc,
    cublasLtMatrixLayout_t bDesc, cublasLtMatrixLayout_t cDesc,
    cublasLtMatrixLayout_t dDesc, cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  Product p;
  *returned = 0;
  if (!ltProduct(desc, aDesc, bDesc, cDesc, dDesc, p))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (refusedEpilogues.count(desc->epilogue))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = {};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

/// D = alpha op(A) op(B) + beta C, then the epilogue.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *a,
                              cublasLtMatrixLayout_t aDesc, const void *b,
                              cublasLtMatrixLayout_t bDesc, const void *beta,
                              const void *c, cublasLtMatrixLayout_t cDesc,
                              void *d, cublasLtMatrixLayout_t dDesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  Product p;
  if (!algo || !ltProduct(desc, aDesc, bDesc, cDesc, dDesc, p))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (workspaceBytes > 0)
    checkRange(workspace, workspaceBytes, "cublasLtMatmul workspace");
  p.alpha = *static_cast<const float *>(alpha);
  p.beta = *static_cast<const float *>(beta);
  p.a = a, p.b = b, p.c = c, p.d = d;
  ++ltEpilogueCalls[desc->epilogue];
  return p.enqueueOn(stream, "cublasLtMatmul");
}

size_t flexpipe::rt::cuda::emulation::ltMatmulsWith(int epilogue) {
  auto it = ltEpilogueCalls.find(epilogue);
  return it == ltEpilogueCalls.end() ? 0 : it->second;
}

void flexpipe::rt::cuda::emulation::refuseLtEpilogue(int epilogue,
                                                     bool refused) {
  if (refused)
    refusedEpilogues.insert(epilogue);
  else
    refusedEpilogues.erase(epilogue);
}

const char *cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
         : status == CUBLAS_STATUS_NOT_SUPPORTED
             ? "CUBLAS_STATUS_NOT_SUPPORTED"
             : "CUBLAS_STATUS_INVALID_VALUE";
}
const char *cublasGetStatusString(cublasStatus_t status) {
  return cublasGetStatusName(status);
}
