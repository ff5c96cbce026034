//===- FlexPipeDialect.td - FlexPipe dialect definition ----*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_DIALECT
#define FLEXPIPE_DIALECT

include "mlir/IR/OpBase.td"

def FlexPipe_Dialect : Dialect {
  let name = "flexpipe";
  let cppNamespace = "::flexpipe";
  let summary = "Pipeline-parallel training schedules: specs and per-actor programs";
  let description = [{
    The `flexpipe` dialect states pipeline-parallel training schedules at two
    levels, both valid input to every FlexPipe tool.

    *Spec level* (what a person writes): a `flexpipe.pipeline` names its actor
    mesh and micro-batch count and holds the modules (model towers) with their
    partition into stages and placement on actors, the two scheduling
    priorities, in-flight limits, registered stages and instructions, and
    extra dependencies. The scheduler gives these meaning.

    ```mlir
    // 1F1B: one stage per actor, backward first, at most (pp - a) micro-batches
    // in flight on actor a.
    flexpipe.pipeline @one_f_one_b actors(4) microbatches(8) {
      flexpipe.module @gpt layers(8) placement(one_to_one)
      flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
      flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
    }
    ```

    *Schedule level* (the result): a `flexpipe.schedule` holds one
    `flexpipe.actor` region per device with its ordered instructions; each
    names its stage and micro-batch, communication also its peer.

    ```mlir
    flexpipe.schedule @one_f_one_b actors(2) stages(2) microbatches(1) {
      flexpipe.actor 0 {
        flexpipe.fwd stage 0 mb 0
        flexpipe.send_act stage 0 mb 0 to 1
        flexpipe.recv_grad stage 0 mb 0 from 1
        flexpipe.bwd stage 0 mb 0
      }
      flexpipe.actor 1 {
        flexpipe.recv_act stage 1 mb 0 from 0
        flexpipe.fwd stage 1 mb 0
        flexpipe.bwd stage 1 mb 0
        flexpipe.send_grad stage 1 mb 0 to 0
      }
    }
    ```

    Every op's custom form ends with an optional attribute dictionary
    (`{...}`; `attributes {...}` before a region) for attributes its syntax
    does not write, such as a schedule's `flexpipe.optimize`. The names of
    the op's own attributes (a pipeline's `actors`, an instruction's `mb`,
    ...) are reserved there: MLIR would set one over the value the syntax
    wrote. Another op's names are not (`{name = "warmup"}` on a `fwd` is a
    discardable attribute). (In the generic form, MLIR's parser drops such a
    name from the dictionary, keeping the value in the op's properties.)
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // `flexpipe.optimize` on a schedule (what its spec asked for) is checked
  // as the spec's op is.
  let hasOperationAttrVerify = 1;
}

class FlexPipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<FlexPipe_Dialect, mnemonic, traits>;

#endif // FLEXPIPE_DIALECT
