// Pipelines and schedules in a nested module are refused by every pass: the
// passes read the top-level module's, and -flexpipe-verify-schedule passed
// this deadlocking schedule (each actor receives before it sends) unread.
// RUN: not flexpipe-opt %s -flexpipe-verify-schedule 2>&1 | FileCheck %s
// RUN: not flexpipe-opt %s -flexpipe-spec-to-schedule 2>&1 | FileCheck %s --check-prefixes=CHECK,SPEC
// RUN: not flexpipe-opt %s -flexpipe-convert-to-emitc 2>&1 | FileCheck %s
// flexpipe-compile said the file held no pipeline or schedule.
// RUN: not flexpipe-compile %s --emit=text 2>&1 | FileCheck %s --check-prefix=SPEC
// SPEC: error: 'flexpipe.pipeline' op is inside a nested module; FlexPipe's passes and tools read the pipelines and schedules of the top-level module only
// CHECK: error: 'flexpipe.schedule' op is inside a nested module; FlexPipe's passes and tools read the pipelines and schedules of the top-level module only

module {
  module @inner {
    flexpipe.pipeline @p actors(2) microbatches(2) {
      flexpipe.module @gpt layers(2) placement(one_to_one)
    }
    flexpipe.schedule @s actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
      flexpipe.actor 0 {
        flexpipe.recv_grad stage 0 mb 0 from 1
        flexpipe.fwd stage 0 mb 0
        flexpipe.send_act stage 0 mb 0 to 1
        flexpipe.bwd stage 0 mb 0
      }
      flexpipe.actor 1 {
        flexpipe.recv_act stage 1 mb 0 from 0
        flexpipe.fwd stage 1 mb 0
        flexpipe.bwd stage 1 mb 0
        flexpipe.send_grad stage 1 mb 0 to 0
      }
    }
  }
}
