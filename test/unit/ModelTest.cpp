//===- ModelTest.cpp - Gradient checks of the built-in model --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every layer's input gradient and weight gradients against central finite
// differences of a scalar objective: sum(output * r) for a fixed random r, or
// the loss for the head.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Model.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>

using namespace flexpipe::rt;

namespace {

GptConfig small() {
  GptConfig c;
  c.vocab = 11;
  c.seq = 5;
  c.hidden = 8;
  c.heads = 2;
  c.layers = 2;
  c.microBatch = 2;
  c.seed = 7;
  return c;
}

Tensor randomTensor(size_t size, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t(size);
  for (float &x : t)
    x = normal(rng);
  return t;
}

double dot(const Tensor &a, const Tensor &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

/// Compares `analytic[i]` with the central difference of `objective` when
/// `value[i]` moves, for up to `samples` indices spread over the tensor.
void checkGradient(const std::string &what, Tensor &value,
                   const Tensor &analytic,
                   const std::function<double()> &objective,
                   size_t samples = 24, float eps = 1e-2f) {
  REQUIRE(value.size() == analytic.size());
  const size_t stride = std::max<size_t>(1, value.size() / samples);
  double worst = 0;
  for (size_t i = 0; i < value.size(); i += stride) {
    const float saved = value[i];
    value[i] = saved + eps;
    const double up = objective();
    value[i] = saved - eps;
    const double down = objective();
    value[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double error = std::abs(numeric - analytic[i]) /
                         std::max(1e-2, std::abs(numeric) + std::abs(analytic[i]));
    worst = std::max(worst, error);
    INFO(what << "[" << i << "]: analytic " << analytic[i] << ", numeric "
              << numeric);
    CHECK(error < 2e-2);
  }
  INFO(what << ": worst relative error " << worst);
}

} // namespace

TEST_CASE("a transformer block's input and weight gradients",
          "[model][gradcheck]") {
  const GptConfig c = small();
  const size_t n = c.tokens() * c.hidden;
  Batch batch = makeBatch(c, 0, 0);
  Tensor x = randomTensor(n, 1), r = randomTensor(n, 2);

  std::unique_ptr<Layer> block = makeBlock(c, 0);
  Tensor y, dx;
  block->forward(0, batch, x, y);
  block->inputGrad(0, r, dx, 1.0f);
  block->weightGrad(0);

  // A second block with the same weights evaluates the objective.
  std::unique_ptr<Layer> probe = makeBlock(c, 0);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor out;
    probe->forward(mb++, batch, x, out);
    return dot(out, r);
  };
  checkGradient("dx", x, dx, objective);
  std::vector<Parameter *> ours = block->parameters(),
                           theirs = probe->parameters();
  for (size_t p = 0; p < ours.size(); ++p)
    checkGradient(ours[p]->name, theirs[p]->value, ours[p]->grad, objective);
  CHECK(block->cachedBytes() == 0);
}

TEST_CASE("the embedding's weight gradients", "[model][gradcheck]") {
  const GptConfig c = small();
  Batch batch = makeBatch(c, 3, 1);
  Tensor r = randomTensor(c.tokens() * c.hidden, 3);
  std::unique_ptr<Layer> embedding = makeEmbedding(c);
  Tensor y, dx;
  embedding->forward(0, batch, {}, y);
  embedding->inputGrad(0, r, dx, 1.0f);
  CHECK(dx.empty());
  embedding->weightGrad(0);
  std::unique_ptr<Layer> probe = makeEmbedding(c);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor out;
    probe->forward(mb++, batch, {}, out);
    return dot(out, r);
  };
  for (size_t p = 0; p < 2; ++p)
    checkGradient(embedding->parameters()[p]->name,
                  probe->parameters()[p]->value,
                  embedding->parameters()[p]->grad, objective);
}

TEST_CASE("the head's input and weight gradients of the loss",
          "[model][gradcheck]") {
  const GptConfig c = small();
  Batch batch = makeBatch(c, 1, 2);
  Tensor x = randomTensor(c.tokens() * c.hidden, 4);
  std::unique_ptr<Layer> head = makeHead(c);
  Tensor unused, dx;
  const float loss = head->forward(0, batch, x, unused);
  CHECK(loss > 0);
  head->inputGrad(0, {}, dx, 1.0f);
  head->weightGrad(0);
  std::unique_ptr<Layer> probe = makeHead(c);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor out;
    return static_cast<double>(probe->forward(mb++, batch, x, out));
  };
  checkGradient("dx", x, dx, objective);
  for (size_t p = 0; p < 3; ++p)
    checkGradient(head->parameters()[p]->name, probe->parameters()[p]->value,
                  head->parameters()[p]->grad, objective);
}

