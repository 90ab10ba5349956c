#include "suites/register_all.h"

#include "engine/tensor/iterator.h"
#include "harness/suite.h"
#include "reference/tensor.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

void register_all() {
  // Same thread count on both sides: the harness calls this with --threads.
  harness::register_thread_setter([](int n) { ref::set_threads(n); });
  const nlohmann::json info = ref::info();  // a named copy: items() must not outlive it
  for (auto& [k, v] : info.items()) harness::add_run_info(k, v);
  harness::add_run_info("engine_blas", "oneDNN (libdnnl) for matmul and convolution");

  harness::register_suite({
      "ops",
      "every tensor op against LibTorch: values, layouts, dtypes, errors; op benchmarks",
      [] {
        std::vector<harness::TestCase> tests;
        for (OpCase& c : all_op_cases()) {
          auto shared = std::make_shared<OpCase>(std::move(c));
          tests.push_back({shared->name, [shared] { return run_case(*shared); }});
        }
        return tests;
      },
      [] {
        std::vector<harness::BenchCase> benches;
        for (OpCase& c : all_op_cases())
          if (c.bench) benches.push_back(make_bench(c));
        return benches;
      },
  });
}

}  // namespace tb::suites
