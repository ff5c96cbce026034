//===- nccl.h - NCCL between processes on the CPU ---------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The part of NCCL's API that NcclComm.cpp uses, with the same names and
// signatures, for the emulated CUDA backend (Nccl.cpp): ranks are processes
// on one machine, connected by Unix sockets in a directory that the unique
// id names; operations run on the emulated streams (Streams.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_NCCL_H
#define FLEXPIPE_TEST_CUDA_EMULATION_NCCL_H

#include "cuda_runtime_api.h"

#include <cstddef>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3
} ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct {
  int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                \
  { 1 }
#define NCCL_SPLIT_NOCOLOR -1

struct ncclComm;
typedef struct ncclComm *ncclComm_t;

const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int ranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int colour, int key,
                           ncclComm_t *newComm, ncclConfig_t *config);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *result);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclSend(const void *data, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *data, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream);

#endif // FLEXPIPE_TEST_CUDA_EMULATION_NCCL_H