TEST_CASE("a whole stage: embedding, blocks and head", "[model][gradcheck]") {
  const GptConfig c = small();
  Batch batch = makeBatch(c, 2, 0);
  Stage stage(c, 0, 2, /*embedding=*/true, /*head=*/true);
  Tensor out, din;
  stage.forward(0, batch, {}, out);
  stage.backward(0, {}, din, 1.0f);
  CHECK(din.empty());
  Stage probe(c, 0, 2, true, true);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor o;
    return static_cast<double>(probe.forward(mb++, batch, {}, o));
  };
  std::vector<Parameter *> ours = stage.parameters(),
                           theirs = probe.parameters();
  REQUIRE(ours.size() == 2 + 2 * 12 + 3);
  for (size_t p = 0; p < ours.size(); ++p)
    // A smaller step: perturbing a bias moves every token through two
    // blocks and the softmax, and the curvature shows at 1e-2.
    checkGradient(ours[p]->name, theirs[p]->value, ours[p]->grad, objective, 6,
                  2e-3f);
}

TEST_CASE("input and weight gradients split equal a full backward",
          "[model]") {
  const GptConfig c = small();
  Batch batch = makeBatch(c, 0, 0);
  Tensor x = randomTensor(c.tokens() * c.hidden, 5),
         r = randomTensor(c.tokens() * c.hidden, 6);
  Stage split(c, 0, 2, false, false), whole(c, 0, 2, false, false);
  Tensor y, dxSplit, dxWhole;
  // Two micro-batches in flight: both inputs first, weights later (as a
  // zero-bubble schedule runs them).
  split.forward(0, batch, x, y);
  split.forward(1, batch, r, y);
  split.inputGrad(1, x, dxSplit, 1.0f);
  split.inputGrad(0, r, dxSplit, 1.0f);
  split.weightGrad(0);
  split.weightGrad(1);
  whole.forward(0, batch, x, y);
  whole.backward(0, r, dxWhole, 1.0f);
  whole.forward(1, batch, r, y);
  whole.backward(1, x, dxWhole, 1.0f);
  std::vector<Parameter *> a = split.parameters(), b = whole.parameters();
  for (size_t p = 0; p < a.size(); ++p)
    for (size_t i = 0; i < a[p]->grad.size(); ++i)
      REQUIRE(a[p]->grad[i] == Approx(b[p]->grad[i]).margin(1e-6));
  CHECK(split.cachedBytes() == 0);
}

TEST_CASE("vocabulary slices split the rows evenly", "[model][vocab]") {
  // 11 rows over 3 parts: 4, 4, 3, contiguous.
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (int part = 0; part < 3; ++part) {
    VocabSlice slice = vocabSlice(11, part, 3);
    rows.push_back({slice.begin, slice.end});
  }
  CHECK(rows ==
        std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 8}, {8, 11}});
  CHECK(vocabSlice(11, 0, 1).whole(11));
  CHECK(sliceName("head.weight", 0, 8, 4, 8, 8, 11) ==
        "head.weight[0:8,4:8]/8x11");
}

TEST_CASE("a vocabulary-split embedding sums to the whole", "[model][vocab]") {
  const GptConfig c = small();
  const int64_t h = c.hidden;
  Batch batch = makeBatch(c, 2, 1);
  Tensor r = randomTensor(c.tokens() * h, 7);
  std::unique_ptr<Layer> whole = makeEmbedding(c);
  Tensor expected, unused;
  whole->forward(0, batch, {}, expected);
  whole->inputGrad(0, r, unused, 1.0f);
  whole->weightGrad(0);
  const Parameter &token = *whole->parameters()[0];
  const Parameter &position = *whole->parameters()[1];

  constexpr int kParts = 3;
  Tensor sum(expected.size(), 0.0f);
  for (int part = 0; part < kParts; ++part) {
    const VocabSlice slice = vocabSlice(c.vocab, part, kParts);
    std::unique_ptr<Layer> piece = makeEmbedding(c, slice);
    Tensor out;
    piece->forward(0, batch, {}, out);
    for (size_t i = 0; i < out.size(); ++i)
      sum[i] += out[i];
    piece->inputGrad(0, r, unused, 1.0f);
    CHECK(unused.empty());
    piece->weightGrad(0);
    // Its rows of the table and of the gradient, exactly; the position
    // embedding on the first part only.
    std::vector<Parameter *> ours = piece->parameters();
    REQUIRE(ours.size() == (part == 0 ? 2u : 1u));
    const int64_t r0 = slice.begin * h, r1 = slice.end * h;
    CHECK(ours[0]->name == sliceName("embedding.token", slice.begin, slice.end,
                                     0, h, c.vocab, h));
    CHECK(ours[0]->value ==
          Tensor(token.value.begin() + r0, token.value.begin() + r1));
    CHECK(ours[0]->grad ==
          Tensor(token.grad.begin() + r0, token.grad.begin() + r1));
    if (part == 0) {
      CHECK(ours[1]->value == position.value);
      CHECK(ours[1]->grad == position.grad);
    }
  }
  // Each token's row comes from one part: the sum is exactly the whole's.
  CHECK(sum == expected);
}

