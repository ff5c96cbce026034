//===- cublas_v2.h - cuBLAS, emulated on the CPU ----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The part of cuBLAS the CUDA backend uses, for the emulation test:
// cublasGemmStridedBatchedEx is a plain column-major reference product per
// matrix of the batch that checks its sizes and leading dimensions as cuBLAS
// does, so the backend's row-major mapping is tested against an independent
// definition. The fast
// compute types round each input as tensor cores do (to TF32's 10-bit or
// bf16's 7-bit mantissa, to nearest even) and sum in fp32.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_CUBLAS_V2_H
#define FLEXPIPE_TEST_CUDA_EMULATION_CUBLAS_V2_H

#include "cuda_runtime_api.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct cublasContext;
typedef cublasContext *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace,
                                  size_t bytes);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *a, cudaDataType_t aType,
    int lda, long long strideA, const void *b, cudaDataType_t bType, int ldb,
    long long strideB, const void *beta, void *c, cudaDataType_t cType, int ldc,
    long long strideC, int batchCount, cublasComputeType_t computeType,
    cublasGemmAlgo_t algo);
const char *cublasGetStatusName(cublasStatus_t status);
const char *cublasGetStatusString(cublasStatus_t status);

#endif // FLEXPIPE_TEST_CUDA_EMULATION_CUBLAS_V2_H
