//===- Model.cpp - The built-in GPT model, layer by layer -----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Model.h"

#include "Kernels.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace flexpipe::rt;

namespace {

/// Moves a layer's initial parameters (ModelData.cpp) into its members, in
/// the order of its parameters().
void initialise(const std::vector<Parameter *> &members,
                std::vector<Parameter> initial) {
  assert(members.size() == initial.size());
  for (size_t i = 0; i < members.size(); ++i)
    *members[i] = std::move(initial[i]);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// C[m x n] = op(A) op(B) + beta * C, row-major, densely stored.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          const float *a, const float *b, float beta, float *c) {
  kernels::gemm(transA, transB, m, n, k, 1.0f, a, transA ? m : k, b,
                transB ? k : n, beta, c, n);
}

/// y[t x out] = x[t x in] W[in x out] + b.
void linearForward(const Tensor &x, const Parameter &w, const Parameter &b,
                   int64_t t, int64_t in, int64_t out, Tensor &y) {
  y.resize(t * out);
  for (int64_t r = 0; r < t; ++r)
    std::copy(b.value.begin(), b.value.end(), y.begin() + r * out);
  gemm(false, false, t, out, in, x.data(), w.value.data(), 1.0f, y.data());
}

/// dx[t x in] = dy[t x out] W^T.
void linearInputGrad(const Tensor &dy, const Parameter &w, int64_t t,
                     int64_t in, int64_t out, Tensor &dx) {
  dx.assign(t * in, 0.0f);
  gemm(false, true, t, in, out, dy.data(), w.value.data(), 1.0f, dx.data());
}

/// dW += x^T dy, db += column sums of dy.
void linearWeightGrad(const Tensor &x, const Tensor &dy, Parameter &w,
                      Parameter *b, int64_t t, int64_t in, int64_t out) {
  gemm(true, false, in, out, t, x.data(), dy.data(), 1.0f, w.grad.data());
  if (b)
    for (int64_t r = 0; r < t; ++r)
      for (int64_t c = 0; c < out; ++c)
        b->grad[c] += dy[r * out + c];
}

/// Row-wise LayerNorm; keeps mean and 1/std per row.
void layerNormForward(const Tensor &x, const Parameter &g, const Parameter &b,
                      int64_t t, int64_t h, Tensor &y, Tensor &mean,
                      Tensor &rstd) {
  y.resize(t * h);
  mean.resize(t);
  rstd.resize(t);
  kernels::layerNormForward(x.data(), g.value.data(), b.value.data(), t, h,
                            y.data(), mean.data(), rstd.data());
}

/// dx (+)= LayerNorm's input gradient for output gradient dy.
void layerNormInputGrad(const Tensor &x, const Tensor &dy, const Parameter &g,
                        const Tensor &mean, const Tensor &rstd, int64_t t,
                        int64_t h, Tensor &dx) {
  kernels::layerNormInputGrad(x.data(), dy.data(), g.value.data(), mean.data(),
                              rstd.data(), t, h, dx.data());
}

void layerNormWeightGrad(const Tensor &x, const Tensor &dy, Parameter &g,
                         Parameter &b, const Tensor &mean, const Tensor &rstd,
                         int64_t t, int64_t h) {
  kernels::layerNormWeightGrad(x.data(), dy.data(), mean.data(), rstd.data(), t,
                               h, g.grad.data(), b.grad.data());
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

/// Token (+ position) embedding of the vocabulary rows in `slice`.
class Embedding final : public Layer {
public:
  Embedding(const GptConfig &c, VocabSlice slice)
      : config(c), slice(slice), withPosition(slice.part == 0) {
    initialise(parameters(), embeddingParameters(c, slice));
  }
  float forward(int64_t mb, const Batch &batch, const Tensor &,
                Tensor &out) override {
    const int64_t t = config.tokens(), h = config.hidden;
    out.assign(t * h, 0.0f);
    for (int64_t r = 0; r < t; ++r) {
      float *row = out.data() + r * h;
      if (const int64_t id = batch.tokens[r];
          id >= slice.begin && id < slice.end)
        std::copy_n(token.value.data() + (id - slice.begin) * h, h, row);
      // token + position, in the whole's order; 0 + position elsewhere.
      if (withPosition)
        for (int64_t c = 0; c < h; ++c)
          row[c] += position.value[(r % config.seq) * h + c];
    }
    tokens[mb] = batch.tokens;
    return 0;
  }
  void inputGrad(int64_t mb, const Tensor &dout, Tensor &din, float) override {
    din.clear(); // token ids have no gradient
    grads[mb] = dout;
  }
  void weightGrad(int64_t mb) override {
    const int64_t t = config.tokens(), h = config.hidden;
    const Tensor &d = grads.at(mb);
    const std::vector<int32_t> &ids = tokens.at(mb);
    for (int64_t r = 0; r < t; ++r) {
      // The scatter-add into this slice's rows.
      if (ids[r] >= slice.begin && ids[r] < slice.end)
        for (int64_t c = 0; c < h; ++c)
          token.grad[(ids[r] - slice.begin) * h + c] += d[r * h + c];
      if (withPosition)
        for (int64_t c = 0; c < h; ++c)
          position.grad[(r % config.seq) * h + c] += d[r * h + c];
    }
    tokens.erase(mb);
    grads.erase(mb);
  }
  std::vector<Parameter *> parameters() override {
    if (withPosition)
      return {&token, &position};
    return {&token};
  }
  size_t cachedBytes() const override {
    size_t bytes = 0;
    for (const auto &[mb, g] : grads)
      bytes += g.size() * sizeof(float);
    for (const auto &[mb, ids] : tokens)
      bytes += ids.size() * sizeof(int32_t);
    return bytes;
  }

private:
  GptConfig config;
  VocabSlice slice;
  bool withPosition;
  Parameter token, position;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, Tensor> grads;
};

/// x -> x + Attn(LN1(x)) -> x2 + MLP(LN2(x2)).
class Block final : public Layer {
public:
  Block(const GptConfig &c, int64_t index) : config(c) {
    initialise(parameters(), blockParameters(c, index));
  }

  float forward(int64_t mb, const Batch &, const Tensor &in,
                Tensor &out) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = states[mb];
    s.x = in;
    layerNormForward(s.x, ln1g, ln1b, t, h, s.h1, s.mean1, s.rstd1);
    linearForward(s.h1, wqkv, bqkv, t, h, 3 * h, s.qkv);
    attentionForward(s);
    Tensor o;
    linearForward(s.a, wo, bo, t, h, h, o);
    s.x2.resize(t * h);
    for (int64_t i = 0; i < t * h; ++i)
      s.x2[i] = s.x[i] + o[i];
    layerNormForward(s.x2, ln2g, ln2b, t, h, s.h2, s.mean2, s.rstd2);
    linearForward(s.h2, w1, b1, t, h, 4 * h, s.pre);
    s.f.resize(s.pre.size());
    kernels::geluForward(s.pre.data(), s.f.data(),
                         static_cast<int64_t>(s.pre.size()));
    Tensor m;
    linearForward(s.f, w2, b2, t, 4 * h, h, m);
    out.resize(t * h);
    for (int64_t i = 0; i < t * h; ++i)
      out[i] = s.x2[i] + m[i];
    return 0;
  }

  void inputGrad(int64_t mb, const Tensor &dy, Tensor &dx, float) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = states.at(mb);
    // MLP branch; the residual carries dy to x2.
    s.dm = dy;
    Tensor df;
    linearInputGrad(s.dm, w2, t, 4 * h, h, df);
    s.dpre.resize(df.size());
    kernels::geluInputGrad(s.pre.data(), df.data(), s.dpre.data(),
                           static_cast<int64_t>(df.size()));
    linearInputGrad(s.dpre, w1, t, h, 4 * h, s.dh2);
    Tensor dx2 = dy;
    layerNormInputGrad(s.x2, s.dh2, ln2g, s.mean2, s.rstd2, t, h, dx2);
    // Attention branch; the residual carries dx2 to x.
    s.dout = dx2;
    Tensor da;
    linearInputGrad(s.dout, wo, t, h, h, da);
    attentionInputGrad(s, da);
    linearInputGrad(s.dqkv, wqkv, t, h, 3 * h, s.dh1);
    dx = dx2;
    layerNormInputGrad(s.x, s.dh1, ln1g, s.mean1, s.rstd1, t, h, dx);
    // What only the input gradient reads goes now (as on the CUDA backend):
    // the weight gradient needs each product's input and output gradient
    // and the LayerNorms' inputs, not qkv, the probabilities or the MLP's
    // pre-activation. The cost model's weight-gradient state
    // (docs/CostModel.md) counts what stays.
    Tensor().swap(s.qkv);
    Tensor().swap(s.probs);
    Tensor().swap(s.pre);
  }

