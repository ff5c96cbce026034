// RUN: flexpipe-opt %s -split-input-file -verify-diagnostics

// Tests a pipeline without actors.
// expected-error @+1 {{'flexpipe.pipeline' op needs at least one actor, got 0}}
flexpipe.pipeline @p actors(0) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// -----

// Tests a count that is not an integer (MLIR's own message would be
// "expected non-function type").
// expected-error @+1 {{expected the number of actors, an integer}}
flexpipe.pipeline @p actors((4)) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// -----

flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{expected the number of layers, an integer}}
  flexpipe.module @gpt layers(eight) placement(one_to_one)
}

// -----

// Tests a pipeline without micro-batches (m < 1).
// expected-error @+1 {{'flexpipe.pipeline' op needs at least one micro-batch, got 0}}
flexpipe.pipeline @p actors(4) microbatches(0) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// -----

// Tests a pipeline with more micro-batches than the tools handle.
// expected-error @+1 {{'flexpipe.pipeline' op has 9999999999 micro-batches; FlexPipe handles at most 1048576}}
flexpipe.pipeline @p actors(4) microbatches(9999999999) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// -----

// Tests a module with more chunks than the tools handle.
flexpipe.pipeline @p actors(2) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op has 100000 chunks; FlexPipe handles at most 4096}}
  flexpipe.module @gpt layers(8) placement(circular) chunks(100000)
}

// -----

// Tests a schedule with more actors than the tools handle.
// expected-error @+1 {{'flexpipe.schedule' op has 100000 actors; FlexPipe handles at most 65536}}
flexpipe.schedule @s actors(100000) stages(1) microbatches(1) {
}

// -----

// Tests a pipeline without modules.
// expected-error @+1 {{'flexpipe.pipeline' op declares no flexpipe.module; a pipeline needs at least one module to place on its actors}}
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.priority cttp<bwd_first>
}

// -----

// Tests an actor left without stages.
// expected-error @+1 {{'flexpipe.pipeline' op leaves actor 2 without any stage; every actor of the mesh must hold at least one (check the modules' actor groups, chunks and maps, or lower actors())}}
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) actors [0, 1, 3]
}

// -----

// Tests a module without layers.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op needs at least one layer, got 0}}
  flexpipe.module @gpt layers(0) placement(one_to_one)
}

// -----

// Tests an actor group naming an actor outside the mesh.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op the actor group names actor 4, but the mesh has actors 0 to 3}}
  flexpipe.module @gpt layers(8) placement(one_to_one) actors [0, 1, 2, 4]
}

// -----

// Tests an actor group listing an actor twice.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op the actor group lists actor 1 twice}}
  flexpipe.module @gpt layers(8) placement(one_to_one) actors [0, 1, 1, 2]
}

// -----

// Tests an explicit placement without a map.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op placement(explicit) needs `map [...]` giving the actor of each stage}}
  flexpipe.module @gpt layers(8) placement(explicit)
}

// -----

// Tests a map with a built-in placement.
flexpipe.pipeline @p actors(2) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op `map` is only valid with placement(explicit), not placement(circular)}}
  flexpipe.module @gpt layers(8) placement(circular) map [0, 1]
}

// -----

// Tests one_to_one with several chunks.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op one_to_one places exactly one stage per actor but chunks is 2; use circular or vshape for several stages per actor}}
  flexpipe.module @gpt layers(8) placement(one_to_one) chunks(2)
}

// -----

// Tests zero chunks.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op chunks must be at least 1, got 0}}
  flexpipe.module @gpt layers(8) placement(circular) chunks(0)
}

// -----

// Tests an explicit map that leaves the module's actor group.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op the stage map puts stage 2 on actor 3, which is not in the module's actor group}}
  flexpipe.module @gpt layers(8) placement(explicit) map [0, 1, 3] actors [0, 1, 2]
}

// -----

// Tests a bidirectional explicit map that leaves an actor of the group to
// the mirrored direction alone (it mirrored onto actors 4, 3, 2, 1).
flexpipe.pipeline @p actors(5) microbatches(4) {
  // expected-error @+1 {{'flexpipe.module' op the stage map leaves actor 4 of the module's group without a stage; a bidirectional module's mirrored direction runs over the same actors as the first, so its map must use each of them}}
  flexpipe.module @gpt layers(8) placement(explicit) map [0, 1, 2, 3] bidirectional
}

// -----

// Tests a partition with the wrong number of stages.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op partition lists 3 stages, but the placement makes 8 stages per direction; give one layer count per stage}}
  flexpipe.module @gpt layers(8) placement(circular) partition [2, 3, 3]
}

// -----

// Tests a partition that does not add up to the layers.
flexpipe.pipeline @p actors(2) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op partition sums to 7 layers, but the module has 8}}
  flexpipe.module @gpt layers(8) placement(one_to_one) partition [3, 4]
}

