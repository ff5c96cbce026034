//===- flexpipe-opt.cpp - FlexPipe optimizer driver -----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// mlir-opt for FlexPipe: parses, verifies, transforms and prints flexpipe IR.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  flexpipe::registerFlexPipePassesAndPipelines();
  flexpipe::registerFlexPipeConversionPasses();
  mlir::DialectRegistry registry;
  registry.insert<flexpipe::FlexPipeDialect, mlir::func::FuncDialect,
                  mlir::emitc::EmitCDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "FlexPipe optimizer driver\n", registry));
}
