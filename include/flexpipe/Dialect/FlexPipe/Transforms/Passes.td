//===- Passes.td - FlexPipe passes -------------------------*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_PASSES
#define FLEXPIPE_PASSES

include "mlir/Pass/PassBase.td"

def PartitionPass : Pass<"flexpipe-partition", "mlir::ModuleOp"> {
  let summary = "cut each module's layers into stages";
  let description = [{
    Gives every `flexpipe.module` without a `partition` an explicit one: the
    layers split as evenly as possible over the stages its placement makes,
    the first `layers mod stages` stages taking one layer more. Modules that
    already state a partition are left alone.

    With `balance=cost` the split instead minimises the slowest stage's
    forward + backward FLOPs, with the token embedding on the first stage and
    the LM head and loss on the last (so a large vocabulary leaves fewer
    layers there); a `vocab_parallel` module's embedding and head are stages
    of their own, split over every actor, so its layer stages are split
    evenly. The sizes come, by module name, from the `model` file, which
    also prices the stages, or, for a module it does not name, from the
    module's `model<...>`. A module the file names must have the file's
    layer count (flexpipe-compile `--model` writes it into the spec): a spec
    written for a model of another size is refused at the module.

    ```mlir
    // Before:
    flexpipe.module @gpt layers(10) placement(one_to_one)
    // After, on 4 actors:
    flexpipe.module @gpt layers(10) placement(one_to_one) partition [3, 3, 2, 2]
    ```
  }];
  let options = [
    Option<"balance", "balance", "::flexpipe::sched::Balance", "::flexpipe::sched::Balance::Layers",
           "`layers` (an even split of the layers) or `cost` (balance the "
           "stages' FLOPs, embedding and LM head included)",
           [{::flexpipe::balanceValues()}]>,
    Option<"modelFile", "model", "std::string", "\"\"",
           "Model YAML giving the sizes for `balance=cost` (over a module's "
           "`model<...>`); the modules it names must have its layer counts">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def PlacePass : Pass<"flexpipe-place", "mlir::ModuleOp"> {
  let summary = "resolve each module's placement into an explicit stage map";
  let description = [{
    Rewrites `one_to_one`, `circular` and `vshape` placements into
    `placement(explicit) map [...]`, the actor of each stage of the first
    direction; `bidirectional` is kept (its mirrored direction follows from
    the map). After this pass every placement reads the same way, and the
    stage numbering that the scheduler uses can be read off the IR.

    ```mlir
    // Before, on 4 actors:
    flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
    // After:
    flexpipe.module @gpt layers(16) placement(explicit) map [0, 1, 2, 3, 3, 2, 1, 0]
    ```
  }];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def SchedulePass : Pass<"flexpipe-schedule", "mlir::ModuleOp"> {
  let summary = "run the priority-driven scheduler (CSSR + Algorithm 1)";
  let description = [{
    Replaces every `flexpipe.pipeline` by a `flexpipe.schedule` of the same
    name holding each actor's computations in execution order, computed by the
    paper's scheduler: an instruction pool, per-actor reorder queues per
    instruction type, a dependency resolver over the stage DAG and extra
    dependencies, and Algorithm 1's step function driven by the two
    priorities and the in-flight limits.

    A configuration that can make no progress is reported with one line per
    waiting actor; the pass never loops.

    The spec's extra dependencies must hold when the programs run, through
    program order, messages and collectives; one that does not is an error
    at its `flexpipe.dependency`. Without `finish` they are checked on the
    program that the bubble optimizations `flexpipe.optimize` asks for will
    make of this one, since the schedule IR does not record the
    dependencies for those passes (a weight gradient moved past the input
    gradient that depends on it passed the passes run one by one): an error
    where the program finished with this pass's costs breaks one (as
    `finish` would make it), a warning where only the one
    `-flexpipe-gradient-separation` makes with its default costs (the step
    model) does.

    With the cost model on a cluster whose ranks share a node's cores (a
    measured cluster), the choice between the greedy order and the step
    model's order (the cost model keeps the faster) is made by simulating
    both, sharing included, on `dp` replicas' devices, as flexpipe-tune
    does: each after the bubble optimizations the pipeline's
    `flexpipe.optimize` asks for (with their passes' default options, but
    gradient separation timed as this pass times programs), as the
    spec-to-schedule pipeline will run it.

    Before:

    ```mlir
    flexpipe.pipeline @p actors(2) microbatches(2) {
      flexpipe.module @gpt layers(2) placement(one_to_one)
      flexpipe.priority cttp<fwd_first>
    }
    ```

    After:

    ```mlir
    flexpipe.schedule @p actors(2) stages(2) microbatches(2) {
      flexpipe.actor 0 {
        flexpipe.fwd stage 0 mb 0
        flexpipe.fwd stage 0 mb 1
        flexpipe.bwd stage 0 mb 0
        flexpipe.bwd stage 0 mb 1
      }
      flexpipe.actor 1 {
        flexpipe.fwd stage 1 mb 0
        flexpipe.fwd stage 1 mb 1
        flexpipe.bwd stage 1 mb 0
        flexpipe.bwd stage 1 mb 1
      }
    }
    ```
  }];
  let options = [
    Option<"timeModel", "time-model", "::flexpipe::sched::TimeModel", "::flexpipe::sched::TimeModel::Step",
           "How long instructions take while scheduling: `step` (the paper's "
           "model: every instruction takes one step) or `cost` (each actor "
           "picks its next instruction when it becomes free; forward, "
           "backward, input- and weight-gradient take 1, 2, 1 and 1 time "
           "units per micro-batch on an actor with an average share of the "
           "layers, a stage in proportion to its layers, or the cost "
           "model's durations when "
           "`model` and `cluster` are given; the step model's order is kept "
           "when it finishes earlier under those durations, or, with "
           "`model` and `cluster`, in the simulation with messages and "
           "shared cores)",
           [{::flexpipe::timeModelValues()}]>,
    Option<"stepRule", "step-rule", "::flexpipe::sched::StepRule", "::flexpipe::sched::StepRule::NextType",
           "What Algorithm 1's step function does when the fetch of the "
           "preferred instruction type finds nothing schedulable in a "
           "non-empty reorder queue (in-flight limit, interval, check "
           "function): `next-type` (FlexPipe's default) tries the next type; "
           "`literal` (the paper as written) leaves the actor idle for the "
           "step (docs/Rationale.md)",
           [{::flexpipe::stepRuleValues()}]>,
    Option<"modelFile", "model", "std::string", "\"\"",
           "Model YAML (docs/CostModel.md) for the cost time model">,
    Option<"clusterFile", "cluster", "std::string", "\"\"",
           "Cluster YAML (docs/CostModel.md) for the cost time model">,
    Option<"dp", "dp", "int64_t", "1",
           "Data-parallel replicas the job runs (pp x dp ranks share the "
           "nodes' cores; replica 0's actor a is device a x dp), for the "
           "cost model on a measured cluster">,
    Option<"finish", "finish", "bool", "false",
           "Also apply the bubble optimizations the pipeline's "
           "`flexpipe.optimize` asks for (split-backward, "
           "gradient-separation, async-comm, with their passes' default "
           "options, except that gradient separation times the program "
           "with this pass's time model, model, cluster and dp, where "
           "-flexpipe-gradient-separation's own default is the step "
           "model) and insert communication, on the scheduled program "
           "before it is written: the program is built and written once "
           "(-flexpipe-spec-to-schedule sets it)">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def SplitBackwardPass : Pass<"flexpipe-split-backward", "mlir::ModuleOp"> {
  let summary = "split every backward into input and weight gradient";
  let description = [{
    Replaces each `flexpipe.bwd` by `flexpipe.igrad` and `flexpipe.wgrad` of
    the same stage and micro-batch, in place. The input gradient is what the
    previous stage waits for, so it can be sent before the weight gradient is
    computed; the runtime executes both for real.
    ```mlir
    // Before:
    flexpipe.bwd stage 1 mb 0
    // After:
    flexpipe.igrad stage 1 mb 0
    flexpipe.wgrad stage 1 mb 0
    ```
  }];
  let options = [
    Option<"requestedOnly", "requested-only", "bool", "false",
           "Only transform schedules whose spec asked for it with "
           "`flexpipe.optimize` (set by -flexpipe-spec-to-schedule)">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def GradientSeparationPass
    : Pass<"flexpipe-gradient-separation", "mlir::ModuleOp"> {
  let summary = "move weight gradients into bubbles (stash and insert)";
  let description = [{
    The paper's bubble optimizer, on compute-only schedules (run it before
    `-flexpipe-insert-comm`) whose computations pass
    `-flexpipe-verify-schedule`'s checks (every forward with its backward,
    every micro-batch on every stage of its pipeline) and that run: the
    program, with its communication inserted, must replay without a
    deadlock or a dependency out of order. Backwards are split
    first where needed. Each
    actor keeps its order of forwards and input gradients; weight gradients
    move later:

    1. start with every weight gradient right after its input gradient and
       time the programs with the costs below;
    2. take the earliest bubble (an actor idle while its next forward or
       input gradient waits for an input), follow the blocked item's chain of
       inputs back across actors, and stash the weight gradients that ran on
       that chain after its items were ready, so that their input gradients
       run earlier and release the blocked item;
    3. stashed weight gradients run in the next bubble of their actor they
       fit in, or earlier when a forward (or an input gradient whose
       weight-gradient state outweighs its activations) would otherwise
       exceed the memory bound (a stashed weight gradient keeps its
       weight-gradient state alive; docs/CostModel.md);
    4. keep a change when the iteration gets shorter (or equally long with
       the actors' forwards and input gradients done sooner); repeat;
    5. once that finds nothing more, go on with a second change per bubble:
       fuse the stashed weight gradient that waits through it (that of the
       last input gradient before it, which did not fit in it), so that it
       fills the bubble and delays the blocked item by what does not fit
       (where that item is off the critical path, a shorter iteration).

    The same search (steps 2 to 5, both changes) also starts from stashing
    every weight gradient, where bubbles shorter than the weight gradients
    (uneven stages, messages) leave them piled up after the last input
    gradients. Its result is compared with that of stashing every weight
    gradient (under a bound above the peak without separation, also under
    that peak unsearched) and with the
    schedule without separation (the split one, every weight gradient right
    after its input gradient); the fastest is kept, and of equally fast ones
    (within a millionth of the shortest instruction's duration) the one with
    the lower peak memory. It is never slower than that schedule and never
    exceeds the memory bound; `time_before` is that schedule's time. The
    split itself is not free where an instruction has a fixed cost or ranks
    share cores (a measured cluster): there the unsplit backward may be
    faster than any separated program (interleaved 1F1B of a 29-layer GPT on 7
    ranks of a 16-device copy of the
    measured CPU cluster: 1.072 s unsplit, 1.163 s separated), which
    flexpipe-tune finds by trying separation off and on. The search is a
    heuristic: under other costs it may find another placement of the same
    order's weight gradients, and not always a faster one. Step 5 and the
    search from every weight gradient stashed closed most such gaps (ZB-H1
    on 6 actors, 16 layers, 7 micro-batches under the cost model's units:
    28.50 units, where the placement found under the step model's steps
    takes 27.75; now 27.75), not all: bidirectional on 6 actors, 29
    layers, 8 micro-batches takes 29.17 units, the step model's placement
    28.55 (docs/Rationale.md). Works for every placement
    (one-to-one, circular, V-shape, bidirectional and combinations) and both
    time models. A memory bound below what the schedule needs with every
    weight gradient right after its input gradient is an error.
    Shared stages (each actor's part is its own item) and blocking
    all-gathers and gathers (the loss exchange of a vocabulary-parallel
    head, the sync of two towers' outputs) are handled: a collective keeps
    its place among the actor's forwards and input gradients and, in the
    re-timing, starts once every member's forward is done, each member
    waiting for the last as in the simulator. Asynchronous collectives and
    registered instructions (`exec`) are not supported yet. The re-timing
    runs on the simulator's event core, so ranks that share a node's cores
    (a measured cluster) share them here too.

    The outcome is recorded as a `flexpipe.separation` dictionary on the
    schedule: time and peak memory before and after, the bound, the number of
    stashed weight gradients and the strategy that won.
  }];
  let options = [
    Option<"requestedOnly", "requested-only", "bool", "false",
           "Only transform schedules whose spec asked for it with "
           "`flexpipe.optimize` (set by -flexpipe-spec-to-schedule)">,
    Option<"timeModel", "time-model", "::flexpipe::sched::TimeModel", "::flexpipe::sched::TimeModel::Step",
           "How long instructions take without `model` and `cluster` (with "
           "them, the cost model's durations, whichever this is): `step` "
           "(one step each) or `cost` (1, 2, 1, 1 for forward, backward, "
           "input and weight gradient per actor's share of the layers)",
           [{::flexpipe::timeModelValues()}]>,
    Option<"modelFile", "model", "std::string", "\"\"",
           "Model YAML (docs/CostModel.md)">,
    Option<"clusterFile", "cluster", "std::string", "\"\"",
           "Cluster YAML (docs/CostModel.md)">,
    Option<"dp", "dp", "int64_t", "1",
           "Data-parallel replicas the messages are priced for: replica 0's "
           "actor a is device a x dp (sched::replicaDevices; as "
           "flexpipe-compile --dp and flexpipe-tune lay them out)">,
    Option<"memoryBound", "memory-bound", "double", "0",
           "Peak activation memory allowed per actor, in the costs' units "
           "(bytes with a model; without, the report's: stage-micro-batches "
           "under the step time model, M_B under the cost one, "
           "docs/CostModel.md); 0: the input schedule's peak with every "
           "weight gradient right after its input gradient (each actor's "
           "static plus activation memory within the largest such sum). "
           "A spec's `flexpipe.optimize memory_bound(...)` takes precedence">,
    Option<"maxRounds", "max-rounds", "int64_t", "2000",
           "Most stash-and-insert attempts per schedule, all searches "
           "together (each gets what the earlier ones left)">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def AsyncCommPass : Pass<"flexpipe-async-comm", "mlir::ModuleOp"> {
  let summary = "post receives early and wait right before use";
  let description = [{
    Turns every blocking `recv_act` / `recv_grad` into an asynchronous one
    that returns a `!flexpipe.token`, posted `lookahead` computations before
    its first use, and a `flexpipe.wait` where the blocking receive stood. The
    transfer then overlaps the computations in between: with rendezvous
    transfers (NCCL, large MPI messages) data moves only once both sides are
    posted, which the simulator models. Sends are already asynchronous (a
    send does not hold up its actor). Receives keep their relative order, so
    every channel stays FIFO; posting early never creates a deadlock.
    ```mlir
    // Before:
    flexpipe.fwd stage 0 mb 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    // After (lookahead 1):
    %t = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
    flexpipe.fwd stage 0 mb 1
    flexpipe.wait %t
    flexpipe.bwd stage 0 mb 0
    ```
  }];
  let options = [
    Option<"requestedOnly", "requested-only", "bool", "false",
           "Only transform schedules whose spec asked for it with "
           "`flexpipe.optimize` (set by -flexpipe-spec-to-schedule)">,
    Option<"lookahead", "lookahead", "int64_t", "1",
           "Computations between a receive's post and its wait (at least 1)">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def InsertCommPass : Pass<"flexpipe-insert-comm", "mlir::ModuleOp"> {
  let summary = "add send/recv pairs for every cross-actor edge";
  let description = [{
    For every stage edge whose two ends run on different actors, sends each
    activation right after the forward that produces it and receives it right
    before the first forward that needs it; gradients likewise in the other
    direction. Same-actor edges get nothing. Schedules that already contain
    transfers are left alone. The result is verified as
    `-flexpipe-verify-schedule` does: computation orders that no transfers
    can serve (an actor computes micro-batch 1 before 0 while its peer sends
    0 first) fail the pass, at the transfer where the replay stops, which
    takes the location of the computation it serves.

    The programs target these runtime semantics, which
    `-flexpipe-verify-schedule` replays: a send is posted and the actor goes
    on; a message is delivered once its receive is posted, and an iteration
    ends when every send has been delivered; a receive blocks until its
    message arrives; messages of one kind from one sending stage to one actor
    arrive in the order they were sent. Under them a schedule computed by
    `-flexpipe-schedule` cannot deadlock: every receive waits for a send that
    the scheduler placed earlier in time.

    ```mlir
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.send_act stage 0 mb 0 to 1
      flexpipe.recv_grad stage 0 mb 0 from 1
      flexpipe.bwd stage 0 mb 0
    }
    ```
  }];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def VerifySchedulePass : Pass<"flexpipe-verify-schedule", "mlir::ModuleOp"> {
  let summary = "prove that a schedule's programs are correct and terminate";
  let description = [{
    Replays every `flexpipe.schedule` under the runtime semantics described
    at `-flexpipe-insert-comm` and checks that every computation's inputs are
    computed or received on its actor before it runs (of a stage computed in
    slices on several actors, `shared [...]`, every slice: its own and each
    other actor's message; a vocabulary-parallel head's `all_gather` after
    the head's forward), that every forward's
    backward is completed, that sends and receives match one to one and in the
    same order per channel, that every send is received, and that all
    programs run to their end. A `flexpipe.wait` on a send completes once the
    receiver has posted the receive (MPI's wait on a large message and NCCL's
    completion event need that much): an actor that waits for a send before
    posting what its peer waits for deadlocks. A deadlock
    is reported as one error with a note at each op of the wait cycle. The IR
    is not changed.

    A channel is what a runtime keeps in order. FlexPipe's runtimes tag each
    message with its kind and sending stage (`channels=stage`, the default).
    Untagged point-to-point, such as PyTorch's pipelining runtime, has one
    FIFO channel per ordered pair of actors: the n-th receive from a peer
    takes the n-th send to it, whatever it carries. `channels=pair` checks
    that stricter rule (`--emit=torch-csv-comms` orders receives so).
  }];
  let options = [
    Option<"channels", "channels", "::flexpipe::sched::ChannelRule", "::flexpipe::sched::ChannelRule::PerStage",
           "Which messages share one FIFO channel: `stage` (sender, "
           "receiver, kind and sending stage; FlexPipe's tagged runtimes) "
           "or `pair` (sender and receiver; untagged runtimes such as "
           "PyTorch's)",
           [{::flexpipe::channelRuleValues()}]>,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

def SimulatePass : Pass<"flexpipe-simulate", "mlir::ModuleOp"> {
  let summary = "predict iteration time, bubbles and memory of each schedule";
  let description = [{
    Replays every `flexpipe.schedule` with a cost model and attaches the
    prediction as a `flexpipe.simulation` dictionary: `iteration_time` (the
    pipeline's: what follows it, a data-parallel gradient all-reduce, the
    bidirectional copies' exchange or the optimizer step, is added by
    `flexpipe-compile --emit=report`, which prints the sum),
    `bubble_ratio` (idle share of all actors' time) and `unit` (`s`, or
    `steps` for unit costs), and per actor `busy`, `bubble`,
    `peak_activation` and `total_bytes`, plus `over_memory` (the actors that
    do not fit a device) and `critical_path` (its number of computations).
    With `dp` replicas the figures are those of the replica whose pipeline
    ends last (the all-reduce after it waits for every replica), named in
    `replica`. A schedule must pass `-flexpipe-verify-schedule` first (reported as that
    pass does): with its communication (`-flexpipe-insert-comm`), since a
    compute-only one says nothing of the waits between actors.

    Costs: without options every computation takes one step and messages
    nothing; with `model` and `cluster` the analytic cost model
    (docs/CostModel.md); with `profile` measured durations (alone or over the
    model's).

    ```mlir
    flexpipe.schedule @s actors(1) stages(1) microbatches(1)
        attributes {flexpipe.simulation = {bubble_ratio = 0.000000e+00 : f64,
        iteration_time = 2.000000e+00 : f64, unit = "steps"}} {
      flexpipe.actor 0 {
        flexpipe.fwd stage 0 mb 0
        flexpipe.bwd stage 0 mb 0
      }
    }
    ```
  }];
  let options = [
    Option<"rendezvous", "rendezvous", "bool", "false",
           "Model rendezvous transfers (NCCL, large MPI messages): a message "
           "leaves when both its send and its receive are posted, so early "
           "receives from -flexpipe-async-comm overlap it with computation; "
           "by default messages leave when sent">,
    Option<"timeModel", "time-model", "::flexpipe::sched::TimeModel", "::flexpipe::sched::TimeModel::Step",
           "Costs without a model or profile: `step` (every instruction one "
           "step, one unit of activation memory per stage) or `cost` "
           "(forward, backward, input and weight gradient 1, 2, 1, 1 per "
           "actor's share of the layers, memory likewise)",
           [{::flexpipe::timeModelValues()}]>,
    Option<"modelFile", "model", "std::string", "\"\"",
           "Model YAML (docs/CostModel.md); needs `cluster`">,
    Option<"clusterFile", "cluster", "std::string", "\"\"",
           "Cluster YAML (docs/CostModel.md); needs `model`">,
    Option<"profileFile", "profile", "std::string", "\"\"",
           "Measured profile YAML (docs/CostModel.md)">,
    Option<"dp", "dp", "int64_t", "1",
           "Data-parallel replicas: replica r's actor a is device a x dp + r "
           "(sched::replicaDevices; as flexpipe-compile --dp and "
           "flexpipe-tune lay them out); each replica's pipeline is priced "
           "on its devices' links and cores, and the slowest is reported">,
  ];
  let dependentDialects = ["flexpipe::FlexPipeDialect"];
}

#endif // FLEXPIPE_PASSES
