//===- CudaModel.cpp - The built-in GPT model on a GPU --------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Model.cpp's layers, layer by layer, with the same split into forward,
// input gradient and weight gradient and the same state kept between them,
// on the compute stream: matrix products in cuBLAS and cuBLASLt, with
// biases, the residual and the MLP's GELU (forward and derivative) in
// cuBLASLt's epilogues; the rest in Kernels.cu. The layers are templates over
// the activations' type T: float (FLEXPIPE_CUDA_MATH fp32 or tf32), or bf16
// (mixed precision: activations, their gradients and the products' weights
// in bf16, fp32 master weights, gradients and Adam). A bf16 stage hands bf16
// arrays to the executor, so messages between stages are bf16 too.
// Initial weights are Model.cpp's: each layer's parameters are drawn on the
// host by Model.h's embeddingParameters, blockParameters and headParameters
// (ModelData.cpp) and copied to the GPU, so a CUDA run starts from exactly the
// weights of flexpipe-reference without linking the CPU layers and OpenBLAS.
// Nothing here waits for the GPU but through CudaContext::synchronize's
// polled, timeout-aware wait (takeLossSum, synchronize, hostData, weights,
// state, the copies to the GPU), which comes first where a copy from the GPU
// into pageable memory follows: such a copy blocks in the driver, out of the
// timeout's reach, until all earlier work on the stream is done.
// Each stage computation and the optimizer step end with a progress marker
// (CudaContext::markProgress) that host waits count as progress.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "Kernels.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

