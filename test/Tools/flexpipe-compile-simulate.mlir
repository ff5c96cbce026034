// Predictions: report, SVG and Chrome trace, with unit costs and with the
// cost model.

// Unit costs: 1F1B on 4 actors and 8 micro-batches has the closed-form
// bubble (p - 1) / (m + p - 1) = 3/11.
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=report | FileCheck %s --check-prefix=UNIT
// UNIT:      schedule @one_f_one_b: 4 actors, 4 stages, 8 micro-batches
// UNIT-NEXT: iteration time 22 steps, bubble ratio 27.3% (idle share of all actors' time)
// UNIT:      actor  busy          idle          bubble   peak act.
// UNIT-NEXT: 0      16 steps      6 steps       27.3%    4 mb
// UNIT-NEXT: 1      16 steps      6 steps       27.3%    3 mb
// UNIT-NEXT: 2      16 steps      6 steps       27.3%    2 mb
// UNIT-NEXT: 3      16 steps      6 steps       27.3%    1 mb
// Under the cost model a stage's activation is its share of an actor's
// layers, in M_B, the zero-bubble papers' unit (not the step model's
// stage-micro-batches, "mb": interleaved 1F1B holds 11, 9 and 7 of those):
// printed with its fraction (5.5 printed as "6", 4.5 and 3.5 both as "4").
// RUN: flexpipe-compile %schedules/interleaved-1f1b.mlir --emit=report --time-model cost | FileCheck %s --check-prefix=SHARES
// SHARES: {{^0 .* 5.50 M_B}}
// SHARES: {{^1 .* 4.50 M_B}}
// SHARES: {{^2 .* 3.50 M_B}}
// UNIT:      critical path (22 computations): 0F0 -> 1F0 -> 2F0 -> 3F0 -> 3B0 -> 3F1

// With --time-model=cost and no files the report times what the scheduler
// timed: 1, 2, 1, 1 units per layer for F, B, I and W (every computation was
// one step: ZB-H1 then looked slower than 1F1B, 27 against 22). 1F1B: the
// closed form (m + p - 1)(1 + 2) = 33; ZB-H1's weight gradients fill its
// bubbles.
// RUN: flexpipe-compile %schedules/1f1b.mlir --time-model=cost --emit=report | FileCheck %s --check-prefix=COST1F1B
// RUN: flexpipe-compile %schedules/zb-h1.mlir --time-model=cost --emit=report | FileCheck %s --check-prefix=COSTZB
// COST1F1B: iteration time 33 units, bubble ratio 27.3%
// COSTZB:   iteration time 27 units, bubble ratio 11.1%

// A small model's memory in MiB and KiB (it read 0.00 GiB throughout).
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=report | FileCheck %s --check-prefix=TINY
// TINY:      0      {{.*}}    1.41 MiB     2.26 MiB    3.66 MiB
// TINY:      3      {{.*}}    416.00 KiB   2.22 MiB    2.63 MiB

// The GPT 5B model with a 1M vocabulary on A800s: the last stage carries the
// LM head (about 31 layers' worth of FLOPs) and the first the embedding.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %S/../../configs/models/gpt-5b-1m.yaml --cluster %S/../../configs/clusters/a800.yaml --microbatches 32 --emit=report | FileCheck %s --check-prefix=GPT
// GPT:      schedule @one_f_one_b: 4 actors, 4 stages, 32 micro-batches
// GPT-NEXT: iteration time 2.511 s, bubble ratio 51.3% (idle share of all actors' time), 6526 tokens/s per pipeline
// GPT:      actor  busy          idle          bubble   peak act.    static      total
// GPT-NEXT: 0      819.348 ms    1.691 s       67.4%    7.67 GiB     56.92 GiB   64.59 GiB
// GPT:      3      2.434 s       76.922 ms     3.1%     4.78 GiB     56.90 GiB   61.68 GiB