// -----

// Tests a negative layer count.
flexpipe.pipeline @p actors(2) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op partition gives stage 0 a negative layer count (-1)}}
  flexpipe.module @gpt layers(8) placement(one_to_one) partition [-1, 9]
}

// -----

// Tests a stage with more layers than the module, which would also let
// counts near 2^63 wrap the sum around to the module's layers.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op partition gives stage 0 9223372036854775807 layers, but the module has 8}}
  flexpipe.module @gpt layers(8) placement(one_to_one) partition [9223372036854775807, 9223372036854775807, 5, 5]
}

// -----

// Tests an even split with fewer layers than stages.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op cannot split 6 layers over 8 stages with at least one layer each; add layers, use fewer stages, or give `partition [...]`}}
  flexpipe.module @gpt layers(6) placement(vshape)
}

// -----

// Tests a vocabulary-parallel module on one actor.
flexpipe.pipeline @p actors(1) microbatches(8) {
  // expected-error @+1 {{'flexpipe.module' op is vocab_parallel, which splits the token embedding and LM head over its actors and needs at least 2, but it has 1}}
  flexpipe.module @gpt layers(8) placement(one_to_one) vocab_parallel
}

// -----

// Tests a bidirectional pipeline with a single micro-batch.
flexpipe.pipeline @p actors(4) microbatches(1) {
  // expected-error @+1 {{'flexpipe.module' op is bidirectional, which splits micro-batches between two directions and needs at least 2, but the pipeline has 1}}
  flexpipe.module @gpt layers(8) placement(one_to_one) bidirectional
}

// -----

// Tests an unknown placement.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{unknown keyword 'ring'; expected one of: one_to_one, circular, vshape, explicit}}
  flexpipe.module @gpt layers(8) placement(ring)
}

// -----

// Tests a model whose hidden size is not a multiple of its heads.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{model hidden 100 is not a multiple of heads 3}}
  flexpipe.module @gpt layers(8) placement(one_to_one) model<hidden = 100, heads = 3, seq = 16, vocab = 64>
}

// -----

// Tests a model with a non-positive size.
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{model vocab must be between 1 and 16777216, got 0}}
  flexpipe.module @gpt layers(8) placement(one_to_one) model<hidden = 64, heads = 4, seq = 16, vocab = 0>
}

// -----

// Tests a model size beyond any the runtime can build (2^63 - 1).
flexpipe.pipeline @p actors(4) microbatches(8) {
  // expected-error @+1 {{model hidden must be between 1 and 16777216, got 9223372036854775807}}
  flexpipe.module @gpt layers(8) placement(one_to_one) model<hidden = 9223372036854775807, heads = 1, seq = 16, vocab = 64>
}

// -----

// Tests an unknown computation-type traversal priority.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{unknown computation-type traversal priority 'backward_first'; expected bwd_first, fwd_first or interleaved}}
  flexpipe.priority cttp<backward_first>
}

// -----

// Tests an unknown stage traversal priority.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{unknown stage traversal priority 'bfs'; expected breadth_first or depth_first}}
  flexpipe.priority fstp<bfs>
}

// -----

// Tests a zero stage traversal interval.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(circular)
  // expected-error @+1 {{a stage traversal interval must be at least 1, got 0; omit it to take the first item}}
  flexpipe.priority fstp<breadth_first, 0>
}

// -----

// Tests a count MLIR would fold in wrapping arithmetic as it is built
// ((m * 2^62) * 4 became m * 0, and the interval 3): refused at the constant
// that passes the budget in-flight maps have.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  // expected-error @+1 {{at '4611686018427387904' this count's constants and names multiply past 2^62}}
  flexpipe.priority fstp<breadth_first, m * 4611686018427387904 * 4 + 3>
}

// -----

// Tests a hex constant in a count: named as written.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  // expected-error @+1 {{at '0x4000000000000000' this count's constants and names multiply past 2^62}}
  flexpipe.priority fstp<breadth_first, m * 0x4000000000000000 * 4 + 3>
}

// -----

// Tests a count whose names make the coefficient ((pp + pp + pp + pp) is
// pp * 4): each use of a name counts.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  // expected-error @+1 {{at 'pp' this count's constants and names multiply past 2^62}}
  flexpipe.priority cttp<interleaved, 4611686018427387904 * (pp + pp + pp + pp) + 2, 1>
}

// -----

// Tests a zero scheduling unit.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{scheduling units must be at least 1, got 0}}
  flexpipe.priority cttp<interleaved, 0, 1>
}

// -----

// Tests a priority op that sets nothing.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.priority' op sets no priority; give at least one of cttp<...>, fstp<...>, bstp<...> or custom("name")}}
  flexpipe.priority @gpt
}

// -----

