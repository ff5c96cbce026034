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

#include <cblas.h>

using namespace flexpipe::rt;

namespace {

class HostBuffer final : public Buffer {
public:
  explicit HostBuffer(Tensor values) : values(std::move(values)) {}
  float *data() override { return values.data(); }
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
  CpuStage(const GptConfig &config, const ScheduleDesc::Stage &s,
           double &lossSum)
      : stage(config, s.firstBlock, s.blocks, s.first, s.last),
        lossSum(lossSum) {}
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
  std::vector<GradientRef> gradients() override {
    std::vector<GradientRef> all;
    for (Parameter *p : stage.parameters())
      all.push_back({p->grad.data(), p->grad.size()});
    return all;
  }
  size_t cachedBytes() const override { return stage.cachedBytes(); }
  Stage stage;

private:
  double &lossSum;
};

class CpuDevice final : public Device {
public:
  explicit CpuDevice(const ScheduleDesc &desc) : model(desc.model) {
    openblas_set_num_threads(1);
  }
  BufferPtr allocate(size_t count) override {
    return std::make_unique<HostBuffer>(Tensor(count, 0.0f));
  }
  BufferPtr copy(Buffer &buffer) override {
    return std::make_unique<HostBuffer>(
        static_cast<HostBuffer &>(buffer).values);
  }
  std::unique_ptr<DeviceStage>
  makeStage(const ScheduleDesc::Stage &s) override {
    auto stage = std::make_unique<CpuStage>(model, s, lossSum);
    for (Parameter *p : stage->stage.parameters())
      parameters.push_back(p);
    return stage;
  }
  void step(float lr) override {
    adam.lr = lr;
    adam.apply(parameters);
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

private:
  GptConfig model;
  std::vector<Parameter *> parameters;
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
  return runRank(argc, argv, schedule, program, backend);
}
