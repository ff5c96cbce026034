//===- Kernels.cpp - The CPU model's compute kernels ----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Built with -march=${FLEXPIPE_CPU_ARCH} (native by default) so that Eigen
// uses the machine's vector unit; OpenBLAS picks its own kernels at run time.
//
// Bitwise reproducibility: Eigen starts vector work at the first aligned
// address of a mapped buffer and handles the elements before it with scalar
// code, so results would depend on where a tensor happens to live (a
// pipelined rank and the single-process reference allocate differently).
// Every Eigen expression here therefore runs on Eigen's own aligned arrays:
// rows and blocks are copied in and out (`Scratch`), and the results depend
// on the sizes alone.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <Eigen/Core>
#include <cblas.h>

#include <algorithm>
#include <cmath>

using namespace flexpipe::rt;

namespace {

using Array = Eigen::ArrayXf; // aligned storage

/// `n` floats of `src` in an aligned array.
void load(Array &dst, const float *src, int64_t n) {
  dst.resize(n);
  std::copy_n(src, n, dst.data());
}
void store(const Array &src, float *dst) {
  std::copy_n(src.data(), src.size(), dst);
}

constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
/// Elementwise kernels work in blocks that stay in the L1 cache.
constexpr int64_t kBlock = 1024;

} // namespace

void kernels::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

void kernels::layerNormForward(const float *x, const float *g, const float *b,
                               int64_t t, int64_t h, float *y, float *mean,
                               float *rstd) {
  Array gain, bias, row, out;
  load(gain, g, h);
  load(bias, b, h);
  for (int64_t r = 0; r < t; ++r) {
    load(row, x + r * h, h);
    const float m = row.sum() / static_cast<float>(h);
    const float var = (row - m).square().sum() / static_cast<float>(h);
    mean[r] = m;
    rstd[r] = 1.0f / std::sqrt(var + kLayerNormEps);
    out = (row - m) * rstd[r] * gain + bias;
    store(out, y + r * h);
  }
}

void kernels::layerNormInputGrad(const float *x, const float *dy,
                                 const float *g, const float *mean,
                                 const float *rstd, int64_t t, int64_t h,
                                 float *dx) {
  Array gain, xhat, d, acc;
  load(gain, g, h);
  for (int64_t r = 0; r < t; ++r) {
    load(xhat, x + r * h, h);
    xhat = (xhat - mean[r]) * rstd[r];
    load(d, dy + r * h, h);
    d *= gain;
    const float meanD = d.sum() / static_cast<float>(h);
    const float meanDX = (d * xhat).sum() / static_cast<float>(h);
    load(acc, dx + r * h, h);
    acc += rstd[r] * (d - meanD - xhat * meanDX);
    store(acc, dx + r * h);
  }
}

void kernels::layerNormWeightGrad(const float *x, const float *dy,
                                  const float *mean, const float *rstd,
                                  int64_t t, int64_t h, float *dg, float *db) {
  Array gain, bias, xhat, grad;
  load(gain, dg, h);
  load(bias, db, h);
  for (int64_t r = 0; r < t; ++r) {
    load(xhat, x + r * h, h);
    load(grad, dy + r * h, h);
    gain += grad * (xhat - mean[r]) * rstd[r];
    bias += grad;
  }
  store(gain, dg);
  store(bias, db);
}

void kernels::geluForward(const float *x, float *y, int64_t n) {
  Array in, out;
  for (int64_t i = 0; i < n; i += kBlock) {
    load(in, x + i, std::min(kBlock, n - i));
    out = 0.5f * in * (1.0f + (kGeluC * (in + kGeluA * in.cube())).tanh());
    store(out, y + i);
  }
}

void kernels::geluInputGrad(const float *x, const float *dy, float *dx,
                            int64_t n) {
  Array in, t, out;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t len = std::min(kBlock, n - i);
    load(in, x + i, len);
    t = (kGeluC * (in + kGeluA * in.cube())).tanh();
    load(out, dy + i, len);
    out *= 0.5f * (1.0f + t) + 0.5f * in * (1.0f - t.square()) * kGeluC *
                                   (1.0f + 3.0f * kGeluA * in.square());
    store(out, dx + i);
  }
}

void kernels::attentionForward(const float *qkv, int64_t batch, int64_t seq,
                               int64_t heads, int64_t d, float *probs,
                               float *out) {
  const int64_t h = heads * d, ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Array row;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float *q = qkv + b * seq * ld + hd * d;
      const float *k = q + h, *v = q + 2 * h;
      float *p = probs + (b * heads + hd) * seq * seq;
      // Scores for every pair; the causal softmax keeps j <= i.
      gemm(false, true, seq, seq, d, scale, q, ld, k, ld, 0.0f, p, seq);
      for (int64_t i = 0; i < seq; ++i) {
        load(row, p + i * seq, i + 1);
        row = (row - row.maxCoeff()).exp();
        row /= row.sum();
        store(row, p + i * seq);
        std::fill(p + i * seq + i + 1, p + (i + 1) * seq, 0.0f);
      }
      gemm(false, false, seq, d, seq, 1.0f, p, seq, v, ld, 0.0f,
           out + b * seq * h + hd * d, h);
    }
}

void kernels::attentionInputGrad(const float *qkv, const float *probs,
                                 const float *dout, int64_t batch, int64_t seq,
                                 int64_t heads, int64_t d, float *scratch,
                                 float *dqkv) {
  const int64_t h = heads * d, ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Array pi, dsi;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float *q = qkv + b * seq * ld + hd * d;
      const float *k = q + h, *v = q + 2 * h;
      float *dq = dqkv + b * seq * ld + hd * d;
      float *dk = dq + h, *dv = dq + 2 * h;
      const float *p = probs + (b * heads + hd) * seq * seq;
      const float *dO = dout + b * seq * h + hd * d;
      // dV = P^T dO; dP = dO V^T.
      gemm(true, false, seq, d, seq, 1.0f, p, seq, dO, h, 0.0f, dv, ld);
      float *ds = scratch;
      gemm(false, true, seq, seq, d, 1.0f, dO, h, v, ld, 0.0f, ds, seq);
      // Through the softmax: dS = P (dP - rowsum(P dP)) scale, causal.
      for (int64_t i = 0; i < seq; ++i) {
        load(pi, p + i * seq, i + 1);
        load(dsi, ds + i * seq, i + 1);
        const float dot = (pi * dsi).sum();
        dsi = pi * (dsi - dot) * scale;
        store(dsi, ds + i * seq);
        std::fill(ds + i * seq + i + 1, ds + (i + 1) * seq, 0.0f);
      }
      // dQ = dS K; dK = dS^T Q.
      gemm(false, false, seq, d, seq, 1.0f, ds, seq, k, ld, 0.0f, dq, ld);
      gemm(true, false, seq, d, seq, 1.0f, ds, seq, q, ld, 0.0f, dk, ld);
    }
}

void kernels::softmaxNumerators(float *logits, int64_t t, int64_t v,
                                float *maxima, double *sums) {
  Array row;
  for (int64_t r = 0; r < t; ++r) {
    load(row, logits + r * v, v);
    maxima[r] = row.maxCoeff();
    row = (row - maxima[r]).exp();
    sums[r] = static_cast<double>(row.sum());
    store(row, logits + r * v);
  }
}
