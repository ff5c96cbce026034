// RUN: flexpipe-opt %s | flexpipe-opt | FileCheck %s
// RUN: flexpipe-opt %s --mlir-print-op-generic | flexpipe-opt | FileCheck %s
// With locations: the clause lists end at `loc(...)` (read as a
// misspelled clause, it failed).
// RUN: flexpipe-opt %s --mlir-print-debuginfo | flexpipe-opt | FileCheck %s
// Printing is a fixed point: what it prints reads back to the same IR.
// RUN: flexpipe-opt %s > %t.once && flexpipe-opt %t.once > %t.twice && diff %t.once %t.twice

// Round trip of every op and attribute of both levels, in the custom and in
// the generic form.

// CHECK-LABEL: flexpipe.pipeline @spec actors(8) microbatches(16) {
flexpipe.pipeline @spec actors(8) microbatches(16) {
  // CHECK-NEXT: flexpipe.module @image layers(24) placement(circular) chunks(2) actors [0, 1, 2, 3] model<hidden = 1024, heads = 16, seq = 256, vocab = 1000>
  flexpipe.module @image layers(24) placement(circular) chunks(2) actors [0, 1, 2, 3]
      model<hidden = 1024, heads = 16, seq = 256, vocab = 1000>
  // CHECK-NEXT: flexpipe.module @text layers(6) placement(explicit) map [4, 5, 5] actors [4, 5] partition [1, 2, 3]
  flexpipe.module @text layers(6) placement(explicit) map [4, 5, 5] actors [4, 5] partition [1, 2, 3]
  // CHECK-NEXT: flexpipe.module @wave layers(8) placement(vshape) bidirectional actors [6, 7]
  flexpipe.module @wave layers(8) placement(vshape) bidirectional actors [6, 7]
  // CHECK-NEXT: flexpipe.share @image stage 0 actors [0, 1, 2, 3]
  flexpipe.share @image stage 0 actors [0, 1, 2, 3]
  // CHECK-NEXT: flexpipe.stage @sync actors [3, 5]
  flexpipe.stage @sync actors [3, 5]
  // CHECK-NEXT: flexpipe.instruction @sync_gather kind(all_gather) on(@sync) prev(2) next(2) attrs {ranks = [3, 5]}
  flexpipe.instruction @sync_gather kind(all_gather) on(@sync) prev(2) next(2) unit(1) attrs {ranks = [3, 5]}
  // CHECK-NEXT: flexpipe.instruction @gather_logits kind(gather) on(@sync) unit(2)
  flexpipe.instruction @gather_logits kind(gather) on(@sync) unit(2)
  // CHECK-NEXT: flexpipe.instruction @scale kind(compute) on(@text[-1])
  flexpipe.instruction @scale kind(compute) on(@text[-1])
  // CHECK-NEXT: flexpipe.dependency fwd @image[-1] -> @sync_gather @sync
  flexpipe.dependency fwd @image[-1] -> @sync_gather @sync
  // CHECK-NEXT: flexpipe.dependency @sync_gather @sync -> bwd @text[2]
  flexpipe.dependency @sync_gather @sync -> bwd @text[2]
  // CHECK-NEXT: flexpipe.dependency igrad @wave[3] -> wgrad @wave[0]
  flexpipe.dependency igrad @wave[3] -> wgrad @wave[0]
  // CHECK-NEXT: flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  // CHECK-NEXT: flexpipe.priority @image cttp<interleaved> fstp<breadth_first, 4> bstp<depth_first, 4>
  flexpipe.priority @image cttp<interleaved, 1, 1> fstp<breadth_first, 4> bstp<depth_first, 4>
  // Counts may be expressions of pp, s and m; they print back as written
  // (products with the constant last).
  // CHECK-NEXT: flexpipe.priority @image actors [1] cttp<interleaved, pp, (m - 1) floordiv 2> fstp<breadth_first, pp * 2 - 1> bstp<depth_first, s ceildiv pp + m mod 3>
  flexpipe.priority @image actors [1] cttp<interleaved, pp, (m - 1) floordiv 2> fstp<breadth_first, 2 * pp - 1> bstp<depth_first, s ceildiv pp + m mod 3>
  // CHECK-NEXT: flexpipe.priority @text actors [5] cttp<fwd_first, 2, 1>
  flexpipe.priority @text actors [5] cttp<fwd_first, 2, 1>
  // A sum on the right of a sum keeps its parentheses: printed without, it
  // read back as another tree (pp - s * 2 + m), and every round trip
  // changed the IR (the fixed-point RUN line above).
  // CHECK-NEXT: flexpipe.priority @text actors [4] fstp<breadth_first, pp + (s * (-2) + m)>
  flexpipe.priority @text actors [4] fstp<breadth_first, pp + (s * (-2) + m)>
  // An actor counted from the last (-3: actor 5 of 8) prints as written.
  // CHECK-NEXT: flexpipe.priority @text actors [-3] bstp<depth_first>
  flexpipe.priority @text actors [-3] bstp<depth_first>
  // A space before the '<' and a comment inside, with a '>' and a long
  // number in it, read as MLIR reads them (the space was refused as an
  // alias; the '>' ended the scan of the constants).
  // CHECK-NEXT: flexpipe.inflight per_actor affine_map<(d0)[s0, s1, s2] -> (-d0 + s0 + s0)>
  flexpipe.inflight per_actor affine_map <(a)[pp, s, m] -> (pp - a // a > 123456789012345678901234567890
    + pp)>
  // CHECK-NEXT: flexpipe.inflight @image per_stage [8, 7, 6, 5, 4, 3, 2, 1]
  flexpipe.inflight @image per_stage [8, 7, 6, 5, 4, 3, 2, 1]
  // CHECK-NEXT: flexpipe.inflight @text global affine_map<()[s0, s1, s2] -> (s2 floordiv 2)>
  flexpipe.inflight @text global affine_map<()[pp, s, m] -> (m floordiv 2)>
  // CHECK-NEXT: flexpipe.inflight global 12
  flexpipe.inflight global 12
  // CHECK-NEXT: }
}

