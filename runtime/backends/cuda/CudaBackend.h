//===- CudaBackend.h - The CUDA backend's parts -----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// How CudaBackend.cpp's flexpipe_rt_main puts the backend together: startNccl
// (NcclComm.cpp) finds this rank, picks its GPU and opens the NCCL world;
// makeCudaDevice (CudaModel.cpp) builds the model's stages on that GPU.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
#define FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H

#include "CudaContext.h"

#include "flexpipe/Runtime/Comm.h"
#include "flexpipe/Runtime/Device.h"

#include <memory>

namespace flexpipe::rt::cuda {

/// Reads the launch environment (Bootstrap.h), initialises MPI when an MPI
/// launcher started the rank, selects GPU LOCAL_RANK mod the device count
/// (stopping with "no usable CUDA device" when there is none), shares the
/// NCCL unique id (MPI_Bcast or FLEXPIPE_NCCL_ID_FILE) and opens the world
/// communicator. `context` receives the GPU's context.
std::unique_ptr<Comm> startNccl(int *argc, char ***argv,
                                std::shared_ptr<CudaContext> &context);

/// The model's stages, buffers and optimizer on the GPU of `context`.
std::unique_ptr<Device> makeCudaDevice(std::shared_ptr<CudaContext> context,
                                       const ScheduleDesc &desc);

} // namespace flexpipe::rt::cuda

#endif // FLEXPIPE_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
