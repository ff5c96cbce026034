//===- Model.h - The built-in GPT model, layer by layer ---------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A GPT-style decoder in fp32 on the CPU: token + position embedding, pre-LN
// transformer blocks (causal multi-head self-attention, GELU MLP), final
// LayerNorm, LM head and cross-entropy. The same layers make the towers of a
// two-tower (CLIP-style) model: each tower ends in its final LayerNorm, mean
// pooling and a projection, and a symmetric contrastive loss joins the two
// towers' embeddings. Every layer computes its forward,
// its input gradient and its weight gradient separately, so that the
// runtime's B, I and W instructions all do real work: inputGrad keeps what
// weightGrad needs, weightGrad frees the micro-batch's state.
//
// Parameters are initialised from a seed and their names alone, so every
// rank builds exactly the weights a single-process run builds. Matrix
// products go through OpenBLAS's sgemm. The data, the vocabulary's split and
// the initial parameters (ModelData.cpp) need neither OpenBLAS nor the
// layers: they are what a GPU backend shares with this model.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_MODEL_H
#define FLEXPIPE_RUNTIME_MODEL_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flexpipe::rt {

using Tensor = std::vector<float>;

struct GptConfig {
  int64_t vocab = 256, seq = 32, hidden = 64, heads = 4, layers = 8;
  int64_t microBatch = 1;
  uint64_t seed = 1234;
  /// A tower of the two-tower model: its last stage ends in the final
  /// LayerNorm, mean pooling and a projection to `embed` dimensions
  /// (makeTowerHead) instead of the LM head. 0 for the GPT.
  int64_t embed = 0;
  /// Prefix of every parameter's name: empty for the GPT, "NAME." for a
  /// tower (so that the towers draw different weights).
  std::string prefix;
  int64_t tokens() const { return microBatch * seq; }
};

/// A named parameter with its gradient accumulator.
struct Parameter {
  std::string name;
  Tensor value, grad;
};

/// Deterministic synthetic data with learnable structure: sequence n of
/// iteration i starts at a pseudo-random token, and every next token is a
/// fixed random permutation of the previous one (a bigram the model learns).
struct Batch {
  std::vector<int32_t> tokens, targets;
};
Batch makeBatch(const GptConfig &config, int64_t iteration,
                int64_t microbatch);

/// The two-tower model's data: sample b of micro-batch `microbatch` of
/// `iteration` belongs to a latent class, the b-th of a shuffle of the
/// kPairClasses classes drawn from the seed and the micro-batch (distinct
/// within a micro-batch up to kPairClasses samples, the same for both
/// towers). Tower `tower`'s tokens for the sample are the tower's own fixed
/// random sequence for that class, each token replaced by a random one with
/// probability 1/4: matched pairs share a class, which the towers learn to
/// recognise. `targets` stays empty.
constexpr int64_t kPairClasses = 8;
Batch makeTowerBatch(const GptConfig &config, int tower, int64_t iteration,
                     int64_t microbatch);

/// One piece of a stage. Inputs and outputs are [tokens x hidden] row-major,
/// except the embedding's input (token ids) and the LM head's output (its
/// input again: the head returns the loss).
class Layer {
public:
  virtual ~Layer() = default;
  /// Computes the output for micro-batch `mb` and keeps what the gradients
  /// need. Returns the loss for the head, 0 otherwise.
  virtual float forward(int64_t mb, const Batch &batch, const Tensor &in,
                        Tensor &out) = 0;
  /// Gradient with respect to the input from the gradient of the output (the
  /// head ignores `dout`: its output is the loss, scaled by `lossScale`).
  virtual void inputGrad(int64_t mb, const Tensor &dout, Tensor &din,
                         float lossScale) = 0;
  /// Accumulates the weight gradients of micro-batch `mb` and frees its
  /// state. Requires inputGrad first.
  virtual void weightGrad(int64_t mb) = 0;
  virtual std::vector<Parameter *> parameters() = 0;
  /// Bytes held for micro-batches between forward and weightGrad.
  virtual size_t cachedBytes() const = 0;
};

/// Part `part` of `parts` of a vocabulary split evenly along its rows for
/// vocabulary parallelism: rows [begin, end), the first vocab % parts parts
/// one row longer. The whole vocabulary is part 0 of 1.
struct VocabSlice {
  int64_t begin = 0, end = 0;
  int part = 0, parts = 1;
  int64_t size() const { return end - begin; }
  bool whole(int64_t vocab) const { return begin == 0 && end == vocab; }
};
VocabSlice vocabSlice(int64_t vocab, int part, int parts);

/// The name of rows [r0, r1) and columns [c0, c1) of the rows x cols
/// parameter `name`, as parameters of a slice are named (and written by
/// --weights, which scripts/compare-training.py reassembles):
/// "NAME[r0:r1,c0:c1]/ROWSxCOLS".
std::string sliceName(const std::string &name, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1, int64_t rows, int64_t cols);

/// Each layer's parameters as it starts, in the order of its parameters():
/// zero gradients, values drawn from config.seed and the parameter's name
/// alone (ModelData.cpp). The layers below start from them and the CUDA
/// backend copies them to the GPU, which so starts from the same weights
/// without linking the CPU layers (Model.cpp, OpenBLAS).
std::vector<Parameter> embeddingParameters(const GptConfig &config,
                                           VocabSlice slice);
std::vector<Parameter> blockParameters(const GptConfig &config, int64_t index);
std::vector<Parameter> finalNormParameters(const GptConfig &config);
/// VocabHead's weight: the slice's columns of the hidden x vocab head.weight.
Parameter vocabHeadParameter(const GptConfig &config, VocabSlice slice);
/// makeHead's: finalNormParameters and the whole vocabulary's head.weight.
std::vector<Parameter> headParameters(const GptConfig &config);
/// makeTowerHead's projection (its final LayerNorm's are finalNormParameters).
Parameter towerProjectionParameter(const GptConfig &config);

