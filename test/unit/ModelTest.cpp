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
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Support/Hash.h"

// The runtime's internal kernels (runtime/lib).
#include "Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <tuple>

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
    const double error =
        std::abs(numeric - analytic[i]) /
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

TEST_CASE("input and weight gradients split equal a full backward", "[model]") {
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

namespace {

/// A tower of the two-tower model, small.
GptConfig smallTower(const std::string &name, int64_t hidden) {
  GptConfig c = small();
  c.hidden = hidden;
  c.microBatch = 3;
  c.embed = 6;
  c.prefix = name + ".";
  return c;
}

} // namespace

TEST_CASE("a tower head's input and weight gradients", "[model][tower]") {
  const GptConfig c = smallTower("image", 8);
  Batch batch = makeTowerBatch(c, 0, 0, 0);
  Tensor x = randomTensor(c.tokens() * c.hidden, 9),
         r = randomTensor(c.microBatch * c.embed, 10);
  std::unique_ptr<Layer> head = makeTowerHead(c);
  Tensor y, dx;
  head->forward(0, batch, x, y);
  REQUIRE(y.size() == static_cast<size_t>(c.microBatch * c.embed));
  head->inputGrad(0, r, dx, 1.0f);
  head->weightGrad(0);
  CHECK(head->cachedBytes() == 0);
  std::unique_ptr<Layer> probe = makeTowerHead(c);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor out;
    probe->forward(mb++, batch, x, out);
    return dot(out, r);
  };
  checkGradient("dx", x, dx, objective);
  std::vector<Parameter *> ours = head->parameters(),
                           theirs = probe->parameters();
  REQUIRE(ours.size() == 3);
  CHECK(ours[0]->name == "image.head.ln.gain");
  CHECK(ours[2]->name == "image.head.projection");
  for (size_t p = 0; p < ours.size(); ++p)
    checkGradient(ours[p]->name, theirs[p]->value, ours[p]->grad, objective);
}

TEST_CASE("the contrastive loss and its gradients", "[model][tower]") {
  const int64_t batch = 4, dim = 5;
  Tensor a = randomTensor(batch * dim, 11), b = randomTensor(batch * dim, 12);
  Tensor da, db;
  const float loss = contrastiveLoss(a, b, batch, dim, da, db);
  // Symmetric: swapping the towers swaps the gradients.
  Tensor da2, db2;
  CHECK(contrastiveLoss(b, a, batch, dim, db2, da2) ==
        Approx(loss).epsilon(1e-6));
  for (size_t i = 0; i < da.size(); ++i) {
    REQUIRE(da[i] == Approx(da2[i]).margin(1e-7));
    REQUIRE(db[i] == Approx(db2[i]).margin(1e-7));
  }
  auto objective = [&] {
    Tensor ga, gb;
    return static_cast<double>(contrastiveLoss(a, b, batch, dim, ga, gb));
  };
  checkGradient("da", a, da, objective, 24, 1e-3f);
  checkGradient("db", b, db, objective, 24, 1e-3f);
  // Only the directions matter: scaling a row changes nothing.
  Tensor scaled = a;
  for (int64_t c = 0; c < dim; ++c)
    scaled[c] *= 3.0f;
  Tensor unused1, unused2;
  CHECK(contrastiveLoss(scaled, b, batch, dim, unused1, unused2) ==
        Approx(loss).epsilon(1e-5));
  // Matched pairs that point the same way, apart from the others: the loss
  // is small; all alike: ln batch.
  Tensor same(batch * dim, 0.0f), alike(batch * dim, 1.0f);
  for (int64_t i = 0; i < batch; ++i)
    same[i * dim + i] = 1.0f;
  CHECK(contrastiveLoss(same, same, batch, dim, unused1, unused2) < 1e-3);
  CHECK(contrastiveLoss(alike, alike, batch, dim, unused1, unused2) ==
        Approx(std::log(4.0)).epsilon(1e-6));
}

