//===- cuda_runtime_api.h - The CUDA runtime on the CPU ---------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The part of the CUDA runtime API that the CUDA backend's model uses
// (CudaContext, CudaModel, Kernels, NcclComm), with the same names and
// signatures, for the emulation (Emulation.cpp, Streams.cpp): each stream
// runs on a host thread of its own, device memory is host memory that is filled
// with NaN when allocated and freed and checked for overruns. The default
// memory pool (cudaMallocAsync) counts its bytes like one with the release
// threshold at its maximum.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_CUDA_RUNTIME_API_H
#define FLEXPIPE_TEST_CUDA_EMULATION_CUDA_RUNTIME_API_H

#include <cstddef>
#include <cstdint>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNotReady = 600,
};

struct CUstream_st;
typedef CUstream_st *cudaStream_t;
struct CUevent_st;
typedef CUevent_st *cudaEvent_t;
struct CUmemPoolHandle_st;
typedef CUmemPoolHandle_st *cudaMemPool_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
enum cudaDeviceAttr { cudaDevAttrMemoryPoolsSupported = 115 };
enum cudaMemPoolAttr {
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5,
  cudaMemPoolAttrReservedMemHigh = 6,
  cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8,
};

#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
/// The one emulated device's bus id, 0000:00:00.0, so that the ranks of an
/// emulated run share a GPU as they share the machine.
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute,
                                   int device);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value);
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t stream);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMallocHost(void **pointer, size_t bytes);
cudaError_t cudaFreeHost(void *pointer);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned flags);

#endif // FLEXPIPE_TEST_CUDA_EMULATION_CUDA_RUNTIME_API_H
