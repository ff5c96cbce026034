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
// Activations and their gradients are arrays of `T`: float, or bf16 with
// FLEXPIPE_CUDA_MATH=bf16, read into float, computed in float (double where
// Model.cpp sums in double) and rounded once when stored. Parameters, their
// gradients, LayerNorm's statistics, attention's log-sum-exp and the
// logits stay float.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H
#define FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace flexpipe::rt::cuda {

/// bf16 storage (FLEXPIPE_CUDA_MATH=bf16).
using bf16 = __nv_bfloat16;

/// out[r][c] = token[ids[r]][c] + position[r % seq][c].
template <typename T>
void embeddingForward(cudaStream_t stream, const int32_t *ids,
                      const float *token, const float *position, T *out,
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
template <typename T>
void embeddingWeightGrad(cudaStream_t stream, const int32_t *ids,
                         const int32_t *order, const int32_t *starts,
                         int64_t groups, const T *dout, float *tokenGrad,
                         float *positionGrad, int64_t tokens, int64_t hidden,
                         int64_t seq);

/// out[r][c] = row[c] (a bias broadcast before a product adds to it).
/// The scratch floats a sum over `rows` rows of `cols` columns needs
/// (addColumnSums; layerNormWeightGrad takes twice this).
int64_t rowSumScratch(int64_t rows, int64_t cols);
/// sums[c] += sum over rows of x[r][c].
template <typename T>
void addColumnSums(cudaStream_t stream, const T *x, float *sums, float *scratch,
                   int64_t rows, int64_t cols);
/// out = a + b, element by element (the parts of a message).
template <typename T>
void add(cudaStream_t stream, const T *a, const T *b, T *out, int64_t n);

/// Row-wise LayerNorm with mean and 1/std per row kept.
template <typename T>
void layerNormForward(cudaStream_t stream, const T *x, const float *gain,
                      const float *bias, T *y, float *mean, float *rstd,
                      int64_t rows, int64_t hidden);
/// dx (+)= LayerNorm's input gradient (= when !accumulate).
template <typename T>
void layerNormInputGrad(cudaStream_t stream, const T *x, const T *dy,
                        const float *gain, const float *mean, const float *rstd,
                        T *dx, int64_t rows, int64_t hidden, bool accumulate);
/// gainGrad += sum over rows of dy * xhat, biasGrad += sum of dy.
/// gainGrad[c] += sum over rows of dy * xhat, biasGrad[c] += sum of dy;
/// `scratch` holds 2 rowSumScratch(rows, hidden) floats.
template <typename T>
void layerNormWeightGrad(cudaStream_t stream, const T *x, const T *dy,
                         const float *mean, const float *rstd, float *gainGrad,
                         float *biasGrad, float *scratch, int64_t rows,
                         int64_t hidden);

/// y = GELU(x) (tanh approximation).
template <typename T>
void geluForward(cudaStream_t stream, const T *x, T *y, int64_t n);
/// dx = dy * GELU'(x).
template <typename T>
void geluBackward(cudaStream_t stream, const T *dy, const T *x, T *dx,
                  int64_t n);

/// Causal attention's row-wise steps (CudaModel.cpp runs the products with
/// cuBLAS): `rows` score rows of `seq` keys each, row r being query r mod
/// seq of its head. causalSoftmax: probs = the softmax of each row's keys
/// j <= i (0 beyond), lse = each row's log-sum-exp.
template <typename T>
void causalSoftmax(cudaStream_t stream, const float *scores, T *probs,
                   float *lse, int64_t rows, int64_t seq);
/// probs = exp(scores - lse) for keys j <= i, else 0.
template <typename T>
void causalProbs(cudaStream_t stream, const float *scores, const float *lse,
                 T *probs, int64_t rows, int64_t seq);
/// probs becomes the scores' gradient probs * (dprobs - delta) * scale.
template <typename T>
void softmaxGrad(cudaStream_t stream, const float *dprobs, T *probs,
                 const float *delta, int64_t rows, int64_t seq, float scale);
/// delta[(b x heads + head) x seq + i] = dout . out over row i of the head's
/// columns of out and dout [batch*seq x hidden].
template <typename T>
void attentionDelta(cudaStream_t stream, const T *out, const T *dout,
                    float *delta, int64_t batch, int64_t heads, int64_t seq,
                    int64_t hidden);

void softmaxCrossEntropy(cudaStream_t stream, float *logits,
                         const int32_t *targets, double *rowLoss, int64_t rows,
                         int64_t vocab);
/// *sum += float(mean of rowLoss), the rows added in order.
void addMeanLoss(cudaStream_t stream, const double *rowLoss, int64_t rows,
                 double *sum);
/// dlogits = (probs - onehot(target)) * scale; dlogits may be probs.
template <typename T>
void crossEntropyGrad(cudaStream_t stream, const float *probs,
                      const int32_t *targets, T *dlogits, int64_t rows,
                      int64_t vocab, float scale);
/// to[i] = from[i], converted (float <-> bf16, rounding to nearest even).
void convert(cudaStream_t stream, const float *from, bf16 *to, int64_t n);
void convert(cudaStream_t stream, const bf16 *from, float *to, int64_t n);

/// `count` consecutive values of one parameter and its gradient and Adam
/// moments: one block's share of a multi-tensor Adam step.
struct AdamChunk {
  float *value, *grad, *m, *v;
  bf16 *copy; ///< the values' bf16 copy, updated too; may be null
  int64_t count;
};
/// Values per AdamChunk at most: a block's worth of work.
constexpr int64_t kAdamChunkValues = 4096;
/// Cuts each parameter (value, grad, m, v and bf16 copy pointers, the copy
/// null without one, and its size) into
/// chunks of at most kAdamChunkValues, in order.
void appendAdamChunks(float *value, float *grad, float *m, float *v, bf16 *copy,
                      int64_t n, std::vector<AdamChunk> &chunks);
/// One Adam step (Model.cpp's Adam::apply) for every value of `chunks`
/// (device memory), in one launch; clears the gradients.
void adamStep(cudaStream_t stream, const AdamChunk *chunks, int64_t count,
              float lr, float beta1, float beta2, float eps, float c1,
              float c2);

} // namespace flexpipe::rt::cuda

#endif // FLEXPIPE_RUNTIME_BACKENDS_CUDA_KERNELS_H
