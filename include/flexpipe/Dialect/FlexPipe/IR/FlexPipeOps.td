//===- FlexPipeOps.td - FlexPipe operations ----------------*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_OPS
#define FLEXPIPE_OPS

include "flexpipe/Dialect/FlexPipe/IR/FlexPipeDialect.td"
include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.td"
include "flexpipe/Dialect/FlexPipe/IR/FlexPipeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"

//===----------------------------------------------------------------------===//
// Spec level
//===----------------------------------------------------------------------===//

// A symbol's name: `@""` parses, but prints as no name that reads back.
def FlexPipe_SymbolName : ConfinedAttr<SymbolNameAttr, [AttrConstraint<
    CPred<"!::llvm::cast<::mlir::StringAttr>($_self).getValue().empty()">,
    "not empty">]> {
  let summary = "a symbol name that is not empty";
}

def FlexPipe_PipelineOp : FlexPipe_Op<"pipeline", [
    Symbol, SymbolTable, IsolatedFromAbove, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "a pipeline-parallel schedule as a person states it";
  let description = [{
    The spec level's root: an actor mesh of `actors` devices, the number of
    micro-batches per iteration, and a body that says how the model is cut
    and placed and which priorities order the work. The body holds only
    spec-level ops (`flexpipe.module`, `share`, `stage`, `instruction`,
    `dependency`, `check`, `priority`, `inflight`, `optimize`).

    Every actor must hold at least one stage. Stages get global ids in
    declaration order: each module's stages (all directions), then each
    registered `flexpipe.stage`.

    ```mlir
    // GPipe: all forwards, then all backwards.
    flexpipe.pipeline @gpipe actors(4) microbatches(8) {
      flexpipe.module @gpt layers(8) placement(one_to_one)
      flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>
    }
    ```
  }];
  let arguments = (ins FlexPipe_SymbolName:$sym_name, I64Attr:$actors,
                       I64Attr:$microbatches);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `actors` `(` custom<Count>($actors, "\"actors\"") `)`
    `microbatches` `(` custom<Count>($microbatches, "\"micro-batches\"") `)`
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()", "/*withKeyword=*/true") $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The modules' stages, the `s` of the pipeline's priorities and
    /// in-flight limits; registered stages (flexpipe.stage: no layers, no
    /// forwards) are not counted. Modules whose placement is invalid count
    /// as zero.
    int64_t getNumStages();
  }];
}

