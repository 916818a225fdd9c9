/* liveprof's C ABI: what libliveprof.so exports (docs/attach.md).
 *
 * One shared library serves three callers:
 *   - the CUDA driver, through its documented injection entry point:
 *     CUDA_INJECTION64_PATH=<path of libliveprof.so> makes the driver load it
 *     at cuInit and call InitializeInjection(), which starts GPU tracing
 *     (CUPTI) and the sender in the profiled process, no code change;
 *   - the Python package (src/python/liveprof, pure Python over ctypes), on
 *     any Python 3 without a build for it;
 *   - any other language with a C FFI.
 * A process that loads it twice by the same path (the driver, then Python)
 * gets one copy: one stream, one sender, one CUPTI source.
 *
 * Threads: every function may be called from any thread. Nothing here
 * blocks except liveprof_disconnect (it waits for the server's
 * acknowledgement) and liveprof_gpu_stop (CUPTI's last flush). Nothing here
 * throws or exits: failures are return values and messages.
 *
 * Versioning: liveprof_abi_version() is LIVEPROF_ABI_VERSION; a caller
 * built against another version must not go on. Structs carry their size
 * first, so fields are only ever added at the end.
 */
#ifndef LIVEPROF_ATTACH_LIVEPROF_C_H_
#define LIVEPROF_ATTACH_LIVEPROF_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIVEPROF_ABI_VERSION 1

int liveprof_abi_version(void);

/* CUDA's injection entry point (the driver calls it once, inside cuInit).
 * Starts the sender if LIVEPROF_SERVER is set (it is, under `liveprof
 * run`) and then GPU tracing at LIVEPROF_CUPTI_LEVEL (default "default"),
 * CUPTI from LIVEPROF_CUPTI_LIBRARY (default libcupti.so.13). Never
 * fails the job: no server, no CUPTI, no GPU: the job runs as without
 * liveprof, and why is said once on stderr. Returns 1. */
int InitializeInjection(void);

/* ---- names and time ---------------------------------------------------- */

/* The id of a name (UTF-8, `size` bytes), interned once. Never fails: an
 * over-long name maps to a placeholder, and is counted. */
uint32_t liveprof_intern(const char* utf8, size_t size);
/* The host API's timestamp now (raw ticks; 0 never). */
uint64_t liveprof_now(void);

/* ---- spans with a handle (for languages without RAII) ------------------ *
 * begin returns a handle for end (0: not recording: tracing off, or the
 * level or the Python scopes switch leaves this kind out; end(0) does
 * nothing). The handle lives in the calling thread's table; end it on the
 * same thread (an end on another thread, or a second end, is counted as
 * span_end_without_begin and records nothing). At most 4,095 open at a
 * time per thread; past that begin returns 0 and counts
 * span_stack_overflow. */
uint32_t liveprof_scope_begin(uint32_t name);            /* a user scope: level 2, Python scopes switch */
uint32_t liveprof_op_begin(uint32_t name);               /* a framework op: level 2 */
uint32_t liveprof_input_begin(uint32_t name, int stage); /* input-pipeline work: level 1 */
void liveprof_span_end(uint32_t handle);

/* ---- spans, steps, samples given whole --------------------------------- */

/* kind: 0 a user scope, 1 input (stage: liveprof_input_stage_name), 2 a
 * framework op; begin/end: liveprof_now() readings. */
void liveprof_record_span(int kind, uint32_t name, uint64_t begin, uint64_t end, int stage);
/* Training step `step` between two liveprof_now() readings. */
void liveprof_record_step(int64_t step, uint32_t name, uint64_t begin, uint64_t end);
/* Step begin/end on this thread's step stack (host_api.h StepBegin/End). */
void liveprof_step_begin(int64_t step, uint32_t name);
void liveprof_step_end(int64_t step);
void liveprof_counter(uint32_t name, double value);
void liveprof_instant(uint32_t name);

/* ---- liveprof's own hooks' time (docs/attach.md) ------------------------ *
 * A hook liveprof runs inside the program (the Python package's, under
 * `liveprof run`) measures its own body: hook_end adds the time since
 * `since` (a liveprof_now() reading the hook took at its start, or where
 * its own work began) to this process's hook time, counts one call, and
 * returns liveprof_now() now, for the hook to use as its own reading (one
 * clock read for both). The sender sends the totals with liveprof's own
 * cost (IngestBatch.cost) and the server shows the hooks' time per step.
 * hook_totals: the hook time in ns (host clock), the calls, and the
 * training steps this process has marked (liveprof_record_step,
 * liveprof_step_end, ...); a forked child starts from 0. Never block. */
uint64_t liveprof_hook_end(uint64_t since);
void liveprof_hook_totals(uint64_t* ns, uint64_t* calls, uint64_t* steps);

/* ---- switches ----------------------------------------------------------- */

void liveprof_set_enabled(int on);
int liveprof_enabled(void);
void liveprof_set_level(int level); /* 1 or 2, clamped */
int liveprof_level(void);
void liveprof_set_python_scopes(int on);
int liveprof_python_scopes(void);

/* ---- the sender ---------------------------------------------------------- */

