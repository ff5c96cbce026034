//===- Kernels.cu - The CUDA backend's kernels ----------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Three shapes of kernel: elementwise (grid-stride loops), one warp per row
// (sums within a row are warp tree reductions, in double where Model.cpp
// sums in double), and sums over rows (weight and bias gradients) in two
// passes: a warp per chunk of kRowsPerChunk rows and 32 columns sums its
// chunk in row order (a lane per column: coalesced reads) into a partial
// per chunk and column, then a thread per column adds the chunks' partials
// in chunk order. No atomics: the results are deterministic. The
// embedding's scatter-add runs a thread per (token, column) over that
// token's rows, in row order (the host groups the rows by token), and a
// thread per (position, column) over the sequences.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "CudaContext.h"

#include <algorithm>

using namespace flexpipe::rt::cuda;

namespace {

constexpr int kThreads = 256;
/// Rows a warp sums in the first pass of a sum over rows.
constexpr int64_t kRowsPerChunk = 64;
constexpr int kWarpsPerBlock = 4;
constexpr unsigned kFullMask = 0xffffffffu;
/// Model.cpp's constants.
constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)

/// Blocks for `work` items at `perBlock` per block; grid-stride loops cover
/// the rest.
unsigned blocksFor(int64_t work, int64_t perBlock) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + perBlock - 1) / perBlock, 1 << 16));
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Index helpers for grid-stride loops.
__device__ int64_t globalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t globalThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
__device__ int64_t firstRow() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}
__device__ int64_t rowStride() {
  return static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
}

/// Sums over the warp; every lane gets the result.
template <typename T> __device__ T warpSum(T value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(kFullMask, value, offset);
  return __shfl_sync(kFullMask, value, 0);
}
__device__ float warpMax(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_down_sync(kFullMask, value, offset));
  return __shfl_sync(kFullMask, value, 0);
}

/// Activations (float or bf16) are read into float and rounded once when
/// stored.
__host__ __device__ inline float toFloat(float x) { return x; }
__host__ __device__ inline float toFloat(bf16 x) { return __bfloat162float(x); }
template <typename T> __host__ __device__ inline T fromFloat(float x);
template <> __host__ __device__ inline float fromFloat<float>(float x) {
  return x;
}
template <> __host__ __device__ inline bf16 fromFloat<bf16>(float x) {
  return __float2bfloat16(x);
}