// Tests a priority for an unknown module.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.priority' op refers to @vit, which is not a flexpipe.module of this pipeline}}
  flexpipe.priority @vit cttp<bwd_first>
}

// -----

// Tests a priority field set twice for the same scope.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-note @+1 {{first set here}}
  flexpipe.priority actors [1, 2] cttp<bwd_first>
  // expected-error @+1 {{'flexpipe.priority' op sets cttp again for actor 2; set each priority once per scope (use `actors [...]` to override single actors)}}
  flexpipe.priority actors [2] cttp<fwd_first>
}

// -----

// Tests a per-actor priority for an actor before the first, counting from
// the last.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.priority' op a per-actor priority names actor -5, but the mesh has actors 0 to 3 (-1 to -4 counting from the last)}}
  flexpipe.priority actors [-5] cttp<fwd_first>
}

// -----

// Tests a per-actor priority that names one actor twice, once from the end.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.priority' op a per-actor priority lists actor 3 (as -1) twice}}
  flexpipe.priority actors [3, -1] cttp<fwd_first>
}

// -----

// Tests two per-actor priorities for one actor, one counting from the end.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-note @+1 {{first set here}}
  flexpipe.priority actors [3] cttp<bwd_first>
  // expected-error @+1 {{'flexpipe.priority' op sets cttp again for actor 3}}
  flexpipe.priority actors [-1] cttp<fwd_first>
}

// -----

// Tests a per-actor priority for an actor outside the module, counting from
// the last.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @a layers(8) placement(one_to_one) actors [0, 1]
  flexpipe.module @b layers(8) placement(one_to_one) actors [2, 3]
  // expected-error @+1 {{'flexpipe.priority' op overrides actor 3, which is not one of module @a's actors}}
  flexpipe.priority @a actors [-1] cttp<fwd_first>
}

// -----

// Tests a per-actor priority for an actor outside the module.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @a layers(8) placement(one_to_one) actors [0, 1]
  flexpipe.module @b layers(8) placement(one_to_one) actors [2, 3]
  // expected-error @+1 {{'flexpipe.priority' op overrides actor 2, which is not one of module @a's actors}}
  flexpipe.priority @a actors [2] cttp<fwd_first>
}

// -----

// Tests an in-flight limit of 0.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.inflight' op gives actor 0 an in-flight limit of 0; every limit must be at least 1 (1 runs one micro-batch at a time)}}
  flexpipe.inflight per_actor 0
}

// -----

// Tests an in-flight rule that starves the last actor.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.inflight' op gives actor 3 an in-flight limit of 0; every limit must be at least 1 (1 runs one micro-batch at a time)}}
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a - 1)>
}

// -----

// Tests a per-stage list of the wrong length.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(circular)
  // expected-error @+1 {{'flexpipe.inflight' op lists 4 limits, but the scope has 8 stages; give one per stage}}
  flexpipe.inflight per_stage [4, 3, 2, 1]
}

// -----

// Tests a global limit given as a list.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.inflight' op gives a global limit as a list; a global limit is one number (or an affine map without dimensions)}}
  flexpipe.inflight global [4, 3]
}

// -----

// Tests an in-flight affine map of the wrong shape.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.inflight' op expects an affine map of the form (i)[pp, s, m] -> (limit) (1 dimension, 3 symbols, 1 result; a fourth symbol, round, is optional), got affine_map<(d0) -> (d0 + 1)>}}
  flexpipe.inflight per_actor affine_map<(a) -> (a + 1)>
}

// -----

// Tests two limits for the same scope.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-note @+1 {{first limit here}}
  flexpipe.inflight per_stage 4
  // expected-error @+1 {{'flexpipe.inflight' op repeats a per_stage limit for the same scope; keep one of the two}}
  flexpipe.inflight per_stage [4, 3, 2, 1]
}

// -----

// Tests a shared stage that leaves out its home actor.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.share' op must include actor 3, where the placement puts stage 3}}
  flexpipe.share @gpt stage -1 actors [0, 1]
}

// -----

// Tests a shared stage with a single actor.
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.share' op a shared stage must list at least 2 actors, but lists 1}}
  flexpipe.share @gpt stage 0 actors [0]
}

// -----

// Tests a stage shared twice (stage -3 of 3 is stage 0): the schedule has
// one actor list per stage.
flexpipe.pipeline @p actors(3) microbatches(4) {
  flexpipe.module @gpt layers(6) placement(one_to_one)
  // expected-note @+1 {{first shared here}}
  flexpipe.share @gpt stage 0 actors [0, 1]
  // expected-error @+1 {{'flexpipe.share' op shares stage 0 of module @gpt again; give each stage one flexpipe.share}}
  flexpipe.share @gpt stage -3 actors [0, 2]
}

// -----

