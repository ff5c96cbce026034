//===- Device.h - Where a backend keeps tensors and runs stages -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The seam between the backend-neutral executor (runtime/lib/Executor.cpp)
// and a backend. A backend starts communication (Comm.h) and provides a
// Device: buffers for the activations and gradients in flight, the model's
// stages, the optimizer step and the iteration's loss. The CPU backend wraps
// Model.h; the CUDA backend keeps everything in GPU memory. Buffers hold
// floats in the device's address space, and Comm moves them as they are.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_DEVICE_H
#define FLEXPIPE_RUNTIME_DEVICE_H

#include "flexpipe/Runtime/Comm.h"
#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/Runtime.h"
#include "flexpipe/Runtime/Schedule.h"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::rt {

/// Floats in a device's memory: an activation or a gradient in flight.
class Buffer {
public:
  virtual ~Buffer() = default;
  /// The elements in the device's address space (what Comm moves): floats,
  /// or a device's narrower activations (the CUDA backend's bf16).
  virtual void *data() = 0;
  virtual size_t size() const = 0;
  virtual size_t elementBytes() const { return sizeof(float); }
  size_t bytes() const { return size() * elementBytes(); }
};
using BufferPtr = std::unique_ptr<Buffer>;

/// A parameter's gradient where the device keeps it: what the data-parallel
/// all-reduce and the exchange between stage copies add to.
struct GradientRef {
  float *data;
  size_t size;
};

/// One pipeline stage of the built-in model on a device, with the same three
/// computations as Model.h's Stage.
class DeviceStage {
public:
  virtual ~DeviceStage() = default;
  /// `in` is null on the first stage. On the GPT's last stage `out` is the
  /// hidden state entering the final LayerNorm and LM head (what a runtime
  /// operation sees as the stage's output; nothing is passed on); when
  /// `countLoss`, the device adds the micro-batch's mean cross-entropy to
  /// the iteration's loss (Device::takeLossSum). A tower's last stage keeps
  /// its embeddings for statistics() and also returns them in `out`. A
  /// vocabulary-parallel head's `out` stays null.
  virtual void forward(int64_t mb, const Batch &batch, BufferPtr in,
                       BufferPtr &out, bool countLoss) = 0;
  /// `dout` is null on the last stage (a tower's starts from the gradient of
  /// its embeddings that combine() computed); `din` may stay null on the
  /// first.
  virtual void inputGrad(int64_t mb, BufferPtr dout, BufferPtr &din,
                         float lossScale) = 0;
  virtual void weightGrad(int64_t mb) = 0;
  /// Every parameter's gradient, in Model.h's parameter order.
  virtual std::vector<GradientRef> gradients() = 0;
  /// Bytes held for micro-batches between forward and weightGrad.
  virtual size_t cachedBytes() const = 0;

  /// A vocabulary-parallel head or a tower's last stage only (the executor
  /// calls these for no other stage): after forward, what the stage's group
  /// exchanges for micro-batch `mb` (a head slice's per-token statistics,
  /// VocabHead::forward; a tower's embeddings), once; empty before the
  /// forward ...
  virtual std::vector<double> statistics(int64_t mb) { return {}; }
  /// ... and every member's, in group order (vocabulary order; tower order),
  /// from which the stage computes the loss (added to the iteration's when
  /// `countLoss`) and keeps what its backward needs.
  virtual void combine(int64_t mb, const std::vector<double> &all,
                       bool countLoss) {}
};

/// What training continues from, besides the data (a function of the
/// iteration): every parameter of a device, by name, with Adam's moments,
/// and Adam's step count. A checkpoint holds one per rank.
struct DeviceState {
  struct Parameter {
    std::string name;
    /// The value and Adam's first and second moments (zeros before the
    /// first step), of equal sizes.
    std::vector<float> value, m, v;
  };
  int64_t adamStep = 0;
  std::vector<Parameter> parameters;
};

/// "" when `state` holds each parameter of `expected` (name, values) once,
/// with moments of its size, and nothing else, and a step count >= 0; else
/// the first thing that differs. Backends check with it before setState
/// changes anything.
std::string
stateMismatch(const DeviceState &state,
              const std::vector<std::pair<std::string, size_t>> &expected);