TEST_CASE("a vocabulary-split head equals the whole head", "[model][vocab]") {
  const GptConfig c = small();
  const int64_t h = c.hidden, t = c.tokens();
  Batch batch = makeBatch(c, 1, 3);
  Tensor x = randomTensor(t * h, 8);
  std::unique_ptr<Layer> whole = makeHead(c);
  Tensor unused, dxWhole;
  const float lossWhole = whole->forward(0, batch, x, unused);
  whole->inputGrad(0, {}, dxWhole, 0.5f);
  whole->weightGrad(0);
  const Parameter &weightWhole = *whole->parameters()[2];

  // The final norm once (the last transformer stage), the head in slices
  // that exchange their statistics, as the actors of a group do.
  constexpr int kParts = 3;
  std::unique_ptr<Layer> norm = makeFinalNorm(c);
  Tensor hidden;
  norm->forward(0, batch, x, hidden);
  std::vector<std::unique_ptr<VocabHead>> heads;
  std::vector<double> all;
  for (int part = 0; part < kParts; ++part) {
    heads.push_back(
        std::make_unique<VocabHead>(c, vocabSlice(c.vocab, part, kParts)));
    std::vector<double> stats = heads.back()->forward(0, batch, hidden);
    REQUIRE(stats.size() == static_cast<size_t>(t * VocabHead::kStatistics));
    all.insert(all.end(), stats.begin(), stats.end());
  }
  Tensor dhidden(t * h, 0.0f);
  for (int part = 0; part < kParts; ++part) {
    CHECK(heads[part]->combine(0, all) == Approx(lossWhole).epsilon(1e-6));
    Tensor partial;
    heads[part]->inputGrad(0, partial, 0.5f);
    for (size_t i = 0; i < partial.size(); ++i)
      dhidden[i] += partial[i];
    heads[part]->weightGrad(0);
    CHECK(heads[part]->cachedBytes() == 0);
    // The slice's columns of head.weight and of its gradient.
    const VocabSlice slice = vocabSlice(c.vocab, part, kParts);
    const Parameter &w = heads[part]->parameter();
    CHECK(w.name ==
          sliceName("head.weight", 0, h, slice.begin, slice.end, h, c.vocab));
    for (int64_t row = 0; row < h; ++row)
      for (int64_t col = slice.begin; col < slice.end; ++col) {
        const size_t ours = row * slice.size() + col - slice.begin;
        REQUIRE(w.value[ours] == weightWhole.value[row * c.vocab + col]);
        REQUIRE(w.grad[ours] ==
                Approx(weightWhole.grad[row * c.vocab + col]).margin(1e-6));
      }
  }
  Tensor dx;
  norm->inputGrad(0, dhidden, dx, 0.5f);
  norm->weightGrad(0);
  for (size_t i = 0; i < dx.size(); ++i)
    REQUIRE(dx[i] == Approx(dxWhole[i]).margin(1e-6));
  for (size_t p = 0; p < 2; ++p) {
    const Parameter &ours = *norm->parameters()[p];
    const Parameter &theirs = *whole->parameters()[p];
    CHECK(ours.name == theirs.name);
    for (size_t i = 0; i < ours.grad.size(); ++i)
      REQUIRE(ours.grad[i] == Approx(theirs.grad[i]).margin(1e-6));
  }
}

TEST_CASE("data is deterministic and learnable", "[model]") {
  const GptConfig c = small();
  Batch a = makeBatch(c, 4, 2), b = makeBatch(c, 4, 2), d = makeBatch(c, 4, 3);
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens != d.tokens);
  // Every target is the next input token within a sequence.
  for (int64_t i = 0; i + 1 < c.seq; ++i)
    CHECK(a.targets[i] == a.tokens[i + 1]);
}