namespace {

using Floats = DeviceArray<float>;
template <typename T> using Acts = DeviceArray<T>;

/// A parameter on the GPU with its gradient and Adam's moments, and in
/// mixed precision the bf16 copy of its values that products read (Adam
/// writes it with the values).
struct DeviceParameter {
  std::string name;
  Floats value, grad, m, v;
  Acts<bf16> copy;
  /// Rounds the values into the copy, where there is one.
  void refreshCopy(CudaContext &context) {
    if (copy)
      convert(context.stream(), value.get(), copy.get(),
              static_cast<int64_t>(value.size()));
  }
};

/// The values products read: the parameter's own, or its bf16 copy.
template <typename T> const T *weights(const DeviceParameter &p);
template <> const float *weights<float>(const DeviceParameter &p) {
  return p.value.get();
}
template <> const bf16 *weights<bf16>(const DeviceParameter &p) {
  return p.copy.get();
}

/// A layer's initial parameters (drawn on the host) copied to the GPU, with
/// bf16 copies for activations of type T = bf16.
template <typename T>
std::vector<DeviceParameter> upload(CudaContext &context,
                                    const std::vector<Parameter> &initial) {
  std::vector<DeviceParameter> all;
  for (const Parameter &p : initial) {
    DeviceParameter d{p.name, Floats(context, p.value.size()),
                      Floats(context, p.value.size(), true),
                      Floats(context, p.value.size(), true),
                      Floats(context, p.value.size(), true)};
    CUDACHECK(cudaMemcpyAsync(d.value.get(), p.value.data(), d.value.bytes(),
                              cudaMemcpyHostToDevice, context.stream()));
    if (std::is_same_v<T, bf16>) {
      d.copy = Acts<bf16>(context, p.value.size());
      d.refreshCopy(context);
    }
    all.push_back(std::move(d));
  }
  // The host copies are freed when `initial` goes: wait for the copies.
  context.synchronize("copying the initial weights to the GPU");
  return all;
}

int asInt(int64_t value, const char *what) {
  if (value < 0 || value > INT_MAX)
    fatal(std::string(what) + " " + std::to_string(value) +
          " does not fit cuBLAS's int sizes");
  return static_cast<int>(value);
}

/// cuBLAS's name of an element type.
template <typename T> constexpr cudaDataType_t dataType() {
  return std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_32F;
}
/// How products with inputs of type T sum: bf16 inputs in fp32; fp32 inputs
/// as the context says (fp32, or TF32 tensor cores).
template <typename T> cublasComputeType_t computeType(CudaContext &context) {
  return std::is_same_v<T, bf16> ? CUBLAS_COMPUTE_32F : context.computeType();
}

/// One row-major matrix of a batched product: its elements, leading
/// dimension and the distance between consecutive matrices of the batch.
template <typename T> struct Strided {
  T *at;
  int64_t ld, stride = 0;
};

/// C_i[m x n] = alpha op(A_i) op(B_i) + beta C_i for the `count` matrices
/// of each operand, row-major, inputs of type In, C of type Out (a weight
/// gradient or attention's scores: fp32 whatever the inputs). cuBLAS is
/// column-major: it computes C^T = op(B)^T op(A)^T on the same memory.
template <typename In, typename Out>
void gemmBatched(CudaContext &context, bool transA, bool transB, int64_t m,
                 int64_t n, int64_t k, float alpha, Strided<const In> a,
                 Strided<const In> b, float beta, Strided<Out> c,
                 int64_t count) {
  CUBLASCHECK(cublasGemmStridedBatchedEx(
      context.blas(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
      transA ? CUBLAS_OP_T : CUBLAS_OP_N, asInt(n, "n"), asInt(m, "m"),
      asInt(k, "k"), &alpha, b.at, dataType<In>(), asInt(b.ld, "ldb"), b.stride,
      a.at, dataType<In>(), asInt(a.ld, "lda"), a.stride, &beta, c.at,
      dataType<Out>(), asInt(c.ld, "ldc"), c.stride, asInt(count, "batch"),
      computeType<In>(context), CUBLAS_GEMM_DEFAULT));
}

/// C[m x n] = op(A) op(B) + beta C, row-major (Model.cpp's gemm), dense.
template <typename In, typename Out>
void gemm(CudaContext &context, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, const In *a, const In *b, float beta, Out *c) {
  gemmBatched<In, Out>(context, transA, transB, m, n, k, 1.0f,
                       {a, transA ? m : k}, {b, transB ? k : n}, beta, {c, n},
                       1);
}

/// Causal multi-head attention of one sequence after another: qkv
/// [batch*seq x 3*hidden] (q | k | v of each head side by side) into out
/// [batch*seq x hidden], keeping per query row (batch x heads x seq) the
/// log-sum-exp of its scores in `lse`. Per sequence, the scores of all heads
/// (heads x seq x seq, fp32) and the probabilities (of type T) live only
/// during the call; cuBLAS's batched products do the work: scores =
/// q k^T / sqrt(dim), out = probs v.
template <typename T> struct Attention {
  CudaContext &context;
  int64_t batch, heads, seq, hidden;

  int64_t dim() const { return hidden / heads; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(dim())); }
  int64_t rows() const { return heads * seq; }
  /// The heads of sequence b in qkv or dqkv (which: 0 q, 1 k, 2 v).
  template <typename U>
  Strided<U> part(U *qkv, int64_t b, int64_t which) const {
    return {qkv + b * seq * 3 * hidden + which * hidden, 3 * hidden, dim()};
  }
  /// The heads of sequence b in a [batch*seq x hidden] tensor.
  template <typename U> Strided<U> headsOf(U *x, int64_t b) const {
    return {x + b * seq * hidden, hidden, dim()};
  }
  /// The heads' seq x seq matrices (scores, probabilities).
  template <typename U> Strided<U> square(U *x) const {
    return {x, seq, seq * seq};
  }
  /// scores = q k^T * scale for sequence b.
  void scores(const T *qkv, int64_t b, float *into) {
    gemmBatched<T, float>(context, false, true, seq, seq, dim(), scale(),
                          part(qkv, b, 0), part(qkv, b, 1), 0.0f, square(into),
                          heads);
  }

  void forward(const T *qkv, float *lse, T *out) {
    Floats s(context, rows() * seq);
    Acts<T> p(context, rows() * seq);
    for (int64_t b = 0; b < batch; ++b) {
      scores(qkv, b, s.get());
      causalSoftmax(context.stream(), s.get(), p.get(), lse + b * rows(),
                    rows(), seq);
      gemmBatched<T, T>(context, false, false, seq, dim(), seq, 1.0f,
                        square<const T>(p.get()), part(qkv, b, 2), 0.0f,
                        headsOf(out, b), heads);
    }
  }

  /// dqkv (laid out as qkv) from the forward's out and lse and the output
  /// gradient dout: per sequence the probabilities again from lse, then
  /// dv = p^T dout, dp = dout v^T, ds = p (dp - delta) scale, dq = ds k and
  /// dk = ds^T q.
  void backward(const T *qkv, const T *out, const float *lse, const T *dout,
                T *dqkv) {
    Floats delta(context, batch * rows()), s(context, rows() * seq);
    Acts<T> p(context, rows() * seq);
    attentionDelta(context.stream(), out, dout, delta.get(), batch, heads, seq,
                   hidden);
    for (int64_t b = 0; b < batch; ++b) {
      const Strided<const T> dOb = headsOf(dout, b);
      scores(qkv, b, s.get());
      causalProbs(context.stream(), s.get(), lse + b * rows(), p.get(), rows(),
                  seq);
      gemmBatched<T, T>(context, true, false, seq, dim(), seq, 1.0f,
                        square<const T>(p.get()), dOb, 0.0f, part(dqkv, b, 2),
                        heads);
      gemmBatched<T, float>(context, false, true, seq, seq, dim(), 1.0f, dOb,
                            part(qkv, b, 2), 0.0f, square(s.get()), heads);
      softmaxGrad(context.stream(), s.get(), p.get(), delta.get() + b * rows(),
                  rows(), seq, scale());
      gemmBatched<T, T>(context, false, false, seq, dim(), seq, 1.0f,
                        square<const T>(p.get()), part(qkv, b, 1), 0.0f,
                        part(dqkv, b, 0), heads);
      gemmBatched<T, T>(context, true, false, seq, dim(), seq, 1.0f,
                        square<const T>(p.get()), part(qkv, b, 0), 0.0f,
                        part(dqkv, b, 1), heads);
    }
  }
};

/// What a cuBLASLt product does after D = A op(B) (+ C): add a bias (Bias),
/// add a bias, keep the sum in `aux` and apply GELU (GeluAuxBias), or
/// multiply by GELU's derivative at `aux` (DGelu).
enum class Epilogue : int64_t { Bias, GeluAuxBias, DGelu };

/// D[m x n] = A[m x k] op(B) (+ C[m x n], the residual, where given), then
/// the epilogue, row-major: op(B) is B[k x n], or B[n x k] transposed with
/// `transB`. Every matrix and the bias are of type T.
template <typename T> struct LtProduct {
  int64_t m, n, k;
  const T *a, *b;
  bool transB;
  Epilogue epilogue;
  const T *bias; ///< n values (Bias, GeluAuxBias)
  T *aux;        ///< m x n: GELU's input, written or read
  const T *c;
  T *d;
};

/// Runs `p` as one cuBLASLt product on the compute stream. Column-major,
/// that is D^T = op(B)^T A^T: cuBLASLt's A is our B (n x k, or k x n
/// transposed), its B our A (k x m, ld k), and the bias runs along D^T's
/// rows, our columns. cuBLASLt's heuristic picks the algorithm once per kind
/// of product, within the context's workspace. False, with nothing enqueued,
/// when cuBLASLt has no algorithm for a GELU epilogue (the caller computes
/// GELU apart); a bias product without one stops the rank.
template <typename T>
bool ltMatmul(CudaContext &context, const LtProduct<T> &p) {
  cublasLtMatmulDesc_t desc = nullptr;
  CUBLASCHECK(
      cublasLtMatmulDescCreate(&desc, computeType<T>(context), CUDA_R_32F));
  const cublasOperation_t transA = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLASCHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &transA, sizeof(transA)));
  const cublasLtEpilogue_t epilogue =
      p.epilogue == Epilogue::Bias          ? CUBLASLT_EPILOGUE_BIAS
      : p.epilogue == Epilogue::GeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                            : CUBLASLT_EPILOGUE_DGELU;
  CUBLASCHECK(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (p.epilogue != Epilogue::DGelu)
    CUBLASCHECK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  if (p.epilogue != Epilogue::Bias) {
    const int64_t auxLd = p.n; // D^T's leading dimension
    CUBLASCHECK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux,
        sizeof(p.aux)));
    CUBLASCHECK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof(auxLd)));
  }
  cublasLtMatrixLayout_t ours[3] = {}; // op(B)^T, A^T, D^T (and C^T)
  const int64_t shapes[3][2] = {
      {p.transB ? p.k : p.n, p.transB ? p.n : p.k}, {p.k, p.m}, {p.n, p.m}};
  for (int i = 0; i < 3; ++i)
    CUBLASCHECK(cublasLtMatrixLayoutCreate(
        &ours[i], dataType<T>(), shapes[i][0], shapes[i][1], shapes[i][0]));
  const cublasLtMatmulAlgo_t *algo = context.blasLtAlgo(
      {p.m, p.n, p.k, p.transB, static_cast<int64_t>(p.epilogue),
       p.c != nullptr},
      [&]() -> std::optional<cublasLtMatmulAlgo_t> {
        cublasLtMatmulPreference_t preference = nullptr;
        CUBLASCHECK(cublasLtMatmulPreferenceCreate(&preference));
        const size_t bytes = context.blasWorkspaceBytes();
        CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
            sizeof(bytes)));
        cublasLtMatmulHeuristicResult_t result = {};
        int found = 0;
        // Not checked: "not supported" is an answer here.
        const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
            context.blasLt(), desc, ours[0], ours[1], ours[2], ours[2],
            preference, 1, &result, &found);
        CUBLASCHECK(cublasLtMatmulPreferenceDestroy(preference));
        if (status == CUBLAS_STATUS_SUCCESS && found > 0 &&
            result.state == CUBLAS_STATUS_SUCCESS)
          return result.algo;
        if (p.epilogue == Epilogue::Bias)
          fatal("cuBLASLt has no algorithm for a " + std::to_string(p.m) +
                " x " + std::to_string(p.n) + " x " + std::to_string(p.k) +
                (std::is_same_v<T, bf16> ? " bf16" : " fp32") +
                " product with a bias epilogue");
        return std::nullopt;
      });
  if (algo) {
    const float alpha = 1.0f, beta = p.c ? 1.0f : 0.0f;
    CUBLASCHECK(cublasLtMatmul(context.blasLt(), desc, &alpha, p.b, ours[0],
                               p.a, ours[1], &beta, p.c ? p.c : p.d, ours[2],
                               p.d, ours[2], algo, context.blasWorkspace(),
                               context.blasWorkspaceBytes(), context.stream()));
  }
  for (cublasLtMatrixLayout_t layout : ours)
    CUBLASCHECK(cublasLtMatrixLayoutDestroy(layout));
  CUBLASCHECK(cublasLtMatmulDescDestroy(desc));
  return algo != nullptr;
}