// CHECK-LABEL: flexpipe.schedule @program actors(2) stages(3) microbatches(2) edges [0 -> 1, 0 -> 2] shared [2] {
flexpipe.schedule @program actors(2) stages(3) microbatches(2) edges [0 -> 1, 0 -> 2] shared [2] {
  // CHECK-NEXT: flexpipe.actor 0 {
  flexpipe.actor 0 {
    // A name that is another op's attribute (flexpipe.check's `name`) is
    // this op's discardable attribute: each op reserves its own names only
    // (every FlexPipe op's were reserved, and the generic form's discardable
    // `id` on a pipeline printed as text that did not read back).
    // CHECK-NEXT: flexpipe.fwd stage 0 mb 0 {name = "warmup"}
    flexpipe.fwd stage 0 mb 0 {name = "warmup"}
    // CHECK-NEXT: %[[S:.*]] = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token
    %s = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token
    // CHECK-NEXT: flexpipe.wait %[[S]]
    flexpipe.wait %s
    // CHECK-NEXT: flexpipe.fwd stage 2 mb 0
    flexpipe.fwd stage 2 mb 0
    // CHECK-NEXT: flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    // CHECK-NEXT: %[[G:.*]] = flexpipe.gather stage 2 mb 0 group [0, 1] root 0 : !flexpipe.token
    %g = flexpipe.gather stage 2 mb 0 group [0, 1] root 0 : !flexpipe.token
    // CHECK-NEXT: flexpipe.wait %[[G]]
    flexpipe.wait %g
    // CHECK-NEXT: flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    // CHECK-NEXT: flexpipe.igrad stage 0 mb 0
    flexpipe.igrad stage 0 mb 0
    // CHECK-NEXT: flexpipe.wgrad stage 0 mb 0
    flexpipe.wgrad stage 0 mb 0
    // CHECK-NEXT: flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
    // CHECK-NEXT: }
  }
  // CHECK-NEXT: flexpipe.actor 1 {
  flexpipe.actor 1 {
    // CHECK-NEXT: %[[R:.*]] = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    %r = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    // CHECK-NEXT: flexpipe.fwd stage 2 mb 0
    flexpipe.fwd stage 2 mb 0
    // CHECK-NEXT: flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    // CHECK-NEXT: flexpipe.gather stage 2 mb 0 group [0, 1] root 0
    flexpipe.gather stage 2 mb 0 group [0, 1] root 0
    // CHECK-NEXT: flexpipe.wait %[[R]]
    flexpipe.wait %r
    // CHECK-NEXT: flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 1 mb 0
    // CHECK-NEXT: flexpipe.exec @scale stage 1 mb 0
    flexpipe.exec @scale stage 1 mb 0
    // CHECK-NEXT: %[[E:.*]] = flexpipe.exec @sync_gather stage 1 mb 1 : !flexpipe.token
    %e = flexpipe.exec @sync_gather stage 1 mb 1 : !flexpipe.token
    // CHECK-NEXT: flexpipe.wait %[[E]]
    flexpipe.wait %e
    // CHECK-NEXT: flexpipe.bwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    // CHECK-NEXT: flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
    // CHECK-NEXT: flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.send_grad stage 1 mb 0 to 0
    // CHECK-NEXT: }
  }
}

