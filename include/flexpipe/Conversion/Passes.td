//===- Passes.td - FlexPipe conversion passes --------------*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_CONVERSION_PASSES
#define FLEXPIPE_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertToEmitCPass : Pass<"flexpipe-convert-to-emitc", "mlir::ModuleOp"> {
  let summary = "lower each actor's program to EmitC calls into the runtime";
  let description = [{
    Replaces every `flexpipe.schedule` by one `builtin.module` per
    actor (`@NAME_rankA`, attribute `flexpipe.actor = A`) holding an
    `emitc.func @flexpipe_program` with one `emitc.call_opaque` into the
    runtime (runtime/include/flexpipe/Runtime/Runtime.h) per instruction, and
    an `emitc.func @main` that hands it to `flexpipe_rt_main` with the
    schedule's description (docs/Runtime.md; also attached to the module as
    `flexpipe.description`). MLIR's C++ emitter (`translateToCpp`) prints
    each module as one rank's source. A schedule that fails
    `-flexpipe-verify-schedule` (a deadlock, a message taken by the wrong
    receive, a micro-batch left out) is reported as that pass does and not
    lowered.

    ```mlir
    flexpipe.actor 1 {
      %t = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
      flexpipe.wait %t
      flexpipe.fwd stage 1 mb 0
    }
    ```

    becomes, in the module of actor 1,

    ```mlir
    emitc.func @flexpipe_program(%rt: !emitc.ptr<!emitc.opaque<"flexpipe_rt">>) {
      %t = emitc.call_opaque "flexpipe_rt_recv_act_async"(%rt) {args = [0 : index, 1 : i64, 0 : i64, 0 : i64]} : (!emitc.ptr<!emitc.opaque<"flexpipe_rt">>) -> i64
      emitc.call_opaque "flexpipe_rt_wait"(%rt, %t) : (!emitc.ptr<!emitc.opaque<"flexpipe_rt">>, i64) -> ()
      emitc.call_opaque "flexpipe_rt_fwd"(%rt) {args = [0 : index, 1 : i64, 0 : i64]} : (!emitc.ptr<!emitc.opaque<"flexpipe_rt">>) -> ()
      emitc.return
    }
    ```

    which prints as

    ```c++
    void flexpipe_program(flexpipe_rt* v1) {
      int64_t v2 = flexpipe_rt_recv_act_async(v1, 1, 0, 0);
      flexpipe_rt_wait(v1, v2);
      flexpipe_rt_fwd(v1, 1, 0);
      return;
    }
    ```

    Calls that repeat are rolled into loops: where at least three trips of
    up to 256 calls repeat with the same callees, each integer argument
    advancing by its own constant step (1F1B's steady state: micro-batch
    `j`, `j + 3`, ...), they become an `emitc.for` over the trips whose body
    computes each argument as `first + trip * step`. The rank programs then
    stay a few dozen lines at any number of micro-batches: written out, a
    program of 20,000 micro-batches took the host C++ compiler 8 minutes
    (2.3 GB) per rank. A token stays within its trip: a receive posted in
    one trip and waited in the next (`-flexpipe-async-comm` with a
    `lookahead` longer than the steady state's period) keeps those calls
    straight, as does a schedule that does not repeat.

    Actor 0 of 1F1B on 3 actors with 9 micro-batches prints as

    ```c++
    void flexpipe_program(flexpipe_rt* v1) {
      flexpipe_rt_fwd(v1, 0, 0);
      flexpipe_rt_send_act(v1, 0, 0, 1);
      flexpipe_rt_fwd(v1, 0, 1);
      flexpipe_rt_send_act(v1, 0, 1, 1);
      int64_t v2 = 1;
      int64_t v3 = 7;
      int64_t v4 = 0;
      for (int64_t i5 = v4; i5 < v3; i5 += v2) {
        int64_t v6 = 2;
        int64_t v7 = i5 + v6;
        flexpipe_rt_fwd(v1, 0, v7);
        flexpipe_rt_group_start(v1);
        flexpipe_rt_send_act(v1, 0, v7, 1);
        flexpipe_rt_recv_grad(v1, 0, i5, 1);
        flexpipe_rt_group_end(v1);
        flexpipe_rt_bwd(v1, 0, i5);
      }
      flexpipe_rt_recv_grad(v1, 0, 7, 1);
      flexpipe_rt_bwd(v1, 0, 7);
      flexpipe_rt_recv_grad(v1, 0, 8, 1);
      flexpipe_rt_bwd(v1, 0, 8);
      return;
    }
    ```

    (test/Conversion/FlexPipeToEmitC/loops.mlir).

    A send and a receive with one peer that an actor posts one right after
    the other, whose counterparts the peer posts one right after the other
    too (1F1B's steady state), are bracketed by
    `flexpipe_rt_group_start(rt)` and `flexpipe_rt_group_end(rt)`: the NCCL
    backend posts the two as one NCCL group, as PyTorch's `batch_isend_irecv`
    does; a blocking receive among them completes at the group's end. Each
    of the four transfers would complete at the same moment without the
    groups, so they add no wait (docs/Rationale.md). A schedule the replay
    rejects gets no groups.

    The model's sizes come from the `model` file (its single module must be
    a GPT with a vocabulary) or default to the tiny model of
    configs/models/tiny.yaml. The stages of a bidirectional pipeline's second
    direction hold the same blocks (and weights) as the first's. Shared
    stages become the vocabulary-parallel token embedding (0 layers, `first`)
    and LM head + loss (0 layers, `last`), split over the actors that run
    them, and a head's `flexpipe.all_gather` becomes
    `flexpipe_rt_all_gather(rt, stage, mb)` (docs/Runtime.md).

    A registered computation's `flexpipe.exec` becomes one call of the
    runtime operation bound to its name (`FLEXPIPE_OPERATION` in
    runtime/include/flexpipe/Runtime/UserOps.h, compiled in with
    `flexpipe-compile --ops`) with its stage, its first micro-batch, the
    number of micro-batches it covers (up to the next instance of the same
    instruction and stage on the actor) and its attributes, encoded as
    `KEY=K:VALUE` entries (docs/Runtime.md):

    ```mlir
    flexpipe.exec @log_norms stage 1 mb 0 attrs {file = "norms.txt"}
    ```

    prints as

    ```c++
    flexpipe_rt_exec(v1, "log_norms", 1, 0, 1, "file=s:norms.txt");
    ```

    and with a token as `int64_t v2 = flexpipe_rt_exec_async(...)`. The
    description lists every instance (`exec` lines), so that every rank
    checks at start-up that its operations were compiled in, and
    flexpipe-reference runs them in the same places. Attributes other than
    strings, integers, floats, booleans and unit attributes, and instruction
    names other than `[A-Za-z_][A-Za-z0-9_.-]*`, are rejected. Schedules the
    runtime cannot run yet are rejected with a diagnostic: other shared
    stages, other all-gathers and gathers. With `backend=cuda`, so is an
    actor whose ranks would take part in more than 31 message channels (one
    per peer, direction and sending stage, and one exchange channel per
    peer): the NCCL backend gives each channel and the compute stream a
    stream, a GPU has 32 hardware queues, and streams that share one can
    hang the run.
  }];
  let options = [
    Option<"modelFile", "model", "std::string", "\"\"",
           "Model YAML (docs/CostModel.md) giving the GPT's sizes, or both towers' "
           "for a two-tower schedule (required then)">,
    Option<"dataParallel", "dp", "int64_t", "1",
           "Data-parallel replicas of the pipeline (world = actors x dp)">,
    Option<"seed", "seed", "int64_t", "1234",
           "Seed of the weights and the synthetic data (0 or more)">,
    Option<"backend", "backend", "::flexpipe::RuntimeBackend",
           "::flexpipe::RuntimeBackend::Cpu",
           "Runtime backend the ranks link; on cuda, an actor whose ranks "
           "would take part in more than 31 message channels is rejected",
           [{::flexpipe::runtimeBackendValues()}]>,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif // FLEXPIPE_CONVERSION_PASSES