// Tests a registered instruction with a reserved name.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op cannot take the name @fwd, which is reserved for the built-in instruction; choose another name}}
  flexpipe.instruction @fwd kind(compute) on(@gpt[0])
}

// -----

// Tests a registered instruction with prev(0).
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op prev must be between 1 and 1048576 (the most micro-batches a pipeline has), got 0}}
  flexpipe.instruction @scale kind(compute) on(@gpt[0]) prev(0)
}

// -----

// Tests a registered instruction with next(2^32), which the scheduler's
// 32-bit micro-batch arithmetic divided by zero.
flexpipe.pipeline @p actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op next must be between 1 and 1048576 (the most micro-batches a pipeline has), got 4294967296}}
  flexpipe.instruction @n kind(compute) on(@gpt[-1]) next(4294967296)
  flexpipe.dependency fwd @gpt[-1] -> @n @gpt[-1]
}

// -----

// Tests a collective attached to a module stage on one actor.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op is a kind(gather) instruction, which synchronises several actors; attach it to a registered flexpipe.stage that lists at least two}}
  flexpipe.instruction @g kind(gather) on(@gpt[1])
}

// -----

// Tests a module stage named without an index.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op its stage @gpt is a module; name one of its stages as @gpt[i]}}
  flexpipe.instruction @scale kind(compute) on(@gpt)
}

// -----

// Tests a dependency on a stage index out of range.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.dependency' op the destination stage @gpt[5] is out of range: the module has 2 stages (indices -2 to 1)}}
  flexpipe.dependency fwd @gpt[0] -> bwd @gpt[5]
}

// -----

// Tests a dependency on an unregistered instruction.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.dependency' op the source instruction @sync is neither a built-in type (fwd, bwd, igrad, wgrad) nor a registered flexpipe.instruction}}
  flexpipe.dependency @sync @gpt[0] -> bwd @gpt[1]
}

// -----

// Tests an unknown built-in instruction keyword.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{unknown instruction type 'forward'; expected fwd, bwd, igrad, wgrad or a registered @instruction}}
  flexpipe.dependency forward @gpt[0] -> bwd @gpt[1]
}

// -----

// Tests a registered instruction named with the wrong stage.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op the destination instruction @ag is attached to stage @sync; name that stage here}}
  flexpipe.dependency fwd @gpt[-1] -> @ag @gpt[0]
}

// -----

// Tests a dependency of an instruction on itself.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.dependency' op makes an instruction depend on itself, which can never be satisfied}}
  flexpipe.dependency fwd @gpt[1] -> fwd @gpt[-1]
}

// -----

// Tests a cycle in extra dependencies.
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-note @+1 {{part of the cycle}}
  flexpipe.dependency fwd @gpt[0] -> wgrad @gpt[1]
  // expected-note @+1 {{part of the cycle}}
  flexpipe.dependency wgrad @gpt[1] -> igrad @gpt[0]
  // expected-error @+1 {{'flexpipe.dependency' op closes a cycle of extra dependencies, so none of its instructions can ever be scheduled; remove one of them}}
  flexpipe.dependency igrad @gpt[0] -> fwd @gpt[0]
}

// -----

// Tests a schedule whose actor id is out of range.
flexpipe.schedule @s actors(1) stages(1) microbatches(1) {
  // expected-error @+1 {{'flexpipe.actor' op has id 1, but the schedule has actors 0 to 0}}
  flexpipe.actor 1 {
  }
}

// -----

// Tests a schedule with two programs for one actor.
flexpipe.schedule @s actors(2) stages(1) microbatches(1) {
  // expected-note @+1 {{first program of actor 0}}
  flexpipe.actor 0 {
  }
  // expected-error @+1 {{'flexpipe.actor' op repeats actor 0; each actor has one program}}
  flexpipe.actor 0 {
  }
}

// -----

// Tests a schedule missing an actor's program.
// expected-error @+1 {{'flexpipe.schedule' op has no program for actor 1; give every actor a flexpipe.actor region (an idle actor's may be empty)}}
flexpipe.schedule @s actors(2) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
  }
}

// -----

// Tests an instruction on a stage out of range.
flexpipe.schedule @s actors(1) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.fwd' op works on stage 2, but the schedule has stages 0 to 1}}
    flexpipe.fwd stage 2 mb 0
  }
}

// -----

// Tests an instruction on a micro-batch out of range.
flexpipe.schedule @s actors(1) stages(1) microbatches(4) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.bwd' op works on micro-batch 4, but the schedule has micro-batches 0 to 3}}
    flexpipe.bwd stage 0 mb 4
  }
}

// -----

// Tests an instruction that runs twice.
flexpipe.schedule @s actors(1) stages(1) microbatches(2) {
  flexpipe.actor 0 {
    // expected-note @+1 {{first occurrence}}
    flexpipe.fwd stage 0 mb 1
    // expected-error @+1 {{'flexpipe.fwd' op repeats stage 0 micro-batch 1; each instruction runs once per stage and micro-batch}}
    flexpipe.fwd stage 0 mb 1
  }
}