/// cuBLASLt's GELU epilogues want GELU's input with a leading dimension
/// divisible by 8.
bool geluEpilogueFits(int64_t n) { return n % 8 == 0; }

/// y[t x out] = x[t x in] W[in x out] + b, plus `residual` where given (the
/// projections that end a residual branch).
template <typename T>
Acts<T> linearForward(CudaContext &context, const Acts<T> &x,
                      const DeviceParameter &w, const DeviceParameter &b,
                      int64_t t, int64_t in, int64_t out,
                      const Acts<T> *residual = nullptr) {
  Acts<T> y(context, t * out);
  ltMatmul<T>(context, {t, out, in, x.get(), weights<T>(w), false,
                        Epilogue::Bias, weights<T>(b), nullptr,
                        residual ? residual->get() : nullptr, y.get()});
  return y;
}

/// pre = x W + b and f = GELU(pre) (the MLP's first product), in one
/// cuBLASLt product where its GELU epilogue serves.
template <typename T>
void linearGeluForward(CudaContext &context, const Acts<T> &x,
                       const DeviceParameter &w, const DeviceParameter &b,
                       int64_t t, int64_t in, int64_t out, Acts<T> &pre,
                       Acts<T> &f) {
  f = Acts<T>(context, t * out);
  pre = Acts<T>(context, t * out);
  if (geluEpilogueFits(out) &&
      ltMatmul<T>(context, {t, out, in, x.get(), weights<T>(w), false,
                            Epilogue::GeluAuxBias, weights<T>(b), pre.get(),
                            nullptr, f.get()}))
    return;
  // Without the GELU epilogue: the bias product into the same `pre`.
  ltMatmul<T>(context,
              {t, out, in, x.get(), weights<T>(w), false, Epilogue::Bias,
               weights<T>(b), nullptr, nullptr, pre.get()});
  geluForward(context.stream(), pre.get(), f.get(), pre.size());
}

/// dx[t x in] = dy[t x out] W^T.
template <typename T>
Acts<T> linearInputGrad(CudaContext &context, const Acts<T> &dy,
                        const DeviceParameter &w, int64_t t, int64_t in,
                        int64_t out) {
  Acts<T> dx(context, t * in);
  gemm(context, false, true, t, in, out, dy.get(), weights<T>(w), 0.0f,
       dx.get());
  return dx;
}

/// dpre[t x in] = (dy[t x out] W^T) * GELU'(pre): the input gradient of
/// the product after a GELU, in one cuBLASLt product where its GELU
/// derivative epilogue serves.
template <typename T>
Acts<T> geluLinearInputGrad(CudaContext &context, const Acts<T> &dy,
                            const DeviceParameter &w, const Acts<T> &pre,
                            int64_t t, int64_t in, int64_t out) {
  Acts<T> dpre(context, t * in);
  if (geluEpilogueFits(in) &&
      ltMatmul<T>(context,
                  {t, in, out, dy.get(), weights<T>(w), true, Epilogue::DGelu,
                   nullptr, const_cast<T *>(pre.get()), nullptr, dpre.get()}))
    return dpre;
  Acts<T> df = linearInputGrad(context, dy, w, t, in, out);
  geluBackward(context.stream(), df.get(), pre.get(), dpre.get(), df.size());
  return dpre;
}

/// dW += x^T dy, db += column sums of dy (fp32 gradients).
template <typename T>
void linearWeightGrad(CudaContext &context, const Acts<T> &x, const Acts<T> &dy,
                      DeviceParameter &w, DeviceParameter *b, int64_t t,
                      int64_t in, int64_t out) {
  gemm(context, true, false, in, out, t, x.get(), dy.get(), 1.0f, w.grad.get());
  if (b) {
    Floats scratch(context, rowSumScratch(t, out));
    addColumnSums(context.stream(), dy.get(), b->grad.get(), scratch.get(), t,
                  out);
  }
}

