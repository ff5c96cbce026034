//===- CudaModelTest.cpp - The CUDA model against Model.cpp, emulated -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trains the CUDA backend's model (runtime/backends/cuda/CudaModel.cpp and
// the very kernels of Kernels.cu, compiled for the CPU with the emulation of
// this folder) and Model.cpp's CPU model side by side, and requires the same
// losses and weights. What this covers: the kernels' indexing and math, the
// row-major mapping onto cuBLAS's column-major sgemm, the layers' wiring and
// kept state, stage splits, Adam and the loss sum, every output element
// written (new memory is NaN), no overruns, no leaks. What it cannot cover:
// real GPU concurrency, streams and events, cuBLAS itself and NCCL.
//
//===----------------------------------------------------------------------===//

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "CudaBackend.h"
#include "Emulation.h"
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

namespace {

/// Micro-batch `mb` of iteration `it` forward through `stages` in order;
/// the last stage's output (the head's input).
BufferPtr forwardAll(std::vector<std::unique_ptr<DeviceStage>> &stages,
                     const GptConfig &config, int it, int mb) {
  BufferPtr current;
  for (auto &stage : stages) {
    BufferPtr next;
    stage->forward(mb, makeBatch(config, it, mb), std::move(current), next,
                   &stage == &stages.back());
    current = std::move(next);
  }
  return current;
}

/// Micro-batch `mb`'s input gradients back through `stages`, then every
/// stage's weight gradient; the first stage's input gradient.
BufferPtr backwardAll(std::vector<std::unique_ptr<DeviceStage>> &stages, int mb,
                      float scale) {
  BufferPtr current;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    BufferPtr next;
    (*it)->inputGrad(mb, std::move(current), next, scale);
    current = std::move(next);
  }
  for (auto &stage : stages)
    stage->weightGrad(mb);
  return current;
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> weights;
  /// Every parameter's gradient after the first iteration's backward, in
  /// Model.h's order: the sharp check (Adam's first steps barely depend on
  /// a gradient's size).
  std::vector<std::vector<float>> gradients;
  /// The last stage's output (the hidden state entering the head, what
  /// runtime operations see) of micro-batch 0 in the first iteration.
  std::vector<float> headInput;
};

/// The order every run here follows in an iteration: all forwards, then per
/// micro-batch the input gradient and the weight gradient.
constexpr int kIterations = 3;
constexpr float kLr = 1e-3f;

Trained trainOnCpu(const GptConfig &config, int microbatches) {
  Stage model(config, 0, config.layers, true, true);
  Adam adam;
  adam.lr = kLr;
  Trained result;
  const float scale = 1.0f / static_cast<float>(microbatches);
  for (int it = 0; it < kIterations; ++it) {
    double loss = 0;
    for (int mb = 0; mb < microbatches; ++mb) {
      Tensor out;
      loss += model.forward(mb, makeBatch(config, it, mb), {}, out);
      if (it == 0 && mb == 0)
        result.headInput = out;
    }
    for (int mb = 0; mb < microbatches; ++mb) {
      Tensor din;
      model.inputGrad(mb, {}, din, scale);
      model.weightGrad(mb);
    }
    if (it == 0)
      for (Parameter *p : model.parameters())
        result.gradients.push_back(p->grad);
    adam.apply(model.parameters());
    result.losses.push_back(loss * scale);
  }
  for (Parameter *p : model.parameters())
    result.weights[p->name] = p->value;
  return result;
}