/* Sends this process's events to `liveprof serve --ingest ADDRESS`
 * ("unix:/path", "tcp:127.0.0.1:PORT"). program: NULL for the process's
 * name; rank: -1 for $RANK. 0 on success; else -1 with the reason in
 * `error` (NUL-terminated, cut to error_size). */
int liveprof_connect(const char* address, const char* program, int rank, char* error, size_t error_size);
/* The same, for a process that serves another (a DataLoader worker):
 * `helper` ("loader 1") and the served process's pid, so that the server
 * names it "<that process's label> · loader 1". In a process forked from
 * one that sends, the child's sender is its own (the parent's events stay
 * the parent's). */
int liveprof_connect_helper(const char* address, const char* program, int rank, const char* helper, uint64_t helper_of,
                            char* error, size_t error_size);
/* Sends what is recorded, waits up to timeout_ns for the acknowledgement,
 * stops the sender. Idempotent. */
void liveprof_disconnect(uint64_t timeout_ns);

typedef struct liveprof_status {
  size_t size; /* set by the caller: sizeof(liveprof_status) */
  int running, connected;
  uint64_t events_sent, batches_sent, batches_acked, batches_resent, batches_dropped, connects, events_refused,
      ring_dropped;
  char last_error[256];
  /* GPU tracing: a CuptiSource status (0 idle, 1 running, 2 stopped, 3 no
   * CUPTI, 4 unavailable, 5 no privileges, 6 busy, 7 failed) and its
   * message. */
  int gpu_status;
  char gpu_message[512];
  /* What became of the events recorded (SenderStatus, ingest_sender.h):
   * delivered (acknowledged), or lost in full rings, in batches dropped
   * unacknowledged, or unacknowledged when the sender stopped; resends
   * apart (events_sent counts each event once). */
  uint64_t events_recorded, events_delivered, events_resent, events_ring_dropped, events_dropped_unacked,
      events_unsent_at_stop, events_lost;
} liveprof_status;
/* Fills *out up to out->size. 0, or -1 if out->size is too small for the
 * fields before last_error. */
int liveprof_get_status(liveprof_status* out);

/* ---- GPU tracing (CUPTI) in this process -------------------------------- */

/* Starts GPU tracing in this process (the Python module's connect(gpu=True);
 * the injection does it for any CUDA program). level: "default", "full", or
 * NULL (LIVEPROF_CUPTI_LEVEL, else default). Returns the status (1
 * running, as liveprof_status.gpu_status) and its message in `message`.
 * A second call returns the first one's status. */
int liveprof_gpu_start(const char* level, char* message, size_t message_size);
/* Stops it after a last flush. Idempotent. */
void liveprof_gpu_stop(void);

/* Another CUPTI client in this process (torch.profiler's Kineto;
 * docs/attach.md, "A script that profiles itself"). With CUDA 13.2 or
 * older, or drivers before r610, CUPTI's activity buffers and kinds are
 * process-wide: call liveprof_gpu_yield right before the other client
 * starts tracing and liveprof_gpu_regain right after it has stopped (its
 * kinds off, its buffers flushed). Each handoff is an instant on the
 * process's "GPU tracer (liveprof)" track, which the server shows per
 * process ("GPU data: torch.profiler from t0 to t1").
 *
 * yield: the GPU tracer gives CUPTI back every record it holds and makes no
 * CUPTI call until the regain; with no tracer yet, one that starts before
 * the regain (CUDA's injection, inside the other client's first CUPTI call)
 * starts aside. `client` names it ("torch.profiler"). Returns 1 stepped
 * aside, 2 noted (no tracer yet), 0 nothing to do (aside already, or GPU
 * tracing is off for good). Blocks for one forced flush.
 * regain: returns 1 tracing again, 2 nothing to take back, 0 CUPTI refused
 * (why in `message`; the tracer stays aside and tries again about every
 * second).
 * state: 0 no GPU tracer (not started, failed, stopped), 1 tracing, 2 aside
 * for another client, 3 none yet but one would start aside. */
int liveprof_gpu_yield(const char* client);
int liveprof_gpu_regain(char* message, size_t message_size);
int liveprof_gpu_state(void);

/* ---- introspection (names, tests) ---------------------------------------- */

/* The name of input stage `stage` ("unknown", "read", ... "wait"), NULL
 * past the last. */
const char* liveprof_input_stage_name(int stage);
/* The name of event kind `kind` (stream/event.h's EventKindName), NULL
 * for a value no kind has. */
const char* liveprof_kind_name(int kind);
/* The text of name `id` (valid for the process's life). */
const char* liveprof_name(uint32_t id);
/* Diagnostic counter `i`: its name (NULL past the last) and value. */
const char* liveprof_diagnostic(int i, uint64_t* value);

typedef struct liveprof_event {
  uint64_t ts_ns, dur_ns; /* host ns (a line through two clock readings) */
  int64_t step;           /* step markers; else -1 */
  double value;           /* counters */
  uint32_t name, track;
  uint8_t kind, sub;
} liveprof_event;
/* Tests only: takes up to `capacity` of the events recorded and not sent,
 * oldest first per thread. -1 while a sender runs (it drains). */
int64_t liveprof_drain_local(liveprof_event* out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* LIVEPROF_ATTACH_LIVEPROF_C_H_ */
