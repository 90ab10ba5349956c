// Shared by the parts of the elementwise table (cases_elementwise.cpp: unary ops and the table
// function; cases_elementwise_binary.cpp: binary ops and the benchmarks; cases_elementwise_grad.cpp
// and cases_elementwise_binary_grad.cpp: the rows that exist for their gradients): short names for
// the types and layouts the rows are written in, and add_row.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "reference/elementwise.h"
#include "suites/ops/op_case.h"

namespace tb::suites::elementwise_rows {

namespace O = tb::ops;
namespace A = tb::autograd;  // the differentiable functions, for rows with `grad`
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
// The dtypes of the gradient rows (finite differences in float64).
inline bool grad_dtype(DType d) { return d == DType::Float32 || d == DType::Float64; }

inline void add_row(std::vector<OpCase>& v, std::string name, std::vector<Input> in, EngineFn e, RefFn r,
                    Check check = Check::Values) {
  v.push_back(make_case(std::move(name), std::move(in), std::move(e), std::move(r), check));
}

// The gradient rows of a differentiable unary op g (float32/float64, inputs `vals`) beyond its
// layout rows: one element, a view taken inside the op, a chain with mul. Names base + variant.
void grad_unary_rows(std::vector<OpCase>& v, const std::string& base, const std::function<Tn(const Tn&)>& g,
                     const std::function<RT(const RT&)>& r, DType d, Values vals);
// The gradient rows of an in-place unary op f (on a clone of x in each layout; on a view of a
// non-leaf). `skip`: a layout whose row of this name is made elsewhere.
void grad_inplace_rows(std::vector<OpCase>& v, const std::string& base, const std::function<void(Tn&)>& f,
                       const std::function<RT(const RT&)>& r, DType d, Values vals, const char* skip = nullptr);

}  // namespace tb::suites::elementwise_rows

namespace tb::suites {
// The parts of the table (each appends its rows).
void elementwise_binary_rows(std::vector<OpCase>& v);       // cases_elementwise_binary.cpp
void elementwise_grad_rows(std::vector<OpCase>& v);         // cases_elementwise_grad.cpp
void elementwise_binary_grad_rows(std::vector<OpCase>& v);  // cases_elementwise_binary_grad.cpp
}  // namespace tb::suites