TEST_CASE("two towers' last stages and the contrastive loss",
          "[model][tower]") {
  // Two towers of different widths, each a last stage (blocks and tower
  // head) fed with hidden states; every input and parameter gradient of both
  // against the loss, the backward starting from contrastiveLoss's gradients
  // as the runtime's does.
  const GptConfig ci = smallTower("image", 8), ct = smallTower("text", 12);
  Stage image(ci, 0, 1, false, true), text(ct, 1, 2, false, true);
  Stage probeImage(ci, 0, 1, false, true), probeText(ct, 1, 2, false, true);
  const Batch bi = makeTowerBatch(ci, 0, 1, 2),
              bt = makeTowerBatch(ct, 1, 1, 2);
  Tensor xi = randomTensor(ci.tokens() * ci.hidden, 13),
         xt = randomTensor(ct.tokens() * ct.hidden, 14);
  Tensor ei, et, dei, det, dxi, dxt;
  image.forward(0, bi, xi, ei);
  text.forward(0, bt, xt, et);
  const float loss = contrastiveLoss(ei, et, ci.microBatch, ci.embed, dei, det);
  CHECK(loss > 0);
  image.backward(0, dei, dxi, 1.0f);
  text.backward(0, det, dxt, 1.0f);
  CHECK(image.cachedBytes() == 0);
  int64_t mb = 100;
  auto objective = [&] {
    Tensor oi, ot, gi, gt;
    probeImage.forward(mb, bi, xi, oi);
    probeText.forward(mb++, bt, xt, ot);
    return static_cast<double>(
        contrastiveLoss(oi, ot, ci.microBatch, ci.embed, gi, gt));
  };
  checkGradient("dx image", xi, dxi, objective, 24, 4e-3f);
  checkGradient("dx text", xt, dxt, objective, 24, 4e-3f);
  for (auto [ours, theirs] :
       {std::pair{&image, &probeImage}, std::pair{&text, &probeText}}) {
    std::vector<Parameter *> a = ours->parameters(), b = theirs->parameters();
    REQUIRE(a.size() == b.size());
    for (size_t p = 0; p < a.size(); ++p)
      checkGradient(a[p]->name, b[p]->value, a[p]->grad, objective, 6, 4e-3f);
  }
}

TEST_CASE("towers name their parameters apart", "[model][tower]") {
  const GptConfig ci = smallTower("image", 8), ct = smallTower("text", 8);
  Stage image(ci, 0, 1, true, true), text(ct, 0, 1, true, true);
  std::vector<Parameter *> a = image.parameters(), b = text.parameters();
  REQUIRE(a.size() == 2 + 12 + 3);
  REQUIRE(a.size() == b.size());
  CHECK(a[0]->name == "image.embedding.token");
  CHECK(b[2]->name == "text.block0.ln1.gain");
  // Same shapes, different draws.
  CHECK(a[4]->name == "image.block0.attn.qkv.weight");
  CHECK(a[4]->value != b[4]->value);
  // The GPT keeps its names.
  CHECK(Stage(small(), 0, 1, true, true).parameters()[0]->name ==
        "embedding.token");
}

TEST_CASE("the towers' data is deterministic and paired", "[model][tower]") {
  GptConfig ci = smallTower("image", 8), ct = smallTower("text", 8);
  ci.vocab = ct.vocab = 1000; // equal prototype tokens unlikely
  ci.seq = ct.seq = 16;
  ci.microBatch = ct.microBatch = 2 * kPairClasses;
  const Batch a = makeTowerBatch(ci, 0, 2, 1);
  CHECK(a.tokens == makeTowerBatch(ci, 0, 2, 1).tokens);
  CHECK(a.tokens != makeTowerBatch(ci, 0, 2, 2).tokens);
  CHECK(a.tokens != makeTowerBatch(ci, 0, 3, 1).tokens);
  const Batch t = makeTowerBatch(ct, 1, 2, 1);
  CHECK(a.tokens != t.tokens);
  for (int32_t token : t.tokens)
    CHECK((token >= 0 && token < ct.vocab));
  // Two samples of one class agree on about 9 of their 16 tokens in each
  // tower (a token is noise with probability 1/4), samples of different
  // classes only by chance (1 in 1000 per token).
  // The classes of the first kPairClasses samples are distinct, and sample
  // b + kPairClasses repeats sample b's: in both towers, exactly those pairs
  // agree.
  auto agree = [&](const Batch &batch, int64_t i, int64_t j) {
    int64_t same = 0;
    for (int64_t k = 0; k < ci.seq; ++k)
      same += batch.tokens[i * ci.seq + k] == batch.tokens[j * ci.seq + k];
    return same >= 2;
  };
  for (int64_t i = 0; i < ci.microBatch; ++i)
    for (int64_t j = i + 1; j < ci.microBatch; ++j) {
      INFO("samples " << i << " and " << j);
      CHECK(agree(a, i, j) == (j == i + kPairClasses));
      CHECK(agree(t, i, j) == (j == i + kPairClasses));
    }
}