// -----

// Tests a transfer that runs twice: of two repeats, the one repeated first
// in program order is reported.
flexpipe.schedule @s actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    // expected-note @+1 {{first occurrence}}
    flexpipe.send_act stage 0 mb 1 to 1
    // expected-error @+1 {{'flexpipe.send_act' op repeats stage 0 micro-batch 1 on the same actor and peer}}
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.send_act stage 0 mb 0 to 1
  }
  flexpipe.actor 1 {
  }
}

// -----

// Tests a non-shared stage computed on two actors.
flexpipe.schedule @s actors(2) stages(1) microbatches(2) {
  flexpipe.actor 0 {
    // expected-note @+1 {{stage 0 runs here}}
    flexpipe.fwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{'flexpipe.fwd' op runs stage 0 on actor 1, but actor 0 already runs it; a stage lives on one actor unless the schedule lists it in `shared [...]`}}
    flexpipe.fwd stage 0 mb 1
  }
}

// -----

// Tests a backward that runs both whole and split.
flexpipe.schedule @s actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-note @+1 {{full backward here}}
    flexpipe.bwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.igrad' op splits the backward of stage 0 micro-batch 0, which also runs as a full flexpipe.bwd; use either bwd or igrad + wgrad}}
    flexpipe.igrad stage 0 mb 0
    flexpipe.wgrad stage 0 mb 0
  }
}

// -----

// Tests an input gradient without its weight gradient.
flexpipe.schedule @s actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.igrad' op has no matching flexpipe.wgrad for stage 0 micro-batch 0; a split backward needs both halves}}
    flexpipe.igrad stage 0 mb 0
  }
}

// -----

// Tests a transfer to the sending actor itself.
flexpipe.schedule @s actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.send_act' op names its own actor 0 as the peer; same-actor edges need no communication}}
    flexpipe.send_act stage 0 mb 0 to 0
  }
  flexpipe.actor 1 {
  }
}

// -----

// Tests a transfer to an actor outside the schedule.
flexpipe.schedule @s actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{'flexpipe.recv_grad' op names peer actor 7, but the schedule has actors 0 to 1}}
    flexpipe.recv_grad stage 1 mb 0 from 7
  }
}

// -----

// Tests an asynchronous transfer that is never waited.
flexpipe.schedule @s actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.send_grad' op returns a token that is never waited; add a flexpipe.wait on it before the data is used (or drop the result to make the transfer blocking)}}
    %t = flexpipe.send_grad stage 0 mb 0 to 1 : !flexpipe.token
  }
  flexpipe.actor 1 {
  }
}

// -----

// Tests an asynchronous transfer waited twice.
flexpipe.schedule @s actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{'flexpipe.recv_act' op returns a token that is waited 2 times; wait on it exactly once}}
    %t = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    flexpipe.wait %t
    flexpipe.wait %t
  }
}

// -----

// Tests a collective whose group is out of order (only the lowering
// refused it).
flexpipe.schedule @s actors(3) stages(3) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.all_gather' op lists its group out of order; list the actors in ascending order, the order the runtime gathers their parts in}}
    flexpipe.all_gather stage 0 mb 0 group [2, 0]
  }
  flexpipe.actor 1 {
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests a collective whose group leaves out its own actor.
flexpipe.schedule @s actors(3) stages(3) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.all_gather' op runs on actor 0, which is not in its group; list it}}
    flexpipe.all_gather stage 0 mb 0 group [1, 2]
  }
  flexpipe.actor 1 {
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests a gather whose root is not in the group.
flexpipe.schedule @s actors(3) stages(3) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.gather' op gathers to root 2, which is not in its group}}
    flexpipe.gather stage 0 mb 0 group [0, 1] root 2
  }
  flexpipe.actor 1 {
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests an edge given twice (a stage waited for the same input twice; the
// run stopped).
// expected-error @+1 {{'flexpipe.schedule' op has the edge 0 -> 1 twice; give each edge once}}
flexpipe.schedule @s actors(1) stages(2) microbatches(1) edges [0 -> 1, 0 -> 1] {
  flexpipe.actor 0 {
  }
}

// -----

// Tests a cycle in the stage DAG.
// expected-error @+1 {{'flexpipe.schedule' op has a cycle in its stage edges; the stage graph must be a DAG}}
flexpipe.schedule @s actors(1) stages(3) microbatches(1) edges [0 -> 1, 1 -> 2, 2 -> 1] {
  flexpipe.actor 0 {
  }
}

// -----

// Tests a stage edge outside the stages.
// expected-error @+1 {{'flexpipe.schedule' op has an edge 0 -> 3 outside the stages 0 to 2}}
flexpipe.schedule @s actors(1) stages(3) microbatches(1) edges [0 -> 3] {
  flexpipe.actor 0 {
  }
}

// -----

// Tests an odd number of edge endpoints (only writable in generic form).
// expected-error @+1 {{'flexpipe.schedule' op has an odd number of edge endpoints; edges are (from, to) pairs}}
"flexpipe.schedule"() <{actors = 1 : i64, stages = 2 : i64, microbatches = 1 : i64, edges = array<i64: 0, 1, 1>, sym_name = "s"}> ({
  "flexpipe.actor"() <{id = 0 : i64}> ({
  }) : () -> ()
}) : () -> ()

// -----

// Tests a shared stage id out of range.
// expected-error @+1 {{'flexpipe.schedule' op marks stage 5 shared, but the schedule has stages 0 to 1}}
flexpipe.schedule @s actors(1) stages(2) microbatches(1) shared [5] {
  flexpipe.actor 0 {
  }
}

// -----

// Tests a foreign op inside an actor program.
flexpipe.schedule @s actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'emitc.verbatim' op cannot appear in a flexpipe.actor, which holds only flexpipe instructions}}
    emitc.verbatim "x"
  }
}