  void weightGrad(int64_t mb) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = states.at(mb);
    linearWeightGrad(s.f, s.dm, w2, &b2, t, 4 * h, h);
    linearWeightGrad(s.h2, s.dpre, w1, &b1, t, h, 4 * h);
    layerNormWeightGrad(s.x2, s.dh2, ln2g, ln2b, s.mean2, s.rstd2, t, h);
    linearWeightGrad(s.a, s.dout, wo, &bo, t, h, h);
    linearWeightGrad(s.h1, s.dqkv, wqkv, &bqkv, t, h, 3 * h);
    layerNormWeightGrad(s.x, s.dh1, ln1g, ln1b, s.mean1, s.rstd1, t, h);
    states.erase(mb);
  }

  std::vector<Parameter *> parameters() override {
    return {&ln1g, &ln1b, &wqkv, &bqkv, &wo, &bo,
            &ln2g, &ln2b, &w1,   &b1,   &w2, &b2};
  }
  size_t cachedBytes() const override {
    size_t floats = 0;
    for (const auto &[mb, s] : states)
      for (const Tensor *t : {&s.x, &s.h1, &s.qkv, &s.probs, &s.a, &s.x2,
                              &s.h2, &s.pre, &s.f, &s.dm, &s.dpre, &s.dh2,
                              &s.dout, &s.dqkv, &s.dh1, &s.mean1, &s.rstd1,
                              &s.mean2, &s.rstd2})
        floats += t->size();
    return floats * sizeof(float);
  }

