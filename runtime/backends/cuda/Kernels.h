//===- Kernels.h - The CUDA backend's kernels ------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Launchers for everything of the built-in model that is not a matrix
// product (those go to cuBLAS). Each computes what the function of the same
// name in runtime/lib/Model.cpp computes, in the same float / double
// precision; sums that Model.cpp runs over rows keep its order, sums within
// a row are tree reductions. Every launcher enqueues on `stream` and checks
// the launch. Matrices are row-major; sizes are element counts.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H
#define FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace flexpipe::rt::cuda {

/// The widest attention head the attention kernels take.
constexpr int64_t kMaxHeadDim = 256;

/// out[r][c] = token[ids[r]][c] + position[r % seq][c].
void embeddingForward(cudaStream_t stream, const int32_t *ids,
                      const float *token, const float *position, float *out,
                      int64_t tokens, int64_t hidden, int64_t seq);
/// On the host: the rows 0..tokens-1 grouped by token id (`order`, rows in
/// order within a group), the groups' first places in `order` and, after
/// the last, `tokens` (`starts`, groups + 1 entries; at most tokens + 1).
void groupRowsByToken(const int32_t *ids, int64_t tokens, int32_t *order,
                      int32_t *starts, int64_t &groups);
/// token.grad[ids[r]] += dout[r], position.grad[r % seq] += dout[r], rows in
/// order (no atomics: repeated tokens add up deterministically), a thread
/// per (token group, column) and per (position, column); `order`, `starts`
/// and `groups` are groupRowsByToken's for `ids`, on the GPU.
void embeddingWeightGrad(cudaStream_t stream, const int32_t *ids,
                         const int32_t *order, const int32_t *starts,
                         int64_t groups, const float *dout, float *tokenGrad,
                         float *positionGrad, int64_t tokens, int64_t hidden,
                         int64_t seq);

/// out[r][c] = row[c] (a bias broadcast before a product adds to it).
/// The scratch floats a sum over `rows` rows of `cols` columns needs
/// (addColumnSums; layerNormWeightGrad takes twice this).
int64_t rowSumScratch(int64_t rows, int64_t cols);
/// sums[c] += sum over rows of x[r][c].
void addColumnSums(cudaStream_t stream, const float *x, float *sums,
                   float *scratch, int64_t rows, int64_t cols);
void add(cudaStream_t stream, const float *a, const float *b, float *out,
         int64_t n);

/// Row-wise LayerNorm with mean and 1/std per row kept.
void layerNormForward(cudaStream_t stream, const float *x, const float *gain,
                      const float *bias, float *y, float *mean, float *rstd,
                      int64_t rows, int64_t hidden);
/// dx (+)= LayerNorm's input gradient (= when !accumulate).
void layerNormInputGrad(cudaStream_t stream, const float *x, const float *dy,
                        const float *gain, const float *mean, const float *rstd,
                        float *dx, int64_t rows, int64_t hidden,
                        bool accumulate);
/// gainGrad += sum over rows of dy * xhat, biasGrad += sum of dy.
/// gainGrad[c] += sum over rows of dy * xhat, biasGrad[c] += sum of dy;
/// `scratch` holds 2 rowSumScratch(rows, hidden) floats.
void layerNormWeightGrad(cudaStream_t stream, const float *x, const float *dy,
                         const float *mean, const float *rstd, float *gainGrad,
                         float *biasGrad, float *scratch, int64_t rows,
                         int64_t hidden);

/// y = GELU(x) (tanh approximation).
void geluForward(cudaStream_t stream, const float *x, float *y, int64_t n);
/// dx = dy * GELU'(x).
void geluBackward(cudaStream_t stream, const float *dy, const float *x,
                  float *dx, int64_t n);

/// Causal multi-head attention: qkv [batch*seq x 3*hidden] (q | k | v) into
/// out [batch*seq x hidden]. Keeps per query row (batch x heads x seq) only
/// the log-sum-exp of its scores in `lse`, not its probabilities (batch x
/// heads x seq x seq). Heads have at most kMaxHeadDim dimensions.
void attentionForward(cudaStream_t stream, const float *qkv, float *lse,
                      float *out, int64_t batch, int64_t heads, int64_t seq,
                      int64_t hidden);
/// The gradient of qkv (`dqkv`, laid out as qkv) from the forward's `out`
/// and `lse` and the output gradient `dout`; `delta` is scratch of one float
/// per query row.
void attentionBackward(cudaStream_t stream, const float *qkv, const float *out,
                       const float *lse, const float *dout, float *delta,
                       float *dqkv, int64_t batch, int64_t heads, int64_t seq,
                       int64_t hidden);

void softmaxCrossEntropy(cudaStream_t stream, float *logits,
                         const int32_t *targets, double *rowLoss, int64_t rows,
                         int64_t vocab);
/// *sum += float(mean of rowLoss), the rows added in order.
void addMeanLoss(cudaStream_t stream, const double *rowLoss, int64_t rows,
                 double *sum);
/// dlogits = (probs - onehot(target)) * scale; dlogits may be probs.
void crossEntropyGrad(cudaStream_t stream, const float *probs,
                      const int32_t *targets, float *dlogits, int64_t rows,
                      int64_t vocab, float scale);

/// `count` consecutive values of one parameter and its gradient and Adam
/// moments: one block's share of a multi-tensor Adam step.
struct AdamChunk {
  float *value, *grad, *m, *v;
  int64_t count;
};
/// Values per AdamChunk at most: a block's worth of work.
constexpr int64_t kAdamChunkValues = 4096;
/// Cuts each parameter (value, grad, m, v pointers and its size) into
/// chunks of at most kAdamChunkValues, in order.
void appendAdamChunks(float *value, float *grad, float *m, float *v, int64_t n,
                      std::vector<AdamChunk> &chunks);
/// One Adam step (Model.cpp's Adam::apply) for every value of `chunks`
/// (device memory), in one launch; clears the gradients.
void adamStep(cudaStream_t stream, const AdamChunk *chunks, int64_t count,
              float lr, float beta1, float beta2, float eps, float c1,
              float c2);

} // namespace flexpipe::rt::cuda

#endif // FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H
