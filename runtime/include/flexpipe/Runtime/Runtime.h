/*===- Runtime.h - The interface generated rank programs call -----*- C -*-===*\
|*                                                                            *|
|* Part of the FlexPipe project, under the Apache License v2.0 with LLVM      *|
|* Exceptions. See LICENSE for license information.                           *|
|* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception                    *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* A small, stable C interface: `flexpipe-compile --emit=cpp` lowers each     *|
|* actor's program to one function of calls into it, and a `main` that hands  *|
|* that function to flexpipe_rt_main. docs/Runtime.md describes the           *|
|* semantics; the backends (CPU + MPI, CUDA + NCCL) implement it. The op      *|
|* flexpipe.X of a schedule calls flexpipe_rt_X, or flexpipe_rt_X_async where *|
|* it returns a token (the lowering derives the name from the op's).          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FLEXPIPE_RUNTIME_RUNTIME_H
#define FLEXPIPE_RUNTIME_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's runtime state. */
typedef struct flexpipe_rt flexpipe_rt;

/* One iteration of this rank's program. */
typedef void (*flexpipe_rt_program)(flexpipe_rt *rt);

/* Parses the command line (--iterations N, --profile FILE, --trace FILE,
 * --losses FILE, --weights FILE, --lr X), starts the backend, checks that
 * every rank was compiled from the same schedule (`schedule` is its
 * description, docs/Runtime.md), builds this rank's stages and runs the
 * iterations: the program, then the data-parallel gradient all-reduce and
 * the optimizer step. Returns the process exit code. */
int flexpipe_rt_main(int argc, char **argv, const char *schedule,
                     flexpipe_rt_program program);

/* Computations of stage `stage` for micro-batch `mb`. */
void flexpipe_rt_fwd(flexpipe_rt *rt, int64_t stage, int64_t mb);
void flexpipe_rt_bwd(flexpipe_rt *rt, int64_t stage, int64_t mb);
void flexpipe_rt_igrad(flexpipe_rt *rt, int64_t stage, int64_t mb);
void flexpipe_rt_wgrad(flexpipe_rt *rt, int64_t stage, int64_t mb);

/* Point-to-point transfers. Sends name the sending stage, receives the
 * receiving stage; `peer` is an actor. A send returns once posted (the
 * iteration ends when every send is delivered); a blocking receive returns
 * when the data is here. The _async variants post the transfer and return a
 * token for flexpipe_rt_wait, which for a send returns once the message is
 * delivered, i.e. once its receive is posted. */
void flexpipe_rt_send_act(flexpipe_rt *rt, int64_t stage, int64_t mb,
                          int64_t peer);
void flexpipe_rt_recv_act(flexpipe_rt *rt, int64_t stage, int64_t mb,
                          int64_t peer);
void flexpipe_rt_send_grad(flexpipe_rt *rt, int64_t stage, int64_t mb,
                           int64_t peer);
void flexpipe_rt_recv_grad(flexpipe_rt *rt, int64_t stage, int64_t mb,
                           int64_t peer);
int64_t flexpipe_rt_send_act_async(flexpipe_rt *rt, int64_t stage, int64_t mb,
                                   int64_t peer);
int64_t flexpipe_rt_recv_act_async(flexpipe_rt *rt, int64_t stage, int64_t mb,
                                   int64_t peer);
int64_t flexpipe_rt_send_grad_async(flexpipe_rt *rt, int64_t stage,
                                    int64_t mb, int64_t peer);
int64_t flexpipe_rt_recv_grad_async(flexpipe_rt *rt, int64_t stage,
                                    int64_t mb, int64_t peer);
void flexpipe_rt_wait(flexpipe_rt *rt, int64_t token);

/* A transfer group: the transfers posted between group_start and group_end
 * (the lowering brackets a send and the receive from the same peer that the
 * peer mirrors) start together: one NCCL group on the CUDA backend. A
 * blocking receive inside returns at group_end; no wait may come inside,
 * and groups do not nest. */
void flexpipe_rt_group_start(flexpipe_rt *rt);
void flexpipe_rt_group_end(flexpipe_rt *rt);

/* The all-gather of stage `stage` for micro-batch `mb` (docs/Runtime.md):
 * of a vocabulary-parallel LM head (a shared stage), after its forward, the
 * actors holding its vocabulary slices exchange per-token softmax
 * statistics; of a two-tower model's sync stage, after both towers' last
 * forwards, their actors exchange the towers' embeddings. Each member then
 * has the exact loss and what its backward needs. The _async variant posts
 * it and returns a token for flexpipe_rt_wait, which completes it. */
void flexpipe_rt_all_gather(flexpipe_rt *rt, int64_t stage, int64_t mb);
int64_t flexpipe_rt_all_gather_async(flexpipe_rt *rt, int64_t stage,
                                     int64_t mb);

/* The runtime operation `name`, bound to the registered compute instruction
 * of that name (FLEXPIPE_OPERATION in flexpipe/Runtime/UserOps.h; compiled
 * in with flexpipe-compile --ops), for stage `stage` and micro-batches
 * [mb, mb + count). `attrs` are the instruction's attributes, encoded as
 * docs/Runtime.md describes. The operation runs before the call returns; the
 * _async variant also runs it at once and returns a token whose
 * flexpipe_rt_wait has nothing left to do. */
void flexpipe_rt_exec(flexpipe_rt *rt, const char *name, int64_t stage,
                      int64_t mb, int64_t count, const char *attrs);
int64_t flexpipe_rt_exec_async(flexpipe_rt *rt, const char *name, int64_t stage,
                               int64_t mb, int64_t count, const char *attrs);

#ifdef __cplusplus
}
#endif

#endif /* FLEXPIPE_RUNTIME_RUNTIME_H */