private:
  struct State {
    Tensor x, h1, qkv, probs, a, x2, h2, pre, f;      // forward
    Tensor mean1, rstd1, mean2, rstd2;                // LayerNorm statistics
    Tensor dm, dpre, dh2, dout, dqkv, dh1;            // kept for weightGrad
  };

  /// Causal multi-head attention from s.qkv into s.a, keeping probabilities.
  void attentionForward(State &s) {
    const int64_t seq = config.seq, heads = config.heads;
    s.a.assign(config.tokens() * config.hidden, 0.0f);
    s.probs.resize(config.microBatch * heads * seq * seq);
    kernels::attentionForward(s.qkv.data(), config.microBatch, seq, heads,
                              config.hidden / heads, s.probs.data(),
                              s.a.data());
  }

  /// Gradient of the attention with respect to s.qkv, from da.
  void attentionInputGrad(State &s, const Tensor &da) {
    const int64_t seq = config.seq, heads = config.heads;
    s.dqkv.assign(config.tokens() * 3 * config.hidden, 0.0f);
    Tensor scratch(seq * seq);
    kernels::attentionInputGrad(
        s.qkv.data(), s.probs.data(), da.data(), config.microBatch, seq, heads,
        config.hidden / heads, scratch.data(), s.dqkv.data());
  }

  GptConfig config;
  Parameter ln1g, ln1b, wqkv, bqkv, wo, bo, ln2g, ln2b, w1, b1, w2, b2;
  std::map<int64_t, State> states;
};