__device__ float gelu(float x) {
  return 0.5f * x * (1 + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
}
__device__ float geluGrad(float x) {
  const float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
  return 0.5f * (1 + t) +
         0.5f * x * (1 - t * t) * kGeluC * (1 + 3 * 0.044715f * x * x);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void embeddingForwardKernel(const int32_t *ids, const float *token,
                                       const float *position, T *out,
                                       int64_t tokens, int64_t hidden,
                                       int64_t seq) {
  for (int64_t i = globalThread(); i < tokens * hidden; i += globalThreads()) {
    const int64_t r = i / hidden, c = i % hidden;
    out[i] = fromFloat<T>(token[ids[r] * hidden + c] +
                          position[(r % seq) * hidden + c]);
  }
}

/// Thread (g, c): column c of the token of group g, its rows
/// order[starts[g] .. starts[g + 1]) added in that (row) order.
template <typename T>
__global__ void tokenGradKernel(const int32_t *ids, const int32_t *order,
                                const int32_t *starts, int64_t groups,
                                const T *dout, float *tokenGrad,
                                int64_t hidden) {
  for (int64_t i = globalThread(); i < groups * hidden; i += globalThreads()) {
    const int64_t g = i / hidden, c = i % hidden;
    float *into = tokenGrad + ids[order[starts[g]]] * hidden + c;
    float sum = *into;
    for (int32_t k = starts[g]; k < starts[g + 1]; ++k)
      sum += toFloat(dout[order[k] * hidden + c]);
    *into = sum;
  }
}

/// Thread (p, c): column c of position p, the sequences' rows in order.
template <typename T>
__global__ void positionGradKernel(const T *dout, float *positionGrad,
                                   int64_t tokens, int64_t hidden,
                                   int64_t seq) {
  for (int64_t i = globalThread(); i < seq * hidden; i += globalThreads()) {
    float sum = positionGrad[i];
    for (int64_t r = i / hidden; r < tokens; r += seq)
      sum += toFloat(dout[r * hidden + i % hidden]);
    positionGrad[i] = sum;
  }
}

/// The chunks of kRowsPerChunk rows that `rows` rows make.
__host__ __device__ int64_t rowChunks(int64_t rows) {
  return (rows + kRowsPerChunk - 1) / kRowsPerChunk;
}

/// A first pass over rows: warp w (of chunks x column tiles) covers rows
/// [chunk * kRowsPerChunk, +kRowsPerChunk) of column tile * 32 + lane;
/// `body(chunk, c, first, end)` sums rows [first, end) of column c.
template <typename Body>
__device__ void forEachChunk(int64_t rows, int64_t cols, Body body) {
  const int64_t tiles = (cols + 31) / 32;
  for (int64_t w = firstRow(); w < rowChunks(rows) * tiles; w += rowStride()) {
    const int64_t chunk = w / tiles;
    const int64_t c = (w % tiles) * 32 + threadIdx.x % 32;
    const int64_t first = chunk * kRowsPerChunk;
    const int64_t end =
        first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
    if (c < cols)
      body(chunk, c, first, end);
  }
}

/// partials[chunk][c] = sum of x[r][c] over the chunk's rows.
template <typename T>
__global__ void columnPartialsKernel(const T *x, float *partials, int64_t rows,
                                     int64_t cols) {
  forEachChunk(rows, cols,
               [&](int64_t chunk, int64_t c, int64_t first, int64_t end) {
                 float sum = 0;
                 for (int64_t r = first; r < end; ++r)
                   sum += toFloat(x[r * cols + c]);
                 partials[chunk * cols + c] = sum;
               });
}

/// sums[c] += partials[0][c] + partials[1][c] + ..., in chunk order.
__global__ void addPartialsKernel(const float *partials, float *sums,
                                  int64_t chunks, int64_t cols) {
  for (int64_t c = globalThread(); c < cols; c += globalThreads()) {
    float sum = sums[c];
    for (int64_t k = 0; k < chunks; ++k)
      sum += partials[k * cols + c];
    sums[c] = sum;
  }
}

template <typename T>
__global__ void addKernel(const T *a, const T *b, T *out, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    out[i] = fromFloat<T>(toFloat(a[i]) + toFloat(b[i]));
}

template <typename T>
__global__ void
layerNormForwardKernel(const T *x, const float *gain, const float *bias, T *y,
                       float *mean, float *rstd, int64_t rows, int64_t hidden) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    const T *row = x + r * hidden;
    double m = 0;
    for (int64_t c = lane; c < hidden; c += 32)
      m += toFloat(row[c]);
    m = warpSum(m) / hidden;
    double v = 0;
    for (int64_t c = lane; c < hidden; c += 32)
      v += (toFloat(row[c]) - m) * (toFloat(row[c]) - m);
    v = warpSum(v) / hidden;
    const float mu = static_cast<float>(m);
    const float inv = static_cast<float>(1.0 / sqrt(v + kLayerNormEps));
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = inv;
    }
    for (int64_t c = lane; c < hidden; c += 32)
      y[r * hidden + c] =
          fromFloat<T>((toFloat(row[c]) - mu) * inv * gain[c] + bias[c]);
  }
}

template <typename T>
__global__ void layerNormInputGradKernel(const T *x, const T *dy,
                                         const float *gain, const float *mean,
                                         const float *rstd, T *dx, int64_t rows,
                                         int64_t hidden, bool accumulate) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    const float mu = mean[r], inv = rstd[r];
    double meanD = 0, meanDX = 0;
    for (int64_t c = lane; c < hidden; c += 32) {
      const double xhat = (toFloat(x[r * hidden + c]) - mu) * inv;
      const double d = toFloat(dy[r * hidden + c]) * gain[c];
      meanD += d;
      meanDX += d * xhat;
    }
    meanD = warpSum(meanD) / hidden;
    meanDX = warpSum(meanDX) / hidden;
    for (int64_t c = lane; c < hidden; c += 32) {
      const double xhat = (toFloat(x[r * hidden + c]) - mu) * inv;
      const double d = toFloat(dy[r * hidden + c]) * gain[c];
      const float value = static_cast<float>(inv * (d - meanD - xhat * meanDX));
      dx[r * hidden + c] = fromFloat<T>(
          accumulate ? toFloat(dx[r * hidden + c]) + value : value);
    }
  }
}

