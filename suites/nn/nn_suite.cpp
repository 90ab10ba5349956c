// The nn suite: every layer against its LibTorch twin (layer_cases.cpp), attention, the models
// and losses on models (model_cases.cpp), and Module's own behaviour (module_cases.cpp).
#include "suites/nn/nn_suite.h"

#include <memory>

#include "suites/nn/nn_case.h"

namespace tb::suites {

std::vector<harness::TestCase> nn_tests() {
  std::vector<harness::TestCase> tests;
  for (auto table : {layer_cases, attention_cases, model_cases})
    for (LayerCase& c : table()) {
      auto shared = std::make_shared<LayerCase>(std::move(c));
      tests.push_back({shared->name, [shared] { return run_layer_case(*shared); }});
    }
  for (harness::TestCase& t : module_semantics_tests()) tests.push_back(std::move(t));
  return tests;
}

}  // namespace tb::suites