/// The final LayerNorm.
class FinalNorm final : public Layer {
public:
  explicit FinalNorm(const GptConfig &c) : config(c) {
    initialise(parameters(), finalNormParameters(c));
  }
  float forward(int64_t mb, const Batch &, const Tensor &in,
                Tensor &out) override {
    State &s = states[mb];
    s.x = in;
    layerNormForward(s.x, gain, bias, config.tokens(), config.hidden, out,
                     s.mean, s.rstd);
    return 0;
  }
  void inputGrad(int64_t mb, const Tensor &dout, Tensor &din, float) override {
    const int64_t t = config.tokens(), h = config.hidden;
    State &s = states.at(mb);
    s.dy = dout;
    din.assign(t * h, 0.0f);
    layerNormInputGrad(s.x, s.dy, gain, s.mean, s.rstd, t, h, din);
  }
  void weightGrad(int64_t mb) override {
    State &s = states.at(mb);
    layerNormWeightGrad(s.x, s.dy, gain, bias, s.mean, s.rstd, config.tokens(),
                        config.hidden);
    states.erase(mb);
  }
  std::vector<Parameter *> parameters() override { return {&gain, &bias}; }
  size_t cachedBytes() const override {
    size_t floats = 0;
    for (const auto &[mb, s] : states)
      floats += s.x.size() + s.mean.size() + s.rstd.size() + s.dy.size();
    return floats * sizeof(float);
  }

private:
  struct State {
    Tensor x, mean, rstd, dy;
  };
  GptConfig config;
  Parameter gain, bias;
  std::map<int64_t, State> states;
};

/// Final LayerNorm, LM head (no bias) and mean cross-entropy: the head of
/// the whole vocabulary, which needs no exchange.
class Head final : public Layer {
public:
  explicit Head(const GptConfig &c)
      : norm(c), head(c, vocabSlice(c.vocab, 0, 1)) {}
  /// `out` is the input: the stage's output that runtime operations see.
  float forward(int64_t mb, const Batch &batch, const Tensor &in,
                Tensor &out) override {
    Tensor hidden;
    norm.forward(mb, batch, in, hidden);
    out = in;
    return head.combine(mb, head.forward(mb, batch, hidden));
  }
  void inputGrad(int64_t mb, const Tensor &, Tensor &din,
                 float lossScale) override {
    Tensor dhidden;
    head.inputGrad(mb, dhidden, lossScale);
    norm.inputGrad(mb, dhidden, din, lossScale);
  }
  void weightGrad(int64_t mb) override {
    head.weightGrad(mb);
    norm.weightGrad(mb);
  }
  std::vector<Parameter *> parameters() override {
    std::vector<Parameter *> all = norm.parameters();
    all.push_back(&head.parameter());
    return all;
  }
  size_t cachedBytes() const override {
    return norm.cachedBytes() + head.cachedBytes();
  }

private:
  FinalNorm norm;
  VocabHead head;
};

/// The LM head of the whole vocabulary and the mean cross-entropy, without
/// the final LayerNorm (Head's second half); passes its input on.
class LmHead final : public Layer {
public:
  explicit LmHead(const GptConfig &c) : head(c, vocabSlice(c.vocab, 0, 1)) {}
  float forward(int64_t mb, const Batch &batch, const Tensor &in,
                Tensor &out) override {
    out = in;
    return head.combine(mb, head.forward(mb, batch, in));
  }
  void inputGrad(int64_t mb, const Tensor &, Tensor &din,
                 float lossScale) override {
    head.inputGrad(mb, din, lossScale);
  }
  void weightGrad(int64_t mb) override { head.weightGrad(mb); }
  std::vector<Parameter *> parameters() override { return {&head.parameter()}; }
  size_t cachedBytes() const override { return head.cachedBytes(); }

private:
  VocabHead head;
};

