// The Trainer's mixed-precision recipe options (Note [Mixed precision and accumulation]):
// gradient accumulation equals one large batch, a checkpoint between micro-batches resumes bit for
// bit (scaler and accumulated gradients included), the GradScaler's skipped steps, per-epoch
// scheduling, ReduceLROnPlateau on the chosen metric and checkpoint-the-best in max mode, and
// clear errors for inconsistent options. The comparison with LibTorch is suites/training's
// recipe/* cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include "engine/autograd/functions.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/nn/activation.h"
#include "engine/nn/container.h"
#include "engine/nn/linear.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"
#include "engine/train/trainer.h"

namespace tb {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("trainbench-trainer-test-" + std::to_string(getpid()));
  TempDir() { fs::remove_all(p); }
  ~TempDir() { fs::remove_all(p); }
};

std::shared_ptr<nn::Sequential> small_model(DType dt) {
  core::manual_seed(3);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 8, true, dt));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(8, 3, true, dt));
  return m;
}

std::shared_ptr<data::TensorDataset> dataset(int64_t n, DType dt) {
  core::Generator g(17);
  return std::make_shared<data::TensorDataset>(randn({n, 6}, dt, &g), randint(0, 3, {n}, DType::Int64, &g));
}

data::DataLoader loader(std::shared_ptr<data::TensorDataset> ds, int64_t batch) {
  data::DataLoader::Options o;
  o.batch_size = batch;
  return data::DataLoader(std::move(ds), o);
}

train::Trainer::LossFn ce() {
  return [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); };
}

train::Options quiet() {
  train::Options o;
  o.log = [](const std::string&) {};
  return o;
}

void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    Tensor x = a[i].detach().contiguous(), y = b[i].detach().contiguous();
    ASSERT_EQ(x.sizes(), y.sizes());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), size_t(x.numel()) * x.itemsize()), 0) << "tensor " << i;
  }
}

// 3 micro-batches of 2 with accumulation 3 == one batch of 6 (float64: the mean of the three
// means is the mean of the six up to rounding); an epoch of 5 micro-batches takes 2 steps, the
// last over 2 micro-batches each weighted 1/2.
TEST(Trainer, AccumulationEqualsOneLargeBatch) {
  auto ds = dataset(12, DType::Float64);
  auto run = [&](int64_t batch, int64_t accumulation) {
    auto m = small_model(DType::Float64);
    optim::SGD::Options so;
    so.lr = 0.1;
    so.momentum = 0.9;
    auto opt = std::make_shared<optim::SGD>(m->parameters(), so);
    train::Options o = quiet();
    o.accumulation_steps = accumulation;
    o.epochs = 2;
    train::Trainer t(m, opt, nullptr, ce(), o);
    data::DataLoader l = loader(ds, batch);
    const auto stats = t.fit(l);
    EXPECT_EQ(stats[0].steps, 12 / (batch * accumulation));
    return m->parameters();
  };
  const auto accumulated = run(2, 3), whole = run(6, 1);
  for (size_t i = 0; i < whole.size(); ++i) {
    const double d = tb::max(tb::abs(tb::sub(accumulated[i].detach(), whole[i].detach()))).item_double();
    EXPECT_LT(d, 1e-13) << "parameter " << i;
  }

  // 5 micro-batches (10 samples, batch 2), accumulation 3: steps over 3 then 2 micro-batches.
  auto m = small_model(DType::Float64);
  auto opt = std::make_shared<optim::SGD>(m->parameters(), optim::SGD::Options{});
  train::Options o = quiet();
  o.accumulation_steps = 3;
  std::vector<int64_t> micro;
  o.on_step = [&](const train::StepInfo& s) { micro.push_back(s.micro_batches); };
  train::Trainer t(m, opt, nullptr, ce(), o);
  data::DataLoader l = loader(dataset(10, DType::Float64), 2);
  EXPECT_EQ(t.fit(l)[0].steps, 2);
  EXPECT_EQ(micro, (std::vector<int64_t>{3, 2}));
}