/// LayerNorm's output and statistics.
template <typename T> struct Normalized {
  Acts<T> y;
  Floats mean, rstd;
};
template <typename T>
Normalized<T> layerNorm(CudaContext &context, const Acts<T> &x,
                        const DeviceParameter &g, const DeviceParameter &b,
                        int64_t t, int64_t h) {
  Normalized<T> n{Acts<T>(context, t * h), Floats(context, t),
                  Floats(context, t)};
  layerNormForward(context.stream(), x.get(), g.value.get(), b.value.get(),
                   n.y.get(), n.mean.get(), n.rstd.get(), t, h);
  return n;
}

/// LayerNorm's gain and bias gradients from its input x, statistics and
/// output gradient dy.
template <typename T>
void normWeightGrad(CudaContext &context, const Acts<T> &x, const Acts<T> &dy,
                    const Floats &mean, const Floats &rstd,
                    DeviceParameter &gain, DeviceParameter &bias, int64_t t,
                    int64_t h) {
  Floats scratch(context, 2 * rowSumScratch(t, h));
  layerNormWeightGrad(context.stream(), x.get(), dy.get(), mean.get(),
                      rstd.get(), gain.grad.get(), bias.grad.get(),
                      scratch.get(), t, h);
}

/// Per micro-batch token ids (tokens or targets): copied from the host
/// through page-locked memory, one slot per micro-batch. A slot is rewritten
/// in the next iteration only, after the executor's end-of-iteration wait.
/// With `grouped`, each slot also holds its rows grouped by token
/// (groupRowsByToken), for the embedding's weight gradient.
class TokenSlots {
public:
  TokenSlots(CudaContext &context, int64_t slots, int64_t perSlot,
             bool grouped = false)
      : context(context), perSlot(perSlot), host(slots * perSlot),
        device(context, slots * perSlot) {
    if (!grouped)
      return;
    // Per slot: perSlot rows in `order`, then perSlot + 1 group starts.
    groupHost = PinnedArray<int32_t>(slots * (2 * perSlot + 1));
    groupDevice = DeviceArray<int32_t>(context, slots * (2 * perSlot + 1));
    groupCount.assign(slots, 0);
  }
  const int32_t *upload(int64_t mb, const std::vector<int32_t> &ids,
                        int64_t vocab) {
    if (mb < 0 || (mb + 1) * perSlot > static_cast<int64_t>(host.size()) ||
        static_cast<int64_t>(ids.size()) != perSlot)
      fatal("micro-batch " + std::to_string(mb) +
            " is outside the schedule's micro-batches");
    for (int32_t id : ids)
      if (id < 0 || id >= vocab)
        fatal("token " + std::to_string(id) + " is outside the vocabulary");
    std::memcpy(host.get() + mb * perSlot, ids.data(),
                perSlot * sizeof(int32_t));
    CUDACHECK(cudaMemcpyAsync(
        device.get() + mb * perSlot, host.get() + mb * perSlot,
        perSlot * sizeof(int32_t), cudaMemcpyHostToDevice, context.stream()));
    if (!groupCount.empty()) {
      int32_t *slot = groupHost.get() + mb * (2 * perSlot + 1);
      groupRowsByToken(ids.data(), perSlot, slot, slot + perSlot,
                       groupCount[mb]);
      CUDACHECK(cudaMemcpyAsync(groupDevice.get() + mb * (2 * perSlot + 1),
                                slot, (2 * perSlot + 1) * sizeof(int32_t),
                                cudaMemcpyHostToDevice, context.stream()));
    }
    return at(mb);
  }
  const int32_t *at(int64_t mb) const { return device.get() + mb * perSlot; }
  /// Micro-batch mb's rows grouped by token: the order, the groups' starts
  /// and their number (a grouped slot's, after its upload).
  const int32_t *order(int64_t mb) const {
    return groupDevice.get() + mb * (2 * perSlot + 1);
  }
  const int32_t *starts(int64_t mb) const { return order(mb) + perSlot; }
  int64_t groups(int64_t mb) const { return groupCount[mb]; }

private:
  CudaContext &context;
  int64_t perSlot;
  PinnedArray<int32_t> host;
  DeviceArray<int32_t> device;
  PinnedArray<int32_t> groupHost;
  DeviceArray<int32_t> groupDevice;
  std::vector<int64_t> groupCount;
};

/// What a layer keeps for micro-batch `mb`; stops the rank when `what`
/// comes before the computation that makes it.
template <typename T>
T &stateOf(std::map<int64_t, T> &states, int64_t mb, const std::string &what) {
  auto it = states.find(mb);
  if (it == states.end())
    fatal(what + " of mb " + std::to_string(mb) + " ran out of order");
  return it->second;
}