/// The end of a tower: final LayerNorm, mean over each sequence, projection.
class TowerHead final : public Layer {
public:
  explicit TowerHead(const GptConfig &c)
      : config(c), norm(c), projection(towerProjectionParameter(c)) {}
  float forward(int64_t mb, const Batch &batch, const Tensor &in,
                Tensor &out) override {
    const int64_t b = config.microBatch, seq = config.seq, h = config.hidden;
    Tensor normed;
    norm.forward(mb, batch, in, normed);
    State &s = states[mb];
    s.pooled.assign(b * h, 0.0f);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t c = 0; c < h; ++c) {
        double sum = 0;
        for (int64_t j = 0; j < seq; ++j)
          sum += normed[(i * seq + j) * h + c];
        s.pooled[i * h + c] = static_cast<float>(sum / seq);
      }
    out.resize(b * config.embed);
    gemm(false, false, b, config.embed, h, s.pooled.data(),
         projection.value.data(), 0.0f, out.data());
    return 0;
  }
  void inputGrad(int64_t mb, const Tensor &dout, Tensor &din,
                 float lossScale) override {
    const int64_t b = config.microBatch, seq = config.seq, h = config.hidden;
    State &s = states.at(mb);
    s.dout = dout;
    Tensor dpooled(b * h, 0.0f);
    gemm(false, true, b, h, config.embed, s.dout.data(),
         projection.value.data(), 0.0f, dpooled.data());
    // The mean hands each token 1/seq of its sequence's gradient.
    Tensor dnormed(config.tokens() * h);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < seq; ++j)
        for (int64_t c = 0; c < h; ++c)
          dnormed[(i * seq + j) * h + c] =
              dpooled[i * h + c] / static_cast<float>(seq);
    norm.inputGrad(mb, dnormed, din, lossScale);
  }
  void weightGrad(int64_t mb) override {
    State &s = states.at(mb);
    gemm(true, false, config.hidden, config.embed, config.microBatch,
         s.pooled.data(), s.dout.data(), 1.0f, projection.grad.data());
    norm.weightGrad(mb);
    states.erase(mb);
  }
  std::vector<Parameter *> parameters() override {
    std::vector<Parameter *> all = norm.parameters();
    all.push_back(&projection);
    return all;
  }
  size_t cachedBytes() const override {
    size_t floats = 0;
    for (const auto &[mb, s] : states)
      floats += s.pooled.size() + s.dout.size();
    return norm.cachedBytes() + floats * sizeof(float);
  }

private:
  struct State {
    Tensor pooled, dout;
  };
  GptConfig config;
  FinalNorm norm;
  Parameter projection;
  std::map<int64_t, State> states;
};

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

std::unique_ptr<Layer> flexpipe::rt::makeEmbedding(const GptConfig &config,
                                                   VocabSlice slice) {
  return std::make_unique<Embedding>(config, slice);
}
std::unique_ptr<Layer> flexpipe::rt::makeBlock(const GptConfig &config,
                                               int64_t index) {
  return std::make_unique<Block>(config, index);
}
std::unique_ptr<Layer> flexpipe::rt::makeFinalNorm(const GptConfig &config) {
  return std::make_unique<FinalNorm>(config);
}
std::unique_ptr<Layer> flexpipe::rt::makeHead(const GptConfig &config) {
  return std::make_unique<Head>(config);
}
std::unique_ptr<Layer> flexpipe::rt::makeLmHead(const GptConfig &config) {
  return std::make_unique<LmHead>(config);
}
std::unique_ptr<Layer> flexpipe::rt::makeTowerHead(const GptConfig &config) {
  return std::make_unique<TowerHead>(config);
}