TEST_CASE("the schedule description of a GPT and of two towers",
          "[model][tower]") {
  const std::string gpt = "flexpipe-schedule 1\n"
                          "actors 2\nstages 2\nmicrobatches 2\ndp 1\n"
                          "model vocab=256 seq=32 hidden=64 heads=4 layers=8 "
                          "microbatch=1 seed=1234\n"
                          "stage 0 actor 0 blocks 0 4 first_last 1 0\n"
                          "stage 1 actor 1 blocks 4 4 first_last 0 1\n"
                          "edge 0 1\n";
  ScheduleDesc d;
  REQUIRE(parseSchedule(gpt, d) == "");
  CHECK(!d.twoTower());
  CHECK(d.stage[1].tower == -1);
  CHECK(d.config(1).hidden == 64);
  CHECK(d.config(1).prefix.empty());

  const std::string header = "flexpipe-schedule 1\n"
                             "actors 4\nstages 5\nmicrobatches 4\ndp 1\n"
                             "model microbatch=4 seed=7 embed=32\n"
                             "tower image vocab=64 seq=8 hidden=32 heads=2 "
                             "layers=4\n"
                             "tower text vocab=128 seq=12 hidden=48 heads=4 "
                             "layers=2\n";
  const std::string towers =
      "stage 0 actor 0 blocks 0 2 first_last 1 0 tower 0\n"
      "stage 1 actor 1 blocks 2 2 first_last 0 1 tower 0\n"
      "stage 2 actor 2 blocks 0 1 first_last 1 0 tower 1\n"
      "stage 3 actor 3 blocks 1 1 first_last 0 1 tower 1\n";
  const std::string edges = "edge 0 1\nedge 2 3\n";
  ScheduleDesc t;
  REQUIRE(parseSchedule(header + towers +
                            "stage 4 actor 1 blocks 0 0 first_last 0 0 "
                            "sync 1 3\n" +
                            edges,
                        t) == "");
  REQUIRE(t.twoTower());
  CHECK(t.syncStage() == 4);
  CHECK(t.stage[4].sync);
  CHECK(!t.stage[4].shared());
  CHECK(t.stage[4].actors == std::vector<int>{1, 3});
  CHECK(t.towerLastStage(0) == 1);
  CHECK(t.towerLastStage(1) == 3);
  CHECK(t.stage[3].towerLast());
  const GptConfig &text = t.config(3);
  CHECK(text.prefix == "text.");
  CHECK(text.hidden == 48);
  CHECK(text.microBatch == 4);
  CHECK(text.seed == 7);
  CHECK(text.embed == 32);

  // Towers that do not fit together.
  auto problem = [&](const std::string &text) {
    ScheduleDesc bad;
    return parseSchedule(text, bad);
  };
  CHECK(problem(header + towers +
                "stage 4 actor 0 blocks 0 0 first_last 0 0 sync 0 3\n" +
                edges) ==
        "schedule description: sync stage 4 must list the two different "
        "actors of the towers' last stages");
  CHECK(problem(header + towers +
                "stage 4 actor 1 blocks 0 0 first_last 0 0 sync 1 3\n" +
                "edge 1 2\n") ==
        "schedule description: edge 1 2 leaves its tower");
  CHECK(problem(header + towers + edges) ==
        "schedule description: stage 4 belongs to no tower ('tower 0' or "
        "'tower 1')");
  CHECK(problem(header + towers +
                "stage 4 actor 1 blocks 0 1 first_last 0 0 sync 1 3\n") ==
        "schedule description line 13: a sync stage holds no blocks, is "
        "neither first nor last, belongs to no tower and lists two actors");
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string text = gpt;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  CHECK(problem(replaced("first_last 0 1\n", "first_last 0 1 tower 0\n")) ==
        "schedule description: stage 1 names a tower or is a sync stage, but "
        "the model has no 'tower' lines");

  // A corrupted description is refused before a layer is built (these used
  // to divide by zero, throw length_error or bad_alloc, or train).
  const std::tuple<std::string, std::string, std::string> corrupted[] = {
      {"vocab=256", "vocab=0",
       "model vocab must be between 1 and 16777216, got 0"},
      {"hidden=64", "hidden=-64",
       "model hidden must be between 1 and 16777216, got -64"},
      {"layers=8", "layers=2000000",
       "model layers must be between 1 and 1048576, got 2000000"},
      {"microbatch=1", "microbatch=0",
       "model microbatch must be between 1 and 1048576, got 0"},
      {"hidden=64", "hidden=16777212",
       "model needs a tensor of 4294966272 floats; one process holds at most "
       "2^31"},
      {"heads=4", "heads=5", "model hidden 64 is not a multiple of heads 5"},
      {"actors 2", "actors 400000000",
       "actors 400000000 must be between 1 and 65536"},
      {"edge 0 1", "edge 0 7", "edge 0 7 does not join two of the 2 stages"},
      {"stage 1 actor 1 blocks 4 4 first_last 0 1\n", "",
       "stage 1 has no 'stage' line"},
      {"stage 1 actor 1", "stage 1 actor 2",
       "stage 1 names actor 2, but there are 2"},
      {"blocks 4 4", "blocks 6 4",
       "stage 1 holds blocks 6 to 9, but the model has 8 layers"},
  };
  for (const auto &[from, to, error] : corrupted) {
    INFO(from << " -> " << to);
    CHECK(problem(replaced(from, to)) == "schedule description: " + error);
  }
  // Stages that leave blocks out would train a smaller model than named.
  CHECK(problem(replaced("blocks 4 4", "blocks 4 3")) ==
        "schedule description: block 7 of the model is held by no stage");
  CHECK(problem(replaced("blocks 4 4", "blocks 5 3")) ==
        "schedule description: block 4 of the model is held by no stage");
  // Stages that do not make pipelines of the model (each trained without a
  // word): a block twice, no first stage, no edge, an edge that skips
  // blocks, a cycle of stages without blocks.
  CHECK(problem(replaced("blocks 0 4", "blocks 0 5")) ==
        "schedule description: block 4 of the model is held by 2 stages and "
        "block 0 by 1; each block once per pipeline direction");
  CHECK(problem(replaced("blocks 0 4 first_last 1 0",
                         "blocks 0 4 first_last 0 0")) ==
        "schedule description: 0 first and 1 last stages for 1 pipeline "
        "direction(s); one of each per direction");
  CHECK(problem(replaced("edge 0 1\n", "")) ==
        "schedule description: stage 0 is not a last stage but no edge leaves "
        "it");
  CHECK(problem(replaced("edge 0 1\n", "edge 1 0\n")) ==
        "schedule description: edge 1 0 hands the output after block 7 to "
        "stage 0, which starts at block 0");
  std::string cycle =
      replaced("edge 0 1\n", "stage 2 actor 0 blocks 4 0 first_last 0 0\n"
                             "stage 3 actor 0 blocks 4 0 first_last 0 0\n"
                             "edge 0 2\nedge 2 3\nedge 3 2\nedge 2 1\n");
  cycle.replace(cycle.find("stages 2"), 8, "stages 4");
  CHECK(problem(cycle) == "schedule description: the edges form a cycle");
  // A repeated edge (a stage would wait for the same input twice), which
  // the compiler refuses, passed the reader.
  CHECK(problem(replaced("edge 0 1\n", "edge 0 1\nedge 0 1\n")) ==
        "schedule description: edge 0 1 is given twice");
  CHECK(problem(replaced("stages 2", "stages 0")) ==
        "schedule description line 3: stages must be between 1 and 1048576");
  CHECK(problem(gpt + "stage 1 actor 1 blocks 4 4 first_last 0 1\n") ==
        "schedule description line 10: stage 1 is declared twice");
  // An actor number beyond an int used to throw out_of_range (fuzzing).
  CHECK(problem(
            replaced("first_last 0 1\n", "first_last 0 1 tower 99999999999\n"))
            .rfind("schedule description line 8: expected", 0) == 0);

  // flexpipe-compile's check line: the sum of what follows it. A change to
  // any later line, or a hash line left without it, is refused.
  const std::string body = gpt.substr(gpt.find('\n') + 1);
  const std::string signed_ = "flexpipe-schedule 1\nhash 42\ncheck " +
                              std::to_string(flexpipe::fnv1a(body)) + "\n" +
                              body;
  CHECK(problem(signed_).empty());
  std::string changed = signed_;
  changed.replace(changed.find("edge 0 1"), 8, "edge 0 0");
  CHECK(problem(changed) ==
        "schedule description line 3: the description does not match its "
        "check sum: it was changed after flexpipe-compile wrote it; compile "
        "the spec again");
  std::string unchecked = signed_;
  unchecked.erase(unchecked.find("check "),
                  unchecked.find('\n', unchecked.find("check ")) -
                      unchecked.find("check ") + 1);
  CHECK(problem(unchecked) ==
        "schedule description line 2: a 'hash' line without the 'check' line "
        "flexpipe-compile writes after it: the description was changed");
  CHECK(problem("") == "schedule description: empty");
}

