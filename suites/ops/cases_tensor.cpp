// The tensor family: views (checked for sizes, strides, offsets and storage sharing), copies,
// casts (round to nearest even into bf16/f16), creation ops, and the errors of bad input. Part 2
// (cases_tensor_views.cpp): the same view and copy methods with gradients.
#include "engine/tensor/factories.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

using E = std::vector<tb::Tensor>;
using R = std::vector<ref::Tensor>;

// A view case on one input of `shape` in `layout`; with `grad_f32` its float32 row is also a
// gradient row (Tensor's view methods are differentiable).
void add_view(std::vector<OpCase>& cs, const std::string& op, const std::string& variant, Shape shape, Layout layout,
              std::function<tb::Tensor(const tb::Tensor&)> e, std::function<ref::Tensor(const ref::Tensor&)> r,
              Check check = Check::View, bool grad_f32 = false) {
  for (DType dt : {DType::Float32, DType::Int64}) {
    cs.push_back({op + "/" + core::name(dt) + "/" + variant,
                  {{shape, dt, layout}},
                  [e](const E& in) { return one(e(in[0])); },
                  [r](const R& in) { return one(r(in[0])); },
                  check});
    cs.back().grad = grad_f32 && dt == DType::Float32;
  }
}

void add_error(std::vector<OpCase>& cs, const std::string& op, const std::string& variant, Shape shape,
               std::function<tb::Tensor(const tb::Tensor&)> e, std::function<ref::Tensor(const ref::Tensor&)> r,
               Layout layout = Layout::Contiguous) {
  cs.push_back({op + "/float32/error_" + variant,
                {{shape, DType::Float32, layout}},
                [e](const E& in) { return one(e(in[0])); },
                [r](const R& in) { return one(r(in[0])); },
                Check::Error});
}