// Balancing the stages' FLOPs moves layers off the LM head's stage: a
// 21-21-21-1 split instead of 16 each cuts the slowest stage from 47.5 to
// 32.5 layers' worth of FLOPs.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %S/../../configs/models/gpt-5b-1m.yaml --cluster %S/../../configs/clusters/a800.yaml --microbatches 32 --balance cost --emit=report | FileCheck %s --check-prefix=BAL
// BAL: iteration time 1.766 s, bubble ratio 30.8%

// Memory over the device is flagged (16.1B with 1.2M vocabulary on 2 GPUs).
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --model %S/../../configs/models/gpt-16b-1.2m.yaml --cluster %S/../../configs/clusters/a800.yaml --emit=report | FileCheck %s --check-prefix=OOM
// OOM: OVER DEVICE MEMORY
// OOM: warning: actor 0 needs {{.*}} GiB but a device has 80.00 GiB

// The SVG is well-formed XML with one box per computation.
// RUN: flexpipe-compile %schedules/interleaved-1f1b.mlir --emit=svg -o %t.svg
// RUN: python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); print(len([r for r in d.getElementsByTagName('rect') if r.getElementsByTagName('title')]))" %t.svg | FileCheck %s --check-prefix=SVG
// SVG: 128
// A long schedule draws work under a pixel wide together: at most about
// two boxes per pixel of an actor's row, whatever the number of
// micro-batches (1F1B with 262144 of them drew 380 MB), each saying what it
// holds.
// RUN: flexpipe-compile %schedules/1f1b.mlir --microbatches 50000 --emit=svg -o %t.long.svg
// RUN: python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); n = len([r for r in d.getElementsByTagName('rect') if r.getElementsByTagName('title')]); print('bounded' if n <= 2 * 1100 * 4 else n)" %t.long.svg | FileCheck %s --check-prefix=LONG
// LONG: bounded
// RUN: FileCheck %s --check-prefix=LONGBOX < %t.long.svg
// LONGBOX: <title>{{[0-9]+}} instructions ({{[0-9]+}} fwd, {{[0-9]+}} bwd), stage 0, micro-batches 0 to {{[0-9]+}}, 0 steps to {{[0-9]+}} steps</title>
// Every box under a pixel has no white edge (at 1000 micro-batches each
// instruction is 0.55 px, and half a pixel of edge drew a busy 1F1B white),
// and every box is at least half a pixel wide, work of no time too (a
// profile of zeros drew each actor's work as one box 0 px wide).
// RUN: flexpipe-compile %schedules/1f1b.mlir --microbatches 1000 --emit=svg -o %t.thin.svg
// RUN: printf 'stages:\n  - {stage: 0, fwd_s: 0, bwd_s: 0}\n  - {stage: 1, fwd_s: 0, bwd_s: 0}\n  - {stage: 2, fwd_s: 0, bwd_s: 0}\n  - {stage: 3, fwd_s: 0, bwd_s: 0}\ndefault_message_s: 0\n' > %t.zero.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --profile %t.zero.yaml --emit=svg -o %t.zero.svg
// RUN: python3 -c "import sys, xml.dom.minidom as m; r = [x for f in sys.argv[1:] for x in m.parse(f).getElementsByTagName('rect') if x.getElementsByTagName('title')]; w = [float(x.getAttribute('width')) for x in r]; print(sum(x.hasAttribute('stroke') and v < 1 for x, v in zip(r, w)), 'edged under a pixel,', sum(v < 0.5 for v in w), 'under half a pixel')" %t.thin.svg %t.zero.svg | FileCheck %s --check-prefix=THIN
// THIN: 0 edged under a pixel, 0 under half a pixel

