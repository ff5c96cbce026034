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
// on the compute stream: matrix products in cuBLAS and cuBLASLt (fp32
// arrays; full fp32 math unless FLEXPIPE_CUDA_MATH asks for TF32 or bf16
// tensor cores), with biases, the residual and the MLP's GELU (forward and
// derivative) in cuBLASLt's epilogues; the rest in Kernels.cu. Initial weights
// are Model.cpp's: each layer's parameters are drawn on the host by Model.h's
// embeddingParameters, blockParameters and headParameters (ModelData.cpp) and
// copied to the GPU, so a CUDA run starts from exactly the weights of
// flexpipe-reference without linking the CPU layers and OpenBLAS. Nothing here
// waits for the GPU except takeLossSum, synchronize and weights. Each stage
// computation and the optimizer step end with a progress marker
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

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

namespace {

using Floats = DeviceArray<float>;

/// A parameter on the GPU with its gradient and Adam's moments.
struct DeviceParameter {
  std::string name;
  Floats value, grad, m, v;
};

/// A layer's initial parameters (drawn on the host) copied to the GPU.
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

/// C[m x n] = op(A) op(B) + beta C, row-major (Model.cpp's gemm). cuBLAS is
/// column-major: it computes C^T = op(B)^T op(A)^T on the same memory.
void gemm(CudaContext &context, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, const float *a, const float *b, float beta, float *c) {
  const float alpha = 1.0f;
  CUBLASCHECK(cublasGemmEx(
      context.blas(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
      transA ? CUBLAS_OP_T : CUBLAS_OP_N, asInt(n, "n"), asInt(m, "m"),
      asInt(k, "k"), &alpha, b, CUDA_R_32F, asInt(transB ? k : n, "ldb"), a,
      CUDA_R_32F, asInt(transA ? m : k, "lda"), &beta, c, CUDA_R_32F,
      asInt(n, "ldc"), context.computeType(), CUBLAS_GEMM_DEFAULT));
}

/// What a cuBLASLt product does after D = A op(B) (+ C): add a bias (Bias),
/// add a bias, keep the sum in `aux` and apply GELU (GeluAuxBias), or
/// multiply by GELU's derivative at `aux` (DGelu).
enum class Epilogue : int64_t { Bias, GeluAuxBias, DGelu };

/// D[m x n] = A[m x k] op(B) (+ C[m x n], the residual, where given), then
/// the epilogue, row-major: op(B) is B[k x n], or B[n x k] transposed with
/// `transB`.
struct LtProduct {
  int64_t m, n, k;
  const float *a, *b;
  bool transB;
  Epilogue epilogue;
  const float *bias; ///< n values (Bias, GeluAuxBias)
  float *aux;        ///< m x n: GELU's input, written or read
  const float *c;
  float *d;
};

/// Runs `p` as one cuBLASLt product on the compute stream. Column-major,
/// that is D^T = op(B)^T A^T: cuBLASLt's A is our B (n x k, or k x n
/// transposed), its B our A (k x m, ld k), and the bias runs along D^T's
/// rows, our columns. cuBLASLt's heuristic picks the algorithm once per kind
/// of product, within the context's workspace. False, with nothing enqueued,
/// when cuBLASLt has no algorithm for a GELU epilogue (the caller computes
/// GELU apart); a bias product without one stops the rank.
bool ltMatmul(CudaContext &context, const LtProduct &p) {
  cublasLtMatmulDesc_t desc = nullptr;
  CUBLASCHECK(
      cublasLtMatmulDescCreate(&desc, context.computeType(), CUDA_R_32F));
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
    CUBLASCHECK(cublasLtMatrixLayoutCreate(&ours[i], CUDA_R_32F, shapes[i][0],
                                           shapes[i][1], shapes[i][0]));
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
                " fp32 product with a bias epilogue");
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
Floats linearForward(CudaContext &context, const Floats &x,
                     const DeviceParameter &w, const DeviceParameter &b,
                     int64_t t, int64_t in, int64_t out,
                     const Floats *residual = nullptr) {
  Floats y(context, t * out);
  ltMatmul(context, {t, out, in, x.get(), w.value.get(), false, Epilogue::Bias,
                     b.value.get(), nullptr,
                     residual ? residual->get() : nullptr, y.get()});
  return y;
}

/// pre = x W + b and f = GELU(pre) (the MLP's first product), in one
/// cuBLASLt product where its GELU epilogue serves.
void linearGeluForward(CudaContext &context, const Floats &x,
                       const DeviceParameter &w, const DeviceParameter &b,
                       int64_t t, int64_t in, int64_t out, Floats &pre,
                       Floats &f) {
  f = Floats(context, t * out);
  if (geluEpilogueFits(out)) {
    pre = Floats(context, t * out);
    if (ltMatmul(context, {t, out, in, x.get(), w.value.get(), false,
                           Epilogue::GeluAuxBias, b.value.get(), pre.get(),
                           nullptr, f.get()}))
      return;
  }
  pre = linearForward(context, x, w, b, t, in, out);
  geluForward(context.stream(), pre.get(), f.get(), pre.size());
}

/// dx[t x in] = dy[t x out] W^T.
Floats linearInputGrad(CudaContext &context, const Floats &dy,
                       const DeviceParameter &w, int64_t t, int64_t in,
                       int64_t out) {
  Floats dx(context, t * in);
  gemm(context, false, true, t, in, out, dy.get(), w.value.get(), 0.0f,
       dx.get());
  return dx;
}

/// dpre[t x in] = (dy[t x out] W^T) * GELU'(pre): the input gradient of
/// the product after a GELU, in one cuBLASLt product where its GELU
/// derivative epilogue serves.
Floats geluLinearInputGrad(CudaContext &context, const Floats &dy,
                           const DeviceParameter &w, const Floats &pre,
                           int64_t t, int64_t in, int64_t out) {
  Floats dpre(context, t * in);
  if (geluEpilogueFits(in) &&
      ltMatmul(context,
               {t, in, out, dy.get(), w.value.get(), true, Epilogue::DGelu,
                nullptr, const_cast<float *>(pre.get()), nullptr, dpre.get()}))
    return dpre;
  Floats df = linearInputGrad(context, dy, w, t, in, out);
  geluBackward(context.stream(), df.get(), pre.get(), dpre.get(), df.size());
  return dpre;
}

/// dW += x^T dy, db += column sums of dy.
void linearWeightGrad(CudaContext &context, const Floats &x, const Floats &dy,
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
struct Normalized {
  Floats y, mean, rstd;
};
Normalized layerNorm(CudaContext &context, const Floats &x,
                     const DeviceParameter &g, const DeviceParameter &b,
                     int64_t t, int64_t h) {
  Normalized n{Floats(context, t * h), Floats(context, t), Floats(context, t)};
  layerNormForward(context.stream(), x.get(), g.value.get(), b.value.get(),
                   n.y.get(), n.mean.get(), n.rstd.get(), t, h);
  return n;
}

/// LayerNorm's gain and bias gradients from its input x, statistics and
/// output gradient dy.
void normWeightGrad(CudaContext &context, const Floats &x, const Floats &dy,
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

size_t floatBytes(std::initializer_list<const Floats *> arrays) {
  size_t bytes = 0;
  for (const Floats *a : arrays)
    bytes += a->bytes();
  return bytes;
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

/// Model.h's Layer on the GPU; arrays move in and out.
class GpuLayer {
public:
  virtual ~GpuLayer() = default;
  virtual void forward(int64_t mb, const Batch &batch, Floats in, Floats &out,
                       bool countLoss) = 0;
  virtual void inputGrad(int64_t mb, Floats dout, Floats &din,
                         float lossScale) = 0;
  virtual void weightGrad(int64_t mb) = 0;
  virtual std::vector<DeviceParameter *> parameters() = 0;
  virtual size_t cachedBytes() const = 0;
};

class GpuEmbedding final : public GpuLayer {
public:
  GpuEmbedding(CudaContext &context, const GptConfig &config,
               int64_t microbatches)
      : context(context), config(config),
        ids(context, microbatches, config.tokens(), /*grouped=*/true) {
    params = upload(
        context, embeddingParameters(config, vocabSlice(config.vocab, 0, 1)));
  }
  void forward(int64_t mb, const Batch &batch, Floats, Floats &out,
               bool) override {
    const int64_t t = config.tokens(), h = config.hidden;
    const int32_t *tokens = ids.upload(mb, batch.tokens, config.vocab);
    out = Floats(context, t * h);
    embeddingForward(context.stream(), tokens, params[0].value.get(),
                     params[1].value.get(), out.get(), t, h, config.seq);
    live.insert(mb);
  }
  void inputGrad(int64_t mb, Floats dout, Floats &din, float) override {
    din = Floats(); // token ids have no gradient
    grads[mb] = std::move(dout);
  }
  void weightGrad(int64_t mb) override {
    const Floats &d = stateOf(grads, mb, "the embedding's weight gradient");
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
  std::map<int64_t, Floats> grads;
};

/// x -> x + Attn(LN1(x)) -> x2 + MLP(LN2(x2)).
class GpuBlock final : public GpuLayer {
public:
  GpuBlock(CudaContext &context, const GptConfig &config, int64_t index)
      : context(context), config(config) {
    if (config.hidden / config.heads > kMaxHeadDim)
      fatal("attention heads of " +
            std::to_string(config.hidden / config.heads) +
            " dimensions are wider than the CUDA kernels' " +
            std::to_string(kMaxHeadDim) + "; use more heads");
    params = upload(context, blockParameters(config, index));
  }

  void forward(int64_t mb, const Batch &, Floats in, Floats &out,
               bool) override {
    const int64_t t = config.tokens(), h = config.hidden;
    cudaStream_t stream = context.stream();
    State &s = states[mb];
    s.x = std::move(in);
    Normalized n1 = layerNorm(context, s.x, ln1g(), ln1b(), t, h);
    s.h1 = std::move(n1.y);
    s.mean1 = std::move(n1.mean);
    s.rstd1 = std::move(n1.rstd);
    s.qkv = linearForward(context, s.h1, wqkv(), bqkv(), t, h, 3 * h);
    s.lse = Floats(context, queryRows());
    s.a = Floats(context, t * h);
    attentionForward(stream, s.qkv.get(), s.lse.get(), s.a.get(),
                     config.microBatch, config.heads, config.seq, h);
    s.x2 = linearForward(context, s.a, wo(), bo(), t, h, h, &s.x);
    Normalized n2 = layerNorm(context, s.x2, ln2g(), ln2b(), t, h);
    s.h2 = std::move(n2.y);
    s.mean2 = std::move(n2.mean);
    s.rstd2 = std::move(n2.rstd);
    linearGeluForward(context, s.h2, w1(), b1(), t, h, 4 * h, s.pre, s.f);
    out = linearForward(context, s.f, w2(), b2(), t, 4 * h, h, &s.x2);
  }

  void inputGrad(int64_t mb, Floats dy, Floats &dx, float) override {
    const int64_t t = config.tokens(), h = config.hidden;
    cudaStream_t stream = context.stream();
    State &s = stateOf(states, mb, "a block's input gradient");
    // MLP branch; the residual carries dy to x2.
    s.dm = std::move(dy);
    s.dpre = geluLinearInputGrad(context, s.dm, w2(), s.pre, t, 4 * h, h);
    s.dh2 = linearInputGrad(context, s.dpre, w1(), t, h, 4 * h);
    Floats dx2 = s.dm.clone();
    layerNormInputGrad(stream, s.x2.get(), s.dh2.get(), ln2g().value.get(),
                       s.mean2.get(), s.rstd2.get(), dx2.get(), t, h, true);
    // Attention branch; the residual carries dx2 to x.
    s.dout = dx2.clone();
    Floats da = linearInputGrad(context, s.dout, wo(), t, h, h);
    Floats delta(context, queryRows());
    s.dqkv = Floats(context, t * 3 * h);
    attentionBackward(stream, s.qkv.get(), s.a.get(), s.lse.get(), da.get(),
                      delta.get(), s.dqkv.get(), config.microBatch,
                      config.heads, config.seq, h);
    s.dh1 = linearInputGrad(context, s.dqkv, wqkv(), t, h, 3 * h);
    dx = std::move(dx2);
    layerNormInputGrad(stream, s.x.get(), s.dh1.get(), ln1g().value.get(),
                       s.mean1.get(), s.rstd1.get(), dx.get(), t, h, true);
    // What only the input gradient reads goes now (the stream-ordered
    // allocator frees it after the kernels above): the weight gradient
    // needs each product's input and output gradient, not qkv, lse or the
    // MLP's pre-activation.
    s.qkv = Floats();
    s.lse = Floats();
    s.pre = Floats();
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
      bytes +=
          floatBytes({&s.x, &s.h1, &s.qkv, &s.lse, &s.a, &s.x2, &s.h2, &s.pre,
                      &s.f, &s.dm, &s.dpre, &s.dh2, &s.dout, &s.dqkv, &s.dh1,
                      &s.mean1, &s.rstd1, &s.mean2, &s.rstd2});
    return bytes;
  }

private:
  struct State {
    // Forward (lse: attention's log-sum-exp per query row; the input
    // gradient frees qkv, lse and pre).
    Floats x, h1, qkv, lse, a, x2, h2, pre, f;
    Floats mean1, rstd1, mean2, rstd2;     // LayerNorm statistics
    Floats dm, dpre, dh2, dout, dqkv, dh1; // kept for weightGrad
  };
  /// Attention's query rows: batch x heads x seq.
  int64_t queryRows() const {
    return config.microBatch * config.heads * config.seq;
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

/// Final LayerNorm, LM head (no bias) and mean cross-entropy.
class GpuHead final : public GpuLayer {
public:
  GpuHead(CudaContext &context, const GptConfig &config, int64_t microbatches,
          double *lossSum)
      : context(context), config(config),
        targets(context, microbatches, config.tokens()), lossSum(lossSum) {
    params = upload(context, headParameters(config));
  }
  /// `out` is a copy of the input: the stage's output that runtime operations
  /// see (Model.cpp's Head passes its input on alike).
  void forward(int64_t mb, const Batch &batch, Floats in, Floats &out,
               bool countLoss) override {
    const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
    cudaStream_t stream = context.stream();
    State &s = states[mb];
    s.x = std::move(in);
    out = s.x.clone();
    const int32_t *target = targets.upload(mb, batch.targets, v);
    Normalized n = layerNorm(context, s.x, gain(), bias(), t, h);
    s.hf = std::move(n.y);
    s.mean = std::move(n.mean);
    s.rstd = std::move(n.rstd);
    s.probs = Floats(context, t * v);
    gemm(context, false, false, t, v, h, s.hf.get(), weight().value.get(), 0.0f,
         s.probs.get());
    DeviceArray<double> rowLoss(context, t);
    softmaxCrossEntropy(stream, s.probs.get(), target, rowLoss.get(), t, v);
    if (countLoss)
      addMeanLoss(stream, rowLoss.get(), t, lossSum);
  }
  void inputGrad(int64_t mb, Floats, Floats &din, float lossScale) override {
    const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
    cudaStream_t stream = context.stream();
    State &s = stateOf(states, mb, "the head's input gradient");
    // The logit gradients replace the probabilities in place: the head
    // keeps one vocabulary-wide array per micro-batch, not two.
    s.dlogits = std::move(s.probs);
    crossEntropyGrad(stream, s.dlogits.get(), targets.at(mb), s.dlogits.get(),
                     t, v, lossScale / static_cast<float>(t));
    s.dhf = Floats(context, t * h);
    gemm(context, false, true, t, h, v, s.dlogits.get(), weight().value.get(),
         0.0f, s.dhf.get());
    din = Floats(context, t * h);
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
      bytes += floatBytes({&s.x, &s.hf, &s.probs, &s.mean, &s.rstd, &s.dlogits,
                           &s.dhf}) +
               config.tokens() * sizeof(int32_t);
    return bytes;
  }

private:
  struct State {
    Floats x, hf, probs, mean, rstd, dlogits, dhf;
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

class CudaBuffer final : public Buffer {
public:
  explicit CudaBuffer(Floats array) : array(std::move(array)) {}
  float *data() override { return array.get(); }
  size_t size() const override { return array.size(); }
  Floats array;
};

Floats unwrap(BufferPtr buffer) {
  return buffer ? std::move(static_cast<CudaBuffer &>(*buffer).array)
                : Floats();
}
BufferPtr wrap(Floats array) {
  return array ? std::make_unique<CudaBuffer>(std::move(array)) : nullptr;
}

class CudaStage final : public DeviceStage {
public:
  CudaStage(CudaContext &context, const GptConfig &config,
            const ScheduleDesc::Stage &s, int64_t microbatches, double *lossSum)
      : context(context) {
    if (s.first)
      layers.push_back(
          std::make_unique<GpuEmbedding>(context, config, microbatches));
    for (int64_t i = 0; i < s.blocks; ++i)
      layers.push_back(
          std::make_unique<GpuBlock>(context, config, s.firstBlock + i));
    if (s.last)
      layers.push_back(
          std::make_unique<GpuHead>(context, config, microbatches, lossSum));
  }
  void forward(int64_t mb, const Batch &batch, BufferPtr in, BufferPtr &out,
               bool countLoss) override {
    Floats current = unwrap(std::move(in));
    for (auto &layer : layers) {
      Floats next;
      layer->forward(mb, batch, std::move(current), next, countLoss);
      current = std::move(next);
    }
    out = wrap(std::move(current));
    context.markProgress();
  }
  void inputGrad(int64_t mb, BufferPtr dout, BufferPtr &din,
                 float lossScale) override {
    Floats current = unwrap(std::move(dout));
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      Floats next;
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
  std::vector<DeviceParameter *> parameters() {
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
  std::vector<std::unique_ptr<GpuLayer>> layers;
};

class CudaDevice final : public Device {
public:
  CudaDevice(std::shared_ptr<CudaContext> context, const ScheduleDesc &desc)
      : context(std::move(context)), desc(desc),
        lossSum(*this->context, 1, true), lossHost(1) {}
  BufferPtr allocate(size_t count) override {
    return std::make_unique<CudaBuffer>(Floats(*context, count, true));
  }
  BufferPtr copy(Buffer &buffer) override {
    return std::make_unique<CudaBuffer>(
        static_cast<CudaBuffer &>(buffer).array.clone());
  }
  const float *hostData(Buffer &buffer, std::vector<float> &scratch) override {
    scratch.resize(buffer.size());
    CUDACHECK(cudaMemcpyAsync(scratch.data(), buffer.data(),
                              buffer.size() * sizeof(float),
                              cudaMemcpyDeviceToHost, context->stream()));
    context->synchronize("copying an output for a runtime operation");
    return scratch.data();
  }
  std::unique_ptr<DeviceStage>
  makeStage(const ScheduleDesc::Stage &s) override {
    auto stage = std::make_unique<CudaStage>(*context, desc.model, s,
                                             desc.microbatches, lossSum.get());
    for (DeviceParameter *p : stage->parameters())
      parameters.push_back(p);
    return stage;
  }
  // Vocabulary-parallel stages (shared embedding and head) and the two-tower
  // model are not ported to the GPU: vocabParallel() and twoTower() stay
  // false and the executor stops at start-up.
  void accumulate(Buffer &into, Buffer &from) override {
    add(context->stream(), into.data(), from.data(), into.data(),
        static_cast<int64_t>(into.size()));
  }
  void step(float lr) override {
    // Model.cpp's Adam::apply, bias corrections computed alike on the host.
    ++adam.step;
    const float c1 = 1 - std::pow(adam.beta1, static_cast<float>(adam.step));
    const float c2 = 1 - std::pow(adam.beta2, static_cast<float>(adam.step));
    if (adamChunks.size() == 0)
      uploadAdamChunks();
    adamStep(context->stream(), adamChunks.get(),
             static_cast<int64_t>(adamChunks.size()), lr, adam.beta1,
             adam.beta2, adam.eps, c1, c2);
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
    std::map<std::string, DeviceParameter *> byName;
    for (DeviceParameter *p : parameters) {
      expected.push_back({p->name, p->value.size()});
      byName[p->name] = p;
    }
    if (std::string error = stateMismatch(s, expected); !error.empty())
      return error;
    for (const DeviceState::Parameter &saved : s.parameters) {
      DeviceParameter &p = *byName.at(saved.name);
      for (auto [from, to] :
           {std::make_pair(&saved.value, &p.value),
            std::make_pair(&saved.m, &p.m), std::make_pair(&saved.v, &p.v)})
        CUDACHECK(cudaMemcpyAsync(to->get(), from->data(), to->bytes(),
                                  cudaMemcpyHostToDevice, context->stream()));
    }
    adam.step = s.adamStep;
    // `s` may go once this returns: wait for the copies.
    context->synchronize("copying a checkpoint to the GPU");
    return {};
  }

private:
  std::shared_ptr<CudaContext> context;
  ScheduleDesc desc;
  DeviceArray<double> lossSum;
  PinnedArray<double> lossHost;
  std::vector<DeviceParameter *> parameters;
  Adam adam; // hyper-parameters and the step count; moments live on the GPU
  /// Every parameter cut into chunks for the one-launch Adam step; made at
  /// the first step, when the stages (and their arrays) are all there.
  DeviceArray<AdamChunk> adamChunks;

  void uploadAdamChunks() {
    std::vector<AdamChunk> chunks;
    for (DeviceParameter *p : parameters)
      appendAdamChunks(p->value.get(), p->grad.get(), p->m.get(), p->v.get(),
                       static_cast<int64_t>(p->value.size()), chunks);
    if (chunks.empty())
      return;
    adamChunks = DeviceArray<AdamChunk>(*context, chunks.size());
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