/// The bytes of `arrays`, of any element types.
template <typename... Arrays> size_t bytesOf(const Arrays &...arrays) {
  return (arrays.bytes() + ... + size_t{0});
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

/// Model.h's Layer on the GPU, its activations of type T; arrays move in and
/// out.
template <typename T> class GpuLayer {
public:
  virtual ~GpuLayer() = default;
  virtual void forward(int64_t mb, const Batch &batch, Acts<T> in, Acts<T> &out,
                       bool countLoss) = 0;
  virtual void inputGrad(int64_t mb, Acts<T> dout, Acts<T> &din,
                         float lossScale) = 0;
  virtual void weightGrad(int64_t mb) = 0;
  virtual std::vector<DeviceParameter *> parameters() = 0;
  virtual size_t cachedBytes() const = 0;
};

template <typename T> class GpuEmbedding final : public GpuLayer<T> {
public:
  GpuEmbedding(CudaContext &context, const GptConfig &config,
               int64_t microbatches)
      : context(context), config(config),
        ids(context, microbatches, config.tokens(), /*grouped=*/true) {
    params = upload<T>(
        context, embeddingParameters(config, vocabSlice(config.vocab, 0, 1)));
  }
  void forward(int64_t mb, const Batch &batch, Acts<T>, Acts<T> &out,
               bool) override {
    const int64_t t = config.tokens(), h = config.hidden;
    const int32_t *tokens = ids.upload(mb, batch.tokens, config.vocab);
    out = Acts<T>(context, t * h);
    embeddingForward(context.stream(), tokens, params[0].value.get(),
                     params[1].value.get(), out.get(), t, h, config.seq);
    live.insert(mb);
  }
  void inputGrad(int64_t mb, Acts<T> dout, Acts<T> &din, float) override {
    din = Acts<T>(); // token ids have no gradient
    grads[mb] = std::move(dout);
  }
  void weightGrad(int64_t mb) override {
    const Acts<T> &d = stateOf(grads, mb, "the embedding's weight gradient");
    embeddingWeightGrad(context.stream(), ids.at(mb), ids.order(mb),
                        ids.starts(mb), ids.groups(mb), d.get(),
                        params[0].grad.get(), params[1].grad.get(),
                        config.tokens(), config.hidden, config.seq);
    grads.erase(mb);
    live.erase(mb);
  }
  std::vector<DeviceParameter *> parameters() override {
    return {&params[0], &params[1]};
  }
  size_t cachedBytes() const override {
    size_t bytes = live.size() * config.tokens() * sizeof(int32_t);
    for (const auto &[mb, g] : grads)
      bytes += g.bytes();
    return bytes;
  }

private:
  CudaContext &context;
  GptConfig config;
  std::vector<DeviceParameter> params; // token, position
  TokenSlots ids;
  std::set<int64_t> live;
  std::map<int64_t, Acts<T>> grads;
};

/// x -> x + Attn(LN1(x)) -> x2 + MLP(LN2(x2)).
template <typename T> class GpuBlock final : public GpuLayer<T> {
public:
  GpuBlock(CudaContext &context, const GptConfig &config, int64_t index)
      : context(context), config(config) {
    params = upload<T>(context, blockParameters(config, index));
  }

  void forward(int64_t mb, const Batch &, Acts<T> in, Acts<T> &out,
               bool) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = states[mb];
    s.x = std::move(in);
    Normalized<T> n1 = layerNorm(context, s.x, ln1g(), ln1b(), t, h);
    s.h1 = std::move(n1.y);
    s.mean1 = std::move(n1.mean);
    s.rstd1 = std::move(n1.rstd);
    s.qkv = linearForward(context, s.h1, wqkv(), bqkv(), t, h, 3 * h);
    s.lse = Floats(context, queryRows());
    s.a = Acts<T>(context, t * h);
    attention().forward(s.qkv.get(), s.lse.get(), s.a.get());
    s.x2 = linearForward(context, s.a, wo(), bo(), t, h, h, &s.x);
    Normalized<T> n2 = layerNorm(context, s.x2, ln2g(), ln2b(), t, h);
    s.h2 = std::move(n2.y);
    s.mean2 = std::move(n2.mean);
    s.rstd2 = std::move(n2.rstd);
    linearGeluForward(context, s.h2, w1(), b1(), t, h, 4 * h, s.pre, s.f);
    out = linearForward(context, s.f, w2(), b2(), t, 4 * h, h, &s.x2);
  }

  void inputGrad(int64_t mb, Acts<T> dy, Acts<T> &dx, float) override {
    const int64_t t = config.tokens(), h = config.hidden;
    cudaStream_t stream = context.stream();
    State &s = stateOf(states, mb, "a block's input gradient");
    // MLP branch; the residual carries dy to x2.
    s.dm = std::move(dy);
    s.dpre = geluLinearInputGrad(context, s.dm, w2(), s.pre, t, 4 * h, h);
    s.dh2 = linearInputGrad(context, s.dpre, w1(), t, h, 4 * h);
    Acts<T> dx2 = s.dm.clone();
    layerNormInputGrad(stream, s.x2.get(), s.dh2.get(), ln2g().value.get(),
                       s.mean2.get(), s.rstd2.get(), dx2.get(), t, h, true);
    // Attention branch; the residual carries dx2 to x.
    s.dout = dx2.clone();
    Acts<T> da = linearInputGrad(context, s.dout, wo(), t, h, h);
    s.dqkv = Acts<T>(context, t * 3 * h);
    attention().backward(s.qkv.get(), s.a.get(), s.lse.get(), da.get(),
                         s.dqkv.get());
    s.dh1 = linearInputGrad(context, s.dqkv, wqkv(), t, h, 3 * h);
    dx = std::move(dx2);
    layerNormInputGrad(stream, s.x.get(), s.dh1.get(), ln1g().value.get(),
                       s.mean1.get(), s.rstd1.get(), dx.get(), t, h, true);
    // What only the input gradient reads goes now (the stream-ordered
    // allocator frees it after the kernels above): the weight gradient
    // needs each product's input and output gradient, not qkv, lse or the
    // MLP's pre-activation.
    s.qkv = Acts<T>();
    s.lse = Floats();
    s.pre = Acts<T>();
  }

  void weightGrad(int64_t mb) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = stateOf(states, mb, "a block's weight gradient");
    linearWeightGrad(context, s.f, s.dm, w2(), &b2(), t, 4 * h, h);
    linearWeightGrad(context, s.h2, s.dpre, w1(), &b1(), t, h, 4 * h);
    normWeightGrad(context, s.x2, s.dh2, s.mean2, s.rstd2, ln2g(), ln2b(), t,
                   h);
    linearWeightGrad(context, s.a, s.dout, wo(), &bo(), t, h, h);
    linearWeightGrad(context, s.h1, s.dqkv, wqkv(), &bqkv(), t, h, 3 * h);
    normWeightGrad(context, s.x, s.dh1, s.mean1, s.rstd1, ln1g(), ln1b(), t, h);
    states.erase(mb);
  }

  std::vector<DeviceParameter *> parameters() override {
    std::vector<DeviceParameter *> all;
    for (DeviceParameter &p : params)
      all.push_back(&p);
    return all;
  }
  size_t cachedBytes() const override {
    size_t bytes = 0;
    for (const auto &[mb, s] : states)
      bytes += bytesOf(s.x, s.h1, s.qkv, s.lse, s.a, s.x2, s.h2, s.pre, s.f,
                       s.dm, s.dpre, s.dh2, s.dout, s.dqkv, s.dh1, s.mean1,
                       s.rstd1, s.mean2, s.rstd2);
    return bytes;
  }

