//===- CpuBackend.cpp - The CPU backend: Model.h on the host, MPI ---------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The Device of the CPU backend wraps the built-in model of Model.cpp as it
// is: buffers are std::vectors, stages are Model.h's Stage, the optimizer is
// Model.h's Adam, and the loss is summed in the order the forwards ran, so
// that a run computes exactly what flexpipe-reference computes.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Device.h"
#include "flexpipe/Runtime/Host.h"

#include <cblas.h>

#include <map>
#include <new>

using namespace flexpipe::rt;

namespace {

/// The gradient accumulators of every parameter of `stage`.
static std::vector<GradientRef> gradientRefs(Stage &stage) {
  std::vector<GradientRef> all;
  for (Parameter *p : stage.parameters())
    all.push_back({p->grad.data(), p->grad.size()});
  return all;
}

class HostBuffer final : public Buffer {
public:
  explicit HostBuffer(Tensor values) : values(std::move(values)) {}
  void *data() override { return values.data(); }
  size_t size() const override { return values.size(); }
  Tensor values;
};

/// The tensor of a buffer this device made, or an empty one for null.
const Tensor &tensorOf(const BufferPtr &buffer) {
  static const Tensor empty;
  return buffer ? static_cast<HostBuffer &>(*buffer).values : empty;
}

class CpuStage final : public DeviceStage {
public:
  CpuStage(Stage stage, double &lossSum)
      : stage(std::move(stage)), lossSum(lossSum) {}
  void forward(int64_t mb, const Batch &batch, BufferPtr in, BufferPtr &out,
               bool countLoss) override {
    Tensor result;
    const float loss = stage.forward(mb, batch, tensorOf(in), result);
    if (countLoss)
      lossSum += loss;
    out = std::make_unique<HostBuffer>(std::move(result));
  }
  void inputGrad(int64_t mb, BufferPtr dout, BufferPtr &din,
                 float lossScale) override {
    Tensor result;
    stage.inputGrad(mb, tensorOf(dout), result, lossScale);
    din = std::make_unique<HostBuffer>(std::move(result));
  }
  void weightGrad(int64_t mb) override { stage.weightGrad(mb); }
  std::vector<GradientRef> gradients() override { return gradientRefs(stage); }
  size_t cachedBytes() const override { return stage.cachedBytes(); }
  Stage stage;

private:
  double &lossSum;
};

/// What a stage left for micro-batch `mb`'s exchange (empty if nothing),
/// removed.
static std::vector<double>
takePending(std::map<int64_t, std::vector<double>> &pending, int64_t mb) {
  auto it = pending.find(mb);
  if (it == pending.end())
    return {};
  std::vector<double> values = std::move(it->second);
  pending.erase(it);
  return values;
}

/// A slice of a vocabulary-parallel LM head + loss (Model.h's VocabHead).
class CpuVocabHead final : public DeviceStage {
public:
  CpuVocabHead(const GptConfig &config, VocabSlice slice, double &lossSum)
      : head(config, slice), lossSum(lossSum) {}
  void forward(int64_t mb, const Batch &batch, BufferPtr in, BufferPtr &,
               bool) override {
    pending[mb] = head.forward(mb, batch, tensorOf(in));
  }
  std::vector<double> statistics(int64_t mb) override {
    return takePending(pending, mb);
  }
  void combine(int64_t mb, const std::vector<double> &all,
               bool countLoss) override {
    const float loss = head.combine(mb, all);
    if (countLoss)
      lossSum += loss;
  }
  void inputGrad(int64_t mb, BufferPtr, BufferPtr &din,
                 float lossScale) override {
    Tensor result;
    head.inputGrad(mb, result, lossScale);
    din = std::make_unique<HostBuffer>(std::move(result));
  }
  void weightGrad(int64_t mb) override { head.weightGrad(mb); }
  std::vector<GradientRef> gradients() override {
    Parameter &p = head.parameter();
    return {{p.grad.data(), p.grad.size()}};
  }
  size_t cachedBytes() const override { return head.cachedBytes(); }
  VocabHead head;

private:
  double &lossSum;
  std::map<int64_t, std::vector<double>> pending; // statistics to exchange
};

/// The last stage of a tower of the two-tower model: its forward ends in
/// the tower's embeddings, which the sync stage's all-gather exchanges; from
/// both towers' it computes the contrastive loss and the gradient of its own
/// embeddings, where its backward starts.
class CpuTowerLast final : public DeviceStage {
public:
  CpuTowerLast(Stage stage, const GptConfig &config, int tower, double &lossSum)
      : stage(std::move(stage)), config(config), tower(tower),
        lossSum(lossSum) {}
  void forward(int64_t mb, const Batch &batch, BufferPtr in, BufferPtr &out,
               bool) override {
    Tensor embeddings;
    stage.forward(mb, batch, tensorOf(in), embeddings);
    pending[mb] = std::vector<double>(embeddings.begin(), embeddings.end());
    out = std::make_unique<HostBuffer>(std::move(embeddings));
  }
  std::vector<double> statistics(int64_t mb) override {
    return takePending(pending, mb);
  }
  void combine(int64_t mb, const std::vector<double> &all,
               bool countLoss) override {
    // Both towers' embeddings, tower 0's first; each tower's went through
    // double unchanged.
    const size_t n = static_cast<size_t>(config.microBatch * config.embed);
    const Tensor a(all.begin(), all.begin() + n),
        b(all.begin() + n, all.begin() + 2 * n);
    Tensor da, db;
    const float loss =
        contrastiveLoss(a, b, config.microBatch, config.embed, da, db);
    if (countLoss)
      lossSum += loss;
    grads[mb] = tower == 0 ? std::move(da) : std::move(db);
  }
  void inputGrad(int64_t mb, BufferPtr, BufferPtr &din,
                 float lossScale) override {
    Tensor dembeddings = std::move(grads.at(mb)), result;
    grads.erase(mb);
    for (float &g : dembeddings)
      g *= lossScale;
    stage.inputGrad(mb, dembeddings, result, lossScale);
    din = std::make_unique<HostBuffer>(std::move(result));
  }
  void weightGrad(int64_t mb) override { stage.weightGrad(mb); }
  std::vector<GradientRef> gradients() override { return gradientRefs(stage); }
  size_t cachedBytes() const override {
    size_t bytes = stage.cachedBytes();
    for (const auto &[mb, values] : pending)
      bytes += values.size() * sizeof(double);
    for (const auto &[mb, values] : grads)
      bytes += values.size() * sizeof(float);
    return bytes;
  }
  Stage stage;

private:
  GptConfig config;
  int tower;
  double &lossSum;
  std::map<int64_t, std::vector<double>> pending; // embeddings to exchange
  std::map<int64_t, Tensor> grads; // of this tower's embeddings, unscaled
};

class CpuDevice final : public Device {
public:
  explicit CpuDevice(const ScheduleDesc &desc)
      : model(desc.model), towers(desc.towers) {
    prepareHostProcess();
  }
  void setThreads(int threads) override { openblas_set_num_threads(threads); }
  BufferPtr allocate(size_t count) override {
    return std::make_unique<HostBuffer>(Tensor(count, 0.0f));
  }
  BufferPtr copy(Buffer &buffer) override {
    return std::make_unique<HostBuffer>(
        static_cast<HostBuffer &>(buffer).values);
  }
  const float *hostData(Buffer &buffer, std::vector<float> &) override {
    return static_cast<HostBuffer &>(buffer).values.data();
  }
  std::unique_ptr<DeviceStage>
  makeStage(const ScheduleDesc::Stage &s) override {
    const GptConfig &config = s.tower >= 0 ? towers[s.tower] : model;
    Stage layers(config, s.firstBlock, s.blocks, s.first, s.last, s.finalNorm);
    if (s.towerLast()) {
      auto stage = std::make_unique<CpuTowerLast>(std::move(layers), config,
                                                  s.tower, lossSum);
      add(stage->stage.parameters());
      return stage;
    }
    auto stage = std::make_unique<CpuStage>(std::move(layers), lossSum);
    add(stage->stage.parameters());
    return stage;
  }
  bool vocabParallel() const override { return true; }
  bool twoTower() const override { return true; }
  std::unique_ptr<DeviceStage> makeVocabStage(const ScheduleDesc::Stage &s,
                                              VocabSlice slice) override {
    if (s.vocabHead()) {
      auto stage = std::make_unique<CpuVocabHead>(model, slice, lossSum);
      add({&stage->head.parameter()});
      return stage;
    }
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(makeEmbedding(model, slice));
    auto stage = std::make_unique<CpuStage>(Stage(std::move(layers)), lossSum);
    add(stage->stage.parameters());
    return stage;
  }
  void accumulate(Buffer &into, Buffer &from) override {
    float *a = static_cast<HostBuffer &>(into).values.data();
    const float *b = static_cast<HostBuffer &>(from).values.data();
    for (size_t i = 0; i < into.size(); ++i)
      a[i] += b[i];
  }
  void step(float lr) override {
    // A copy on this device of a parameter it already holds (the slices of
    // the two directions' vocabulary-parallel stages of a bidirectional
    // pipeline) adds its gradient to the first holder's, which Adam steps;
    // then the copy takes the new value.
    for (auto [first, copy] : copies)
      for (size_t i = 0; i < first->grad.size(); ++i) {
        first->grad[i] += copy->grad[i];
        copy->grad[i] = 0.0f;
      }
    adam.lr = lr;
    adam.apply(parameters);
    for (auto [first, copy] : copies)
      copy->value = first->value;
  }
  double takeLossSum() override {
    const double sum = lossSum;
    lossSum = 0;
    return sum;
  }
  bool asynchronous() const override { return false; }
  void synchronize() override {}
  std::vector<std::pair<std::string, std::vector<float>>> weights() override {
    std::vector<std::pair<std::string, std::vector<float>>> all;
    for (Parameter *p : parameters)
      all.push_back({p->name, p->value});
    return all;
  }
  DeviceState state() override {
    DeviceState s;
    s.adamStep = adam.step;
    for (Parameter *p : parameters) {
      DeviceState::Parameter saved{p->name, p->value, {}, {}};
      // Adam makes a parameter's moments at its first step.
      auto moments = adam.moments.find(p->name);
      if (moments != adam.moments.end() && !moments->second.first.empty()) {
        saved.m = moments->second.first;
        saved.v = moments->second.second;
      } else {
        saved.m.assign(p->value.size(), 0.0f);
        saved.v.assign(p->value.size(), 0.0f);
      }
      s.parameters.push_back(std::move(saved));
    }
    return s;
  }
  std::string setState(const DeviceState &s) override {
    std::vector<std::pair<std::string, size_t>> expected;
    for (Parameter *p : parameters)
      expected.push_back({p->name, p->value.size()});
    if (std::string error = stateMismatch(s, expected); !error.empty())
      return error;
    for (const DeviceState::Parameter &saved : s.parameters) {
      byName.at(saved.name)->value = saved.value;
      adam.moments[saved.name] = {saved.m, saved.v};
    }
    adam.step = s.adamStep;
    for (auto [first, copy] : copies)
      copy->value = first->value;
    return {};
  }

private:
  void add(const std::vector<Parameter *> &stageParameters) {
    for (Parameter *p : stageParameters) {
      auto [it, isNew] = byName.try_emplace(p->name, p);
      if (isNew)
        parameters.push_back(p);
      else
        copies.push_back({it->second, p});
    }
  }
  GptConfig model;
  std::vector<GptConfig> towers;
  std::vector<Parameter *> parameters; // what Adam steps, each name once
  std::map<std::string, Parameter *> byName;
  std::vector<std::pair<Parameter *, Parameter *>> copies; // (first, copy)
  Adam adam;
  double lossSum = 0;
};

class CpuBackend final : public Backend {
public:
  bool helpBeforeStart() const override { return false; }
  std::unique_ptr<Comm> start(int *argc, char ***argv) override {
    return makeMpiComm(argc, argv);
  }
  std::unique_ptr<Device> makeDevice(const ScheduleDesc &desc) override {
    return std::make_unique<CpuDevice>(desc);
  }
};

} // namespace

extern "C" int flexpipe_rt_main(int argc, char **argv, const char *schedule,
                                flexpipe_rt_program program) {
  CpuBackend backend;
  // A model too large for the machine: said, exit 1 (it aborted with a
  // backtrace).
  try {
    return runRank(argc, argv, schedule, program, backend);
  } catch (const std::bad_alloc &) {
    return outOfHostMemory();
  }
}