// The trace is valid JSON with one complete event per instruction (64
// computations, 96 transfers) and a named track per actor.
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=trace -o %t.json
// No event of an actor overlaps its next one (ts and dur rounded apart to
// 12 digits overlapped 201 of these 640):
// RUN: flexpipe-compile %schedules/zb-v.mlir --actors 2 --microbatches 32 --model %configs/models/gpt-5b-1m.yaml --cluster %configs/clusters/a800.yaml --emit=trace -o %t.priced.json
// RUN: python3 -c "import json, sys; d = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X']; a = {}; [a.setdefault(e['tid'], []).append(e) for e in d]; print(len(d), 'events', sum(x['ts'] + x['dur'] > y['ts'] for l in a.values() for x, y in zip(sorted(l, key=lambda e: e['ts']), sorted(l, key=lambda e: e['ts'])[1:])), 'overlaps')" %t.priced.json | FileCheck %s --check-prefix=NOOVERLAP
// NOOVERLAP: 640 events 0 overlaps
// RUN: python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['traceEvents']; print(sum(e['ph'] == 'X' for e in d), sorted({e['args']['name'] for e in d if e['name'] == 'thread_name'}))" %t.json | FileCheck %s --check-prefix=TRACE
// TRACE: 160 ['actor 0', 'actor 1', 'actor 2', 'actor 3']

// A sub-microsecond iteration (an unbounded cluster): the timeline's axis
// keeps its ticks inside the picture (a slack of 1e-9 s, more than the
// span, drew 13 ticks up to x = 2279 on a 1200-wide picture).
// RUN: sed -e 's/^peak_flops: .*/peak_flops: 1e18/' -e 's/latency_s: .*/latency_s: 0/' -e 's/bandwidth_bytes_per_s: .*/bandwidth_bytes_per_s: 1e15/' %configs/clusters/cpu.yaml > %t.fastest.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t.fastest.yaml --emit=svg -o %t.fastest.svg
// RUN: python3 %S/Inputs/svg-ticks.py %t.fastest.svg | FileCheck %s --check-prefix=TICKS
// TICKS: {{^([1-9]|1[0-2]) inside$}}
// Times below a millisecond keep four significant digits, without an
// exponent (they read "0.000 ms", busy and idle alike; then 6.003e-07 ms).
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t.fastest.yaml --emit=report | FileCheck %s --check-prefix=TINYTIME
// TINYTIME: iteration time {{0\.0+[1-9][0-9][0-9][0-9]}} ms, bubble ratio
// TINYTIME: {{^0 +0\.0+[1-9][0-9][0-9][0-9] ms +0\.0+[1-9][0-9][0-9][0-9] ms}}

// Values as wide as their column keep a space after them (they ran into
// the next: '47185982.915 s5898310.984 s').
// RUN: sed 's/hidden: 64/hidden: 4000000/' %configs/models/tiny.yaml > %t.wide.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --model %t.wide.yaml --cluster %configs/clusters/cpu.yaml --emit=report | FileCheck %s --check-prefix=WIDE
// WIDE: 0      47185982.915 s 5898310.984 s 11.1%    71.53 GiB    14305140.08 GiB 14305211.60 GiB OVER DEVICE MEMORY

