// Shared by the two halves of the elementwise table (cases_elementwise.cpp: unary ops and the
// table function; cases_elementwise_binary.cpp: binary ops and the benchmarks): short names for
// the types and layouts the rows are written in, and add_row.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/ops/elementwise.h"
#include "reference/elementwise.h"
#include "suites/ops/op_case.h"

namespace tb::suites::elementwise_rows {

namespace O = tb::ops;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using Tn = tb::Tensor;
using RT = ref::Tensor;
using O::Scalar;

constexpr Layout C = Layout::Contiguous, Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;
constexpr DType kAll[] = {DType::Bool,    DType::Int32,   DType::Int64,  DType::BFloat16,
                          DType::Float16, DType::Float32, DType::Float64};
inline std::string dn(DType d) { return core::name(d); }

inline void add_row(std::vector<OpCase>& v, std::string name, std::vector<Input> in, EngineFn e, RefFn r,
             Check check = Check::Values) {
  v.push_back(make_case(std::move(name), std::move(in), std::move(e), std::move(r), check));
}

}  // namespace tb::suites::elementwise_rows
