// Framework op names as xprof reads them (docs/semantics-tf.md §0.3,
// xla/tsl/profiler/utils/tf_op_utils.cc): "model/dense/MatMul:MatMul" is a
// TensorFlow op of type MatMul, "Iterator::Batch" a tf.data op, and so on.
// Used by the TF stats table and the step breakdown's name rules.
#ifndef LIVEPROF_AGGREGATORS_TF_TF_OP_NAME_H_
#define LIVEPROF_AGGREGATORS_TF_TF_OP_NAME_H_

#include <cstdint>
#include <string_view>

namespace liveprof {

enum class OpCategory : uint8_t {
  kUnknown = 0,
  kTensorFlow,
  kJax,
  kDataset,  // tf.data: "Iterator::..."
  kMemcpyHToD,
  kMemcpyDToH,
  kMemcpyDToD,
  kMemcpyHToH,
};

// "TensorFlow", "JAX", "Dataset", "MemcpyHToD"..., "Unknown".
std::string_view OpCategoryName(OpCategory c);

struct ParsedOp {
  // Views into the parsed string, or static literals ("Dataset", "MemcpyHToD").
  std::string_view name;  // op name without ":type"; the whole name otherwise.
  std::string_view type;  // op type; "" when kUnknown.
  OpCategory category = OpCategory::kUnknown;
};

// Splits a framework op full name ("model/dense/MatMul:MatMul") as xprof does:
//  no ':'             -> memcpy by case-insensitive prefix "MEMCPYHToD"... else
//                        Unknown (name = whole, type = "");
//  "Iterator::..."    -> Dataset (name = whole, type "Dataset");
//  TF name ':' TF type-> TensorFlow (name, type);
//  JAX type (or, if the type is empty, the last path segment without a numeric
//  "_N" suffix) matching [a-z_][a-z0-9_]*(\[.*\])? -> Jax, "[...]" stripped;
//  empty type         -> TensorFlow with the derived type;
//  otherwise Unknown. Allocation-free; any thread.
ParsedOp ParseTfOpName(std::string_view full_name);

// True if `s` starts with `prefix`, ASCII letters compared without case.
bool StartsWithNoCase(std::string_view s, std::string_view prefix);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_TF_OP_NAME_H_