// A profile replaces durations: stage 3 twice as slow makes actor 3 the
// bottleneck.
// RUN: printf 'stages:\n  - {stage: 3, fwd_s: 2, bwd_s: 2}\n' > %t.profile.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --profile %t.profile.yaml --emit=report | FileCheck %s --check-prefix=PROFILE
// PROFILE: iteration time 38.000 s
// PROFILE: 3      32.000 s      6.000 s       15.8%    1 mb
// Without every stage's activation_bytes memory is counted in
// stage-micro-batches (it printed the counts as bytes: '1 B'); with them,
// in bytes.
// RUN: printf 'stages:\n' > %t.bytes.yaml
// RUN: for s in 0 1 2 3; do printf '  - {stage: %%s, fwd_s: 1, bwd_s: 2, activation_bytes: 2048}\n' $s >> %t.bytes.yaml; done
// RUN: flexpipe-compile %schedules/1f1b.mlir --profile %t.bytes.yaml --emit=report | FileCheck %s --check-prefix=BYTES
// BYTES: 0      24.000 s      9.000 s       27.3%    8.00 KiB
// A registered stage (the two-tower example's sync stage, 10) holds no
// activations: bytes without an entry for it.
// RUN: printf 'stages:\n' > %t.towers.yaml
// RUN: for s in 0 1 2 3 4 5 6 7 8 9; do printf '  - {stage: %%s, fwd_s: 1, bwd_s: 2, activation_bytes: 1024}\n' $s >> %t.towers.yaml; done
// RUN: flexpipe-compile %examples/clip-mixed.mlir --profile %t.towers.yaml --emit=report | FileCheck %s --check-prefix=TOWERS
// TOWERS: 0      48.000 s      15.000 s      23.8%    12.00 KiB
// weight_grad_bytes: what a micro-batch keeps from its input gradient to
// its weight gradient. Twice its activations, ZB-H1's deferred weight
// gradients cost memory: under the fused peak (10 KiB: 3 micro-batches'
// activations and one weight-gradient state) the separation defers fewer,
// and the iteration takes 29 s against 27 with the activations alone.
// RUN: sed 's/2048}/2048, weight_grad_bytes: 4096}/' %t.bytes.yaml > %t.wgrad.yaml
// RUN: flexpipe-compile %schedules/zb-h1.mlir --profile %t.bytes.yaml --emit=report | FileCheck %s --check-prefix=NOSTATE
// NOSTATE: iteration time 27.000 s
// NOSTATE: 0      24.000 s      3.000 s       11.1%    8.00 KiB
// RUN: flexpipe-compile %schedules/zb-h1.mlir --profile %t.wgrad.yaml --emit=report | FileCheck %s --check-prefix=WSTATE
// WSTATE: iteration time 29.000 s
// WSTATE: 0      24.000 s      5.000 s       17.2%    10.00 KiB
// RUN: printf 'stages:\n  - {stage: 0, fwd_s: 1, bwd_s: 2, weight_grad_bytes: 4}\n' > %t.nobytes.yaml
// RUN: not flexpipe-compile %schedules/zb-h1.mlir --profile %t.nobytes.yaml 2>&1 | FileCheck %s --check-prefix=NOBYTES
// NOBYTES: nobytes.yaml:2:55: error: weight_grad_bytes needs the stage's activation_bytes