/// One rank's compute device.
class Device {
public:
  virtual ~Device() = default;
  /// A buffer of `count` zero elements of the type the device's stages pass
  /// on (a message's receive buffer).
  virtual BufferPtr allocate(size_t count) = 0;
  virtual BufferPtr copy(Buffer &buffer) = 0;
  /// The elements of `buffer` as floats in host memory, for a runtime
  /// operation to read:
  /// the buffer's own when the device keeps them on the host, otherwise a
  /// copy in `scratch` once the work issued so far has finished.
  virtual const float *hostData(Buffer &buffer,
                                std::vector<float> &scratch) = 0;
  /// Stage `stage` of the schedule, with the weights a single-process run
  /// starts from (Model.h's deterministic initialisation).
  virtual std::unique_ptr<DeviceStage>
  makeStage(const ScheduleDesc::Stage &stage) = 0;
  /// Whether the device runs vocabulary-parallel stages: makeVocabStage, and
  /// the final LayerNorm in makeStage's stages that feed such a head.
  virtual bool vocabParallel() const { return false; }
  /// The slice `slice` of vocabulary-parallel embedding or head `stage`.
  virtual std::unique_ptr<DeviceStage>
  makeVocabStage(const ScheduleDesc::Stage &stage, VocabSlice slice) {
    return nullptr;
  }
  /// Whether the device runs the two-tower model: makeStage's last stages of
  /// towers with statistics() and combine() (the contrastive loss).
  virtual bool twoTower() const { return false; }
  /// How the device computes, which every rank of a run must share: a
  /// number for the ranks to compare and its name (the CUDA backend's
  /// FLEXPIPE_CUDA_MATH; the CPU backend's fp32).
  virtual std::pair<uint64_t, std::string> precision() const {
    return {0, "fp32"};
  }
  /// into += from, element by element (the parts of a vocabulary-parallel
  /// stage's output or input gradient).
  virtual void accumulate(Buffer &into, Buffer &from) = 0;
  /// One Adam step over the parameters of every stage made so far, in the
  /// order they were made; clears the gradients.
  virtual void step(float lr) = 0;
  /// The sum of the losses counted since the last call.
  virtual double takeLossSum() = 0;
  /// Host threads the device may use for its compute (--threads; 1 by
  /// default). A device that computes elsewhere ignores it.
  virtual void setThreads(int threads) {}
  /// Whether work runs behind the host's back (then timings synchronise).
  virtual bool asynchronous() const = 0;
  /// Returns when the work issued so far has finished.
  virtual void synchronize() = 0;
  /// Every parameter of every stage, by name, copied to the host.
  virtual std::vector<std::pair<std::string, std::vector<float>>> weights() = 0;
  /// The parameters (as weights()) with Adam's moments and step count,
  /// copied to the host between iterations.
  virtual DeviceState state() = 0;
  /// Restores what state() returned, once every stage is made and before
  /// the first step: afterwards the device computes bitwise what the device
  /// that saved it would have. Returns "" or what does not fit (a parameter
  /// missing or extra, a size, moments of another size), changing nothing
  /// then.
  virtual std::string setState(const DeviceState &state) = 0;
};

/// What a rank program's flexpipe_rt_main hands to the executor.
class Backend {
public:
  virtual ~Backend() = default;
  /// Whether `--help` is answered before start() (the CUDA backend answers
  /// it on machines without a GPU; the CPU backend after MPI_Init, by rank 0).
  virtual bool helpBeforeStart() const = 0;
  /// Starts communication between the ranks (MPI; NCCL after picking this
  /// rank's GPU).
  virtual std::unique_ptr<Comm> start(int *argc, char ***argv) = 0;
  /// This rank's device, once the schedule is parsed and checked.
  virtual std::unique_ptr<Device> makeDevice(const ScheduleDesc &desc) = 0;
};

/// Runs one rank (runtime/lib/Executor.cpp); returns the exit code.
int runRank(int argc, char **argv, const char *schedule,
            flexpipe_rt_program program, Backend &backend);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_DEVICE_H