// -----

// Tests an instruction outside any actor program.
// expected-error @+1 {{'flexpipe.fwd' op expects parent op 'flexpipe.actor'}}
flexpipe.fwd stage 0 mb 0

// -----

// Tests a spec op outside a pipeline.
// expected-error @+1 {{'flexpipe.module' op expects parent op 'flexpipe.pipeline'}}
flexpipe.module @gpt layers(8) placement(one_to_one)

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op names no optimization; expected split_backward, gradient_separation or async_comm}}
  flexpipe.optimize
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op has a memory_bound but no gradient_separation, the only optimization it bounds}}
  flexpipe.optimize split_backward memory_bound(4.0)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op has max_rounds but no gradient_separation, the only optimization that has rounds}}
  flexpipe.optimize split_backward max_rounds(10)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op max_rounds must not be negative, not -1}}
  flexpipe.optimize gradient_separation max_rounds(-1)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op memory_bound must be a positive, finite number (omit it for the schedule's own peak), not -1}}
  flexpipe.optimize gradient_separation memory_bound(-1.0)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{expected a number, not true}}
  flexpipe.optimize gradient_separation memory_bound(true)
}

// -----

// An exponent without a decimal point is two tokens to MLIR ("expected ')'"
// said nothing of it).
flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{write the bound 2e3 with a decimal point (2.0e3): MLIR reads 2e3 as 2 and more}}
  flexpipe.optimize gradient_separation memory_bound(2e3)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{write the bound 4e-1 with a decimal point (4.0e-1): MLIR reads 4e-1 as 4 and more}}
  flexpipe.optimize gradient_separation memory_bound(4e-1)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'async_comm' appears twice}}
  flexpipe.optimize async_comm split_backward async_comm
}

// -----

// The optional clauses of module, instruction and priority come in any
// order, each once; a second one is pointed at.
flexpipe.pipeline @p actors(2) microbatches(2) {
  // expected-error @+1 {{'chunks' appears twice}}
  flexpipe.module @gpt layers(4) placement(circular) chunks(2) actors [0, 1] chunks(2)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  // expected-error @+1 {{'prev' appears twice}}
  flexpipe.instruction @g kind(all_gather) on(@sync) prev(2) async prev(2)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'cttp' appears twice}}
  flexpipe.priority fstp<breadth_first> cttp<bwd_first> cttp<fwd_first>
}

// -----

// A misspelled clause is named as one (MLIR read it as an unknown op).
flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{unknown clause 'gradient_seperation'; expected one of: split_backward, gradient_separation, async_comm, memory_bound, max_rounds}}
  flexpipe.optimize gradient_seperation
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  // expected-error @+1 {{unknown clause 'vocab_paralel'}}
  flexpipe.module @gpt layers(2) placement(one_to_one) vocab_paralel
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{unknown clause 'ctp'; expected one of: cttp, fstp, bstp, custom}}
  flexpipe.priority ctp<bwd_first>
}

// -----

// A word of the op in the wrong place is named as one.
flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'actors' comes before the clauses (cttp, fstp, bstp, custom)}}
  flexpipe.priority cttp<bwd_first> actors [0]
}

// -----

