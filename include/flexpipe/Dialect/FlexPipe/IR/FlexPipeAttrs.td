//===- FlexPipeAttrs.td - FlexPipe enums, attributes, types -*- tablegen -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_ATTRS
#define FLEXPIPE_ATTRS

include "flexpipe/Dialect/FlexPipe/IR/FlexPipeDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def FlexPipe_PlacementKind : I32EnumAttr<"PlacementKind",
    "how a module's stages sit on its actors", [
  // Stage i on actor i: one stage per actor (GPipe, 1F1B).
  I32EnumAttrCase<"OneToOne", 0, "one_to_one">,
  // Stage i on actor i mod n, `chunks` rounds (interleaved 1F1B, looped BFS).
  I32EnumAttrCase<"Circular", 1, "circular">,
  // Chunks alternate direction: down, back up, ... (V-shape, waves).
  I32EnumAttrCase<"VShape", 2, "vshape">,
  // A user-given stage -> actor map (`map [...]`).
  I32EnumAttrCase<"Explicit", 3, "explicit">,
]> {
  let cppNamespace = "::flexpipe";
  let genSpecializedAttr = 0;
}
def FlexPipe_PlacementKindAttr
    : EnumAttr<FlexPipe_Dialect, FlexPipe_PlacementKind, "placement_kind"> {
  let assemblyFormat = "$value";
}

def FlexPipe_CttpKind : I32EnumAttr<"CttpKind",
    "computation-type traversal priority", [
  // Backward reorder queue first, forward when it is empty (1F1B family).
  I32EnumAttrCase<"BwdFirst", 0, "bwd_first">,
  // Forward reorder queue first, backward when it is empty (GPipe family).
  I32EnumAttrCase<"FwdFirst", 1, "fwd_first">,
  // Alternate: `fwd_unit` forwards, then `bwd_unit` backwards, and so on.
  I32EnumAttrCase<"Interleaved", 2, "interleaved">,
]> {
  let cppNamespace = "::flexpipe";
  let genSpecializedAttr = 0;
}
def FlexPipe_CttpKindAttr
    : EnumAttr<FlexPipe_Dialect, FlexPipe_CttpKind, "cttp_kind"> {
  let assemblyFormat = "$value";
}

def FlexPipe_StageOrder : I32EnumAttr<"StageOrder",
    "stage traversal direction", [
  // Earlier stages (front layers) first.
  I32EnumAttrCase<"BreadthFirst", 0, "breadth_first">,
  // Later stages (back layers) first.
  I32EnumAttrCase<"DepthFirst", 1, "depth_first">,
]> {
  let cppNamespace = "::flexpipe";
  let genSpecializedAttr = 0;
}
def FlexPipe_StageOrderAttr
    : EnumAttr<FlexPipe_Dialect, FlexPipe_StageOrder, "stage_order"> {
  let assemblyFormat = "$value";
}

def FlexPipe_InflightScope : I32EnumAttr<"InflightScope",
    "what an in-flight limit counts", [
  // Micro-batches between their first forward and their last backward.
  I32EnumAttrCase<"Global", 0, "global">,
  // Per stage: forwards of that stage not yet matched by their backward.
  I32EnumAttrCase<"PerStage", 1, "per_stage">,
  // Per actor: forwards on that actor not yet matched by their backward.
  I32EnumAttrCase<"PerActor", 2, "per_actor">,
]> {
  let cppNamespace = "::flexpipe";
  let genSpecializedAttr = 0;
}
def FlexPipe_InflightScopeAttr
    : EnumAttr<FlexPipe_Dialect, FlexPipe_InflightScope, "inflight_scope"> {
  let assemblyFormat = "$value";
}