float flexpipe::rt::contrastiveLoss(const Tensor &a, const Tensor &b,
                                    int64_t batch, int64_t dim, Tensor &da,
                                    Tensor &db) {
  assert(a.size() == static_cast<size_t>(batch * dim) && b.size() == a.size() &&
         "batch x dim embeddings");
  const int64_t n = batch, d = dim;
  // Unit rows and their norms.
  auto normalise = [&](const Tensor &x, std::vector<double> &unit,
                       std::vector<double> &norm) {
    unit.resize(n * d);
    norm.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      double sq = 0;
      for (int64_t c = 0; c < d; ++c)
        sq += static_cast<double>(x[i * d + c]) * x[i * d + c];
      norm[i] = std::max(std::sqrt(sq), 1e-12);
      for (int64_t c = 0; c < d; ++c)
        unit[i * d + c] = x[i * d + c] / norm[i];
    }
  };
  std::vector<double> ua, ub, na, nb;
  normalise(a, ua, na);
  normalise(b, ub, nb);
  std::vector<double> logits(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double dotij = 0;
      for (int64_t c = 0; c < d; ++c)
        dotij += ua[i * d + c] * ub[j * d + c];
      logits[i * n + j] = kContrastiveScale * dotij;
    }
  // Softmax along rows (a's samples against every b) and along columns;
  // g = dloss/dlogits = ((rows - I) + (columns - I)) / 2n.
  std::vector<double> g(n * n, 0.0);
  double loss = 0;
  for (int transposed = 0; transposed < 2; ++transposed)
    for (int64_t i = 0; i < n; ++i) {
      auto at = [&](int64_t k) -> int64_t {
        return transposed ? k * n + i : i * n + k;
      };
      double maxLogit = logits[at(0)];
      for (int64_t k = 1; k < n; ++k)
        maxLogit = std::max(maxLogit, logits[at(k)]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k)
        sum += std::exp(logits[at(k)] - maxLogit);
      loss += std::log(sum) + maxLogit - logits[at(i)];
      for (int64_t k = 0; k < n; ++k)
        g[at(k)] +=
            (std::exp(logits[at(k)] - maxLogit) / sum - (k == i ? 1.0 : 0.0)) /
            (2.0 * n);
    }
  loss /= 2.0 * n;
  // Through the logits to the unit rows, then through the normalisation:
  // d(x / |x|) = (du - u (u . du)) / |x|.
  auto backward =
      [&](const std::vector<double> &unit, const std::vector<double> &norm,
          const std::vector<double> &other, bool transposed, Tensor &dx) {
        dx.assign(n * d, 0.0f);
        std::vector<double> du(d);
        for (int64_t i = 0; i < n; ++i) {
          std::fill(du.begin(), du.end(), 0.0);
          for (int64_t k = 0; k < n; ++k) {
            const double gik = transposed ? g[k * n + i] : g[i * n + k];
            for (int64_t c = 0; c < d; ++c)
              du[c] += kContrastiveScale * gik * other[k * d + c];
          }
          double along = 0;
          for (int64_t c = 0; c < d; ++c)
            along += unit[i * d + c] * du[c];
          for (int64_t c = 0; c < d; ++c)
            dx[i * d + c] =
                static_cast<float>((du[c] - unit[i * d + c] * along) / norm[i]);
        }
      };
  backward(ua, na, ub, false, da);
  backward(ub, nb, ua, true, db);
  return static_cast<float>(loss);
}

VocabHead::VocabHead(const GptConfig &c, VocabSlice slice)
    : config(c), slice(slice), weight(vocabHeadParameter(c, slice)) {}

std::vector<double> VocabHead::forward(int64_t mb, const Batch &batch,
                                       const Tensor &hidden) {
  const int64_t t = config.tokens(), h = config.hidden, v = slice.size();
  State &s = states[mb];
  s.hidden = hidden;
  s.targets = batch.targets;
  s.probs.resize(t * v);
  gemm(false, false, t, v, h, s.hidden.data(), weight.value.data(), 0.0f,
       s.probs.data());
  std::vector<double> stats(t * kStatistics);
  for (int64_t r = 0; r < t; ++r) {
    const int64_t target = s.targets[r];
    stats[r * kStatistics + 2] = target >= slice.begin && target < slice.end
                                     ? s.probs[r * v + target - slice.begin]
                                     : 0.0;
  }
  // The logits become exp(logit - the row's largest): the softmax's
  // numerators, which combine() scales once every slice's sum is known.
  std::vector<float> maxima(t);
  std::vector<double> sums(t);
  kernels::softmaxNumerators(s.probs.data(), t, v, maxima.data(), sums.data());
  for (int64_t r = 0; r < t; ++r) {
    stats[r * kStatistics] = maxima[r];
    stats[r * kStatistics + 1] = sums[r];
  }
  return stats;
}

float VocabHead::combine(int64_t mb, const std::vector<double> &all) {
  const int64_t t = config.tokens(), v = slice.size();
  const size_t perPart = static_cast<size_t>(t * kStatistics);
  assert(all.size() == perPart * slice.parts && "one block per slice");
  State &s = states.at(mb);
  double loss = 0;
  for (int64_t r = 0; r < t; ++r) {
    auto stat = [&](int part, int k) {
      return all[part * perPart + r * kStatistics + k];
    };
    double maxLogit = stat(0, 0);
    for (int p = 1; p < slice.parts; ++p)
      maxLogit = std::max(maxLogit, stat(p, 0));
    // Each slice's sum rescaled to the common maximum; the whole
    // vocabulary's (one slice) is its own sum times exp(0) = 1, exactly.
    double sum = 0, target = 0;
    for (int p = 0; p < slice.parts; ++p) {
      sum += stat(p, 1) * std::exp(stat(p, 0) - maxLogit);
      target += stat(p, 2);
    }
    loss += std::log(sum) + maxLogit - target;
    const float factor =
        static_cast<float>(std::exp(stat(slice.part, 0) - maxLogit) / sum);
    float *row = s.probs.data() + r * v;
    for (int64_t c = 0; c < v; ++c)
      row[c] *= factor;
  }
  return static_cast<float>(loss / t);
}