// Infinity (as MLIR writes it) is no bound: refused, and the message says
// why (it read "must be a positive number, not INF", and INF is positive).
flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.optimize' op memory_bound must be a positive, finite number (omit it for the schedule's own peak), not INF}}
  flexpipe.optimize gradient_separation memory_bound(0x7FF0000000000000)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.optimize split_backward
  // expected-error @+1 {{'flexpipe.optimize' op repeats flexpipe.optimize; a pipeline has at most one}}
  flexpipe.optimize async_comm
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.priority' op combines custom("mine") with cttp, fstp or bstp; a custom priority replaces the step function those configure, so give it alone}}
  flexpipe.priority cttp<bwd_first> custom("mine")
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.instruction' op is a kind(compute) instruction, which each actor runs on its own; only all_gather and gather can be async}}
  flexpipe.instruction @work kind(compute) on(@gpt[-1]) async
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{expected an in-flight limit: an integer, a list [a, b, ...], an affine_map<...> or rule("name")}}
  flexpipe.inflight per_stage "oops"
}

// -----

// Tests a stage with more layers than a module may have (the runtime's
// description truncated 2^62 to 0 blocks).
// expected-error @+1 {{a stage cannot hold 4611686018427387904 layers; at most 1048576}}
flexpipe.schedule @huge_stage actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 4611686018427387904, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests a global limit that cannot be evaluated (named no actor: a global
// limit has none).
flexpipe.pipeline @global_div0 actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{cannot evaluate affine_map<()[s0, s1, s2] -> (s2 floordiv 0)> for the scope (a division by zero, or past 64 bits)}}
  flexpipe.inflight global affine_map<()[pp, s, m] -> (m floordiv 0)>
}

// -----

// Tests constants that MLIR would fold in wrapping arithmetic while parsing
// the map ((2^62 + 1) * 4 became 4, and the limit pp * 4 - 15 = 1): refused
// at the constant, before the fold hides it.
flexpipe.pipeline @wrapped_constant actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{at '4611686018427387905' this in-flight affine map's constants and names multiply past 2^62}}
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp * 4611686018427387905 * 4 - 15)>
}

// -----

// Tests a coefficient MLIR makes of repeated names ((pp + pp + pp + pp) is
// pp * 4, and pp * 4 * 2^62 wrapped to 0): each use of a name counts.
flexpipe.pipeline @wrapped_sum actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{at '4611686018427387904' this in-flight affine map's constants and names multiply past 2^62}}
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> ((pp + pp + pp + pp) * 4611686018427387904 + pp)>
}

// -----

// Tests a hex constant (read as its value, not as the digit 0).
flexpipe.pipeline @wrapped_hex actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{at '0x4000000000000001' this in-flight affine map's constants and names multiply past 2^62}}
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp * 0x4000000000000001 * 4 - 15)>
}

// -----

// Tests an alias: its constants were folded before they could be checked.
#lim = affine_map<(a)[pp, s, m] -> (pp - a)>
flexpipe.pipeline @aliased actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{write an in-flight affine map inline, as affine_map<...>}}
  flexpipe.inflight per_actor #lim
}

// -----

// Tests constants each within bounds whose product is not (the digits of the
// names d0, s0, pp2 are no constants).
flexpipe.pipeline @wrapped_product actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  // expected-error @+1 {{at '1000000' this in-flight affine map's constants and names multiply past 2^62}}
  flexpipe.inflight per_actor affine_map<(d0)[pp2, s, m] -> ((pp2 - d0) * 1000000 * 1000000 * 1000000 floordiv 1000)>
}

// -----

// Tests a module that lists an input twice (the schedule got the edge
// 1 -> 2 twice).
flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @a layers(1) placement(one_to_one) actors [0]
  // expected-error @+1 {{'flexpipe.module' op takes input from @a twice; list each module once}}
  flexpipe.module @b layers(1) placement(one_to_one) actors [1] inputs [@a, @a]
}

// -----

// An exec with an empty instruction name printed as
// @<<INVALID EMPTY SYMBOL>>, which does not parse back.
flexpipe.schedule @s actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{'flexpipe.exec' op names no instruction (an empty symbol)}}
    "flexpipe.exec"() <{instruction = @"", mb = 0 : i64, stage = 0 : i64}> : () -> ()
  }
}

// -----

// An empty name parses, but prints as nothing that reads back.
// expected-error @+1 {{attribute 'sym_name' failed to satisfy constraint: a symbol name that is not empty}}
flexpipe.pipeline @"" actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{a symbol name that is not empty}}
  flexpipe.stage @"" actors [0, 1]
}

// -----

