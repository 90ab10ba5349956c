// Tensor methods that copy show in a profile as ops (engine/core/profiler.h, OpScope): a reshape
// that cannot be a view, contiguous, clone, to and copy_, each with its name and input shapes,
// the copy_ nested under the method that made it; views and no-op calls record nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/profiler.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

using profiler::Category;
using profiler::Event;

// The events of a trace as "name args", in recording order (parents before children).
std::vector<std::string> named(const profiler::Trace& t) {
  std::vector<std::string> out;
  for (const Event& e : t.events) out.push_back(std::string(e.name) + " " + e.args);
  return out;
}

TEST(TensorProfile, AReshapeCopyAppearsWithItsNameAndShape) {
  const Tensor x = arange(6).reshape({2, 3}).to(DType::Float32).t();  // [3, 2], not viewable as [6]
  profiler::Profile p;
  const Tensor y = x.reshape({6});
  profiler::Trace t = p.stop();
  EXPECT_EQ(named(t),
            (std::vector<std::string>{R"(reshape "input_shapes":[[3, 2]],"input_dtypes":["float32"])",
                                      R"(copy_ "input_shapes":[[3, 2],[3, 2]],"input_dtypes":["float32","float32"])"}));
  const Event& reshape = t.events[0];
  const Event& copy = t.events[1];
  EXPECT_EQ(reshape.cat, Category::Op);
  EXPECT_LE(reshape.start_ns, copy.start_ns);
  EXPECT_LE(copy.end_ns, reshape.end_ns);
  EXPECT_EQ(reshape.self_ns, reshape.end_ns - reshape.start_ns - (copy.end_ns - copy.start_ns));
  EXPECT_EQ(y.sizes(), Shape({6}));
}

TEST(TensorProfile, CopiesAreOpsAndViewsAreNot) {
  const Tensor x = ones({4, 2}, DType::Float32);
  profiler::Profile p;
  (void)x.reshape({2, 4});  // a view
  (void)x.contiguous();     // already contiguous: the same tensor
  (void)x.to(DType::Float32);
  (void)x.t().contiguous();
  (void)x.clone();
  (void)x.to(DType::BFloat16);
  Tensor z = zeros({4, 2}, DType::Float64);  // a filling factory: "full" (zeros and ones are full)
  z.copy_(x);
  profiler::Trace t = p.stop();
  std::vector<std::string> names;
  for (const Event& e : t.events) names.emplace_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"contiguous", "copy_", "clone", "copy_", "to", "copy_", "full", "copy_"}));
  EXPECT_EQ(t.events[0].args, R"("input_shapes":[[2, 4]],"input_dtypes":["float32"])");
  EXPECT_EQ(t.events[4].args, R"("input_shapes":[[4, 2]],"input_dtypes":["float32"])");
  EXPECT_EQ(t.events[7].args, R"("input_shapes":[[4, 2],[4, 2]],"input_dtypes":["float64","float32"])");
}

TEST(TensorProfile, OffRecordsNothing) {
  const Tensor x = ones({3, 2}).t();
  EXPECT_FALSE(profiler::enabled());
  (void)x.contiguous();
  profiler::Profile p;
  EXPECT_TRUE(p.stop().events.empty());
}

}  // namespace
}  // namespace tb
