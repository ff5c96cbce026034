// RUN: flexpipe-opt %s -split-input-file -flexpipe-schedule -verify-diagnostics

// Tests priorities and limits that can make no progress: every actor's
// in-flight budget fills with forwards of its first stage.
// expected-error @+4 {{'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 6 with 15 of 72 computations scheduled; the priorities and in-flight limits admit no further step}}
// expected-note @+3 {{actor 0 has 18 computations left: fwd stage 3 mb 0 (actor 0) is ready but the actor's in-flight limit 6 is reached}}
// expected-note @+2 {{actor 1 has 19 computations left: fwd stage 1 mb 5 (actor 1) is ready but the actor's in-flight limit 5 is reached}}
// expected-note @+1 {{actor 2 has 20 computations left: fwd stage 2 mb 4 (actor 2) is ready but the actor's in-flight limit 4 is reached}}
flexpipe.pipeline @starved actors(3) microbatches(6) {
  flexpipe.module @gpt layers(6) placement(circular)
  flexpipe.priority cttp<fwd_first>
  flexpipe.inflight per_actor [6, 5, 4]
}

// -----

// Tests an extra dependency that contradicts the stage DAG: stage 0's forward
// waits for stage 1's backward, which needs stage 0's forward.
flexpipe.pipeline @contradiction actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.dependency' op the dependency closes a cycle with the stage graph, so none of its computations can ever run: fwd stage 0 mb 0 (actor 0) -> fwd stage 1 mb 0 (actor 1) -> bwd stage 1 mb 0 (actor 1) -> fwd stage 0 mb 0 (actor 0)}}
  flexpipe.dependency bwd @gpt[1] -> fwd @gpt[0]
}

// -----

// A built-in instruction on a registered stage: it holds no layers.
flexpipe.pipeline @registered actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op runs fwd on registered stage @sync, which holds no layers and so no computations; built-in instructions need a module stage}}
  flexpipe.dependency fwd @sync -> @ag @sync
}

// -----

// Two registered instructions connected to each other.
flexpipe.pipeline @registered actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @a kind(all_gather) on(@sync)
  flexpipe.instruction @b kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op connects two registered instructions; the scheduler orders a registered instruction against computations (its sources and dependents), so connect each to a computation}}
  flexpipe.dependency @a @sync -> @b @sync
}

// -----

// next(k) asks for an instance that prev(k) does not make: at the
// instruction.
flexpipe.pipeline @registered actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  // expected-error @+1 {{'flexpipe.instruction' op registered instruction @ag has 1 instances (prev 2), but next 1 makes micro-batch 1 of stage 1 wait for instance 1}}
  flexpipe.instruction @ag kind(all_gather) on(@sync) prev(2)
  flexpipe.dependency fwd @gpt[-1] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @gpt[-1]
}

// -----

// Plugin hooks that no loaded plugin registers.
flexpipe.pipeline @plugins actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error-re @+1 {{'flexpipe.check' op uses check "nowhere", which no loaded plugin registers; load the plugin that defines it with --load-plugin{{.*}}}}
  flexpipe.check "nowhere"
}

// -----

flexpipe.pipeline @plugins actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error-re @+1 {{'flexpipe.priority' op uses priority "nowhere", which no loaded plugin registers{{.*}}}}
  flexpipe.priority custom("nowhere")
}

// -----

flexpipe.pipeline @plugins actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  // expected-error-re @+1 {{'flexpipe.inflight' op uses in-flight rule "nowhere", which no loaded plugin registers; load it with --load-plugin{{.*}}}}
  flexpipe.inflight per_stage rule("nowhere")
}

// -----

// A count past 64 bits at this size does not evaluate (m * 2^61 is within
// the parser's budget, 2^62, but 5 * 2^61 is not).
flexpipe.pipeline @overflow actors(3) microbatches(5) {
  flexpipe.module @gpt layers(6) placement(circular) chunks(2)
  // expected-error @+1 {{'flexpipe.priority' op gives a forward unit `m * 2305843009213693952`, which does not evaluate (a division by zero, or past 64 bits) at pp = 3, s = 6, m = 5; it must be at least 1 there}}
  flexpipe.priority cttp<interleaved, m * 2305843009213693952, 1> fstp<breadth_first> bstp<breadth_first>
}

// -----

// Two holds at once: stage 0's in-flight limit stops its next forward, and
// the depth-first interval keeps actor 0 at stage 0, so the ready forward
// of stage 2 waits too. Both are said.
// expected-error @+3 {{'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 2 with 2 of 32 computations scheduled; the priorities and in-flight limits admit no further step}}
// expected-note @+2 {{actor 0 has 15 computations left: fwd stage 0 mb 1 (actor 0) is ready but stage 0's in-flight limit 1 is reached; and its forward traversal (interval 2) waits at stage 0 while fwd stage 2 mb 0 (actor 0) is ready}}
// expected-note @+1 {{actor 1 has 15 computations left: bwd stage 1 mb 0 (actor 1) waits for bwd stage 2 mb 0 (actor 0), which is not scheduled}}
flexpipe.pipeline @interval_and_limit actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(circular) chunks(2)
  flexpipe.priority cttp<fwd_first> fstp<depth_first, 2> bstp<breadth_first>
  flexpipe.inflight per_stage [1, 4, 4, 4]
}


// -----

// Tests a grouping instruction that an in-flight limit starves: actor 2's
// backward waits for @probe's first instance (micro-batches 0 and 1), whose
// second forward the limit holds back; the note names the instance (it
// said only that the limit was reached).
// expected-error @+4 {{'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 9}}
// expected-note @+3 {{actor 0 has 19 computations left: fwd stage 0 mb 5 (actor 0) is ready but the actor's in-flight limit 9 is reached}}
// expected-note @+2 {{actor 1 has 21 computations left: fwd stage 1 mb 4 (actor 1) and fwd stage 4 mb 3 (actor 1) are ready but the actor's in-flight limit 7 is reached}}
// expected-note @+1 {{actor 2 has 23 computations and 4 registered instructions left: fwd stage 5 mb 1 (actor 2) is ready but the actor's in-flight limit 5 is reached; bwd stage 5 mb 0 (actor 2) waits for @probe (micro-batch 0), whose sources may be what the limit holds back}}
flexpipe.pipeline @grouped_starved actors(3) microbatches(7) {
  flexpipe.module @gpt layers(6) placement(circular) chunks(2)
  flexpipe.priority cttp<interleaved> fstp<breadth_first, round> bstp<depth_first, round>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m, round] -> ((s floordiv pp - 1) * round + pp * 2 - a * 2 - 1)>
  flexpipe.instruction @probe kind(compute) on(@gpt[-1]) prev(2) next(2)
  flexpipe.dependency fwd @gpt[-1] -> @probe @gpt[-1]
  flexpipe.dependency @probe @gpt[-1] -> bwd @gpt[-1]
}