private:
  struct State {
    // Forward (lse: attention's log-sum-exp per query row; the input
    // gradient frees qkv, lse and pre).
    Acts<T> x, h1, qkv, a, x2, h2, pre, f;
    Floats lse;
    Floats mean1, rstd1, mean2, rstd2;      // LayerNorm statistics
    Acts<T> dm, dpre, dh2, dout, dqkv, dh1; // kept for weightGrad
  };
  /// Attention's query rows: batch x heads x seq.
  int64_t queryRows() const {
    return config.microBatch * config.heads * config.seq;
  }
  Attention<T> attention() {
    return {context, config.microBatch, config.heads, config.seq,
            config.hidden};
  }
  // Model.cpp's parameter order.
  DeviceParameter &ln1g() { return params[0]; }
  DeviceParameter &ln1b() { return params[1]; }
  DeviceParameter &wqkv() { return params[2]; }
  DeviceParameter &bqkv() { return params[3]; }
  DeviceParameter &wo() { return params[4]; }
  DeviceParameter &bo() { return params[5]; }
  DeviceParameter &ln2g() { return params[6]; }
  DeviceParameter &ln2b() { return params[7]; }
  DeviceParameter &w1() { return params[8]; }
  DeviceParameter &b1() { return params[9]; }
  DeviceParameter &w2() { return params[10]; }
  DeviceParameter &b2() { return params[11]; }

  CudaContext &context;
  GptConfig config;
  std::vector<DeviceParameter> params;
  std::map<int64_t, State> states;
};

/// Final LayerNorm, LM head (no bias) and mean cross-entropy. The logits
/// and their softmax are fp32 whatever T (as mixed-precision training keeps
/// the loss); their gradient is of type T.
template <typename T> class GpuHead final : public GpuLayer<T> {
public:
  GpuHead(CudaContext &context, const GptConfig &config, int64_t microbatches,
          double *lossSum)
      : context(context), config(config),
        targets(context, microbatches, config.tokens()), lossSum(lossSum) {
    params = upload<T>(context, headParameters(config));
  }
  /// `out` is a copy of the input: the stage's output that runtime operations
  /// see (Model.cpp's Head passes its input on alike).
  void forward(int64_t mb, const Batch &batch, Acts<T> in, Acts<T> &out,
               bool countLoss) override {
    const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
    cudaStream_t stream = context.stream();
    State &s = states[mb];
    s.x = std::move(in);
    out = s.x.clone();
    const int32_t *target = targets.upload(mb, batch.targets, v);
    Normalized<T> n = layerNorm(context, s.x, gain(), bias(), t, h);
    s.hf = std::move(n.y);
    s.mean = std::move(n.mean);
    s.rstd = std::move(n.rstd);
    s.probs = Floats(context, t * v);
    gemm(context, false, false, t, v, h, s.hf.get(), weights<T>(weight()), 0.0f,
         s.probs.get());
    DeviceArray<double> rowLoss(context, t);
    softmaxCrossEntropy(stream, s.probs.get(), target, rowLoss.get(), t, v);
    if (countLoss)
      addMeanLoss(stream, rowLoss.get(), t, lossSum);
  }
  void inputGrad(int64_t mb, Acts<T>, Acts<T> &din, float lossScale) override {
    const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
    cudaStream_t stream = context.stream();
    State &s = stateOf(states, mb, "the head's input gradient");
    // The logit gradients replace the probabilities (in place for fp32):
    // the head keeps one vocabulary-wide array per micro-batch, not two.
    const float scale = lossScale / static_cast<float>(t);
    if constexpr (std::is_same_v<T, float>) {
      s.dlogits = std::move(s.probs);
      crossEntropyGrad(stream, s.dlogits.get(), targets.at(mb), s.dlogits.get(),
                       t, v, scale);
    } else {
      s.dlogits = Acts<T>(context, t * v);
      crossEntropyGrad(stream, s.probs.get(), targets.at(mb), s.dlogits.get(),
                       t, v, scale);
      s.probs = Floats();
    }
    s.dhf = Acts<T>(context, t * h);
    gemm(context, false, true, t, h, v, s.dlogits.get(), weights<T>(weight()),
         0.0f, s.dhf.get());
    din = Acts<T>(context, t * h);
    layerNormInputGrad(stream, s.x.get(), s.dhf.get(), gain().value.get(),
                       s.mean.get(), s.rstd.get(), din.get(), t, h, false);
  }
  void weightGrad(int64_t mb) override {
    const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
    State &s = stateOf(states, mb, "the head's weight gradient");
    gemm(context, true, false, h, v, t, s.hf.get(), s.dlogits.get(), 1.0f,
         weight().grad.get());
    normWeightGrad(context, s.x, s.dhf, s.mean, s.rstd, gain(), bias(), t, h);
    states.erase(mb);
  }
  std::vector<DeviceParameter *> parameters() override {
    return {&gain(), &bias(), &weight()};
  }
  size_t cachedBytes() const override {
    size_t bytes = 0;
    for (const auto &[mb, s] : states)
      bytes += bytesOf(s.x, s.hf, s.probs, s.mean, s.rstd, s.dlogits, s.dhf) +
               config.tokens() * sizeof(int32_t);
    return bytes;
  }

private:
  struct State {
    Acts<T> x, hf;
    Floats probs, mean, rstd;
    Acts<T> dlogits, dhf;
  };
  DeviceParameter &gain() { return params[0]; }
  DeviceParameter &bias() { return params[1]; }
  DeviceParameter &weight() { return params[2]; }

  CudaContext &context;
  GptConfig config;
  std::vector<DeviceParameter> params;
  TokenSlots targets;
  double *lossSum;
  std::map<int64_t, State> states;
};

//===----------------------------------------------------------------------===//
// Stage and device
//===----------------------------------------------------------------------===//

/// An executor's buffer: activations of type T (the type the stages of the
/// device pass on, so messages between stages are bf16 in mixed
/// precision).
template <typename T> class CudaBuffer final : public Buffer {
public:
  explicit CudaBuffer(Acts<T> array) : array(std::move(array)) {}
  void *data() override { return array.get(); }
  size_t size() const override { return array.size(); }
  size_t elementBytes() const override { return sizeof(T); }
  Acts<T> array;
};

template <typename T> Acts<T> unwrap(BufferPtr buffer) {
  return buffer ? std::move(static_cast<CudaBuffer<T> &>(*buffer).array)
                : Acts<T>();
}
template <typename T> BufferPtr wrap(Acts<T> array) {
  return array ? std::make_unique<CudaBuffer<T>>(std::move(array)) : nullptr;
}