/// `split` blocks on the first stage (with the embedding), the rest on the
/// second (with the head); split = layers: one stage holds everything.
Trained trainOnEmulatedGpu(const GptConfig &config, int microbatches, int split,
                           MathMode math = MathMode::Fp32) {
  Trained result;
  {
    auto context = std::make_shared<CudaContext>(0, 30.0, math);
    ScheduleDesc desc;
    desc.model = config;
    desc.microbatches = microbatches;
    std::unique_ptr<Device> device = makeCudaDevice(context, desc);
    const bool one = split == config.layers;
    std::vector<std::unique_ptr<DeviceStage>> stages;
    ScheduleDesc::Stage first{0, 0, split, true, one};
    stages.push_back(device->makeStage(first));
    if (!one) {
      ScheduleDesc::Stage second{
          0, split, static_cast<int>(config.layers) - split, false, true};
      stages.push_back(device->makeStage(second));
    }
    const float scale = 1.0f / static_cast<float>(microbatches);
    size_t outputElementBytes = 0; // of the last stage's output
    for (int it = 0; it < kIterations; ++it) {
      for (int mb = 0; mb < microbatches; ++mb) {
        BufferPtr current = forwardAll(stages, config, it, mb);
        outputElementBytes = current ? current->elementBytes() : 0;
        // The head passes its input on (what runtime operations see),
        // which hostData copies to the host.
        REQUIRE(current != nullptr);
        CHECK(current->size() ==
              static_cast<size_t>(config.tokens() * config.hidden));
        if (it == 0 && mb == 0) {
          std::vector<float> scratch;
          const float *host = device->hostData(*current, scratch);
          CHECK(host == scratch.data());
          result.headInput.assign(host, host + current->size());
          // accumulate adds element by element (doubling is exact).
          BufferPtr twice = device->copy(*current);
          device->accumulate(*twice, *current);
          std::vector<float> sums;
          const float *doubled = device->hostData(*twice, sums);
          for (size_t i = 0; i < current->size(); ++i)
            REQUIRE(doubled[i] == 2 * result.headInput[i]);
        }
      }
      size_t cached = 0;
      for (auto &stage : stages)
        cached += stage->cachedBytes();
      CHECK(cached > 0);
      for (int mb = 0; mb < microbatches; ++mb)
        CHECK(backwardAll(stages, mb, scale) ==
              nullptr); // token ids have no gradient
      for (auto &stage : stages)
        CHECK(stage->cachedBytes() == 0);
      if (it == 0)
        for (auto &stage : stages)
          for (GradientRef g : stage->gradients()) {
            std::vector<float> values(g.size);
            REQUIRE(cudaMemcpyAsync(values.data(), g.data,
                                    g.size * sizeof(float),
                                    cudaMemcpyDeviceToHost,
                                    context->stream()) == cudaSuccess);
            result.gradients.push_back(std::move(values));
          }
      device->step(kLr);
      result.losses.push_back(device->takeLossSum() * scale);
    }
    for (auto &[name, values] : device->weights())
      result.weights[name] = values;
    // Buffers: zeros of the asked size, of the stages' activations (bf16
    // in mixed precision: messages between stages are bf16 too); copies
    // are copies.
    BufferPtr zeros = device->allocate(5);
    REQUIRE(zeros->size() == 5);
    CHECK(zeros->elementBytes() == (math == MathMode::Bf16 ? 2 : 4));
    CHECK(outputElementBytes == zeros->elementBytes());
    std::vector<float> scratch(5, 1.0f);
    const float *host = device->hostData(*zeros, scratch);
    CHECK(std::vector<float>(host, host + 5) == std::vector<float>(5, 0.0f));
    BufferPtr copy = device->copy(*zeros);
    CHECK(copy->size() == 5);
    CHECK(copy->bytes() == zeros->bytes());
    CHECK(copy->data() != zeros->data());
  }
  // Everything the device and the context allocated is freed.
  CHECK(emulation::liveDeviceAllocations() == 0);
  return result;
}

/// How far an emulated GPU run may be from the CPU's: gradients and the
/// head's input relative to their largest magnitude, losses relative,
/// weights relative (absolute below 1).
struct Tolerance {
  double gradient = 1e-5, headInput = 1e-5, loss = 1e-5, weight = 1e-4;
};