/// LayerNorm's weight gradients per chunk: the gain's (dy * xhat) in
/// partials[0 .. chunks), the bias's (dy) in partials[chunks .. 2 chunks).
template <typename T>
__global__ void layerNormPartialsKernel(const T *x, const T *dy,
                                        const float *mean, const float *rstd,
                                        float *partials, int64_t rows,
                                        int64_t hidden) {
  const int64_t chunks = rowChunks(rows);
  forEachChunk(rows, hidden,
               [&](int64_t chunk, int64_t c, int64_t first, int64_t end) {
                 float g = 0, b = 0;
                 for (int64_t r = first; r < end; ++r) {
                   const float xhat =
                       (toFloat(x[r * hidden + c]) - mean[r]) * rstd[r];
                   const float d = toFloat(dy[r * hidden + c]);
                   g += d * xhat;
                   b += d;
                 }
                 partials[chunk * hidden + c] = g;
                 partials[(chunks + chunk) * hidden + c] = b;
               });
}

template <typename T>
__global__ void geluForwardKernel(const T *x, T *y, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    y[i] = fromFloat<T>(gelu(toFloat(x[i])));
}

template <typename T>
__global__ void geluBackwardKernel(const T *dy, const T *x, T *dx, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    dx[i] = fromFloat<T>(toFloat(dy[i]) * geluGrad(toFloat(x[i])));
}

__global__ void toBf16Kernel(const float *from, bf16 *to, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    to[i] = fromFloat<bf16>(from[i]);
}

__global__ void toFloatKernel(const bf16 *from, float *to, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    to[i] = toFloat(from[i]);
}

// Attention's products (scores, the weighted values and their gradients)
// are cuBLAS's batched products over the heads (CudaModel.cpp); these
// kernels are the row-wise steps between them, one warp per score row
// (head, query i) of one sequence: lane l takes keys l, l + 32, ...
// (coalesced). Keys j > i are masked (causal): their probabilities and
// gradients are 0.

/// probs = softmax over j <= i of scores[row] (already scaled), and
/// lse[row] = log sum_j exp(score_j); rows = heads x seq.
template <typename T>
__global__ void causalSoftmaxKernel(const float *scores, T *probs, float *lse,
                                    int64_t rows, int64_t seq) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    const int64_t i = r % seq;
    const float *row = scores + r * seq;
    float localMax = -INFINITY;
    for (int64_t j = lane; j <= i; j += 32)
      localMax = fmaxf(localMax, row[j]);
    const float rowMax = warpMax(localMax);
    float local = 0;
    for (int64_t j = lane; j <= i; j += 32)
      local += expf(row[j] - rowMax);
    const float sum = warpSum(local);
    for (int64_t j = lane; j < seq; j += 32)
      probs[r * seq + j] =
          fromFloat<T>(j <= i ? expf(row[j] - rowMax) / sum : 0.0f);
    if (lane == 0)
      lse[r] = rowMax + logf(sum);
  }
}

/// probs = exp(scores - lse[row]) for j <= i, else 0: the forward's
/// probabilities again from its log-sum-exp.
template <typename T>
__global__ void causalProbsKernel(const float *scores, const float *lse,
                                  T *probs, int64_t rows, int64_t seq) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    const int64_t i = r % seq;
    for (int64_t j = lane; j < seq; j += 32)
      probs[r * seq + j] =
          fromFloat<T>(j <= i ? expf(scores[r * seq + j] - lse[r]) : 0.0f);
  }
}

/// The scores' gradient, in place of the probabilities:
/// ds = p * (dp - delta[row]) * scale.
template <typename T>
__global__ void softmaxGradKernel(const float *dprobs, T *probs,
                                  const float *delta, int64_t rows, int64_t seq,
                                  float scale) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride())
    for (int64_t j = lane; j < seq; j += 32) {
      const int64_t at = r * seq + j;
      probs[at] =
          fromFloat<T>(toFloat(probs[at]) * (dprobs[at] - delta[r]) * scale);
    }
}