// A run's own profile also says how long each actor's optimizer step took
// (the runtime's --profile writes optimizer_s); with a model and cluster
// the slowest of them is the step after the pipeline (the analytic step of
// configs/clusters/cpu.yaml, which has no measured Adam rate, is 0).
// RUN: printf 'stages:\n  - {stage: 0, fwd_s: 0.001, bwd_s: 0.002}\noptimizer_s: [0.0015, 0.0025]\n' > %t.steps.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.steps.yaml --emit=report | FileCheck %s --check-prefix=STEPS
// STEPS: iteration time {{[0-9.]+}} ms = pipeline {{[0-9.]+}} ms + optimizer step 2.500 ms{{$}}
// The picture's title adds up the iteration as the report does (it called
// the pipeline's time the iteration's), and a part that is 0 is left out
// (the analytic A800 cluster prices no optimizer step).
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 5 --model %configs/models/gpt-h256.yaml --cluster %configs/clusters/a800.yaml --dp 2 --emit=report > %t.dp2.txt
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 5 --model %configs/models/gpt-h256.yaml --cluster %configs/clusters/a800.yaml --dp 2 --emit=svg >> %t.dp2.txt
// RUN: FileCheck %s --check-prefix=TITLE < %t.dp2.txt
// TITLE: iteration time [[ITER:[0-9.]+ ms = pipeline [0-9.]+ ms \+ gradient sync [0-9.]+ ms]]{{$}}
// TITLE: micro-batches; iteration [[ITER]], pipeline bubble
// Counts of one are singular in the report, the grid and the title; a very
// slow model's throughput keeps its digits (it read "0 tokens/s").
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --microbatches 1 --emit=report | FileCheck %s --check-prefix=ONE
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --microbatches 1 --emit=text | FileCheck %s --check-prefix=ONE
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --microbatches 1 --emit=svg | FileCheck %s --check-prefix=ONE
// ONE: one_f_one_b: 1 actor, 1 stage, 1 micro-batch{{$|[,;]}}
// A title wider than the plot (a long schedule name ran past the right
// edge) is squeezed to the plot's width; a short one keeps its own.
// RUN: sed 's/@one_f_one_b/@a_schedule_name_long_enough_to_run_past_the_right_edge_of_the_picture_when_drawn_at_its_natural_width/' %schedules/1f1b.mlir > %t.long-name.mlir
// RUN: flexpipe-compile %t.long-name.mlir --emit=svg | FileCheck %s --check-prefix=SQUEEZED
// SQUEEZED: font-weight="bold" textLength="1100" lengthAdjust="spacingAndGlyphs">@a_schedule_name_long
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=svg | FileCheck %s --check-prefix=NATURAL
// NATURAL: font-weight="bold">@one_f_one_b:
// A control character in a quoted name (XML cannot hold one, escaped or
// not), a byte that is no UTF-8 or U+FFFF: the title writes the name as
// MLIR writes the symbol, escaped, and the picture parses.
// RUN: sed 's/@one_f_one_b/@"a\\01b\\FFc\\EF\\BF\\BFd"/' %schedules/1f1b.mlir > %t.control.mlir
// RUN: flexpipe-compile %t.control.mlir --emit=svg -o %t.control.svg
// RUN: python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); print([t.firstChild.data for t in d.getElementsByTagName('text') if t.getAttribute('font-weight') == 'bold'][0])" %t.control.svg | FileCheck %s --check-prefix=CONTROL
// CONTROL: {{^}}@"a\01b\FFc\EF\BF\BFd": 4 actors, 4 stages, 8 micro-batches; iteration
// RUN: sed 's/^peak_flops:.*/peak_flops: 1000/' %configs/clusters/cpu.yaml > %t.slow.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t.slow.yaml --emit=report | FileCheck %s --check-prefix=SLOW
// SLOW: iteration time {{[0-9.]+}} s, bubble ratio {{.*}}, 0.00{{[0-9]+}} tokens/s per pipeline
// Computations of a million seconds on ranks that take turns on their
// cores (a time slice of 3 ms): whole rounds of turns at once (one event a
// slice ran for hours).
// RUN: sed -e 's/^  cores_per_node: 2$/  cores_per_node: 2\n  time_slice_s: 0.003/' -e 's/fwd_s: 0.0001020155/fwd_s: 1e6/' %S/Inputs/measured-cpu.yaml > %t.million.yaml
// RUN: timeout 60 flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t.million.yaml --emit=report | FileCheck %s --check-prefix=MILLION
// MILLION: iteration time 424399{{[0-9][0-9]\.[0-9]+}} s = pipeline
// RUN: printf 'stages: []\noptimizer_s: 0.5\n' > %t.badsteps.yaml
// RUN: not flexpipe-compile %schedules/1f1b.mlir --profile %t.badsteps.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=BADSTEPS
// BADSTEPS: badsteps.yaml:2:{{[0-9]+}}: error: key 'optimizer_s' must be a list of seconds, one per actor