// A schedule's flexpipe.optimize (its spec's request, which the passes read
// in place of their options) follows the spec op's rules: a NaN bound
// switched the bound off, unchecked.
// expected-error @+1 {{'flexpipe.schedule' op memory_bound must be a positive, finite number (omit it for the schedule's own peak), not nan}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) attributes {flexpipe.optimize = {gradient_separation, memory_bound = 0x7FF8000000000000 : f64}} {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// expected-error @+1 {{'flexpipe.schedule' op max_rounds must not be negative, not -7}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) attributes {flexpipe.optimize = {gradient_separation, max_rounds = -7 : i64}} {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// expected-error @+1 {{'flexpipe.schedule' op has flexpipe.optimize with 'memory_bound = 4 : i64'; it holds split_backward, gradient_separation and async_comm (unit), memory_bound (an f64) and max_rounds (an i64)}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) attributes {flexpipe.optimize = {gradient_separation, memory_bound = 4 : i64}} {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// max_rounds is the i64 the passes read: an i128 was truncated (2^64 + 5
// ran 5 rounds), and a ui8 is not signless for getInt().
// expected-error @+1 {{has flexpipe.optimize with 'max_rounds = 18446744073709551621 : i128'}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) attributes {flexpipe.optimize = {gradient_separation, max_rounds = 18446744073709551621 : i128}} {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// expected-error @+1 {{has flexpipe.optimize with 'memory_bound = 2.000000e+00 : f16'}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) attributes {flexpipe.optimize = {gradient_separation, memory_bound = 2.0 : f16}} {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests an attribute dictionary that names an op's own attribute: MLIR set
// it over the value written (this pipeline had 4 actors, 8 micro-batches).
// expected-error @+1 {{'actors' is reserved in an attribute dictionary: it names an attribute of a FlexPipe op, which MLIR would set over what the op's syntax says}}
flexpipe.pipeline @p actors(1) microbatches(1) attributes {flexpipe.note = "kept", actors = 4} {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// -----

// Tests the same for an op without a region (the schedule used micro-batch
// 1).
flexpipe.schedule @s actors(1) stages(1) microbatches(2) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
  flexpipe.actor 0 {
    // expected-error @+1 {{'mb' is reserved in an attribute dictionary}}
    flexpipe.fwd stage 0 mb 0 {mb = 1}
  }
}


// -----

// MLIR's integer parser takes `true` and `false` as -1 and 0: an index,
// count, limit, edge or layer count written so was read as those (`@gpt[true]`
// named the last stage, `pp + true + 2` was pp + 1). Each is refused at the
// keyword.
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  // expected-error @+1 {{expected an integer, not 'true'}}
  flexpipe.instruction @norm kind(compute) on(@gpt[true])
}

// -----

flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  // expected-error @+1 {{expected an integer, not 'true'}}
  flexpipe.priority cttp<bwd_first> fstp<breadth_first, pp + true + 2> bstp<breadth_first>
}

// -----

// expected-error @+1 {{expected an integer, not 'true'}}
flexpipe.pipeline @p actors(true) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
}

// -----

flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  // expected-error @+1 {{expected an integer, not 'false'}}
  flexpipe.inflight per_actor [1, false]
}

// -----

// expected-error @+1 {{expected an integer, not 'false'}}
flexpipe.schedule @s actors(1) stages(2) microbatches(1) edges [false -> 1] {
  flexpipe.actor 0 {
  }
}

// -----

// expected-error @+1 {{expected an integer, not 'false'}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", false, first, last>] {
  flexpipe.actor 0 {
  }
}

// -----

// A '>' in a comment inside an in-flight map ended the scan of its
// constants: the wrapping product after it vanished (the limit read pp - a).
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a // a > b
  // expected-error @+1 {{at '4611686018427387904' this in-flight affine map's constants and names multiply past 2^62}}
   + (pp + pp + pp + pp) * 4611686018427387904)>
}

// -----

// The token type has no parameters; `<...>` after it was dropped silently.
flexpipe.schedule @s actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{!flexpipe.token takes no parameters}}
    %t = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token<7, "junk">
    flexpipe.wait %t
  }
}

// -----

// An in-flight map from the generic form (or bytecode) is held to the
// custom parser's bound on its constants: it verified, and printed as text
// that was refused when read back.
"flexpipe.pipeline"() <{actors = 2 : i64, microbatches = 2 : i64, sym_name = "p"}> ({
  "flexpipe.module"() <{layers = 2 : i64, placement = #flexpipe<placement_kind one_to_one>, sym_name = "gpt"}> : () -> ()
  // expected-error @+1 {{has an in-flight affine map whose constants and names multiply past 2^62: its custom form could not be read back}}
  "flexpipe.inflight"() <{limit = affine_map<(d0)[s0, s1, s2] -> (d0 floordiv 4611686018427387905 + 1)>, scope = #flexpipe<inflight_scope per_actor>}> : () -> ()
}) : () -> ()

// -----

// A repeated stage_info flag was taken once without a word.
// expected-error @+1 {{'first' is given twice}}
flexpipe.schedule @s actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, first, last>] {
  flexpipe.actor 0 {
  }
}

// -----

// An empty rule name was refused only when the spec was scheduled.
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  // expected-error @+1 {{names an empty in-flight rule; rule("NAME") names a plugin's rule}}
  flexpipe.inflight per_actor rule("")
}
