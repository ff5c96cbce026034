//===- CudaBackend.cpp - flexpipe_rt_main of the CUDA backend -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

using namespace flexpipe::rt;
using namespace flexpipe::rt::cuda;

namespace {

class CudaBackend final : public Backend {
public:
  bool helpBeforeStart() const override { return true; }
  std::unique_ptr<Comm> start(int *argc, char ***argv) override {
    return startNccl(argc, argv, context);
  }
  std::unique_ptr<Device> makeDevice(const ScheduleDesc &desc) override {
    return makeCudaDevice(context, desc);
  }

private:
  std::shared_ptr<CudaContext> context;
};

} // namespace

extern "C" int flexpipe_rt_main(int argc, char **argv, const char *schedule,
                                flexpipe_rt_program program) {
  CudaBackend backend;
  return runRank(argc, argv, schedule, program, backend);
}