// A checkpoint after 1 step + 1 micro-batch of the next (accumulation 3, GradScaler growing its
// scale every 2 steps, bfloat16 autocast) resumes to the same parameters, optimizer state and
// scale as an uninterrupted run, bit for bit.
TEST(Trainer, ResumeBetweenMicroBatchesIsExact) {
  TempDir dir;
  auto ds = dataset(32, DType::Float32);
  auto make = [&](std::shared_ptr<nn::Sequential>& m, std::shared_ptr<optim::AdamW>& opt,
                  std::shared_ptr<optim::GradScaler>& scaler) {
    m = small_model(DType::Float32);
    opt = std::make_shared<optim::AdamW>(m->parameters(), optim::AdamW::Options{});
    scaler = std::make_shared<optim::GradScaler>(1024.0, 2.0, 0.5, 2);
    train::Options o = quiet();
    o.accumulation_steps = 3;
    o.clip_grad_norm = 1.0;
    o.autocast = DType::BFloat16;
    o.grad_scaler = scaler;
    return std::make_unique<train::Trainer>(m, opt, nullptr, ce(), o);
  };
  data::DataLoader l = loader(ds, 4);
  std::vector<data::Batch> batches;
  for (const data::Batch& b : l) batches.push_back(b);
  ASSERT_EQ(batches.size(), 8u);

  std::shared_ptr<nn::Sequential> m1, m2;
  std::shared_ptr<optim::AdamW> o1, o2;
  std::shared_ptr<optim::GradScaler> s1, s2;
  auto whole = make(m1, o1, s1);
  for (int i = 0; i < 7; ++i) whole->train_step(batches[size_t(i)]);

  auto first = make(m2, o2, s2);
  for (int i = 0; i < 4; ++i) first->train_step(batches[size_t(i)]);
  EXPECT_EQ(first->micro_batch(), 1);
  first->save(dir.p.string());
  auto resumed = make(m2, o2, s2);
  ASSERT_TRUE(resumed->resume(dir.p.string()));
  EXPECT_EQ(resumed->micro_batch(), 1);
  EXPECT_EQ(resumed->step(), 1);
  for (int i = 4; i < 7; ++i) resumed->train_step(batches[size_t(i)]);

  EXPECT_EQ(whole->step(), 2);
  EXPECT_EQ(resumed->step(), 2);
  EXPECT_EQ(s1->get_scale(), s2->get_scale());
  EXPECT_EQ(s1->get_scale(), 2048.0);  // grown once after 2 clean steps
  expect_bitwise_equal(m1->parameters(), m2->parameters());
  std::vector<Tensor> st1, st2;
  for (auto& [n, t] : o1->state_dict().tensors) st1.push_back(t);
  for (auto& [n, t] : o2->state_dict().tensors) st2.push_back(t);
  expect_bitwise_equal(st1, st2);
  // One more micro-batch: the resumed run's accumulated gradients match too.
  whole->train_step(batches[7]);
  resumed->train_step(batches[7]);
  for (size_t i = 0; i < m1->parameters().size(); ++i)
    expect_bitwise_equal({m1->parameters()[i].grad()}, {m2->parameters()[i].grad()});
}

// A non-finite loss: the scaler skips optimizer.step() (parameters unchanged), halves its scale;
// the step still counts, and the scheduler still steps (as in PyTorch's loop).
TEST(Trainer, GradScalerSkipsStepsWithInfGradients) {
  auto m = small_model(DType::Float32);
  auto opt = std::make_shared<optim::SGD>(m->parameters(), optim::SGD::Options{0.1});
  auto sched = std::make_shared<optim::StepLR>(*opt, 1, 0.5);
  auto scaler = std::make_shared<optim::GradScaler>(256.0);
  train::Options o = quiet();
  o.grad_scaler = scaler;
  o.clip_grad_norm = 1.0;
  std::vector<train::StepInfo> steps;
  o.on_step = [&](const train::StepInfo& s) { steps.push_back(s); };
  int calls = 0;
  train::Trainer t(
      m, opt, sched,
      [&](nn::Module& mod, const data::Batch& b) {
        Tensor loss = tb::cross_entropy(mod(b.input), b.target);
        return ++calls == 2 ? tb::mul(loss, std::numeric_limits<double>::infinity()) : loss;
      },
      o);
  data::DataLoader l = loader(dataset(12, DType::Float32), 4);
  std::vector<data::Batch> batches;
  for (const data::Batch& b : l) batches.push_back(b);
  t.train_step(batches[0]);
  std::vector<Tensor> before;
  for (const Tensor& p : m->parameters()) before.push_back(p.detach().clone());
  t.train_step(batches[1]);
  expect_bitwise_equal(before, m->parameters());
  t.train_step(batches[2]);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_FALSE(steps[0].skipped);
  EXPECT_TRUE(steps[1].skipped);
  EXPECT_FALSE(steps[2].skipped);
  EXPECT_EQ(steps[1].scale, 256.0);
  EXPECT_EQ(steps[2].scale, 128.0);
  EXPECT_EQ(t.skipped_steps(), 1);
  EXPECT_DOUBLE_EQ(steps[2].lr, 0.025);  // 0.1 halved after each of the two steps before
}