// A profile of another job (a stage, an actor or more optimizer steps than
// the schedule has) is refused, not half applied, naming where the profile
// says it.
// RUN: printf 'stages:\n  - {stage: 99, fwd_s: 2, bwd_s: 2}\n' > %t.stage99.yaml
// RUN: not flexpipe-compile %schedules/1f1b.mlir --profile %t.stage99.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-STAGE
// OTHER-STAGE: 1f1b.mlir:{{[0-9]+}}:1: error: 'flexpipe.pipeline' op the profile '{{.*}}stage99.yaml' lists stage 99 (at {{.*}}stage99.yaml:2:5), but the schedule has 4 stages and 4 actors: was it measured on another job?
// For every output the program is built for, not only the simulation's
// (a separated schedule was built with it):
// RUN: not flexpipe-compile %schedules/zb-h1.mlir --profile %t.stage99.yaml --emit=schedule 2>&1 | FileCheck %s --check-prefix=OTHER-SCHEDULE
// OTHER-SCHEDULE: zb-h1.mlir:{{[0-9]+}}:1: error: 'flexpipe.pipeline' op the profile '{{.*}}stage99.yaml' lists stage 99
// RUN: printf 'stages: []\nmessages:\n  - {from: 0, to: 4, seconds: 0.1}\n' > %t.actor4.yaml
// RUN: not flexpipe-compile %schedules/1f1b.mlir --profile %t.actor4.yaml --emit=trace 2>&1 | FileCheck %s --check-prefix=OTHER-ACTOR
// OTHER-ACTOR: error: 'flexpipe.pipeline' op the profile '{{.*}}actor4.yaml' times messages from actor 0 to actor 4 (at {{.*}}actor4.yaml:3:5), but the schedule has 4 stages and 4 actors
// RUN: printf 'stages: []\noptimizer_s: [1, 1, 1, 1, 1, 1]\n' > %t.steps6.yaml
// RUN: not flexpipe-compile %schedules/1f1b.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.steps6.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-STEPS
// OTHER-STEPS: error: 'flexpipe.pipeline' op the profile '{{.*}}steps6.yaml' has 6 optimizer steps in optimizer_s (at {{.*}}steps6.yaml:2:14), but the schedule has 2 stages and 2 actors
// The runtime records what each stage held, on which actors, the
// micro-batch size and the model's sizes: a V-shape run's 4 stages (2
// layers each) do not price a bidirectional schedule's 4 (4 layers each),
// nor a circular one's (other actors), nor the V-shape at micro-batch size
// 2 or of a wider model (all were priced with the run's durations).
// RUN: printf 'micro_batch_size: 1\nmodules:\n  - {hidden: 64, heads: 4, seq: 32, vocab: 256}\nstages:\n  - {stage: 0, layers: 2, first: true, last: false, actors: [0], fwd_s: 1, bwd_s: 2}\n  - {stage: 1, layers: 2, first: false, last: false, actors: [1], fwd_s: 1, bwd_s: 2}\n  - {stage: 2, layers: 2, first: false, last: false, actors: [1], fwd_s: 1, bwd_s: 2}\n  - {stage: 3, layers: 2, first: false, last: true, actors: [0], fwd_s: 1, bwd_s: 2}\n' > %t.vshape.yaml
// RUN: flexpipe-compile %schedules/vshape.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.vshape.yaml --emit=report | FileCheck %s --check-prefix=SAME-JOB
// SAME-JOB: schedule @vshape: 2 actors, 4 stages, 8 micro-batches
// RUN: not flexpipe-compile %schedules/bidirectional.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.vshape.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-HOLDS
// OTHER-HOLDS: bidirectional.mlir:{{[0-9]+}}:1: error: 'flexpipe.pipeline' op the profile '{{.*}}vshape.yaml' lists stage 0 holding 2 layers (at {{.*}}vshape.yaml:5:5), but the schedule's stage 0 holds 4: was it measured on another job?
// RUN: sed -e 's/micro_batch_size: 1/micro_batch_size: 2/' %configs/models/tiny.yaml > %t.tiny-mbs2.yaml
// RUN: not flexpipe-compile %schedules/vshape.mlir --actors 2 --microbatches 4 --model %t.tiny-mbs2.yaml --cluster %configs/clusters/cpu.yaml --profile %t.vshape.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-MBS
// OTHER-MBS: error: 'flexpipe.pipeline' op the profile '{{.*}}vshape.yaml' was measured at micro-batch size 1 (at {{.*}}vshape.yaml:1:19), but the job's is 2: was it measured on another job?
// RUN: not flexpipe-compile %schedules/interleaved-1f1b.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.vshape.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-ACTORS
// OTHER-ACTORS: error: 'flexpipe.pipeline' op the profile '{{.*}}vshape.yaml' lists stage 2 run by actors [1] (at {{.*}}vshape.yaml:7:5), but the schedule runs it on actors [0]: was it measured on another job?
// RUN: sed -e 's/hidden: 64/hidden: 128/' %configs/models/tiny.yaml > %t.tiny-wide.yaml
// RUN: not flexpipe-compile %schedules/vshape.mlir --actors 2 --model %t.tiny-wide.yaml --cluster %configs/clusters/cpu.yaml --profile %t.vshape.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=OTHER-MODEL
// OTHER-MODEL: error: 'flexpipe.pipeline' op the profile '{{.*}}vshape.yaml' was measured on modules of hidden 64, heads 4, seq 32, vocab 256 (at {{.*}}vshape.yaml:3:3), but the model file's are hidden 128, heads 4, seq 32, vocab 256: was it measured on another job?
// A profile's module sizes and actor ids are held to what a model file and
// a job can have (a module of hidden 65 and 4 heads, and actor 1048576,
// were read):
// RUN: sed -e 's/hidden: 64/hidden: 65/' %t.vshape.yaml > %t.heads.yaml
// RUN: not flexpipe-compile %schedules/vshape.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.heads.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=PROFILE-HEADS
// PROFILE-HEADS: heads.yaml:3:14: error: a profiled module: hidden 65 is not a multiple of heads 4
// RUN: sed -e 's/actors: \[1\]/actors: [1048576]/' %t.vshape.yaml > %t.actor.yaml
// RUN: not flexpipe-compile %schedules/vshape.mlir --actors 2 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t.actor.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=PROFILE-ACTOR
// PROFILE-ACTOR: actor.yaml:6:63: error: key 'actors' must be at most 65535, got 1048576
// A schedule made for another model is reported as that, before the
// profile of the model's own run (3 layers a stage) is blamed:
// RUN: sed -e 's/layers: 8/layers: 6/' %configs/models/tiny.yaml > %t.tiny6.yaml
// RUN: printf 'stages:\n  - {stage: 0, layers: 3, first: true, last: false, fwd_s: 1, bwd_s: 2}\n  - {stage: 1, layers: 3, first: false, last: true, fwd_s: 1, bwd_s: 2}\n' > %t.six.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --emit=schedule > %t.eight.mlir
// RUN: not flexpipe-opt %t.eight.mlir -flexpipe-simulate="model=%t.tiny6.yaml cluster=%configs/clusters/cpu.yaml profile=%t.six.yaml" 2>&1 | FileCheck %s --check-prefix=MODEL-FIRST
// MODEL-FIRST: error: the schedule's stages of module 'gpt' hold 4 layers (stage_info, along its stages), but the model file's 'gpt' has 6
// The simulate pass reads stage_info from schedule-level IR:
// RUN: flexpipe-compile %schedules/bidirectional.mlir --actors 2 --emit=schedule > %t.bidirectional.mlir
// RUN: not flexpipe-opt %t.bidirectional.mlir -flexpipe-simulate="profile=%t.vshape.yaml" 2>&1 | FileCheck %s --check-prefix=OTHER-PASS
// OTHER-PASS: error: the profile '{{.*}}vshape.yaml' lists stage 1 as neither first nor last (at {{.*}}vshape.yaml:6:5), but the schedule's stage 1 is last

// A count within rounding of a whole number prints whole (a sum of thirds,
// 11.999..., read "12.00 units" under actor 0's "12 units"), and an axis
// label of 1 reads "1 step" (it read "1 steps").
// RUN: flexpipe-compile %S/../Runtime/train-clip-spec.mlir --microbatches 3 --time-model=cost --emit=report | FileCheck %s --check-prefix=WHOLE
// WHOLE:      {{^0 +12 units +3.33 units}}
// WHOLE-NEXT: {{^1 +12 units +3.33 units}}
// WHOLE-NEXT: {{^2 +6 units +9.33 units}}
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 2 --emit=svg | FileCheck %s --check-prefix=TICK
// TICK: >1 step<