void view_cases(std::vector<OpCase>& cs) {
  const auto C = Layout::Contiguous, Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;
  for (Layout l : {C, Tr, St, Ex}) {
    const std::string ln = l == C ? "contiguous" : l == Tr ? "transposed" : l == St ? "strided" : "expanded";
    add_view(
        cs, "transpose", ln, {3, 4, 5}, l, [](auto& x) { return x.transpose(0, 2); },
        [](auto& x) { return ref::transpose(x, 0, 2); });
    add_view(
        cs, "t", ln, {4, 6}, l, [](auto& x) { return x.t(); }, [](auto& x) { return ref::t(x); });
    add_view(
        cs, "permute", ln, {2, 3, 4}, l,
        [](auto& x) {
          return x.permute({2, 0, -2});
        },
        [](auto& x) {
          return ref::permute(x, {2, 0, -2});
        });
    add_view(
        cs, "narrow", ln, {5, 6}, l, [](auto& x) { return x.narrow(1, 2, 3); },
        [](auto& x) { return ref::narrow(x, 1, 2, 3); });
    add_view(
        cs, "select", ln, {4, 5}, l, [](auto& x) { return x.select(-1, -2); },
        [](auto& x) { return ref::select(x, -1, -2); });
    add_view(
        cs, "slice", ln + "_step3", {7, 9}, l, [](auto& x) { return x.slice(1, 1, 8, 3); },
        [](auto& x) { return ref::slice(x, 1, 1, 8, 3); });
    add_view(
        cs, "slice", ln + "_clamped", {7, 9}, l, [](auto& x) { return x.slice(0, -20, 100, 2); },
        [](auto& x) { return ref::slice(x, 0, -20, 100, 2); });
    add_view(
        cs, "squeeze", ln, {1, 3, 1, 4}, l, [](auto& x) { return x.squeeze(); },
        [](auto& x) { return ref::squeeze(x); });
    add_view(
        cs, "squeeze_dim", ln, {1, 3, 1, 4}, l, [](auto& x) { return x.squeeze(2); },
        [](auto& x) { return ref::squeeze(x, 2); });
    add_view(
        cs, "unsqueeze", ln, {3, 4}, l, [](auto& x) { return x.unsqueeze(1); },
        [](auto& x) { return ref::unsqueeze(x, 1); });
    add_view(
        cs, "unsqueeze_end", ln, {3, 4}, l, [](auto& x) { return x.unsqueeze(-1); },
        [](auto& x) { return ref::unsqueeze(x, -1); });
    add_view(
        cs, "expand", ln, {1, 4}, l,
        [](auto& x) {
          return x.expand({2, 3, -1});
        },
        [](auto& x) {
          return ref::expand(x, {2, 3, -1});
        });
    // reshape/flatten may copy: Check::View also checks that both sides copy in the same cases.
    add_view(
        cs, "reshape", ln, {4, 6}, l,
        [](auto& x) {
          return x.reshape({3, -1});
        },
        [](auto& x) {
          return ref::reshape(x, {3, -1});
        });
    add_view(
        cs, "flatten", ln, {2, 3, 4}, l, [](auto& x) { return x.flatten(1); },
        [](auto& x) { return ref::flatten(x, 1, -1); });
    // contiguous/float32/transposed, clone/float32/{strided,expanded}: also the gradient rows of
    // those names (their float64 rows: cases_tensor_views.cpp).
    add_view(
        cs, "contiguous", ln, {3, 5}, l, [](auto& x) { return x.contiguous(); },
        [](auto& x) { return ref::contiguous(x); }, Check::View, l == Tr);
    add_view(
        cs, "clone", ln, {3, 5}, l, [](auto& x) { return x.clone(); }, [](auto& x) { return ref::clone(x); },
        Check::View, l == St || l == Ex);
  }
  // contiguous() of attention's keys, (N, L, H, hd) -> (N, H, hd, L): a copy between two
  // different unit-stride dims (Note [Copies that reorder memory] in engine/tensor/copy.cpp).
  for (DType d : {DType::Float32, DType::BFloat16}) {
    cs.push_back({std::string("contiguous/") + core::name(d) + "/permute_0231",
                  {{{16, 128, 8, 32}, d}},
                  [](const E& in) {
                    return one(in[0].permute({0, 2, 3, 1}).contiguous());
                  },
                  [](const R& in) {
                    return one(ref::contiguous(ref::permute(in[0], {0, 2, 3, 1})));
                  }});
    cs.back().bench = true;
    cs.back().bytes = 2.0 * 16 * 128 * 8 * 32 * double(core::itemsize(d));
  }
  add_view(
      cs, "view", "split_dim", {4, 6}, C,
      [](auto& x) {
        return x.view({2, 2, 3, 2});
      },
      [](auto& x) {
        return ref::view(x, {2, 2, 3, 2});
      });
  add_view(
      cs, "view", "infer", {4, 6}, C,
      [](auto& x) {
        return x.view({-1, 8});
      },
      [](auto& x) {
        return ref::view(x, {-1, 8});
      });
  add_view(
      cs, "view", "strided_inner_ok", {4, 6}, St,
      [](auto& x) {
        return x.view({2, 2, 6});
      },
      [](auto& x) {
        return ref::view(x, {2, 2, 6});
      });
  add_view(
      cs, "view", "zero_size", {0, 6}, C,
      [](auto& x) {
        return x.view({3, 0, 2});
      },
      [](auto& x) {
        return ref::view(x, {3, 0, 2});
      });
  add_view(
      cs, "view", "scalar", {}, C,
      [](auto& x) {
        return x.view({1, 1});
      },
      [](auto& x) {
        return ref::view(x, {1, 1});
      });
  add_view(
      cs, "unflatten", "contiguous", {4, 6}, C,
      [](auto& x) {
        return x.unflatten(1, {2, -1});
      },
      [](auto& x) {
        return ref::unflatten(x, 1, {2, -1});
      });
  add_view(
      cs, "as_strided", "overlapping", {4, 6}, C,
      [](auto& x) {
        return x.as_strided({3, 3}, {1, 2}, 1);
      },
      [](auto& x) {
        return ref::as_strided(x, {3, 3}, {1, 2}, 1);
      });
  add_view(
      cs, "transpose", "zero_size", {0, 3}, C, [](auto& x) { return x.transpose(0, 1); },
      [](auto& x) { return ref::transpose(x, 0, 1); });
  add_view(
      cs, "select", "scalar_result", {5}, C, [](auto& x) { return x.select(0, 3); },
      [](auto& x) { return ref::select(x, 0, 3); });

  add_error(
      cs, "view", "incompatible", {4, 6}, [](auto& x) { return x.view({-1}); },
      [](auto& x) { return ref::view(x, {-1}); }, Tr);
  add_error(
      cs, "view", "wrong_numel", {4, 6},
      [](auto& x) {
        return x.view({5, 5});
      },
      [](auto& x) {
        return ref::view(x, {5, 5});
      });
  add_error(
      cs, "view", "two_inferred", {4, 6},
      [](auto& x) {
        return x.view({-1, -1});
      },
      [](auto& x) {
        return ref::view(x, {-1, -1});
      });
  add_error(
      cs, "view", "zero_size_ambiguous", {0, 6},
      [](auto& x) {
        return x.view({3, 0, -1});
      },
      [](auto& x) {
        return ref::view(x, {3, 0, -1});
      });
  add_error(
      cs, "select", "out_of_range", {4, 6}, [](auto& x) { return x.select(1, 6); },
      [](auto& x) { return ref::select(x, 1, 6); });
  add_error(
      cs, "transpose", "bad_dim", {4, 6}, [](auto& x) { return x.transpose(0, 2); },
      [](auto& x) { return ref::transpose(x, 0, 2); });
  add_error(
      cs, "permute", "repeated", {4, 6},
      [](auto& x) {
        return x.permute({0, 0});
      },
      [](auto& x) {
        return ref::permute(x, {0, 0});
      });
  add_error(
      cs, "expand", "mismatch", {3, 4},
      [](auto& x) {
        return x.expand({3, 5});
      },
      [](auto& x) {
        return ref::expand(x, {3, 5});
      });
  add_error(
      cs, "narrow", "past_end", {3, 4}, [](auto& x) { return x.narrow(1, 2, 3); },
      [](auto& x) { return ref::narrow(x, 1, 2, 3); });
  add_error(
      cs, "as_strided", "out_of_storage", {2, 3},
      [](auto& x) {
        return x.as_strided({4, 4}, {4, 1}, 0);
      },
      [](auto& x) {
        return ref::as_strided(x, {4, 4}, {4, 1}, 0);
      });
  add_error(
      cs, "t", "3d", {2, 3, 4}, [](auto& x) { return x.t(); }, [](auto& x) { return ref::t(x); });
  add_error(
      cs, "slice", "zero_step", {5}, [](auto& x) { return x.slice(0, 0, 5, 0); },
      [](auto& x) { return ref::slice(x, 0, 0, 5, 0); });
}