void compare(const Trained &gpu, const Trained &cpu,
             const Tolerance &tolerance = {}) {
  // Gradients: within 1e-5 of the largest magnitude of each parameter's.
  REQUIRE(gpu.gradients.size() == cpu.gradients.size());
  double worstGradient = 0;
  for (size_t p = 0; p < cpu.gradients.size(); ++p) {
    const std::vector<float> &a = gpu.gradients[p], &b = cpu.gradients[p];
    REQUIRE(a.size() == b.size());
    double largest = 0, diff = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      REQUIRE(std::isfinite(a[i]));
      largest = std::max(largest, std::abs(double(b[i])));
      diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    }
    INFO("gradient " << p << ": largest " << largest << ", difference "
                     << diff);
    CHECK(diff <= tolerance.gradient * largest);
    worstGradient = std::max(worstGradient, largest > 0 ? diff / largest : 0);
  }
  WARN("worst relative gradient difference " << worstGradient);
  REQUIRE(gpu.headInput.size() == cpu.headInput.size());
  double largestInput = 0, inputDiff = 0;
  for (size_t i = 0; i < cpu.headInput.size(); ++i) {
    largestInput = std::max(largestInput, std::abs(double(cpu.headInput[i])));
    inputDiff = std::max(inputDiff,
                         std::abs(double(gpu.headInput[i]) - cpu.headInput[i]));
  }
  CHECK(largestInput > 0);
  CHECK(inputDiff <= tolerance.headInput * largestInput);
  REQUIRE(gpu.losses.size() == cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    INFO("iteration " << i << ": emulated GPU " << gpu.losses[i] << ", CPU "
                      << cpu.losses[i]);
    CHECK(std::isfinite(gpu.losses[i]));
    CHECK(std::abs(gpu.losses[i] - cpu.losses[i]) <=
          tolerance.loss * std::abs(cpu.losses[i]));
  }
  CHECK(cpu.losses.back() < cpu.losses.front());
  REQUIRE(gpu.weights.size() == cpu.weights.size());
  double worst = 0;
  std::string where;
  for (const auto &[name, values] : cpu.weights) {
    auto it = gpu.weights.find(name);
    REQUIRE(it != gpu.weights.end());
    REQUIRE(it->second.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      REQUIRE(std::isfinite(it->second[i]));
      const double diff = std::abs(it->second[i] - values[i]) /
                          std::max(1.0, std::abs(double(values[i])));
      if (diff > worst) {
        worst = diff;
        where = name + "[" + std::to_string(i) + "]";
      }
    }
  }
  INFO("worst weight difference " << worst << " at " << where);
  CHECK(worst <= tolerance.weight);
}

/// A device of one GPT model in two stages (the embedding and `split`
/// blocks, the rest and the head), as a rank holds them.
struct TwoStages {
  TwoStages(std::shared_ptr<CudaContext> context, const GptConfig &config,
            int microbatches, int split)
      : config(config), microbatches(microbatches) {
    ScheduleDesc desc;
    desc.model = config;
    desc.microbatches = microbatches;
    device = makeCudaDevice(std::move(context), desc);
    ScheduleDesc::Stage first{0, 0, split, true, false};
    ScheduleDesc::Stage second{
        0, split, static_cast<int>(config.layers) - split, false, true};
    stages.push_back(device->makeStage(first));
    stages.push_back(device->makeStage(second));
  }
  /// Iterations [from, to): forwards, then per micro-batch both backwards;
  /// the losses.
  std::vector<double> train(int from, int to) {
    std::vector<double> losses;
    const float scale = 1.0f / static_cast<float>(microbatches);
    for (int it = from; it < to; ++it) {
      for (int mb = 0; mb < microbatches; ++mb)
        forwardAll(stages, config, it, mb); // the stages keep what they need
      for (int mb = 0; mb < microbatches; ++mb)
        backwardAll(stages, mb, scale);
      device->step(kLr);
      losses.push_back(device->takeLossSum() * scale);
    }
    return losses;
  }
  GptConfig config;
  int microbatches;
  std::unique_ptr<Device> device;
  std::vector<std::unique_ptr<DeviceStage>> stages;
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

} // namespace

