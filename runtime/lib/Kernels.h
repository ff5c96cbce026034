//===- Kernels.h - The CPU model's compute kernels --------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The built-in GPT's arithmetic on the CPU, on two libraries: matrix products
// on OpenBLAS (cblas_sgemm; attention as one product per head and step),
// elementwise and row-wise work on Eigen's vectorised arrays (tanh and exp in
// SIMD). Row-major float tensors throughout. Every kernel is deterministic
// and single-threaded unless OpenBLAS is given threads, so a pipelined run
// equals the single-process reference bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_KERNELS_H
#define FLEXPIPE_RUNTIME_LIB_KERNELS_H

#include <cstdint>

namespace flexpipe::rt::kernels {

/// C[m x n] = alpha op(A) op(B) + beta C with leading dimensions (row-major).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc);

/// Row-wise LayerNorm of t rows of h: y = (x - mean) / std * g + b; keeps
/// mean and 1/std per row.
void layerNormForward(const float *x, const float *g, const float *b, int64_t t,
                      int64_t h, float *y, float *mean, float *rstd);
/// dx += LayerNorm's input gradient for the output gradient dy.
void layerNormInputGrad(const float *x, const float *dy, const float *g,
                        const float *mean, const float *rstd, int64_t t,
                        int64_t h, float *dx);
/// dg += sum over rows of dy * xhat, db += sum over rows of dy.
void layerNormWeightGrad(const float *x, const float *dy, const float *mean,
                         const float *rstd, int64_t t, int64_t h, float *dg,
                         float *db);

/// y = GELU(x) (the tanh approximation), n elements.
void geluForward(const float *x, float *y, int64_t n);
/// dx = dy * GELU'(x).
void geluInputGrad(const float *x, const float *dy, float *dx, int64_t n);

/// Causal multi-head attention of `batch` sequences of `seq` tokens with
/// `heads` heads of `d` dimensions. `qkv` holds per token the query, key and
/// value rows (3 heads d); writes `out` (per token heads d) and keeps the
/// probabilities `probs` (batch x heads x seq x seq).
void attentionForward(const float *qkv, int64_t batch, int64_t seq,
                      int64_t heads, int64_t d, float *probs, float *out);
/// The gradient of the query, key and value rows (`dqkv`, laid out as qkv)
/// from the output gradient `dout`; `scratch` holds seq x seq floats.
void attentionInputGrad(const float *qkv, const float *probs, const float *dout,
                        int64_t batch, int64_t seq, int64_t heads, int64_t d,
                        float *scratch, float *dqkv);

/// Per row of t rows of v logits: its largest logit, and the row replaced by
/// exp(logit - that largest); returns the sum of the row's exponentials in
/// `sums`.
void softmaxNumerators(float *logits, int64_t t, int64_t v, float *maxima,
                       double *sums);

} // namespace flexpipe::rt::kernels

#endif // FLEXPIPE_RUNTIME_LIB_KERNELS_H