def FlexPipe_ModalityOp : FlexPipe_Op<"module", [
    Symbol, HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a model tower: its layers, partition and placement";
  let description = [{
    One module (modality) of the model: `layers` transformer layers cut into
    stages and placed on actors. `layers` and `placement` come first; the
    optional clauses after them may come in any order, each at most once.

    - `placement(...)`: `one_to_one` (stage i on actor i), `circular` (stage i
      on actor i mod n, `chunks` rounds), `vshape` (chunks alternate
      direction: down, back up, ...) or `explicit` (with `map [...]`, the actor
      of each stage).
    - `bidirectional`: adds a mirrored pipeline over the same actors running
      the other way with replicated weights (Chimera); micro-batches are split
      between the two. Combines with every placement.
    - `chunks(v)`: stages per actor per direction for circular and vshape
      (2 when omitted).
    - `actors [...]`: the module's actors in pipeline order (all of the mesh
      when omitted); modules may use disjoint groups.
    - `partition [...]`: layers per stage (one entry per stage of one
      direction, summing to `layers`); an even split when omitted.
    - `inputs [@a, ...]`: modules whose last stage feeds this module's first
      stage (a branching stage DAG, e.g. two towers into a joint head).
      Modules connected this way cannot be bidirectional. A transfer names
      the stage it serves, not the edge, so the inputs of a module must end
      on different actors (or on its own), and two modules that take one
      input must start on different actors (or on the input's): the
      scheduler refuses other placements at the module.
    - `model<...>`: transformer sizes that `--balance cost` splits the
      layers by (`#flexpipe.model`; the simulation and the rank
      executables take sizes from a model file only).
    - `vocab_parallel`: the paper's MLLM placement. The token embedding and
      the LM head with the loss leave the first and last stages and become
      two extra stages per direction (numbered after the module's own),
      each shared by all of the module's actors and split along the
      vocabulary. Every actor runs its slice for every micro-batch; the
      head's slices exchange the loss statistics in an `all_gather` that
      the scheduler places after each head forward (all members join it
      together). These slices do not count against in-flight limits and
      are outside a stage traversal interval: an actor with an interval
      runs a ready slice before its traversal's next item. A
      vocabulary-parallel module cannot be connected to other modules.

    The number of stages per direction is `chunks` times the number of actors,
    or the length of `map`.

    ```mlir
    flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
    flexpipe.module @image layers(24) placement(circular) chunks(2)
        actors [0, 1, 2, 3] partition [3, 3, 3, 3, 3, 3, 3, 3]
    flexpipe.module @text layers(6) placement(explicit) map [4, 5, 5]
        actors [4, 5]
        model<hidden = 512, heads = 8, seq = 77, vocab = 49408>
    flexpipe.module @gpt layers(64) placement(one_to_one) vocab_parallel
    ```
  }];
  let arguments = (ins
    FlexPipe_SymbolName:$sym_name,
    I64Attr:$layers,
    FlexPipe_PlacementKindAttr:$placement,
    UnitAttr:$bidirectional,
    OptionalAttr<I64Attr>:$chunks,
    OptionalAttr<DenseI64ArrayAttr>:$stage_map,
    OptionalAttr<DenseI64ArrayAttr>:$actor_group,
    OptionalAttr<DenseI64ArrayAttr>:$partition,
    OptionalAttr<FlatSymbolRefArrayAttr>:$inputs,
    OptionalAttr<FlexPipe_ModelConfigAttr>:$model,
    UnitAttr:$vocab_parallel
  );
  let assemblyFormat = [{
    $sym_name `layers` `(` custom<Count>($layers, "\"layers\"") `)` `placement` `(` custom<EnumKeyword>($placement) `)`
    `` custom<ModuleClauses>($bidirectional, $chunks, $stage_map,
                             $actor_group, $partition, $inputs, $model,
                             $vocab_parallel)
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The module's actors in pipeline order (the whole mesh by default).
    llvm::SmallVector<int64_t> getActorIds();
    /// The placement parameters as the scheduling library takes them.
    flexpipe::sched::PlacementSpec getPlacementSpec();
    /// Where each stage sits, or the reason the placement is invalid.
    llvm::Expected<flexpipe::sched::ModulePlacement> computePlacement();
    /// Layers of each stage of one direction (explicit or even split).
    llvm::SmallVector<int64_t> getLayersPerStage(int64_t stagesPerDirection);
  }];
}

def FlexPipe_ShareOp : FlexPipe_Op<"share", [HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "label a module stage as shared among several actors";
  let description = [{
    Stage `stage` of module `@module` (a module-local index; negative counts
    from the end, -1 being the last stage of the first direction) is shared:
    each listed actor runs its own part of it (for example the embedding and
    LM head split along the vocabulary). The actors must belong to the module
    and include the actor the placement gives the stage.

    ```mlir
    flexpipe.share @gpt stage 0 actors [0, 1, 2, 3]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$module, I64Attr:$stage,
                       DenseI64ArrayAttr:$actor_ids);
  let assemblyFormat = [{
    $module `stage` $stage `actors` $actor_ids `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
}

def FlexPipe_StageOp : FlexPipe_Op<"stage", [
    Symbol, HasParent<"PipelineOp">]> {
  let summary = "register a stage that holds no model layers";
  let description = [{
    A stage that registered instructions attach to (the paper's
    `register_new_stage`), for example the synchronisation point of two
    towers. It lives on the listed actors.

    ```mlir
    flexpipe.stage @sync actors [3, 7]
    ```
  }];
  let arguments = (ins FlexPipe_SymbolName:$sym_name, DenseI64ArrayAttr:$actor_ids);
  let assemblyFormat = [{$sym_name `actors` $actor_ids `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")}];
  let hasVerifier = 1;
}

def FlexPipe_InstructionOp : FlexPipe_Op<"instruction", [
    Symbol, HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "register a new instruction type";
  let description = [{
    A new instruction type (the paper's `register_new_inst`) attached to a
    stage: a registered `flexpipe.stage` (`on(@sync)`) or a module stage
    (`on(@gpt[-1])`). The scheduler gives it its own reorder queue. On a
    `bidirectional` module, `@gpt[i]` is one stage of the two directions,
    as in `flexpipe.dependency` (0 to pp - 1 the first direction, pp to
    2 pp - 1 the mirrored one, negative from the end of the first): its
    instructions and dependencies cover the micro-batches of that
    direction only (the other half of the micro-batches flows through the
    mirrored copy on the same actor; attach a second instruction there).

    The optional clauses (`prev`, `next`, `unit`, `async`, `attrs`) may come
    in any order, each at most once. Scheduling attributes (all at least 1,
    default 1):
    - `prev(k)`: instance i may run once the prior dependent items of
      micro-batches `[0, (i + 1) * k)` have been scheduled;
    - `next(k)`: a dependent item of micro-batch j may run once instance
      `j / k` has been scheduled;
    - `unit(u)`: how many instances are scheduled at a time.

    `attrs {...}` are passed unchanged to the runtime operation (for example
    the ranks of a communication group). `kind` says what the runtime does:
    - `compute`: every actor of the stage runs its own instance (a
      `flexpipe.exec`, bound to a user operation at run time);
    - `all_gather` / `gather` (to the lowest-numbered actor of the stage,
      whatever order the stage lists them in): a collective among the actors
      of a registered stage (at least two). By default it blocks:
      each member joins as soon as it is free (before any other work) and
      waits for the others. With `async` each member posts it and goes on;
      it completes after the last member posted, and the instructions that
      depend on it wait for that (`%t = flexpipe.all_gather ... :
      !flexpipe.token` and a `flexpipe.wait %t` before the first of them).

    An instruction's sources and dependents are given by
    `flexpipe.dependency`; its instances cover the micro-batches of its
    sources. The names `fwd`, `bwd`, `igrad` and `wgrad` are reserved.

    ```mlir
    flexpipe.instruction @sync_gather kind(all_gather) on(@sync) prev(2) next(2)
    flexpipe.instruction @sync_states kind(all_gather) on(@sync) async
    ```
  }];
  let arguments = (ins
    FlexPipe_SymbolName:$sym_name,
    FlexPipe_RegisteredKindAttr:$kind,
    FlatSymbolRefAttr:$stage,
    OptionalAttr<I64Attr>:$stage_index,
    DefaultValuedAttr<I64Attr, "1">:$prev,
    DefaultValuedAttr<I64Attr, "1">:$next,
    DefaultValuedAttr<I64Attr, "1">:$unit,
    UnitAttr:$async,
    OptionalAttr<DictionaryAttr>:$runtime_attrs
  );
  let assemblyFormat = [{
    $sym_name `kind` `(` custom<EnumKeyword>($kind) `)`
    `on` `(` custom<StageRef>($stage, $stage_index) `)`
    `` custom<InstructionClauses>($prev, $next, $unit, $async,
                                  $runtime_attrs)
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
  let hasVerifier = 1;
}

def FlexPipe_DependencyOp : FlexPipe_Op<"dependency", [
    HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an extra dependency between (instruction, stage) pairs";
  let description = [{
    `A -> B`: for every micro-batch, instruction A on stage A is scheduled
    before instruction B on stage B (the paper's `set_cssr_deps`). An
    endpoint is an instruction type (`fwd`, `bwd`, `igrad`, `wgrad`, or a
    registered `@instruction`) followed by a stage: `@module[i]` (module-local
    index, negative from the end of the first direction; on a
    `bidirectional` module the mirrored direction's stages follow, pp to
    2 pp - 1, each with its own half of the micro-batches) or a registered
    `@stage`. A registered
    instruction must be named with the stage it is attached to. Extra
    dependencies must not form a cycle, among themselves (the verifier
    refuses it) or with the stage graph (a later stage's forward before an
    earlier one's for the same micro-batch, directly or through a registered
    instruction whose dependent comes before its source: `-flexpipe-schedule`
    refuses it at the dependency that closes the cycle, naming the cycle).
    The scheduler sees a backward whole where `flexpipe.optimize` splits it
    after scheduling: there `igrad` and `wgrad` of one stage are one item,
    and `igrad -> @x -> wgrad` is such a cycle.

    A collective (`kind(all_gather)`, `kind(gather)`) orders only its
    members, the actors of its registered stage: each leaves an instance
    once every member has joined it, and a member's program orders the
    member's own computations against it. A computation on another actor
    is ordered against it only through messages: a forward whose data
    reaches a member before the member joins, a backward after gradients
    that leave a member after it. Where none orders them (an `--actors`
    override too may move a stage off a registered stage's literal actors),
    the check below refuses the dependency at this op; add that actor to
    the registered stage's actors, or make the other end a computation on
    a member.

    Between two computations, or a computation and a registered instruction,
    the order must also hold when the schedule runs: `-flexpipe-schedule`
    refuses, at this op, a schedule in which A does not happen before B
    through program order, the messages the actors exchange and their
    collectives (two towers on actors that exchange nothing, a weight
    gradient that the split backward placed on its own after a collective
    or a runtime operation, or a runtime operation (`kind(compute)`, which
    orders nothing between actors) on one actor and a computation on another
    that no message orders). It checks the program it writes (finished,
    where asked); passes run on the schedule afterwards do not see the
    spec's dependencies.

    ```mlir
    flexpipe.dependency fwd @image[-1] -> @sync_gather @sync
    flexpipe.dependency @sync_gather @sync -> bwd @image[-1]
    ```
  }];
  let arguments = (ins
    StrAttr:$src_inst, FlatSymbolRefAttr:$src_stage,
    OptionalAttr<I64Attr>:$src_index,
    StrAttr:$dst_inst, FlatSymbolRefAttr:$dst_stage,
    OptionalAttr<I64Attr>:$dst_index
  );
  let assemblyFormat = [{
    custom<InstRef>($src_inst) custom<StageRef>($src_stage, $src_index) `->`
    custom<InstRef>($dst_inst) custom<StageRef>($dst_stage, $dst_index)
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
}

def FlexPipe_CheckOp : FlexPipe_Op<"check", [HasParent<"PipelineOp">]> {
  let summary = "consult a plugin check function when scheduling";
  let description = [{
    The scheduler asks the check function a plugin registered under `name`
    (`register_new_checkfunc`, loaded with `--load-plugin`) about every item
    it considers fetching; the item is skipped for this step when the
    function returns false. Several checks must all agree. The name is
    resolved when the spec is scheduled: an unknown one is an error that
    lists the registered checks.

    ```mlir
    flexpipe.check "max_two_inflight"
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = [{$name `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")}];
}

def FlexPipe_PriorityOp : FlexPipe_Op<"priority", [HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the two scheduling priorities";
  let description = [{
    Sets the computation-type traversal priority (`cttp`) and the stage
    traversal priorities for forward (`fstp`) and backward (`bstp`) reorder
    queues. Without a module it applies to the whole pipeline; with `@module`
    to that module's actors (the paper's `set_priority`); with `actors [...]`
    it overrides the listed actors only (`set_cttp_for_actor`,
    `set_stp_for_actor`). A negative id counts from the last actor (-1 is
    actor pp - 1), so that a spec resized with `--actors` keeps the override
    at the same place: `actors [-1]` is the last actor at every size, where
    `actors [4]` is the last of 5 but a middle one of 6. At least one of the
    three must be given (in any order, each once), and no two priority ops
    may set the same field for the same scope.

    `custom("name")` instead gives the scope's actors a priority a plugin
    registered (`register_new_priority`, loaded with `--load-plugin`): a step
    function that picks each next item among the ready ones
    (docs/Plugins.md). It replaces cttp, fstp and bstp, so it stands alone.

    Two modules' priorities that set a field differently on an actor both
    modules use are refused (a plugin priority sets all three fields); the
    actor's own priority (`actors [...]`) settles it. A built-in priority
    of a narrower scope (a module's, an actor's own) replaces a wider
    scope's plugin priority on its actors.

    ```mlir
    flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
    flexpipe.priority @image cttp<interleaved> fstp<breadth_first, 4>
        bstp<depth_first, 4>
    flexpipe.priority actors [3] cttp<fwd_first>
    flexpipe.priority actors [-1] cttp<bwd_first>
    flexpipe.priority @text custom("one_f_one_b")
    ```
  }];
  let arguments = (ins
    OptionalAttr<FlatSymbolRefAttr>:$module,
    OptionalAttr<DenseI64ArrayAttr>:$actor_ids,
    OptionalAttr<FlexPipe_CttpAttr>:$cttp,
    OptionalAttr<FlexPipe_StpAttr>:$fstp,
    OptionalAttr<FlexPipe_StpAttr>:$bstp,
    OptionalAttr<StrAttr>:$custom
  );
  let assemblyFormat = [{
    ($module^)? (`actors` $actor_ids^)?
    `` custom<PriorityClauses>($cttp, $fstp, $bstp, $custom) `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
  let extraClassDeclaration = [{
    /// The actors `actors [...]` lists, negative ids counted from the last
    /// actor of the pipeline; empty without the list.
    ::llvm::SmallVector<int64_t> getResolvedActorIds();
  }];
  let hasVerifier = 1;
}

def FlexPipe_InflightOp : FlexPipe_Op<"inflight", [HasParent<"PipelineOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a limit on in-flight micro-batches";
  let description = [{
    Bounds how many micro-batches may be in flight (forward done, backward not
    yet done), which bounds activation memory and shapes the warm-up phase:
    - `global N`: in the whole pipeline (or module);
    - `per_stage [...]`: one limit per stage;
    - `per_actor [...]`: one limit per actor, which counts a micro-batch
      once for each of the actor's stages it is in flight on (as
      interleaved 1F1B's warm-up counts chunk forwards: with two stages on
      an actor, a micro-batch through both takes two places).

    A limit is an integer, a list (one entry per stage / actor of the scope),
    or an affine map evaluated for each index: `(i)[pp, s, m] -> (...)` where
    `i` is the stage index or the actor's position in the scope, `pp` the
    number of actors, `s` the number of stages (the modules' stages:
    registered `flexpipe.stage`s take no place in a limit) and `m` the number of
    micro-batches of the scope (a `global` map has no dimension). A fourth
    symbol, `round`, is optional: the micro-batches per round as interleaved
    1F1B takes them (m split into the most rounds, at most m floordiv pp,
    whose last still holds pp; pp when pp divides m, m when m < 2 pp). Every limit must be at
    least 1. A map's evaluation is checked for overflow and division by
    zero; since MLIR folds a map's constants while it parses them, in
    wrapping arithmetic, a map is written inline (`affine_map<...>`, not an
    alias), and the product of its constants (each counted as at least 2)
    and of 2 for each use of a name may not exceed 2^62. (The generic form,
    `limit = affine_map<...>` in the op's properties, is read by MLIR's
    attribute parser, which folds before FlexPipe sees the map: write
    in-flight maps in the custom form.) A global limit counts micro-batches: one that flows through
    several first stages (two towers, a shared stage) counts once. With
    `@module` the scope is that module.

    Per-actor and per-stage limits are kept by each actor's program,
    counting a forward until its backward, or its input gradient once
    `flexpipe.optimize` splits the backward (gradient separation's memory
    bound, not these limits, governs the weight gradients it moves). A
    global limit whose first stages are on several actors (a bidirectional
    module, two towers) is kept by the scheduler in its own timing, but the
    programs keep it only where messages make an actor wait for the
    releases; `-flexpipe-schedule` warns at this op where some micro-batch
    may enter while the limit's number of others may be in flight, under
    any timing (not after gradient separation, which bounds memory
    instead). The check takes the number of source actors times the
    program's size; past 2^26 (a thousand towers of a 16-micro-batch
    pipeline) it warns that the limit is not checked.

    `rule("name")` asks an in-flight rule a plugin registered
    (`config_inflight_micros` with a callable, loaded with `--load-plugin`)
    for each index of the scope, with the same sizes as the affine map; it
    is evaluated when the spec is scheduled.

    ```mlir
    // 1F1B's warm-up: actor a holds at most pp - a micro-batches.
    flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
    flexpipe.inflight @image per_stage [4, 3, 2, 1]
    flexpipe.inflight global 8
    flexpipe.inflight per_stage rule("twice_the_stages_after")
    ```
  }];
  let arguments = (ins
    OptionalAttr<FlatSymbolRefAttr>:$module,
    FlexPipe_InflightScopeAttr:$scope,
    AnyAttrOf<[I64Attr, DenseI64ArrayAttr, AffineMapAttr, StrAttr]>:$limit
  );
  let assemblyFormat = [{
    ($module^)? custom<EnumKeyword>($scope) custom<InflightLimit>($limit)
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
  let extraClassDeclaration = [{
    /// The limit for each index of the scope (one entry for `global`), given
    /// the scope's sizes. Returns failure (with a diagnostic at the op) when
    /// the limit does not fit the scope or some limit is below 1.
    llvm::FailureOr<llvm::SmallVector<int64_t>>
    evaluate(int64_t numActors, int64_t numStages, int64_t numMicrobatches);
  }];
}

def FlexPipe_OptimizeOp : FlexPipe_Op<"optimize", [HasParent<"PipelineOp">]> {
  let summary = "the bubble optimizations to apply to this pipeline's schedule";
  let description = [{
    Asks `-flexpipe-spec-to-schedule` (and `flexpipe-compile`) to run bubble
    optimizations on the schedule computed from this spec:
    - `split_backward`: every backward becomes an input gradient (`igrad`)
      and a weight gradient (`wgrad`) right after it
      (`-flexpipe-split-backward`);
    - `gradient_separation`: additionally moves weight gradients into later
      bubbles with the stash-and-insert algorithm, never exceeding
      `memory_bound` (peak activation memory per actor in the simulator's
      units, a number: bytes with a model; without, the report's
      stage-micro-batches under the step time model or M_B under the cost
      one (docs/CostModel.md); `4` and `4.0` are the same; when omitted, the peak
      of the order it separates with every weight gradient right after its
      input gradient: each actor's static plus activation memory stays
      within the largest such sum over actors. Under `--time-model=cost`
      with a model and a cluster the scheduler picks between its greedy and
      step-model orders by their separated times, so that order, and its
      peak, may differ from the one picked without separation) and trying
      at most `max_rounds` stash-and-insert rounds (the pass's
      option, 2000 by default, when omitted)
      (`-flexpipe-gradient-separation`, which implies `split_backward`;
      programs with asynchronous collectives or registered `exec`
      instructions are refused at this op: not supported yet);
    - `async_comm`: receives are posted early and waited on right before
      use (`-flexpipe-async-comm`).
    The clauses may come in any order. At most one per pipeline. The
    schedule made from the pipeline carries the request as its
    `flexpipe.optimize` attribute (a dictionary of the same names), checked
    by the same rules, which the passes read in place of their options
    (`requested-only=true`). flexpipe-compile applies a request when it
    schedules the spec; a schedule handed to it with a request its program
    does not show (no `igrad`, no separation figures, a blocking receive)
    is compiled as written, with a warning that says how to apply it.

    ```mlir
    // ZB-H1: 1F1B whose weight gradients fill the bubbles.
    flexpipe.pipeline @zb_h1 actors(4) microbatches(8) {
      flexpipe.module @gpt layers(8) placement(one_to_one)
      flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
      flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
      flexpipe.optimize gradient_separation
    }
    ```
  }];
  let arguments = (ins UnitAttr:$split_backward,
                       UnitAttr:$gradient_separation,
                       UnitAttr:$async_comm,
                       OptionalAttr<F64Attr>:$memory_bound,
                       OptionalAttr<I64Attr>:$max_rounds);
  // The clauses in any order, each at most once; printed in this order:
  // `split_backward`, `gradient_separation`, `async_comm`,
  // `memory_bound(N)`, `max_rounds(N)`.
  let assemblyFormat = [{
    `` custom<Optimizations>($split_backward, $gradient_separation, $async_comm,
                          $memory_bound, $max_rounds) `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Schedule level
//===----------------------------------------------------------------------===//

def FlexPipe_ScheduleOp : FlexPipe_Op<"schedule", [
    Symbol, IsolatedFromAbove, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "per-actor instruction programs";
  let description = [{
    The schedule level's root: `actors` devices, `stages` global stages and
    `microbatches` micro-batches, and one `flexpipe.actor` region for every
    actor (ids 0 to actors - 1, each once) holding that actor's program in
    execution order.

    `edges [a -> b, ...]` is the stage DAG (forward direction); without it the
    stages form the chain 0 -> 1 -> ... -> stages - 1. `shared [...]` lists
    stages that run on several actors (each its own part). `stage_info [...]`
    says what each stage holds (module, layers, first/last), for the cost
    model and the runtime; schedules from `-flexpipe-schedule` carry it.
    Without it, `flexpipe-compile --model` reads a chain of stages as the
    model's one module split evenly over them.

    The verifier checks what can be checked per op and per schedule: ids in
    range, each (instruction, stage, micro-batch) at most once (per actor for
    shared stages), a non-shared stage's computations on one actor only, `bwd`
    not mixed with `igrad`/`wgrad` for the same stage and micro-batch, peers
    in range, collectives naming their own actor, every token waited once.
    Dependency order and deadlock freedom are checked by
    `-flexpipe-verify-schedule`.

    ```mlir
    flexpipe.schedule @tiny actors(1) stages(1) microbatches(2) {
      flexpipe.actor 0 {
        flexpipe.fwd stage 0 mb 0
        flexpipe.fwd stage 0 mb 1
        flexpipe.bwd stage 0 mb 0
        flexpipe.bwd stage 0 mb 1
      }
    }
    ```
  }];
  let arguments = (ins FlexPipe_SymbolName:$sym_name, I64Attr:$actors,
                       I64Attr:$stages, I64Attr:$microbatches,
                       OptionalAttr<DenseI64ArrayAttr>:$edges,
                       OptionalAttr<DenseI64ArrayAttr>:$shared,
                       OptionalAttr<TypedArrayAttrBase<FlexPipe_StageInfoAttr,
                           "one stage_info per stage">>:$stage_info);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `actors` `(` $actors `)` `stages` `(` $stages `)`
    `microbatches` `(` $microbatches `)`
    (`edges` custom<Edges>($edges)^)? (`shared` $shared^)?
    (`stage_info` $stage_info^)?
    `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()", "/*withKeyword=*/true") $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The stage DAG's edges as (from, to) pairs (the default chain when the
    /// `edges` attribute is absent).
    llvm::SmallVector<std::pair<int64_t, int64_t>> getEdgeList();
  }];
}

def FlexPipe_ActorOp : FlexPipe_Op<"actor", [
    HasParent<"ScheduleOp">, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "one actor's program";
  let description = [{
    The ordered instructions actor `id` executes in one iteration.

    ```mlir
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.bwd stage 0 mb 0
    }
    ```
  }];
  let arguments = (ins I64Attr:$id);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{$id `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()", "/*withKeyword=*/true") $body}];
}

// `kind`: the op's sched::OpKind (Program.h), the one table from ops to
// the in-memory program's kinds (InstructionOpInterface::getOpKind).
class FlexPipe_InstOp<string mnemonic, string kind, list<Trait> traits = []>
    : FlexPipe_Op<mnemonic, !listconcat(traits, [HasParent<"ActorOp">])> {
  let extraClassDeclaration = [{
    static constexpr ::flexpipe::sched::OpKind kOpKind =
        ::flexpipe::sched::OpKind::}] # kind # [{;
  }];
}

class FlexPipe_ComputeOp<string mnemonic, string kind, string what>
    : FlexPipe_InstOp<mnemonic, kind, [
        DeclareOpInterfaceMethods<FlexPipe_InstructionOpInterface>]> {
  let summary = what # " of one micro-batch on one stage";
  let arguments = (ins I64Attr:$stage, I64Attr:$mb);
  let assemblyFormat = [{`stage` $stage `mb` $mb `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")}];
}

def FlexPipe_FwdOp : FlexPipe_ComputeOp<"fwd", "Fwd", "forward pass"> {
  let description = [{
    Forward pass (FwdPass) of micro-batch `mb` through stage `stage`; keeps
    the activations the backward needs.

    ```mlir
    flexpipe.fwd stage 0 mb 3
    ```
  }];
}
def FlexPipe_BwdOp : FlexPipe_ComputeOp<"bwd", "Bwd", "full backward pass"> {
  let description = [{
    Backward pass (BwdPass): input and weight gradients together; frees the
    micro-batch's activations of this stage.

    ```mlir
    flexpipe.bwd stage 0 mb 3
    ```
  }];
}
def FlexPipe_IgradOp : FlexPipe_ComputeOp<"igrad", "Igrad", "input-gradient pass"> {
  let description = [{
    Backward for inputs only (CompInputGrad): produces the gradient sent to
    the previous stage; the activations the weight gradient needs stay alive.

    ```mlir
    flexpipe.igrad stage 0 mb 3
    ```
  }];
}
def FlexPipe_WgradOp : FlexPipe_ComputeOp<"wgrad", "Wgrad", "weight-gradient pass"> {
  let description = [{
    Backward for weights only (CompWeightGrad): accumulates this stage's
    weight gradients and frees the micro-batch's activations. Runs after the
    matching `igrad`.

    ```mlir
    flexpipe.wgrad stage 0 mb 3
    ```
  }];
}

class FlexPipe_P2POp<string mnemonic, string kind, string dir>
    : FlexPipe_InstOp<mnemonic, kind, [DeclareOpInterfaceMethods<
        FlexPipe_InstructionOpInterface, ["getPeerActor"]>]> {
  let arguments = (ins I64Attr:$stage, I64Attr:$mb, I64Attr:$peer);
  let results = (outs Optional<FlexPipe_TokenType>:$token);
  let assemblyFormat = "`stage` $stage `mb` $mb `" # dir #
                       "` $peer `` custom<OwnAttrDict>(attr-dict, \"getAttributeNames()\") (`:` type($token)^)?";
  let hasVerifier = 1;
  // One definition for the four point-to-point ops (verifyP2P is in
  // FlexPipeOps.cpp, before the generated classes).
  let extraClassDefinition = [{
    int64_t $cppClass::getPeerActor() {
      return static_cast<int64_t>(getPeer());
    }
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyP2P(*this, getPeerActor(), getToken());
    }
  }];
}

def FlexPipe_SendActOp : FlexPipe_P2POp<"send_act", "SendAct", "to"> {
  let summary = "send an activation to another actor";
  let description = [{
    Sends the output of stage `stage` (on this actor) for micro-batch `mb` to
    actor `peer`. The send is posted and the actor goes on; the message is
    delivered once `peer` posts the matching receive, and the iteration ends
    when every send has been delivered. With a `!flexpipe.token` result, a
    `flexpipe.wait` on it blocks until the message is delivered.

    ```mlir
    flexpipe.send_act stage 0 mb 3 to 1
    %t = flexpipe.send_act stage 0 mb 4 to 1 : !flexpipe.token
    ```
  }];
}
def FlexPipe_RecvActOp : FlexPipe_P2POp<"recv_act", "RecvAct", "from"> {
  let summary = "receive an activation from another actor";
  let description = [{
    Receives the input of stage `stage` (on this actor) for micro-batch `mb`
    from actor `peer`.

    ```mlir
    flexpipe.recv_act stage 1 mb 3 from 0
    ```
  }];
}
def FlexPipe_SendGradOp : FlexPipe_P2POp<"send_grad", "SendGrad", "to"> {
  let summary = "send an input gradient to another actor";
  let description = [{
    Sends the gradient with respect to the input of stage `stage` (on this
    actor) for micro-batch `mb` to actor `peer`.

    ```mlir
    flexpipe.send_grad stage 1 mb 3 to 0
    ```
  }];
}
def FlexPipe_RecvGradOp : FlexPipe_P2POp<"recv_grad", "RecvGrad", "from"> {
  let summary = "receive an output gradient from another actor";
  let description = [{
    Receives the gradient with respect to the output of stage `stage` (on
    this actor) for micro-batch `mb` from actor `peer`.

    ```mlir
    flexpipe.recv_grad stage 0 mb 3 from 1
    ```
  }];
}

class FlexPipe_CollectiveOp<string mnemonic, string kind, dag extraArgs,
                            string extraFormat>
    : FlexPipe_InstOp<mnemonic, kind, [DeclareOpInterfaceMethods<
        FlexPipe_InstructionOpInterface>]> {
  let arguments = !con((ins I64Attr:$stage, I64Attr:$mb,
                            DenseI64ArrayAttr:$group), extraArgs);
  let results = (outs Optional<FlexPipe_TokenType>:$token);
  let assemblyFormat = "`stage` $stage `mb` $mb `group` $group " #
                       extraFormat # " `` custom<OwnAttrDict>(attr-dict, \"getAttributeNames()\") (`:` type($token)^)?";
  let hasVerifier = 1;
}

def FlexPipe_AllGatherOp
    : FlexPipe_CollectiveOp<"all_gather", "AllGather", (ins), ""> {
  let summary = "all-gather synchronisation (SyncWithAllGather)";
  let description = [{
    Every actor of `group` contributes its state for the synchronisation
    point (`stage`, `mb`) and receives everyone's (for example the output
    states of two towers before a contrastive loss). All members name the same
    stage and micro-batch, which identify the instance; the op blocks until
    every member has reached it. The group lists at least two distinct actors
    in ascending order (the order the runtime gathers the members' parts
    in), this one included.

    ```mlir
    flexpipe.all_gather stage 8 mb 0 group [3, 7]
    ```
  }];
}
def FlexPipe_GatherOp
    : FlexPipe_CollectiveOp<"gather", "Gather", (ins I64Attr:$root),
                            "`root` $root"> {
  let summary = "gather synchronisation (SyncWithGather)";
  let description = [{
    Like `all_gather`, but only `root` (a member of the group) receives.

    ```mlir
    flexpipe.gather stage 8 mb 0 group [3, 7] root 3
    ```
  }];
}

def FlexPipe_ExecOp : FlexPipe_InstOp<"exec", "Exec", [DeclareOpInterfaceMethods<
    FlexPipe_InstructionOpInterface>]> {
  let summary = "run a registered instruction";
  let description = [{
    One instance of the registered `kind(compute)` instruction `@instruction`
    on stage `stage`; `mb` is the first micro-batch the instance covers (the
    micro-batch itself unless the instruction groups several with `prev`).
    `attrs {...}` are the instruction's runtime attributes, copied from its
    `flexpipe.instruction` by the scheduler for the runtime operation.
    Optionally asynchronous. Every actor of a model stage runs its own
    instances, on the outputs it computed: `-flexpipe-verify-schedule`
    refuses an exec of such a stage on an actor that does not compute it
    (a registered stage holds no layers: any actor).

    ```mlir
    flexpipe.exec @normalize stage 3 mb 0
    flexpipe.exec @log_norms stage 3 mb 1 attrs {file = "norms.txt"}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$instruction, I64Attr:$stage,
                       I64Attr:$mb, OptionalAttr<DictionaryAttr>:$attrs);
  let results = (outs Optional<FlexPipe_TokenType>:$token);
  let assemblyFormat = [{
    $instruction `stage` $stage `mb` $mb (`attrs` $attrs^)? `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")
    (`:` type($token)^)?
  }];
  let hasVerifier = 1;
}

def FlexPipe_WaitOp : FlexPipe_InstOp<"wait", "Wait"> {
  let summary = "complete an asynchronous communication";
  let description = [{
    Blocks until the transfer that produced `token` is complete. A receive's
    data may be used only after its wait. A send is complete when its message
    is delivered, which needs the receiver to have posted the receive: waiting
    for a send before posting a receive that the peer is waiting for
    deadlocks (`-flexpipe-verify-schedule` reports it).

    ```mlir
    %t = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    flexpipe.wait %t
    flexpipe.fwd stage 1 mb 0
    ```
  }];
  let arguments = (ins FlexPipe_TokenType:$token);
  let assemblyFormat = [{$token `` custom<OwnAttrDict>(attr-dict, "getAttributeNames()")}];
}

#endif // FLEXPIPE_OPS