void cast_cases(std::vector<OpCase>& cs) {
  for (DType from : core::kAllDTypes) {
    for (DType to : core::kAllDTypes) {
      if (from == to) continue;
      // Values in a range every dtype holds; bf16/f16 rounding is what's under test.
      cs.push_back({std::string("to/") + core::name(to) + "/from_" + core::name(from),
                    {{{7, 33}, from, Layout::Strided}},
                    [to](const E& in) { return one(in[0].to(to)); },
                    [to](const R& in) { return one(ref::to(in[0], to)); }});
    }
  }
  // Round to nearest even at the tie points of bf16 and f16, plus overflow, subnormals, inf, NaN.
  for (DType to : {DType::BFloat16, DType::Float16}) {
    const std::vector<double> edge = {1.0 + 1.0 / 256,
                                      1.0 + 3.0 / 256,
                                      1.0 + 1.0 / 2048,
                                      1.0 + 3.0 / 2048,
                                      65504,
                                      65519.9,
                                      65520,
                                      1e-7,
                                      6e-8,
                                      3e-8,
                                      -2.5e-38,
                                      1e38,
                                      3.4e38,
                                      std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN(),
                                      -0.0};
    cs.push_back({std::string("to/") + core::name(to) + "/rounding_edges",
                  {},
                  [to, edge](const E&) { return one(from_vector(edge, DType::Float32).to(to)); },
                  [to, edge](const R&) { return one(ref::to(ref::to_ref(from_vector(edge, DType::Float32)), to)); }});
  }
  cs.push_back({"copy_/float32/broadcast_cast",
                {{{4, 5}, DType::Float32}, {{5}, DType::Float64, Layout::Strided}},
                [](const E& in) {
                  tb::Tensor d = in[0].clone();
                  d.copy_(in[1]);
                  return one(d);
                },
                [](const R& in) {
                  ref::Tensor d = ref::clone(in[0]);
                  ref::copy_(d, in[1]);
                  return one(d);
                }});
  cs.push_back({"copy_/float32/into_transposed",
                {{{4, 5}, DType::Float32, Layout::Transposed}, {{4, 5}, DType::BFloat16}},
                [](const E& in) {
                  tb::Tensor d = in[0].clone().t().contiguous().t();
                  d.copy_(in[1]);
                  return one(d);
                },
                [](const R& in) {
                  ref::Tensor d = ref::t(ref::contiguous(ref::t(ref::clone(in[0]))));
                  ref::copy_(d, in[1]);
                  return one(d);
                },
                Check::View});
  cs.push_back({"copy_/float32/error_shape",
                {{{4, 5}, DType::Float32}, {{3}, DType::Float32}},
                [](const E& in) {
                  tb::Tensor d = in[0].clone();
                  d.copy_(in[1]);
                  return one(d);
                },
                [](const R& in) {
                  ref::Tensor d = ref::clone(in[0]);
                  ref::copy_(d, in[1]);
                  return one(d);
                },
                Check::Error});
}