/// The device's view of a stage, whatever its activations' type.
class AnyCudaStage : public DeviceStage {
public:
  virtual std::vector<DeviceParameter *> parameters() = 0;
};

template <typename T> class CudaStage final : public AnyCudaStage {
public:
  CudaStage(CudaContext &context, const GptConfig &config,
            const ScheduleDesc::Stage &s, int64_t microbatches, double *lossSum)
      : context(context) {
    if (s.first)
      layers.push_back(
          std::make_unique<GpuEmbedding<T>>(context, config, microbatches));
    for (int64_t i = 0; i < s.blocks; ++i)
      layers.push_back(
          std::make_unique<GpuBlock<T>>(context, config, s.firstBlock + i));
    if (s.last)
      layers.push_back(
          std::make_unique<GpuHead<T>>(context, config, microbatches, lossSum));
  }
  void forward(int64_t mb, const Batch &batch, BufferPtr in, BufferPtr &out,
               bool countLoss) override {
    Acts<T> current = unwrap<T>(std::move(in));
    for (auto &layer : layers) {
      Acts<T> next;
      layer->forward(mb, batch, std::move(current), next, countLoss);
      current = std::move(next);
    }
    out = wrap(std::move(current));
    context.markProgress();
  }
  void inputGrad(int64_t mb, BufferPtr dout, BufferPtr &din,
                 float lossScale) override {
    Acts<T> current = unwrap<T>(std::move(dout));
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      Acts<T> next;
      (*it)->inputGrad(mb, std::move(current), next, lossScale);
      current = std::move(next);
    }
    din = wrap(std::move(current));
    context.markProgress();
  }
  void weightGrad(int64_t mb) override {
    for (auto &layer : layers)
      layer->weightGrad(mb);
    context.markProgress();
  }
  std::vector<DeviceParameter *> parameters() override {
    std::vector<DeviceParameter *> all;
    for (auto &layer : layers)
      for (DeviceParameter *p : layer->parameters())
        all.push_back(p);
    return all;
  }
  std::vector<GradientRef> gradients() override {
    std::vector<GradientRef> all;
    for (DeviceParameter *p : parameters())
      all.push_back({p->grad.get(), p->grad.size()});
    return all;
  }
  size_t cachedBytes() const override {
    size_t bytes = 0;
    for (const auto &layer : layers)
      bytes += layer->cachedBytes();
    return bytes;
  }

private:
  CudaContext &context;
  std::vector<std::unique_ptr<GpuLayer<T>>> layers;
};

class CudaDevice final : public Device {
public:
  CudaDevice(std::shared_ptr<CudaContext> context, const ScheduleDesc &desc)
      : context(std::move(context)), desc(desc),
        lossSum(*this->context, 1, true), lossHost(1) {}
  BufferPtr allocate(size_t count) override {
    if (bf16Activations())
      return std::make_unique<CudaBuffer<bf16>>(
          Acts<bf16>(*context, count, true));
    return std::make_unique<CudaBuffer<float>>(Floats(*context, count, true));
  }
  BufferPtr copy(Buffer &buffer) override {
    if (bf16Activations())
      return wrap(static_cast<CudaBuffer<bf16> &>(buffer).array.clone());
    return wrap(static_cast<CudaBuffer<float> &>(buffer).array.clone());
  }
  const float *hostData(Buffer &buffer, std::vector<float> &scratch) override {
    // A copy into pageable memory (`scratch`) blocks in the driver until the
    // stream's earlier work, NCCL waits included, is done, where no timeout
    // reaches: wait for that work with the polled synchronisation first, as
    // weights() and state() do.
    context->synchronize("the work before copying an output for a runtime "
                         "operation");
    scratch.resize(buffer.size());
    Floats converted;
    const void *from = buffer.data();
    if (bf16Activations()) {
      converted = Floats(*context, buffer.size());
      convert(context->stream(), static_cast<const bf16 *>(buffer.data()),
              converted.get(), static_cast<int64_t>(buffer.size()));
      from = converted.get();
    }
    CUDACHECK(cudaMemcpyAsync(scratch.data(), from,
                              buffer.size() * sizeof(float),
                              cudaMemcpyDeviceToHost, context->stream()));
    context->synchronize("copying an output for a runtime operation");
    return scratch.data();
  }
  std::unique_ptr<DeviceStage>
  makeStage(const ScheduleDesc::Stage &s) override {
    std::unique_ptr<AnyCudaStage> stage;
    if (bf16Activations())
      stage = std::make_unique<CudaStage<bf16>>(
          *context, desc.model, s, desc.microbatches, lossSum.get());
    else
      stage = std::make_unique<CudaStage<float>>(
          *context, desc.model, s, desc.microbatches, lossSum.get());
    for (DeviceParameter *p : stage->parameters()) {
      auto [it, isNew] = byName.try_emplace(p->name, p);
      if (isNew)
        parameters.push_back(p);
      else
        copies.push_back({it->second, p});
    }
    return stage;
  }
  // Vocabulary-parallel stages (shared embedding and head) and the two-tower
  // model are not ported to the GPU: vocabParallel() and twoTower() stay
  // false and the executor stops at start-up.
  void accumulate(Buffer &into, Buffer &from) override {
    const int64_t n = static_cast<int64_t>(into.size());
    if (bf16Activations()) {
      bf16 *sum = static_cast<bf16 *>(into.data());
      add(context->stream(), sum, static_cast<const bf16 *>(from.data()), sum,
          n);
    } else {
      float *sum = static_cast<float *>(into.data());
      add(context->stream(), sum, static_cast<const float *>(from.data()), sum,
          n);
    }
  }
  void step(float lr) override {
    // Model.cpp's Adam::apply, bias corrections computed alike on the host.
    ++adam.step;
    const float c1 = 1 - std::pow(adam.beta1, static_cast<float>(adam.step));
    const float c2 = 1 - std::pow(adam.beta2, static_cast<float>(adam.step));
    if (adamChunks.size() == 0)
      uploadAdamChunks();
    // A copy's gradient goes into its first holder's, which Adam steps
    // (Model.cpp's rule, as the CPU device applies it).
    for (auto [first, copy] : copies) {
      add(context->stream(), first->grad.get(), copy->grad.get(),
          first->grad.get(), static_cast<int64_t>(first->grad.size()));
      CUDACHECK(cudaMemsetAsync(copy->grad.get(), 0, copy->grad.bytes(),
                                context->stream()));
    }
    adamStep(context->stream(), adamChunks.get(),
             static_cast<int64_t>(adamChunks.size()), lr, adam.beta1,
             adam.beta2, adam.eps, c1, c2);
    refreshCopies();
    context->markProgress();
  }
  double takeLossSum() override {
    CUDACHECK(cudaMemcpyAsync(lossHost.get(), lossSum.get(), sizeof(double),
                              cudaMemcpyDeviceToHost, context->stream()));
    CUDACHECK(
        cudaMemsetAsync(lossSum.get(), 0, sizeof(double), context->stream()));
    context->synchronize("the end of the iteration");
    return *lossHost.get();
  }
  std::pair<uint64_t, std::string> precision() const override {
    // The CPU device's fp32 is {0, "fp32"}.
    static_assert(static_cast<uint64_t>(MathMode::Fp32) == 0);
    return {static_cast<uint64_t>(context->math()),
            mathModeName(context->math())};
  }
  bool asynchronous() const override { return true; }
  void synchronize() override {
    context->synchronize("the instruction before a timing");
  }
  std::vector<std::pair<std::string, std::vector<float>>> weights() override {
    context->synchronize("the last iteration");
    std::vector<std::pair<std::string, std::vector<float>>> all;
    for (DeviceParameter *p : parameters) {
      std::vector<float> values(p->value.size());
      CUDACHECK(cudaMemcpyAsync(values.data(), p->value.get(), p->value.bytes(),
                                cudaMemcpyDeviceToHost, context->stream()));
      all.push_back({p->name, std::move(values)});
    }
    context->synchronize("copying the weights to the host");
    return all;
  }
  DeviceState state() override {
    context->synchronize("the iteration before a checkpoint");
    DeviceState s;
    s.adamStep = adam.step;
    for (DeviceParameter *p : parameters) {
      DeviceState::Parameter saved;
      saved.name = p->name;
      for (auto [from, to] :
           {std::make_pair(&p->value, &saved.value),
            std::make_pair(&p->m, &saved.m), std::make_pair(&p->v, &saved.v)}) {
        to->resize(from->size());
        CUDACHECK(cudaMemcpyAsync(to->data(), from->get(), from->bytes(),
                                  cudaMemcpyDeviceToHost, context->stream()));
      }
      s.parameters.push_back(std::move(saved));
    }
    context->synchronize("copying the training state to the host");
    return s;
  }
  std::string setState(const DeviceState &s) override {
    std::vector<std::pair<std::string, size_t>> expected;
    for (DeviceParameter *p : parameters)
      expected.push_back({p->name, p->value.size()});
    if (std::string error = stateMismatch(s, expected); !error.empty())
      return error;
    for (const DeviceState::Parameter &saved : s.parameters) {
      DeviceParameter &p = *byName.at(saved.name);
      for (auto [from, to] :
           {std::make_pair(&saved.value, &p.value),
            std::make_pair(&saved.m, &p.m), std::make_pair(&saved.v, &p.v)})
        CUDACHECK(cudaMemcpyAsync(to->get(), from->data(), to->bytes(),
                                  cudaMemcpyHostToDevice, context->stream()));
      p.refreshCopy(*context);
    }
    refreshCopies();
    adam.step = s.adamStep;
    // `s` may go once this returns: wait for the copies.
    context->synchronize("copying a checkpoint to the GPU");
    return {};
  }

private:
  /// Mixed precision: stages, messages and buffers hold bf16.
  bool bf16Activations() const { return context->math() == MathMode::Bf16; }

