// XPlaneImporter: the TensorFlow / JAX / XLA profilers' `.xplane.pb` files (a
// serialized XSpace, xplane.proto) into liveprof events. The file is read one
// plane at a time (the XSpace is never held whole), plain or gzip.
//
// Mapping (docs/semantics-tf.md §0.1, §0.2):
//   /host:CPU (and the other /host: planes but metadata): one host track per
//   line (thread), keyed by the line id, so /host:CUPTI's and
//   /host:python-tracer's lines merge into their threads as xprof merges them.
//     a `correlation_id` stat                kRuntimeApi (the launch), corr
//     MemoryAllocation / MemoryDeallocation  kAlloc / kFree: `allocator_name`, `addr`,
//                                            `allocation_bytes` (else `requested_bytes`);
//                                            an allocation's `tf_op`, `region_type`,
//                                            `data_type`, `tensor_shape`, `requested_bytes`
//                                            in corr (kFlagAllocAnnotation)
//     Iterator::...                          kInputSpan (tf.data; the stage from the name)
//     "name:Type" (a TF or JAX op name)      kFrameworkOp
//     `_r` with `step_num` / `iter_num`      kStepMarker (only when no device has a
//                                            Steps line)
//     others                                 kHostSpan
//   /device:GPU:N: the plane's stats (compute capability, cores, memory) a
//   kDeviceInfo; one GPU track per stream line (device N, stream = line id):
//     Memcpy* names / `memcpy_details`       kMemcpy{HtoD,DtoH,DtoD,HtoH,PtoP} ("size:N" bytes)
//     Memset* names                          kMemset
//     others                                 kKernel: corr = `correlation_id`,
//                                            details = `kernel_details`, op = `tf_op`
//                                            (else the outermost annotation, `level 0`)
//     the "Steps" line (derived)             kStepMarker (step_num from `step_name`, else
//                                            `group_id`), from the first device that has one
//     other derived lines (XLA Ops, TensorFlow Ops, Name Scope, ...): skipped, counted
//   other planes (/device:TPU:N, /host:metadata, ...): dropped, counted by plane.
// Times: a line's timestamp_ns plus each event's offset in ps, to the ns below
// (begin and end are each floored, so nesting is kept).
#ifndef LIVEPROF_IMPORT_XPLANE_H_
#define LIVEPROF_IMPORT_XPLANE_H_

#include <string>

#include "import/chrome_trace.h"

namespace liveprof {

// True if `path` names an XPlane file (".xplane.pb", ".xplane.pb.gz").
bool IsXPlanePath(std::string_view path);

// Imports `path` with names interned in `names`. Events come in plane order;
// definitions before the events that use them. false on an unreadable or
// malformed file: *error says what and at which plane / byte; the planes
// before it were handed over.
bool ImportXPlaneFile(const std::string& path, NameTable* names, const ChromeTraceImporter::Sink& sink,
                      ImportReport* report, std::string* error, const ImportProgressFn& progress = {});
// The same over a serialized XSpace in memory (tests, fuzzing; under 2 GiB).
bool ImportXPlaneBytes(std::string_view bytes, NameTable* names, const ChromeTraceImporter::Sink& sink,
                       ImportReport* report, std::string* error);

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_XPLANE_H_