void creation_cases(std::vector<OpCase>& cs) {
  for (DType dt : core::kAllDTypes) {
    const std::string n = core::name(dt);
    cs.push_back({"zeros/" + n + "/2x3",
                  {},
                  [dt](const E&) {
                    return one(zeros({2, 3}, dt));
                  },
                  [dt](const R&) {
                    return one(ref::zeros({2, 3}, dt));
                  }});
    cs.push_back({"ones/" + n + "/0x3",
                  {},
                  [dt](const E&) {
                    return one(ones({0, 3}, dt));
                  },
                  [dt](const R&) {
                    return one(ref::ones({0, 3}, dt));
                  }});
    cs.push_back({"full/" + n + "/scalar",
                  {},
                  [dt](const E&) { return one(full({}, 1, dt)); },
                  [dt](const R&) { return one(ref::full({}, 1, dt)); }});
    cs.push_back({"eye/" + n + "/3x5",
                  {},
                  [dt](const E&) { return one(eye(3, 5, dt)); },
                  [dt](const R&) { return one(ref::eye(3, 5, dt)); }});
    cs.push_back({"zeros_like/" + n + "/strided",
                  {{{3, 4}, dt, Layout::Strided}},
                  [](const E& in) { return one(zeros_like(in[0])); },
                  [](const R& in) { return one(ref::zeros_like(in[0])); }});
    cs.push_back({"ones_like/" + n + "/transposed",
                  {{{3, 4}, dt, Layout::Transposed}},
                  [](const E& in) { return one(ones_like(in[0])); },
                  [](const R& in) { return one(ref::ones_like(in[0])); }});
    if (dt == DType::Bool) continue;
    cs.push_back({"full/" + n + "/4x4",
                  {},
                  [dt](const E&) {
                    return one(full({4, 4}, 3, dt));
                  },
                  [dt](const R&) {
                    return one(ref::full({4, 4}, 3, dt));
                  }});
    cs.push_back({"arange/" + n + "/int_step",
                  {},
                  [dt](const E&) { return one(arange(-3, 17, 2, dt)); },
                  [dt](const R&) { return one(ref::arange(-3, 17, 2, dt)); }});
    cs.push_back({"full_like/" + n + "/3x4",
                  {{{3, 4}, dt}},
                  [](const E& in) { return one(full_like(in[0], 2)); },
                  [](const R& in) { return one(ref::full_like(in[0], 2)); }});
  }
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    const std::string n = core::name(dt);
    cs.push_back({"arange/" + n + "/fractional",
                  {},
                  [dt](const E&) { return one(arange(0, 1, 0.1, dt)); },
                  [dt](const R&) { return one(ref::arange(0, 1, 0.1, dt)); }});
    cs.push_back({"linspace/" + n + "/11",
                  {},
                  [dt](const E&) { return one(linspace(-1, 2, 11, dt)); },
                  [dt](const R&) { return one(ref::linspace(-1, 2, 11, dt)); }});
    cs.push_back({"linspace/" + n + "/one_step",
                  {},
                  [dt](const E&) { return one(linspace(3, 5, 1, dt)); },
                  [dt](const R&) { return one(ref::linspace(3, 5, 1, dt)); }});
    OpCase r{"rand/" + n + "/64k",
             {},
             [dt](const E&) {
               return one(rand({256, 256}, dt));
             },
             [dt](const R&) {
               return one(ref::rand({256, 256}, dt));
             },
             Check::Stats};
    r.stats_mean = 0.5;
    r.stats_std = std::sqrt(1.0 / 12);
    cs.push_back(r);
    OpCase rn{"randn/" + n + "/64k",
              {},
              [dt](const E&) {
                return one(randn({256, 256}, dt));
              },
              [dt](const R&) {
                return one(ref::randn({256, 256}, dt));
              },
              Check::Stats};
    cs.push_back(rn);
  }
  OpCase ri{"randint/int64/64k",
            {},
            [](const E&) {
              return one(randint(-3, 7, {256, 256}));
            },
            [](const R&) {
              return one(ref::randint(-3, 7, {256, 256}, DType::Int64));
            },
            Check::Stats};
  ri.stats_mean = 1.5;  // uniform on {-3, ..., 6}
  ri.stats_std = std::sqrt((100.0 - 1) / 12);
  cs.push_back(ri);

  cs.push_back({"zeros/float32/error_negative",
                {},
                [](const E&) {
                  return one(zeros({2, -1}));
                },
                [](const R&) {
                  return one(ref::zeros({2, -1}, DType::Float32));
                },
                Check::Error});
  cs.push_back({"empty/float32/error_overflow",
                {},
                [](const E&) {
                  return one(empty({1ll << 40, 1ll << 40}));
                },
                [](const R&) {
                  return one(ref::empty({1ll << 40, 1ll << 40}, DType::Float32));
                },
                Check::Error});
  cs.push_back({"arange/float32/error_sign",
                {},
                [](const E&) { return one(arange(5, 0, 1, DType::Float32)); },
                [](const R&) { return one(ref::arange(5, 0, 1, DType::Float32)); },
                Check::Error});
  cs.push_back({"randint/int64/error_range",
                {},
                [](const E&) { return one(randint(5, 5, {3})); },
                [](const R&) { return one(ref::randint(5, 5, {3}, DType::Int64)); },
                Check::Error});
}

}  // namespace

// Differentiable view and copy rows: cases_tensor_views.cpp.
std::vector<OpCase> tensor_view_grad_rows();

std::vector<OpCase> tensor_cases() {
  std::vector<OpCase> cs;
  view_cases(cs);
  cast_cases(cs);
  creation_cases(cs);
  for (OpCase& c : tensor_view_grad_rows()) cs.push_back(std::move(c));
  return cs;
}

}  // namespace tb::suites