/// One warp per query row r = (batch x heads + head) x seq + i of
/// out [batch*seq x hidden]: delta_r = dout_i . out_i over the head's
/// columns, which equals sum_j p_ij (dout_i . v_j), the softmax gradient's
/// subtrahend.
template <typename T>
__global__ void attentionDeltaKernel(const T *out, const T *dout, float *delta,
                                     int64_t rows, int64_t heads, int64_t seq,
                                     int64_t hidden) {
  const int lane = threadIdx.x % 32;
  const int64_t dim = hidden / heads;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    const int64_t i = r % seq, bh = r / seq;
    const int64_t at = ((bh / heads) * seq + i) * hidden + (bh % heads) * dim;
    float local = 0;
    for (int64_t c = lane; c < dim; c += 32)
      local += toFloat(dout[at + c]) * toFloat(out[at + c]);
    const float sum = warpSum(local);
    if (lane == 0)
      delta[r] = sum;
  }
}

__global__ void softmaxCrossEntropyKernel(float *logits, const int32_t *targets,
                                          double *rowLoss, int64_t rows,
                                          int64_t vocab) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = firstRow(); r < rows; r += rowStride()) {
    float *row = logits + r * vocab;
    const float target = row[targets[r]];
    float localMax = -INFINITY;
    for (int64_t c = lane; c < vocab; c += 32)
      localMax = fmaxf(localMax, row[c]);
    const float maxLogit = warpMax(localMax);
    double sum = 0;
    for (int64_t c = lane; c < vocab; c += 32)
      sum += exp(static_cast<double>(row[c] - maxLogit));
    sum = warpSum(sum);
    if (lane == 0)
      rowLoss[r] = log(sum) + maxLogit - target;
    // Every lane has read row[target] above before any lane writes.
    __syncwarp();
    for (int64_t c = lane; c < vocab; c += 32)
      row[c] = static_cast<float>(expf(row[c] - maxLogit) / sum);
  }
}

__global__ void addMeanLossKernel(const double *rowLoss, int64_t rows,
                                  double *sum) {
  if (globalThread() != 0)
    return;
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r)
    loss += rowLoss[r];
  *sum += static_cast<float>(loss / rows);
}

template <typename T>
__global__ void
crossEntropyGradKernel(const float *probs, const int32_t *targets, T *dlogits,
                       int64_t rows, int64_t vocab, float scale) {
  for (int64_t i = globalThread(); i < rows * vocab; i += globalThreads()) {
    float g = probs[i];
    if (i % vocab == targets[i / vocab])
      g -= 1.0f;
    dlogits[i] = fromFloat<T>(g * scale);
  }
}