  std::shared_ptr<CudaContext> context;
  ScheduleDesc desc;
  DeviceArray<double> lossSum;
  PinnedArray<double> lossHost;
  std::vector<DeviceParameter *> parameters; // what Adam steps, each once
  std::map<std::string, DeviceParameter *> byName;
  /// Parameters a second stage of this device holds again (the middle
  /// stage of a bidirectional pipeline on an odd number of actors), as
  /// (first holder, copy).
  std::vector<std::pair<DeviceParameter *, DeviceParameter *>> copies;
  Adam adam; // hyper-parameters and the step count; moments live on the GPU
  /// Every parameter cut into chunks for the one-launch Adam step; made at
  /// the first step, when the stages (and their arrays) are all there.
  DeviceArray<AdamChunk> adamChunks;

  /// Each copy takes its first holder's values (and bf16 copy).
  void refreshCopies() {
    for (auto [first, copy] : copies) {
      CUDACHECK(cudaMemcpyAsync(copy->value.get(), first->value.get(),
                                copy->value.bytes(), cudaMemcpyDeviceToDevice,
                                context->stream()));
      copy->refreshCopy(*context);
    }
  }

  void uploadAdamChunks() {
    std::vector<AdamChunk> chunks;
    for (DeviceParameter *p : parameters)
      appendAdamChunks(p->value.get(), p->grad.get(), p->m.get(), p->v.get(),
                       p->copy.get(), static_cast<int64_t>(p->value.size()),
                       chunks);
    if (chunks.empty())
      return;
    adamChunks = DeviceArray<AdamChunk>(*context, chunks.size());
    // All the first iteration has queued first, with the polled wait: a
    // copy from pageable memory may wait for the stream inside the call,
    // where FLEXPIPE_TIMEOUT cannot see a stopped peer (as hostData's did).
    // A hang there said only "copying the Adam step's table", where the
    // pipeline's transfers had stopped.
    context->synchronize(
        "the first iteration's computations and transfers (queued before "
        "the Adam step's table is copied to the GPU)");
    CUDACHECK(cudaMemcpyAsync(adamChunks.get(), chunks.data(),
                              adamChunks.bytes(), cudaMemcpyHostToDevice,
                              context->stream()));
    // `chunks` goes when this returns: wait for the copy.
    context->synchronize("copying the Adam step's table to the GPU");
  }
};

} // namespace

std::unique_ptr<Device>
flexpipe::rt::cuda::makeCudaDevice(std::shared_ptr<CudaContext> context,
                                   const ScheduleDesc &desc) {
  return std::make_unique<CudaDevice>(std::move(context), desc);
}
