//===- FlexPipeInterfaces.td - FlexPipe op interfaces ------*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_INTERFACES
#define FLEXPIPE_INTERFACES

include "mlir/IR/OpBase.td"

def FlexPipe_InstructionOpInterface : OpInterface<"InstructionOpInterface"> {
  let cppNamespace = "::flexpipe";
  let description = [{
    An instruction of a schedule-level actor program: it names the stage and
    micro-batch it works on. Verifiers, passes and the simulator walk actor
    programs through this interface.
  }];
  let methods = [
    InterfaceMethod<"The global stage id the instruction works on.",
      "int64_t", "getStageId", (ins), [{}], [{ return $_op.getStage(); }]>,
    InterfaceMethod<"The micro-batch id (instance index for registered "
                    "instructions).",
      "int64_t", "getMicrobatchId", (ins), [{}], [{ return $_op.getMb(); }]>,
    InterfaceMethod<"The peer actor of a point-to-point transfer, or -1.",
      "int64_t", "getPeerActor", (ins), [{}], [{ return -1; }]>,
    InterfaceMethod<"The instruction's kind in the in-memory program "
                    "(sched::OpKind, Program.h), as its op declares it.",
      "::flexpipe::sched::OpKind", "getOpKind", (ins), [{}],
      [{ return std::decay_t<decltype($_op)>::kOpKind; }]>,
    InterfaceMethod<"Whether the instruction is a computation.",
      "bool", "isCompute", (ins), [{}],
      [{ return ::flexpipe::sched::isCompute(
             std::decay_t<decltype($_op)>::kOpKind); }]>,
  ];
}

#endif // FLEXPIPE_INTERFACES
