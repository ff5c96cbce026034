//===- ModelData.cpp - The built-in model's data and initial weights -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What every backend shares of the built-in model (Model.h) and computes
// nothing with: the synthetic batches, the vocabulary's split and each
// layer's initial parameters, drawn from the seed and the parameters' names.
// The CPU layers (Model.cpp, with OpenBLAS and Eigen through Kernels.cpp)
// start from these parameters and the CUDA backend copies them to the GPU,
// so a CUDA rank links this file but not the CPU model.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Support/Hash.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace flexpipe::rt;

namespace {

//===----------------------------------------------------------------------===//
// Deterministic random numbers
//===----------------------------------------------------------------------===//

uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// N(0, std^2) values from a seed and a parameter name (Box-Muller).
void initNormal(Tensor &t, uint64_t seed, const std::string &name, float std) {
  // The legacy basis: every initial weight, and so every loss the tests and
  // docs state, follows from it.
  uint64_t state = seed ^ flexpipe::fnv1a(name, flexpipe::kFnv1aLegacyOffset);
  for (size_t i = 0; i < t.size(); i += 2) {
    const double u1 =
        (static_cast<double>(splitmix(state) >> 11) + 1) / 9007199254740993.0;
    const double u2 =
        static_cast<double>(splitmix(state) >> 11) / 9007199254740992.0;
    const double r = std::sqrt(-2 * std::log(u1));
    t[i] = static_cast<float>(std * r * std::cos(2 * M_PI * u2));
    if (i + 1 < t.size())
      t[i + 1] = static_cast<float>(std * r * std::sin(2 * M_PI * u2));
  }
}

Parameter makeParameter(const std::string &name, size_t size) {
  return Parameter{name, Tensor(size, 0.0f), Tensor(size, 0.0f)};
}

/// How a parameter starts: zeros (biases), ones (LayerNorm gains) or
/// N(0, 0.02^2) drawn from the seed and its name (weights).
enum class Init { Zeros, Ones, Normal };

Parameter makeParameter(const GptConfig &c, const std::string &name,
                        size_t size, Init init) {
  Parameter p = makeParameter(name, size);
  if (init == Init::Ones)
    std::fill(p.value.begin(), p.value.end(), 1.0f);
  else if (init == Init::Normal)
    initNormal(p.value, c.seed, name, 0.02f);
  return p;
}

} // namespace

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

Batch flexpipe::rt::makeBatch(const GptConfig &config, int64_t iteration,
                              int64_t microbatch) {
  // The bigram to learn: a fixed permutation of the vocabulary.
  std::vector<int32_t> next(config.vocab);
  std::iota(next.begin(), next.end(), 0);
  uint64_t state = config.seed ^ 0x5eedULL;
  for (int64_t i = config.vocab - 1; i > 0; --i)
    std::swap(next[i], next[splitmix(state) % (i + 1)]);

  Batch batch;
  batch.tokens.resize(config.tokens());
  batch.targets.resize(config.tokens());
  for (int64_t b = 0; b < config.microBatch; ++b) {
    uint64_t s = config.seed ^ (static_cast<uint64_t>(iteration) << 40) ^
                 (static_cast<uint64_t>(microbatch) << 20) ^
                 static_cast<uint64_t>(b);
    int32_t token = static_cast<int32_t>(splitmix(s) % config.vocab);
    for (int64_t i = 0; i < config.seq; ++i) {
      batch.tokens[b * config.seq + i] = token;
      token = next[token];
      batch.targets[b * config.seq + i] = token;
    }
  }
  return batch;
}

Batch flexpipe::rt::makeTowerBatch(const GptConfig &config, int tower,
                                   int64_t iteration, int64_t microbatch) {
  // The micro-batch's classes: distinct (a prefix of a shuffle of all
  // classes), so that each sample matches only its own pair; they depend on
  // the micro-batch alone, so both towers agree.
  std::vector<int64_t> classes(kPairClasses);
  std::iota(classes.begin(), classes.end(), 0);
  uint64_t state = config.seed ^ 0xc1a55ULL ^
                   (static_cast<uint64_t>(iteration) << 40) ^
                   (static_cast<uint64_t>(microbatch) << 20);
  for (int64_t i = kPairClasses - 1; i > 0; --i)
    std::swap(classes[i], classes[splitmix(state) % (i + 1)]);
  // The noise differs per tower.
  uint64_t noise = state ^ (static_cast<uint64_t>(tower + 1) << 60);
  Batch batch;
  batch.tokens.resize(config.tokens());
  for (int64_t b = 0; b < config.microBatch; ++b) {
    const uint64_t cls = static_cast<uint64_t>(classes[b % kPairClasses]);
    for (int64_t i = 0; i < config.seq; ++i) {
      uint64_t p = config.seed ^ 0x70e4ULL ^
                   (static_cast<uint64_t>(tower) << 48) ^ (cls << 24) ^
                   static_cast<uint64_t>(i);
      const uint64_t prototype = splitmix(p) % config.vocab;
      const uint64_t r = splitmix(noise);
      batch.tokens[b * config.seq + i] = static_cast<int32_t>(
          r % 4 == 0 ? (r >> 8) % config.vocab : prototype);
    }
  }
  return batch;
}