// Validation accuracy per epoch (scripted through the EvalFn's counts) 0.5, 0.75, 0.75, 0.75,
// 0.9: ReduceLROnPlateau(max, patience 1) halves the lr after epoch 3, and the best checkpoint is
// epoch 4's (max mode). With scheduler_interval "epoch" a StepLR steps once per epoch.
TEST(Trainer, PlateauAndBestOnAccuracy) {
  TempDir dir;
  auto m = small_model(DType::Float32);
  auto opt = std::make_shared<optim::SGD>(m->parameters(), optim::SGD::Options{0.1});
  auto sched = std::make_shared<optim::ReduceLROnPlateau>(*opt, "max", 0.5, 1, 0.0);
  train::Options o = quiet();
  o.epochs = 5;
  o.metric = "accuracy";
  o.metric_mode = "max";
  o.checkpoint_dir = dir.p.string();
  train::Trainer t(m, opt, sched, ce(), o);
  data::DataLoader l = loader(dataset(8, DType::Float32), 4), v = loader(dataset(4, DType::Float32), 4);
  const std::vector<int64_t> correct{50, 75, 75, 75, 90};
  int64_t epoch = 0;
  train::Trainer::EvalFn eval = [&](nn::Module&, const data::Batch&) {
    train::EvalCounts c;
    c.correct = correct[size_t(epoch++)];
    c.count = 100;
    return c;
  };
  const auto stats = t.fit(l, &v, &eval);
  ASSERT_EQ(stats.size(), 5u);
  EXPECT_DOUBLE_EQ(stats[1].lr, 0.1);
  EXPECT_DOUBLE_EQ(stats[2].lr, 0.1);   // one bad epoch: within patience
  EXPECT_DOUBLE_EQ(stats[3].lr, 0.05);  // two: reduced
  EXPECT_DOUBLE_EQ(stats[4].lr, 0.05);
  EXPECT_EQ(t.best_epoch(), 4);
  EXPECT_DOUBLE_EQ(*t.best_metric(), 0.9);
  EXPECT_TRUE(fs::exists(dir.p / "best" / "latest"));
  EXPECT_EQ(checkpoint::load_checkpoint((dir.p / "best").string()).epoch, 5);

  auto m2 = small_model(DType::Float32);
  auto opt2 = std::make_shared<optim::SGD>(m2->parameters(), optim::SGD::Options{0.1});
  auto step_lr = std::make_shared<optim::StepLR>(*opt2, 1, 0.5);
  train::Options o2 = quiet();
  o2.epochs = 3;
  o2.scheduler_interval = "epoch";
  train::Trainer t2(m2, opt2, step_lr, ce(), o2);
  const auto s2 = t2.fit(l);
  EXPECT_EQ(t2.step(), 6);
  EXPECT_DOUBLE_EQ(s2[2].lr, 0.1 * 0.125);
}

TEST(Trainer, InconsistentOptionsAreErrors) {
  auto m = small_model(DType::Float32);
  auto opt = std::make_shared<optim::SGD>(m->parameters(), optim::SGD::Options{0.1});
  auto make = [&](train::Options o, std::shared_ptr<optim::LRScheduler> s = nullptr) {
    o.log = [](const std::string&) {};
    train::Trainer t(m, opt, s, ce(), o);
  };
  train::Options o;
  o.accumulation_steps = 0;
  EXPECT_THROW(make(o), core::Error);
  o = {};
  o.autocast = DType::Float64;
  EXPECT_THROW(make(o), core::Error);
  o = {};
  o.metric = "auc";
  EXPECT_THROW(make(o), core::Error);
  o = {};
  o.scheduler_interval = "batch";
  EXPECT_THROW(make(o), core::Error);
  o = {};
  o.metric = "accuracy";  // metric_mode stays "min"
  try {
    make(o, std::make_shared<optim::ReduceLROnPlateau>(*opt, "max"));
    FAIL() << "a plateau mode that disagrees with metric_mode must be an error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("must agree"), std::string::npos) << e.what();
  }
  // ReduceLROnPlateau without validation.
  train::Trainer t(m, opt, std::make_shared<optim::ReduceLROnPlateau>(*opt), ce(), quiet());
  data::DataLoader l = loader(dataset(4, DType::Float32), 4);
  EXPECT_THROW(t.fit(l), core::Error);
}

TEST(Trainer, F1Metric) {
  train::EvalCounts c;
  c.true_positive = 3, c.false_positive = 1, c.false_negative = 2;
  EXPECT_DOUBLE_EQ(train::eval_metric(c, "f1"), 6.0 / 9.0);
  EXPECT_TRUE(std::isnan(train::eval_metric(train::EvalCounts{}, "f1")));
  EXPECT_THROW(train::eval_metric(c, "auc"), core::Error);
}

}  // namespace
}  // namespace tb