TEST_CASE("the kernels give the same bits wherever the data lives",
          "[model][kernels]") {
  // A pipelined rank and the single-process reference allocate differently;
  // the kernels must not care (Kernels.cpp: Eigen on aligned copies).
  const int64_t seq = 13, heads = 2, d = 5, h = heads * d, t = seq;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto filled = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = normal(rng);
    return v;
  };
  const std::vector<float> qkv = filled(t * 3 * h), dout = filled(t * h),
                           x = filled(t * h), g = filled(h), b = filled(h),
                           logits = filled(t * 37);
  // Runs every kernel on inputs that start `shift` floats into a buffer.
  auto run = [&](size_t shift) {
    auto at = [&](const std::vector<float> &v) {
      std::vector<float> copy(shift + v.size());
      std::copy(v.begin(), v.end(), copy.begin() + shift);
      return copy;
    };
    std::vector<std::vector<float>> out;
    std::vector<float> qs = at(qkv), os = at(dout), xv = at(x), gv = at(g),
                       bv = at(b), lv = at(logits);
    auto *q = &qs, *o = &os, *xs = &xv, *gs = &gv, *bs = &bv, *ls = &lv;
    std::vector<float> probs(shift + heads * seq * seq), a(shift + t * h, 0.0f),
        dqkv(shift + t * 3 * h, 0.0f), scratch(seq * seq), y(shift + t * h),
        mean(t), rstd(t), dx(shift + t * h, 0.0f), dg(shift + h, 0.0f),
        db(shift + h, 0.0f), gelu(shift + t * h), dgelu(shift + t * h),
        maxima(t);
    std::vector<double> sums(t);
    const float *Q = q->data() + shift;
    kernels::attentionForward(Q, 1, seq, heads, d, probs.data() + shift,
                              a.data() + shift);
    kernels::attentionInputGrad(Q, probs.data() + shift, o->data() + shift, 1,
                                seq, heads, d, scratch.data(),
                                dqkv.data() + shift);
    const float *X = xs->data() + shift;
    kernels::layerNormForward(X, gs->data() + shift, bs->data() + shift, t, h,
                              y.data() + shift, mean.data(), rstd.data());
    kernels::layerNormInputGrad(X, o->data() + shift, gs->data() + shift,
                                mean.data(), rstd.data(), t, h,
                                dx.data() + shift);
    kernels::layerNormWeightGrad(X, o->data() + shift, mean.data(), rstd.data(),
                                 t, h, dg.data() + shift, db.data() + shift);
    kernels::geluForward(X, gelu.data() + shift, t * h);
    kernels::geluInputGrad(X, o->data() + shift, dgelu.data() + shift, t * h);
    kernels::softmaxNumerators(ls->data() + shift, t, 37, maxima.data(),
                               sums.data());
    for (auto *v : {&probs, &a, &dqkv, &y, &dx, &dg, &db, &gelu, &dgelu, ls})
      out.emplace_back(v->begin() + shift, v->end());
    out.push_back(mean);
    out.push_back(rstd);
    out.emplace_back(sums.begin(), sums.end());
    return out;
  };
  const auto aligned = run(0);
  for (size_t shift : {1, 2, 3, 5, 7}) {
    INFO("shifted by " << shift << " floats");
    CHECK(run(shift) == aligned);
  }
  // And the attention's rows are causal softmaxes.
  const auto &probs = aligned[0];
  for (int64_t hd = 0; hd < heads; ++hd)
    for (int64_t i = 0; i < seq; ++i) {
      const float *row = probs.data() + (hd * seq + i) * seq;
      float sum = 0;
      for (int64_t j = 0; j < seq; ++j) {
        sum += row[j];
        if (j > i)
          CHECK(row[j] == 0.0f);
      }
      CHECK(sum == Approx(1.0f).epsilon(1e-5));
    }
}