void VocabHead::inputGrad(int64_t mb, Tensor &dhidden, float lossScale) {
  const int64_t t = config.tokens(), h = config.hidden, v = slice.size();
  State &s = states.at(mb);
  // The logit gradients replace the probabilities: the head keeps one
  // vocabulary-wide array per micro-batch from here to its weight gradient.
  s.dlogits = std::move(s.probs);
  s.probs = Tensor();
  for (int64_t r = 0; r < t; ++r)
    if (s.targets[r] >= slice.begin && s.targets[r] < slice.end)
      s.dlogits[r * v + s.targets[r] - slice.begin] -= 1.0f;
  const float scale = lossScale / static_cast<float>(t);
  for (float &g : s.dlogits)
    g *= scale;
  dhidden.assign(t * h, 0.0f);
  gemm(false, true, t, h, v, s.dlogits.data(), weight.value.data(), 0.0f,
       dhidden.data());
}

void VocabHead::weightGrad(int64_t mb) {
  const int64_t t = config.tokens(), h = config.hidden, v = slice.size();
  State &s = states.at(mb);
  gemm(true, false, h, v, t, s.hidden.data(), s.dlogits.data(), 1.0f,
       weight.grad.data());
  states.erase(mb);
}

size_t VocabHead::cachedBytes() const {
  size_t floats = 0;
  for (const auto &[mb, s] : states)
    floats +=
        s.hidden.size() + s.probs.size() + s.dlogits.size() + s.targets.size();
  return floats * sizeof(float);
}

Stage::Stage(const GptConfig &config, int64_t firstBlock, int64_t numBlocks,
             bool embedding, bool head, bool finalNorm) {
  if (embedding)
    layers.push_back(makeEmbedding(config));
  for (int64_t i = 0; i < numBlocks; ++i)
    layers.push_back(makeBlock(config, firstBlock + i));
  if (finalNorm)
    layers.push_back(makeFinalNorm(config));
  if (head)
    layers.push_back(config.embed > 0 ? makeTowerHead(config)
                                      : makeHead(config));
}

float Stage::forward(int64_t mb, const Batch &batch, const Tensor &in,
                     Tensor &out) {
  Tensor current = in, next;
  float loss = 0;
  for (auto &layer : layers) {
    loss = layer->forward(mb, batch, current, next);
    std::swap(current, next);
  }
  out = std::move(current);
  return loss;
}

void Stage::inputGrad(int64_t mb, const Tensor &dout, Tensor &din,
                      float lossScale) {
  Tensor current = dout, next;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    (*it)->inputGrad(mb, current, next, lossScale);
    std::swap(current, next);
  }
  din = std::move(current);
}

void Stage::weightGrad(int64_t mb) {
  for (auto &layer : layers)
    layer->weightGrad(mb);
}

std::vector<Parameter *> Stage::parameters() {
  std::vector<Parameter *> all;
  for (auto &layer : layers)
    for (Parameter *p : layer->parameters())
      all.push_back(p);
  return all;
}

size_t Stage::cachedBytes() const {
  size_t bytes = 0;
  for (const auto &layer : layers)
    bytes += layer->cachedBytes();
  return bytes;
}

void Adam::apply(const std::vector<Parameter *> &parameters) {
  ++step;
  const float c1 = 1 - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1 - std::pow(beta2, static_cast<float>(step));
  for (Parameter *p : parameters) {
    auto &[m, v] = moments[p->name];
    if (m.empty()) {
      m.assign(p->value.size(), 0.0f);
      v.assign(p->value.size(), 0.0f);
    }
    for (size_t i = 0; i < p->value.size(); ++i) {
      const float g = p->grad[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      p->value[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
      p->grad[i] = 0.0f;
    }
  }
}