TEST_CASE("state and setState: a device restored from another's state "
          "trains on bitwise alike, bf16 copies of the weights included",
          "[cuda-emulation]") {
  const GptConfig config{64, 8, 32, 2, 2, 2};
  for (MathMode math : {MathMode::Fp32, MathMode::Bf16}) {
    INFO("FLEXPIPE_CUDA_MATH=" << mathModeName(math));
    auto context = std::make_shared<CudaContext>(0, 30.0, math);
    TwoStages straight(context, config, 2, 1);
    const std::vector<double> losses = straight.train(0, 4);

    TwoStages stopped(context, config, 2, 1);
    const std::vector<double> first = stopped.train(0, 2);
    const DeviceState saved = stopped.device->state();
    CHECK(saved.adamStep == 2);
    REQUIRE(saved.parameters.size() == stopped.device->weights().size());
    for (const DeviceState::Parameter &p : saved.parameters) {
      CHECK(p.m.size() == p.value.size());
      CHECK(p.v.size() == p.value.size());
    }
    // The second moments of the head's weight are squares: positive.
    CHECK(std::any_of(saved.parameters.back().v.begin(),
                      saved.parameters.back().v.end(),
                      [](float x) { return x > 0; }));

    TwoStages resumed(context, config, 2, 1);
    REQUIRE(resumed.device->setState(saved) == "");
    const DeviceState restored = resumed.device->state();
    CHECK(restored.adamStep == saved.adamStep);
    REQUIRE(restored.parameters.size() == saved.parameters.size());
    for (size_t i = 0; i < saved.parameters.size(); ++i) {
      CHECK(restored.parameters[i].name == saved.parameters[i].name);
      CHECK(sameBits(restored.parameters[i].value, saved.parameters[i].value));
      CHECK(sameBits(restored.parameters[i].m, saved.parameters[i].m));
      CHECK(sameBits(restored.parameters[i].v, saved.parameters[i].v));
    }
    std::vector<double> all = first;
    for (double loss : resumed.train(2, 4))
      all.push_back(loss);
    CHECK(all == losses);
    const auto a = straight.device->weights(), b = resumed.device->weights();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(a[i].first == b[i].first);
      CHECK(sameBits(a[i].second, b[i].second));
    }

    // A state that does not fit changes nothing and says what differs.
    TwoStages other(context, config, 2, 1);
    DeviceState renamed = saved;
    renamed.parameters.front().name = "nonsense";
    CHECK(other.device->setState(renamed).find(
              "holds parameter 'nonsense', which this rank does not train") !=
          std::string::npos);
    DeviceState shorter = saved;
    shorter.parameters.back().value.pop_back();
    CHECK(other.device->setState(shorter).find("values, this rank's") !=
          std::string::npos);
    DeviceState fewer = saved;
    fewer.parameters.pop_back();
    CHECK(other.device->setState(fewer).find("it has no parameter") !=
          std::string::npos);
    const DeviceState untouched = other.device->state(),
                      initial =
                          TwoStages(context, config, 2, 1).device->state();
    CHECK(untouched.adamStep == 0);
    REQUIRE(untouched.parameters.size() == initial.parameters.size());
    for (size_t i = 0; i < initial.parameters.size(); ++i) {
      CHECK(
          sameBits(untouched.parameters[i].value, initial.parameters[i].value));
      CHECK(sameBits(untouched.parameters[i].m, initial.parameters[i].m));
    }
  }
  CHECK(emulation::liveDeviceAllocations() == 0);
}

TEST_CASE("two stages; sequences longer than a warp; 2 sequences per "
          "micro-batch",
          "[cuda-emulation]") {
  // vocab, seq, hidden, heads (32 dimensions each), layers, sequences
  const GptConfig config{64, 40, 64, 2, 2, 2};
  compare(trainOnEmulatedGpu(config, 2, 1), trainOnCpu(config, 2));
}

TEST_CASE("one stage with embedding and head; narrow heads; a wide MLP",
          "[cuda-emulation]") {
  const GptConfig config{96, 8, 48, 3, 1, 3}; // 16 dimensions per head
  compare(trainOnEmulatedGpu(config, 3, 1), trainOnCpu(config, 3));
}