/// Every parameter of a rank in one launch: a block per chunk (grid-stride
/// over the chunks), its threads over the chunk's values.
__global__ void adamKernel(const AdamChunk *chunks, int64_t count, float lr,
                           float beta1, float beta2, float eps, float c1,
                           float c2) {
  for (int64_t c = blockIdx.x; c < count; c += gridDim.x) {
    const AdamChunk k = chunks[c];
    for (int64_t i = threadIdx.x; i < k.count; i += blockDim.x) {
      const float g = k.grad[i];
      k.m[i] = beta1 * k.m[i] + (1 - beta1) * g;
      k.v[i] = beta2 * k.v[i] + (1 - beta2) * g * g;
      k.value[i] -= lr * (k.m[i] / c1) / (sqrtf(k.v[i] / c2) + eps);
      if (k.copy)
        k.copy[i] = fromFloat<bf16>(k.value[i]);
      k.grad[i] = 0.0f;
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

#ifdef FLEXPIPE_KERNELS_ON_HOST
// test/Runtime/CudaEmulation compiles this file as C++ and runs each launch
// on the CPU, one warp of fibers at a time, to check the kernels against
// Model.cpp on machines without a GPU.
#define KERNEL_CALL(kernel, blocks, threads, stream, ...)                      \
  ::flexpipe::rt::cuda::emulation::launch(stream, kernel, blocks, threads,     \
                                          __VA_ARGS__)
#else
#define KERNEL_CALL(kernel, blocks, threads, stream, ...)                      \
  kernel<<<blocks, threads, 0, stream>>>(__VA_ARGS__)
#endif

/// Launches `kernel` with `blocks` x `threads` on `stream` when there is
/// work, and checks the launch.
#define LAUNCH(kernel, work, perBlock, threads, stream, ...)                   \
  do {                                                                         \
    if ((work) > 0) {                                                          \
      KERNEL_CALL(kernel, blocksFor((work), (perBlock)), (threads), (stream),  \
                  __VA_ARGS__);                                                \
      CUDALAUNCHCHECK(#kernel);                                                \
    }                                                                          \
  } while (0)
#define LAUNCH_ELEMENTS(kernel, n, stream, ...)                                \
  LAUNCH(kernel, n, kThreads, kThreads, stream, __VA_ARGS__)
#define LAUNCH_ROWS(kernel, rows, stream, ...)                                 \
  LAUNCH(kernel, rows, kWarpsPerBlock, kWarpsPerBlock * 32, stream, __VA_ARGS__)

template <typename T>
void flexpipe::rt::cuda::embeddingForward(cudaStream_t stream,
                                          const int32_t *ids,
                                          const float *token,
                                          const float *position, T *out,
                                          int64_t tokens, int64_t hidden,
                                          int64_t seq) {
  LAUNCH_ELEMENTS(embeddingForwardKernel<T>, tokens * hidden, stream, ids,
                  token, position, out, tokens, hidden, seq);
}

void flexpipe::rt::cuda::groupRowsByToken(const int32_t *ids, int64_t tokens,
                                          int32_t *order, int32_t *starts,
                                          int64_t &groups) {
  for (int64_t r = 0; r < tokens; ++r)
    order[r] = static_cast<int32_t>(r);
  std::stable_sort(order, order + tokens,
                   [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
  groups = 0;
  for (int64_t k = 0; k < tokens; ++k)
    if (k == 0 || ids[order[k]] != ids[order[k - 1]])
      starts[groups++] = static_cast<int32_t>(k);
  starts[groups] = static_cast<int32_t>(tokens);
}

template <typename T>
void flexpipe::rt::cuda::embeddingWeightGrad(
    cudaStream_t stream, const int32_t *ids, const int32_t *order,
    const int32_t *starts, int64_t groups, const T *dout, float *tokenGrad,
    float *positionGrad, int64_t tokens, int64_t hidden, int64_t seq) {
  LAUNCH_ELEMENTS(tokenGradKernel<T>, groups * hidden, stream, ids, order,
                  starts, groups, dout, tokenGrad, hidden);
  LAUNCH_ELEMENTS(positionGradKernel<T>, seq * hidden, stream, dout,
                  positionGrad, tokens, hidden, seq);
}

int64_t flexpipe::rt::cuda::rowSumScratch(int64_t rows, int64_t cols) {
  return rowChunks(rows) * cols;
}

/// The warps of a first pass over rows (forEachChunk): one per chunk and 32
/// columns.
static int64_t chunkWarps(int64_t rows, int64_t cols) {
  return rowChunks(rows) * ((cols + 31) / 32);
}

/// The second pass over rows: sums[c] += the chunks' partials, in order.
static void addPartials(cudaStream_t stream, const float *partials, float *sums,
                        int64_t rows, int64_t cols) {
  LAUNCH_ELEMENTS(addPartialsKernel, rows > 0 ? cols : 0, stream, partials,
                  sums, rowChunks(rows), cols);
}

template <typename T>
void flexpipe::rt::cuda::addColumnSums(cudaStream_t stream, const T *x,
                                       float *sums, float *scratch,
                                       int64_t rows, int64_t cols) {
  LAUNCH_ROWS(columnPartialsKernel<T>, chunkWarps(rows, cols), stream, x,
              scratch, rows, cols);
  addPartials(stream, scratch, sums, rows, cols);
}

template <typename T>
void flexpipe::rt::cuda::add(cudaStream_t stream, const T *a, const T *b,
                             T *out, int64_t n) {
  LAUNCH_ELEMENTS(addKernel<T>, n, stream, a, b, out, n);
}

template <typename T>
void flexpipe::rt::cuda::layerNormForward(cudaStream_t stream, const T *x,
                                          const float *gain, const float *bias,
                                          T *y, float *mean, float *rstd,
                                          int64_t rows, int64_t hidden) {
  LAUNCH_ROWS(layerNormForwardKernel<T>, rows, stream, x, gain, bias, y, mean,
              rstd, rows, hidden);
}

template <typename T>
void flexpipe::rt::cuda::layerNormInputGrad(cudaStream_t stream, const T *x,
                                            const T *dy, const float *gain,
                                            const float *mean,
                                            const float *rstd, T *dx,
                                            int64_t rows, int64_t hidden,
                                            bool accumulate) {
  LAUNCH_ROWS(layerNormInputGradKernel<T>, rows, stream, x, dy, gain, mean,
              rstd, dx, rows, hidden, accumulate);
}

template <typename T>
void flexpipe::rt::cuda::layerNormWeightGrad(cudaStream_t stream, const T *x,
                                             const T *dy, const float *mean,
                                             const float *rstd, float *gainGrad,
                                             float *biasGrad, float *scratch,
                                             int64_t rows, int64_t hidden) {
  LAUNCH_ROWS(layerNormPartialsKernel<T>, chunkWarps(rows, hidden), stream, x,
              dy, mean, rstd, scratch, rows, hidden);
  addPartials(stream, scratch, gainGrad, rows, hidden);
  addPartials(stream, scratch + rowSumScratch(rows, hidden), biasGrad, rows,
              hidden);
}

template <typename T>
void flexpipe::rt::cuda::geluForward(cudaStream_t stream, const T *x, T *y,
                                     int64_t n) {
  LAUNCH_ELEMENTS(geluForwardKernel<T>, n, stream, x, y, n);
}

template <typename T>
void flexpipe::rt::cuda::geluBackward(cudaStream_t stream, const T *dy,
                                      const T *x, T *dx, int64_t n) {
  LAUNCH_ELEMENTS(geluBackwardKernel<T>, n, stream, dy, x, dx, n);
}

void flexpipe::rt::cuda::convert(cudaStream_t stream, const float *from,
                                 bf16 *to, int64_t n) {
  LAUNCH_ELEMENTS(toBf16Kernel, n, stream, from, to, n);
}

void flexpipe::rt::cuda::convert(cudaStream_t stream, const bf16 *from,
                                 float *to, int64_t n) {
  LAUNCH_ELEMENTS(toFloatKernel, n, stream, from, to, n);
}

template <typename T>
void flexpipe::rt::cuda::causalSoftmax(cudaStream_t stream, const float *scores,
                                       T *probs, float *lse, int64_t rows,
                                       int64_t seq) {
  LAUNCH_ROWS(causalSoftmaxKernel<T>, rows, stream, scores, probs, lse, rows,
              seq);
}

template <typename T>
void flexpipe::rt::cuda::causalProbs(cudaStream_t stream, const float *scores,
                                     const float *lse, T *probs, int64_t rows,
                                     int64_t seq) {
  LAUNCH_ROWS(causalProbsKernel<T>, rows, stream, scores, lse, probs, rows,
              seq);
}

template <typename T>
void flexpipe::rt::cuda::softmaxGrad(cudaStream_t stream, const float *dprobs,
                                     T *probs, const float *delta, int64_t rows,
                                     int64_t seq, float scale) {
  LAUNCH_ROWS(softmaxGradKernel<T>, rows, stream, dprobs, probs, delta, rows,
              seq, scale);
}

template <typename T>
void flexpipe::rt::cuda::attentionDelta(cudaStream_t stream, const T *out,
                                        const T *dout, float *delta,
                                        int64_t batch, int64_t heads,
                                        int64_t seq, int64_t hidden) {
  const int64_t rows = batch * heads * seq;
  LAUNCH_ROWS(attentionDeltaKernel<T>, rows, stream, out, dout, delta, rows,
              heads, seq, hidden);
}

void flexpipe::rt::cuda::softmaxCrossEntropy(cudaStream_t stream, float *logits,
                                             const int32_t *targets,
                                             double *rowLoss, int64_t rows,
                                             int64_t vocab) {
  LAUNCH_ROWS(softmaxCrossEntropyKernel, rows, stream, logits, targets, rowLoss,
              rows, vocab);
}

void flexpipe::rt::cuda::addMeanLoss(cudaStream_t stream, const double *rowLoss,
                                     int64_t rows, double *sum) {
  LAUNCH(addMeanLossKernel, rows, rows, 1, stream, rowLoss, rows, sum);
}

template <typename T>
void flexpipe::rt::cuda::crossEntropyGrad(cudaStream_t stream,
                                          const float *probs,
                                          const int32_t *targets, T *dlogits,
                                          int64_t rows, int64_t vocab,
                                          float scale) {
  LAUNCH_ELEMENTS(crossEntropyGradKernel<T>, rows * vocab, stream, probs,
                  targets, dlogits, rows, vocab, scale);
}

// The launchers for both activation types.
#define FLEXPIPE_ACTIVATION_LAUNCHERS(T)                                       \
  template void flexpipe::rt::cuda::embeddingForward<T>(                       \
      cudaStream_t, const int32_t *, const float *, const float *, T *,        \
      int64_t, int64_t, int64_t);                                              \
  template void flexpipe::rt::cuda::embeddingWeightGrad<T>(                    \
      cudaStream_t, const int32_t *, const int32_t *, const int32_t *,         \
      int64_t, const T *, float *, float *, int64_t, int64_t, int64_t);        \
  template void flexpipe::rt::cuda::addColumnSums<T>(                          \
      cudaStream_t, const T *, float *, float *, int64_t, int64_t);            \
  template void flexpipe::rt::cuda::layerNormForward<T>(                       \
      cudaStream_t, const T *, const float *, const float *, T *, float *,     \
      float *, int64_t, int64_t);                                              \
  template void flexpipe::rt::cuda::layerNormInputGrad<T>(                     \
      cudaStream_t, const T *, const T *, const float *, const float *,        \
      const float *, T *, int64_t, int64_t, bool);                             \
  template void flexpipe::rt::cuda::layerNormWeightGrad<T>(                    \
      cudaStream_t, const T *, const T *, const float *, const float *,        \
      float *, float *, float *, int64_t, int64_t);                            \
  template void flexpipe::rt::cuda::geluForward<T>(cudaStream_t, const T *,    \
                                                   T *, int64_t);              \
  template void flexpipe::rt::cuda::geluBackward<T>(cudaStream_t, const T *,   \
                                                    const T *, T *, int64_t);  \
  template void flexpipe::rt::cuda::causalSoftmax<T>(                          \
      cudaStream_t, const float *, T *, float *, int64_t, int64_t);            \
  template void flexpipe::rt::cuda::causalProbs<T>(                            \
      cudaStream_t, const float *, const float *, T *, int64_t, int64_t);      \
  template void flexpipe::rt::cuda::softmaxGrad<T>(                            \
      cudaStream_t, const float *, T *, const float *, int64_t, int64_t,       \
      float);                                                                  \
  template void flexpipe::rt::cuda::attentionDelta<T>(                         \
      cudaStream_t, const T *, const T *, float *, int64_t, int64_t, int64_t,  \
      int64_t);                                                                \
  template void flexpipe::rt::cuda::add<T>(cudaStream_t, const T *, const T *, \
                                           T *, int64_t);                      \
  template void flexpipe::rt::cuda::crossEntropyGrad<T>(                       \
      cudaStream_t, const float *, const int32_t *, T *, int64_t, int64_t,     \
      float);
FLEXPIPE_ACTIVATION_LAUNCHERS(float)
FLEXPIPE_ACTIVATION_LAUNCHERS(bf16)
#undef FLEXPIPE_ACTIVATION_LAUNCHERS

void flexpipe::rt::cuda::appendAdamChunks(float *value, float *grad, float *m,
                                          float *v, bf16 *copy, int64_t n,
                                          std::vector<AdamChunk> &chunks) {
  for (int64_t at = 0; at < n; at += kAdamChunkValues)
    chunks.push_back({value + at, grad + at, m + at, v + at,
                      copy ? copy + at : nullptr,
                      std::min(kAdamChunkValues, n - at)});
}

void flexpipe::rt::cuda::adamStep(cudaStream_t stream, const AdamChunk *chunks,
                                  int64_t count, float lr, float beta1,
                                  float beta2, float eps, float c1, float c2) {
  LAUNCH(adamKernel, count, 1, kThreads, stream, chunks, count, lr, beta1,
         beta2, eps, c1, c2);
}