def FlexPipe_RegisteredKind : I32EnumAttr<"RegisteredKind",
    "what a registered instruction does at run time", [
  // A computation bound to a user operation.
  I32EnumAttrCase<"Compute", 0, "compute">,
  // An all-gather among the actors of its stage (SyncWithAllGather).
  I32EnumAttrCase<"AllGather", 1, "all_gather">,
  // A gather to the first actor of its stage (SyncWithGather).
  I32EnumAttrCase<"Gather", 2, "gather">,
]> {
  let cppNamespace = "::flexpipe";
  let genSpecializedAttr = 0;
}
def FlexPipe_RegisteredKindAttr
    : EnumAttr<FlexPipe_Dialect, FlexPipe_RegisteredKind, "registered_kind"> {
  let assemblyFormat = "$value";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class FlexPipe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<FlexPipe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def FlexPipe_ModelConfigAttr : FlexPipe_Attr<"ModelConfig", "model"> {
  let summary = "transformer configuration of a module";
  let description = [{
    The size of one module's transformer layers, which `--balance cost`
    (`-flexpipe-partition{balance=cost}`) splits the module's layers by when
    no model file names the module. Only the partition reads it: the
    simulation prices stages, and the rank executables size their model,
    from a model file (`--model`), and without one they use unit costs and
    the runtime's default GPT sizes (hidden 64, 4 heads, 32 tokens,
    vocabulary 256). `hidden` must be a multiple of `heads`; each size is
    between 1 and 16,777,216 (2^24, the runtime's bound, shared with the
    model file's reader).

    ```mlir
    flexpipe.module @gpt layers(32) placement(one_to_one)
        model<hidden = 4096, heads = 32, seq = 2048, vocab = 1048576>
    ```
  }];
  let parameters = (ins "int64_t":$hidden, "int64_t":$heads, "int64_t":$seq,
                        "int64_t":$vocab);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def FlexPipe_CttpAttr : FlexPipe_Attr<"Cttp", "cttp"> {
  let summary = "computation-type traversal priority with scheduling units";
  let description = [{
    Which reorder queue an actor reads first: `bwd_first`, `fwd_first` or
    `interleaved`, with the scheduling units `fwd_unit` and `bwd_unit` (how
    many forward / backward items are taken at a time; 1 when omitted).

    A unit is a count: an integer or an expression of the pipeline's size
    over the symbols `pp` (actors), `s` (the modules' stages; registered `flexpipe.stage`s do not count), `m` (micro-batches) and
    `round` (micro-batches per round: m split into the most rounds whose last
    still holds pp; pp when pp divides m)
    with `+`, `-`, `*`, `floordiv`, `ceildiv`, `mod` and parentheses. It is
    evaluated when the spec is scheduled and must then be at least 1. As for
    in-flight maps, the product of its constants (each counted as at least
    2) and of 2 for each use of a name may not exceed 2^62 (MLIR folds the
    constants as it builds the expression, in wrapping arithmetic).

    ```mlir
    flexpipe.priority cttp<bwd_first>
    flexpipe.priority cttp<interleaved, 2, 1>
    flexpipe.priority cttp<interleaved, pp, pp>
    ```
  }];
  let parameters = (ins EnumParameter<FlexPipe_CttpKind>:$kind,
                        OptionalParameter<"::mlir::AffineMap">:$fwdUnit,
                        OptionalParameter<"::mlir::AffineMap">:$bwdUnit);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def FlexPipe_StpAttr : FlexPipe_Attr<"Stp", "stp"> {
  let summary = "stage traversal priority with an optional interval";
  let description = [{
    In which direction an actor walks a reorder queue that holds items of
    several stages: `breadth_first` (front stages first) or `depth_first` (back
    stages first). With an `interval` k, items of the current stage are taken k
    times in a row before the walk moves on to the next stage; without one the
    first schedulable item in the direction is taken.

    The interval is a count: an integer or an expression of the pipeline's
    size over the symbols `pp` (actors), `s` (the modules' stages; registered `flexpipe.stage`s do not count), `m` (micro-batches)
    and `round` (micro-batches per round: m split into the most rounds whose
    last still holds pp; pp when pp divides m, m when m < 2 pp) with `+`, `-`, `*`, `floordiv`, `ceildiv`,
    `mod` and parentheses, so that one spec serves every size (interleaved
    1F1B takes a round of micro-batches per chunk at a time). It is
    evaluated when the spec is scheduled and must then be at least 1; its
    constants and names have the budget a unit has.

    ```mlir
    flexpipe.priority fstp<breadth_first, 4> bstp<depth_first>
    flexpipe.priority fstp<breadth_first, round> bstp<depth_first, round>
    ```
  }];
  let parameters = (ins EnumParameter<FlexPipe_StageOrder>:$order,
                        OptionalParameter<"::mlir::AffineMap">:$interval);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def FlexPipe_StageInfoAttr : FlexPipe_Attr<"StageInfo", "stage_info"> {
  let summary = "what a stage of a schedule holds";
  let description = [{
    The module a stage belongs to, its number of transformer layers, and
    whether it holds the module's first layers (`first`: with the token
    embedding when the model has a vocabulary) and/or its last (`last`: the
    final norm, LM head and loss). The cost model prices a stage from this;
    `-flexpipe-schedule` writes one per stage.

    ```mlir
    #flexpipe.stage_info<"gpt", 16, first>
    ```
  }];
  let parameters = (ins "::mlir::StringAttr":$module, "int64_t":$layers,
                        "bool":$first, "bool":$last);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def FlexPipe_TokenType : TypeDef<FlexPipe_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "handle of an asynchronous communication";
  let description = [{
    Returned by a communication instruction that runs asynchronously; a
    `flexpipe.wait` on it completes the transfer. Every token is waited exactly
    once, in the same actor.

    ```mlir
    %t = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    flexpipe.wait %t
    ```

    It takes no parameters: `!flexpipe.token<...>` is an error.
  }];
  // The generated parser stopped after the mnemonic, and what followed in
  // `<...>` was dropped without a word.
  let hasCustomAssemblyFormat = 1;
}

#endif // FLEXPIPE_ATTRS