TEST_CASE("heads wider than a warp and not a multiple of it; a partial "
          "warp of keys",
          "[cuda-emulation]") {
  // 40 dimensions per head: the batched products' operands are 40 columns
  // of rows 3 x 80 apart; 36 tokens: the row-wise softmax kernels' second
  // round of keys is partial.
  const GptConfig config{64, 36, 80, 2, 1, 2};
  compare(trainOnEmulatedGpu(config, 2, 1), trainOnCpu(config, 2));
}

TEST_CASE("the embedding's weight gradient groups rows by token, rows in "
          "order within a group",
          "[cuda-emulation]") {
  const std::vector<int32_t> ids{3, 1, 3, 0, 1, 3};
  std::vector<int32_t> order(ids.size()), starts(ids.size() + 1);
  int64_t groups = 0;
  groupRowsByToken(ids.data(), static_cast<int64_t>(ids.size()), order.data(),
                   starts.data(), groups);
  CHECK(groups == 3);
  CHECK(order == std::vector<int32_t>{3, 1, 4, 0, 2, 5});
  starts.resize(groups + 1);
  CHECK(starts == std::vector<int32_t>{0, 1, 3, 6});
}

TEST_CASE("the MLP's GELU and its derivative run in cuBLASLt's epilogues, "
          "and in kernels of their own where those do not serve",
          "[cuda-emulation]") {
  auto calls = [] {
    return std::pair{emulation::ltMatmulsWith(CUBLASLT_EPILOGUE_GELU_AUX_BIAS),
                     emulation::ltMatmulsWith(CUBLASLT_EPILOGUE_DGELU)};
  };
  const GptConfig config{64, 8, 48, 3, 2, 2};
  const Trained cpu = trainOnCpu(config, 2);
  // Fused: one GELU_AUX_BIAS product per block and forward, one DGELU per
  // block and input gradient (2 blocks, 2 micro-batches, 3 iterations).
  auto before = calls();
  compare(trainOnEmulatedGpu(config, 2, 1), cpu);
  CHECK(calls().first - before.first == 12);
  CHECK(calls().second - before.second == 12);
  // cuBLASLt without an algorithm for them (as on some GPUs and types):
  // the same training through the bias product and the GELU kernels.
  before = calls();
  emulation::refuseLtEpilogue(CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  emulation::refuseLtEpilogue(CUBLASLT_EPILOGUE_DGELU);
  compare(trainOnEmulatedGpu(config, 2, 1), cpu);
  emulation::refuseLtEpilogue(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, false);
  emulation::refuseLtEpilogue(CUBLASLT_EPILOGUE_DGELU, false);
  CHECK(calls() == before);
  // An odd hidden size: GELU's input (4 x hidden wide) has no leading
  // dimension cuBLASLt takes, so the epilogues are not asked for.
  const GptConfig odd{64, 8, 45, 3, 1, 2}; // 15 dimensions per head
  before = calls();
  compare(trainOnEmulatedGpu(odd, 2, 1), trainOnCpu(odd, 2));
  CHECK(calls() == before);
}

TEST_CASE("TF32 products and bf16 mixed precision (FLEXPIPE_CUDA_MATH=tf32, "
          "bf16) follow the CPU within their precision",
          "[cuda-emulation]") {
  const GptConfig config{96, 8, 48, 3, 2, 2};
  const Trained cpu = trainOnCpu(config, 2);
  const Trained fp32 = trainOnEmulatedGpu(config, 2, 1);
  // TF32 keeps 11 significant bits of each product input; bf16 mixed
  // precision keeps 8 of every activation, gradient and product weight
  // (measured: 8e-4 and 8e-3 of the largest gradient). Adam
  // moves a weight by about lr a step whatever its gradient's size, so one
  // whose gradient is near 0 may move the other way: weights are only held
  // to 2 lr per iteration (the gradients are the sharp check).
  const double weights = 2 * kLr * kIterations;
  for (auto [math, tolerance] :
       {std::pair{MathMode::Tf32, Tolerance{4e-3, 4e-3, 1e-3, weights}},
        std::pair{MathMode::Bf16, Tolerance{3e-2, 3e-2, 1e-2, weights}}}) {
    INFO("FLEXPIPE_CUDA_MATH=" << mathModeName(math));
    const Trained reduced = trainOnEmulatedGpu(config, 2, 1, math);
    compare(reduced, cpu, tolerance);
    // The precision reaches the model: the first loss moves.
    CHECK(reduced.losses.front() != fp32.losses.front());
  }
}

TEST_CASE("the default model, 2 layers, on three micro-batches",
          "[cuda-emulation]") {
  GptConfig config; // vocab 256, seq 32, hidden 64, heads 4
  config.layers = 2;
  compare(trainOnEmulatedGpu(config, 3, 1), trainOnCpu(config, 3));
}

TEST_CASE("a block keeps from its input to its weight gradient only what "
          "the weight gradient reads; bf16 halves its activations",
          "[memory]") {
  const GptConfig config{64, 40, 64, 2, 2, 2};
  const size_t t = config.tokens(), h = config.hidden, heads = config.heads;
  for (auto [math, bytes] : {std::pair{MathMode::Fp32, size_t{4}},
                             std::pair{MathMode::Bf16, size_t{2}}}) {
    INFO("FLEXPIPE_CUDA_MATH=" << mathModeName(math));
    auto context = std::make_shared<CudaContext>(0, 30.0, math);
    ScheduleDesc desc;
    desc.model = config;
    desc.microbatches = 1;
    std::unique_ptr<Device> device = makeCudaDevice(context, desc);
    ScheduleDesc::Stage middle{0, 1, 1, false, false}; // one block
    std::unique_ptr<DeviceStage> stage = device->makeStage(middle);
    BufferPtr out;
    stage->forward(0, makeBatch(config, 0, 0), device->allocate(t * h), out,
                   false);
    // The stage hands fp32 to the executor either way.
    CHECK(out->size() == t * h);
    // x, h1, qkv (3), a, x2, h2, pre (4), f (4) as activations; LayerNorm's
    // mean and rstd twice and attention's log-sum-exp per head in fp32: no
    // seq x seq array.
    CHECK(stage->cachedBytes() ==
          bytes * 16 * t * h + sizeof(float) * (4 * t + heads * t));
    BufferPtr dx;
    stage->inputGrad(0, device->allocate(t * h), dx, 1.0f);
    CHECK(dx->size() == t * h);
    // qkv, pre and lse go; the output gradients of the four products and of
    // the two LayerNorms come: dm, dpre (4), dh2, dout, dqkv (3), dh1.
    CHECK(stage->cachedBytes() ==
          bytes * (16 - 7 + 11) * t * h + sizeof(float) * 4 * t);
    stage->weightGrad(0);
    CHECK(stage->cachedBytes() == 0);
  }
}

TEST_CASE("measured memory: the pool's high-water mark and the GPU at it",
          "[memory]") {
  CudaContext context(0, 30.0);
  // The emulated pool, like the real one, keeps what earlier cases reserved.
  const double before = context.measuredMemory()[0].second;
  const size_t big = static_cast<size_t>(before) + (3u << 20);
  {
    DeviceArray<unsigned char> a(context, big);
    DeviceArray<unsigned char> b(context, 1u << 20);
  }
  const std::vector<std::pair<std::string, double>> peak =
      context.measuredMemory();
  REQUIRE(peak.size() == 2);
  // Both arrays at once, in whole chunks, kept after they are freed.
  CHECK(peak[0].second >= static_cast<double>(big + (1u << 20)));
  // The GPU in use at that peak: the pool's reservation and what lives
  // outside it (at least this context's cuBLAS workspace).
  CHECK(peak[1].second >= peak[0].second + (32u << 20));
  // Allocations within the reservation change neither figure.
  { DeviceArray<float> small(context, 1024); }
  CHECK(context.measuredMemory() == peak);
  CHECK(emulation::liveDeviceAllocations() == 1); // the workspace
}