TEST_CASE("schedule descriptions round-trip through the one writer",
          "[runtime][description]") {
  // Bodies as the lowering writes them (a vocabulary-parallel GPT with a
  // runtime operation, and the two-tower model): parsed and written again,
  // each is the same text.
  const std::vector<std::string> bodies = {
      "name t1f1b\nactors 4\nstages 6\nmicrobatches 8\ndp 2\n"
      "model vocab=256 seq=32 hidden=64 heads=4 layers=8 microbatch=1 "
      "seed=1234\n"
      "stage 0 actor 0 blocks 0 2 first_last 0 0\n"
      "stage 1 actor 1 blocks 2 2 first_last 0 0\n"
      "stage 2 actor 2 blocks 4 2 first_last 0 0\n"
      "stage 3 actor 3 blocks 6 2 first_last 0 0\n"
      "stage 4 actor 0 blocks 0 0 first_last 1 0 shared 0 1 2 3\n"
      "stage 5 actor 0 blocks 8 0 first_last 0 1 shared 0 1 2 3\n"
      "edge 0 1\nedge 1 2\nedge 2 3\nedge 4 0\nedge 3 5\n"
      "exec probe stage 1 actor 1 mb 0 count 2 outputs 0,1 file=s:x "
      "count=i:7\n"
      "exec probe stage 2 actor 2 mb 3 count 1 outputs -\n"
      "predicted peak_activation 2621440 1966080 1310720 655360\n",
      "name clip_mixed\nactors 4\nstages 7\nmicrobatches 8\ndp 1\n"
      "model microbatch=4 seed=1234 embed=32\n"
      "tower image vocab=64 seq=8 hidden=32 heads=2 layers=4\n"
      "tower text vocab=128 seq=12 hidden=48 heads=4 layers=2\n"
      "stage 0 actor 0 blocks 0 1 first_last 1 0 tower 0\n"
      "stage 1 actor 1 blocks 1 1 first_last 0 0 tower 0\n"
      "stage 2 actor 0 blocks 2 1 first_last 0 0 tower 0\n"
      "stage 3 actor 1 blocks 3 1 first_last 0 1 tower 0\n"
      "stage 4 actor 2 blocks 0 1 first_last 1 0 tower 1\n"
      "stage 5 actor 3 blocks 1 1 first_last 0 1 tower 1\n"
      "stage 6 actor 1 blocks 0 0 first_last 0 0 sync 1 3\n"
      "edge 0 1\nedge 1 2\nedge 2 3\nedge 4 5\n"};
  for (const std::string &body : bodies) {
    ScheduleDesc desc;
    const std::string text = withScheduleHeader(body, 42);
    REQUIRE(parseSchedule(text, desc) == "");
    CHECK(desc.hash == 42);
    CHECK(formatScheduleBody(desc) == body);
    // A changed body no longer matches its check sum.
    std::string changed = text;
    changed.replace(changed.find("dp "), 4, "dp 3");
    ScheduleDesc other;
    CHECK(parseSchedule(changed, other).find("check sum") != std::string::npos);
  }
  // A rank's copy names its actor, outside the check sum; the reader keeps
  // it and refuses an actor the schedule does not have.
  {
    ScheduleDesc shared, rank3;
    const std::string text = withScheduleHeader(bodies[0], 42);
    REQUIRE(parseSchedule(text, shared) == "");
    CHECK(shared.program == -1);
    REQUIRE(parseSchedule(forProgram(text, 3), rank3) == "");
    CHECK(rank3.program == 3);
    CHECK(forProgram(text, 3).rfind("flexpipe-schedule 1\nprogram 3\nhash",
                                    0) == 0);
    for (int actor : {4, -1}) {
      ScheduleDesc bad;
      INFO(actor);
      CHECK(parseSchedule(forProgram(text, actor), bad).find("program") !=
            std::string::npos);
    }
  }
  // The cost model's prediction: one number per actor.
  ScheduleDesc desc;
  REQUIRE(parseSchedule(withScheduleHeader(bodies[0], 42), desc) == "");
  CHECK(desc.predictedPeak ==
        std::vector<double>{2621440, 1966080, 1310720, 655360});
  for (const char *line : {"predicted peak_activation 1 2 3\n",
                           "predicted peak_activation 1 2 3 4 x\n",
                           "predicted memory 1 2 3 4\n"}) {
    std::string body = bodies[0];
    body.replace(body.find("predicted"), std::string::npos, line);
    ScheduleDesc bad;
    INFO(line);
    CHECK(parseSchedule(withScheduleHeader(body, 42), bad).find("predicted") !=
          std::string::npos);
  }
}
