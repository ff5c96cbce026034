//===- cublasLt.h - cuBLASLt, emulated on the CPU ---------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The part of cuBLASLt the CUDA backend uses, for the emulation test: fp32
// products D = alpha op(A) op(B) + beta C with the default, BIAS (the bias
// vector added to every column of D, its length D's rows), GELU_AUX_BIAS
// (bias added, the sum kept in the auxiliary matrix, then GELU) or DGELU
// (times GELU's derivative at the auxiliary matrix) epilogue, GELU being
// the tanh approximation as in cuBLASLt; column-major layouts with leading
// dimensions, checked as cuBLASLt checks them, and the same compute types
// (and input rounding) as the emulated cublasGemmStridedBatchedEx.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_CUBLASLT_H
#define FLEXPIPE_TEST_CUDA_EMULATION_CUBLASLT_H

#include "cublas_v2.h"

#include <cstddef>
#include <cstdint>

struct cublasLtContext;
typedef cublasLtContext *cublasLtHandle_t;
struct cublasLtMatmulDescOpaque;
typedef cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
struct cublasLtMatrixLayoutOpaque;
typedef cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
struct cublasLtMatmulPreferenceOpaque;
typedef cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
};

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};
enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
  CUBLASLT_EPILOGUE_DGELU = 192,
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
    size_t bytes);
/// One algorithm (the emulation has one) for shapes cublasLtMatmul takes.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t aDesc, cublasLtMatrixLayout_t bDesc,
    cublasLtMatrixLayout_t cDesc, cublasLtMatrixLayout_t dDesc,
    cublasLtMatmulPreference_t preference, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned);
cublasStatus_t
cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
               const void *alpha, const void *a, cublasLtMatrixLayout_t aDesc,
               const void *b, cublasLtMatrixLayout_t bDesc, const void *beta,
               const void *c, cublasLtMatrixLayout_t cDesc, void *d,
               cublasLtMatrixLayout_t dDesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceBytes, cudaStream_t stream);

#endif // FLEXPIPE_TEST_CUDA_EMULATION_CUBLASLT_H