/// The token embedding (plus the position embedding on part 0). A slice of
/// the vocabulary outputs, per token, its row when the token is in the slice
/// and zeros otherwise, so that the parts' outputs sum to the whole's.
std::unique_ptr<Layer> makeEmbedding(const GptConfig &config, VocabSlice slice);
inline std::unique_ptr<Layer> makeEmbedding(const GptConfig &config) {
  return makeEmbedding(config, vocabSlice(config.vocab, 0, 1));
}
std::unique_ptr<Layer> makeBlock(const GptConfig &config, int64_t index);
/// The final LayerNorm (head.ln.*), alone: with vocabulary parallelism it
/// belongs to the last transformer stage, not to the split head.
std::unique_ptr<Layer> makeFinalNorm(const GptConfig &config);
/// Final LayerNorm, LM head and cross-entropy: makeFinalNorm and a
/// VocabHead of the whole vocabulary.
std::unique_ptr<Layer> makeHead(const GptConfig &config);
/// makeHead without its final LayerNorm: the LM head of the whole
/// vocabulary and the cross-entropy. makeFinalNorm followed by it computes
/// exactly what makeHead computes (flexpipe-reference cuts the model there
/// when a runtime operation reads the final LayerNorm's output).
std::unique_ptr<Layer> makeLmHead(const GptConfig &config);
/// The end of a tower: the final LayerNorm, the mean over each sequence's
/// tokens and a projection without bias (PREFIXhead.projection, hidden x
/// embed) to the shared embedding space. Output: microBatch x embed.
std::unique_ptr<Layer> makeTowerHead(const GptConfig &config);

/// The logit scale of the contrastive loss (CLIP learns it; here it is
/// fixed).
constexpr double kContrastiveScale = 10;
/// The symmetric contrastive (CLIP, InfoNCE) loss of `batch` matched pairs:
/// the rows of `a` and `b` (batch x dim each, sample i of one tower matches
/// sample i of the other) are L2-normalised, logits = kContrastiveScale *
/// a b^T, and the loss is the mean of the cross-entropies of the rows and of
/// the columns against the diagonal, each averaged over the batch. Returns
/// the loss; `da` and `db` get its gradients. Computed in double.
float contrastiveLoss(const Tensor &a, const Tensor &b, int64_t batch,
                      int64_t dim, Tensor &da, Tensor &db);

/// The LM head (no bias) and the mean cross-entropy over a slice of the
/// vocabulary (columns [begin, end) of the hidden x vocab head.weight). Not a
/// Layer: the softmax needs every slice's logits, so the forward ends with
/// per-token statistics that the slices exchange (the all-gather of
/// vocabulary parallelism) before the loss and the gradients exist.
class VocabHead {
public:
  /// Per token: the slice's largest logit, the sum of exp(logit - that
  /// largest), and the target's logit when the target is in the slice (else
  /// 0).
  static constexpr int64_t kStatistics = 3;

  VocabHead(const GptConfig &config, VocabSlice slice);
  /// Logits of the slice for `hidden` (the final LayerNorm's output); returns
  /// the statistics, tokens x kStatistics.
  std::vector<double> forward(int64_t mb, const Batch &batch,
                              const Tensor &hidden);
  /// From every slice's statistics, slices in vocabulary order: the
  /// micro-batch's mean cross-entropy, which every slice gets exactly.
  float combine(int64_t mb, const std::vector<double> &all);
  /// This slice's part of the gradient of the hidden input (the parts sum to
  /// the whole's); the loss is scaled by `lossScale`.
  void inputGrad(int64_t mb, Tensor &dhidden, float lossScale);
  void weightGrad(int64_t mb);
  Parameter &parameter() { return weight; }
  size_t cachedBytes() const;

private:
  struct State {
    Tensor hidden, probs, dlogits;
    std::vector<int32_t> targets;
  };
  GptConfig config;
  VocabSlice slice;
  Parameter weight;
  std::map<int64_t, State> states;
};

/// A pipeline stage: [embedding] blocks [first, first + count) [final norm]
/// [head], or any list of layers. The head of a tower (config.embed > 0) is
/// makeTowerHead's.
class Stage {
public:
  Stage(const GptConfig &config, int64_t firstBlock, int64_t numBlocks,
        bool embedding, bool head, bool finalNorm = false);
  explicit Stage(std::vector<std::unique_ptr<Layer>> layers)
      : layers(std::move(layers)) {}
  /// `in` is ignored on the first stage; on the last the micro-batch's mean
  /// cross-entropy is returned and `out` is the hidden state that entered the
  /// head (a tower's: `out` is its embeddings, the loss comes later from
  /// contrastiveLoss).
  float forward(int64_t mb, const Batch &batch, const Tensor &in, Tensor &out);
  /// `dout` is ignored on the last stage but a tower's (the gradient of its
  /// embeddings); `din` is left empty on the first.
  void inputGrad(int64_t mb, const Tensor &dout, Tensor &din, float lossScale);
  void weightGrad(int64_t mb);
  void backward(int64_t mb, const Tensor &dout, Tensor &din, float lossScale) {
    inputGrad(mb, dout, din, lossScale);
    weightGrad(mb);
  }
  std::vector<Parameter *> parameters();
  size_t cachedBytes() const;

private:
  std::vector<std::unique_ptr<Layer>> layers;
};

/// Adam with the usual defaults; one step over the accumulated gradients,
/// which it then clears.
struct Adam {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  int64_t step = 0;
  std::map<std::string, std::pair<Tensor, Tensor>> moments;
  void apply(const std::vector<Parameter *> &parameters);
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_MODEL_H