// An actor with nothing to do has an empty program.
// CHECK-LABEL: flexpipe.schedule @idle actors(2) stages(1) microbatches(1) {
// CHECK-NEXT: flexpipe.actor 0 {
// CHECK-NEXT: flexpipe.fwd stage 0 mb 0
// CHECK-NEXT: flexpipe.bwd stage 0 mb 0
// CHECK-NEXT: }
// CHECK-NEXT: flexpipe.actor 1 {
// CHECK-NEXT: }
flexpipe.schedule @idle actors(2) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
  }
}

// CHECK-LABEL: flexpipe.pipeline @zero_bubble
// CHECK:         flexpipe.optimize gradient_separation async_comm memory_bound(4.500000e+00)
flexpipe.pipeline @zero_bubble actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.optimize gradient_separation async_comm memory_bound(4.5)
}

// A bound may be written as an integer, and a double printed in hexadecimal
// (MLIR's spelling when no decimal one gives it back) reads back as itself.
// CHECK-LABEL: flexpipe.pipeline @integer_bound
// CHECK:         flexpipe.optimize gradient_separation memory_bound(3.000000e+00)
// CHECK-LABEL: flexpipe.pipeline @hex_bound
// CHECK:         flexpipe.optimize gradient_separation memory_bound(2.500000e+00)
// CHECK-LABEL: flexpipe.pipeline @large_bound
// CHECK:         flexpipe.optimize gradient_separation memory_bound(9.2233720368547758E+18)
flexpipe.pipeline @integer_bound actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.optimize gradient_separation memory_bound(3)
}
flexpipe.pipeline @hex_bound actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.optimize gradient_separation memory_bound(0x4004000000000000)
}
// (2^63 read as a negative 64-bit integer.)
flexpipe.pipeline @large_bound actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.optimize gradient_separation memory_bound(9223372036854775808)
}

// The clauses in any order; printed in the canonical one.
// CHECK-LABEL: flexpipe.pipeline @any_order
// CHECK:         flexpipe.optimize gradient_separation async_comm memory_bound(2.000000e+00) max_rounds(7)
flexpipe.pipeline @any_order actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.optimize max_rounds(7) async_comm memory_bound(2) gradient_separation
}

// So are the optional clauses of module, instruction and priority.
// CHECK-LABEL: flexpipe.pipeline @any_order_clauses
// CHECK-NEXT:    flexpipe.module @gpt layers(8) placement(vshape) bidirectional chunks(2) actors [0, 1] model<hidden = 64, heads = 2, seq = 16, vocab = 128> vocab_parallel
// CHECK-NEXT:    flexpipe.stage @sync actors [0, 1]
// CHECK-NEXT:    flexpipe.instruction @sync_gather kind(all_gather) on(@sync) prev(2) next(3) async attrs {ranks = [0, 1]}
// CHECK-NEXT:    flexpipe.priority @gpt cttp<bwd_first> fstp<breadth_first> bstp<depth_first, 2>
flexpipe.pipeline @any_order_clauses actors(2) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(vshape) vocab_parallel
      model<hidden = 64, heads = 2, seq = 16, vocab = 128> actors [0, 1]
      chunks(2) bidirectional
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @sync_gather kind(all_gather) on(@sync)
      attrs {ranks = [0, 1]} async next(3) unit(1) prev(2)
  flexpipe.priority @gpt bstp<depth_first, 2> cttp<bwd_first>
      fstp<breadth_first>
}