VocabSlice flexpipe::rt::vocabSlice(int64_t vocab, int part, int parts) {
  const int64_t base = vocab / parts, extra = vocab % parts;
  VocabSlice slice;
  slice.begin = part * base + std::min<int64_t>(part, extra);
  slice.end = slice.begin + base + (part < extra ? 1 : 0);
  slice.part = part;
  slice.parts = parts;
  return slice;
}

std::string flexpipe::rt::sliceName(const std::string &name, int64_t r0,
                                    int64_t r1, int64_t c0, int64_t c1,
                                    int64_t rows, int64_t cols) {
  return name + "[" + std::to_string(r0) + ":" + std::to_string(r1) + "," +
         std::to_string(c0) + ":" + std::to_string(c1) + "]/" +
         std::to_string(rows) + "x" + std::to_string(cols);
}

//===----------------------------------------------------------------------===//
// Initial parameters
//===----------------------------------------------------------------------===//

std::vector<Parameter> flexpipe::rt::embeddingParameters(const GptConfig &c,
                                                         VocabSlice slice) {
  // The slice's rows of the whole table, drawn as the whole is drawn.
  const std::string name = c.prefix + "embedding.token";
  Tensor whole(c.vocab * c.hidden);
  initNormal(whole, c.seed, name, 0.02f);
  std::vector<Parameter> all;
  all.push_back(makeParameter(slice.whole(c.vocab)
                                  ? name
                                  : sliceName(name, slice.begin, slice.end, 0,
                                              c.hidden, c.vocab, c.hidden),
                              slice.size() * c.hidden));
  std::copy(whole.begin() + slice.begin * c.hidden,
            whole.begin() + slice.end * c.hidden, all[0].value.begin());
  if (slice.part == 0)
    all.push_back(makeParameter(c, c.prefix + "embedding.position",
                                c.seq * c.hidden, Init::Normal));
  return all;
}

std::vector<Parameter> flexpipe::rt::blockParameters(const GptConfig &c,
                                                     int64_t index) {
  const int64_t h = c.hidden;
  const std::string p = c.prefix + "block" + std::to_string(index) + ".";
  const struct {
    const char *name;
    int64_t size;
    Init init;
  } table[] = {{"ln1.gain", h, Init::Ones},
               {"ln1.bias", h, Init::Zeros},
               {"attn.qkv.weight", h * 3 * h, Init::Normal},
               {"attn.qkv.bias", 3 * h, Init::Zeros},
               {"attn.out.weight", h * h, Init::Normal},
               {"attn.out.bias", h, Init::Zeros},
               {"ln2.gain", h, Init::Ones},
               {"ln2.bias", h, Init::Zeros},
               {"mlp.fc1.weight", h * 4 * h, Init::Normal},
               {"mlp.fc1.bias", 4 * h, Init::Zeros},
               {"mlp.fc2.weight", 4 * h * h, Init::Normal},
               {"mlp.fc2.bias", h, Init::Zeros}};
  std::vector<Parameter> all;
  for (const auto &[name, size, init] : table)
    all.push_back(makeParameter(c, p + name, size, init));
  return all;
}

std::vector<Parameter> flexpipe::rt::finalNormParameters(const GptConfig &c) {
  std::vector<Parameter> all;
  all.push_back(
      makeParameter(c, c.prefix + "head.ln.gain", c.hidden, Init::Ones));
  all.push_back(
      makeParameter(c, c.prefix + "head.ln.bias", c.hidden, Init::Zeros));
  return all;
}

Parameter flexpipe::rt::vocabHeadParameter(const GptConfig &c,
                                           VocabSlice slice) {
  // The slice's columns of the whole hidden x vocab matrix.
  const std::string name = c.prefix + "head.weight";
  Tensor whole(c.hidden * c.vocab);
  initNormal(whole, c.seed, name, 0.02f);
  Parameter weight = makeParameter(
      slice.whole(c.vocab) ? name
                           : sliceName(name, 0, c.hidden, slice.begin,
                                       slice.end, c.hidden, c.vocab),
      c.hidden * slice.size());
  for (int64_t r = 0; r < c.hidden; ++r)
    std::copy_n(whole.data() + r * c.vocab + slice.begin, slice.size(),
                weight.value.data() + r * slice.size());
  return weight;
}

std::vector<Parameter> flexpipe::rt::headParameters(const GptConfig &c) {
  std::vector<Parameter> all = finalNormParameters(c);
  all.push_back(vocabHeadParameter(c, vocabSlice(c.vocab, 0, 1)));
  return all;
}

Parameter flexpipe::rt::towerProjectionParameter(const GptConfig &c) {
  return makeParameter(c, c.prefix + "head.projection", c.hidden * c.embed,
                       Init::Normal);
}
