// Hang scenarios of plain collectives (Note [Hang scenarios] in hang_launch.cpp): ranks that leave,
// freeze, skip, add or mismatch a collective, throw, or never start. Each check names what a
// correct diagnosis must say, from the fault plan alone.
#include <signal.h>

#include <chrono>
#include <regex>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/tensor/factories.h"
#include "suites/scenarios/hang_launch.h"
#include "suites/scenarios/scenarios.h"

namespace tb::suites {

namespace {

using dist::FindingKind;
using hang::Check;
using hang::Outcome;
using hang::Rank;

std::string seq_text(uint64_t s) { return "#" + std::to_string(s); }

// Every rank but the victim trains all steps; the victim runs `fault` at its fault step instead
// of that step's collective, then goes on with the remaining steps.
std::function<void(Rank&)> train_with(std::function<void(Rank&)> fault) {
  return [fault](Rank& r) {
    r.join();
    for (int i = 1; i <= r.plan.steps; ++i) {
      if (r.victim() && i == r.plan.step) {
        fault(r);
        continue;
      }
      r.step();
    }
  };
}

// The survivors' dumps must name the victim as absent or lagging at the fault's collective, and
// at least one survivor's watchdog must have named it too.
Check missing_rank_check(const std::string& watchdog_says) {
  return [watchdog_says](const Outcome& o, std::string& diagnosis) -> std::string {
    const uint64_t S = uint64_t(o.plan.step);
    const dist::Finding* f = o.finding(FindingKind::RankAbsent, o.plan.victim, S);
    if (!f) f = o.finding(FindingKind::Lagging, o.plan.victim, S);
    if (!f)
      return "the dumps do not name rank " + std::to_string(o.plan.victim) + " as absent or lagging at " + seq_text(S);
    const std::string who = "rank " + std::to_string(o.plan.victim);
    for (const std::string& w : o.watchdog_lines)
      if (w.find(who) != std::string::npos && w.find(watchdog_says) != std::string::npos &&
          w.find(seq_text(S)) != std::string::npos) {
        diagnosis = w + " | " + f->text;
        return {};
      }
    return "no watchdog line names " + who + " with '" + watchdog_says + "' and " + seq_text(S);
  };
}

Tensor grad_like(Rank& r, int64_t n, DType dt) { return full({n}, double(r.rank + 1), dt); }

}  // namespace

void register_hang_scenarios() {
  const std::string ar = "all_reduce (float32, 1024 elements, sum)";

  hang::register_hang({
      "rank_exits",
      "a rank calls exit(0) before a collective, its process group still alive (a worker that returns early)",
      "the survivors name the rank that ended and the collective it never reached; exit well before the timeout",
      3,
      train_with([](Rank& r) {
        r.fault("exit(0) before collective #" + std::to_string(r.plan.step));
        std::exit(0);
      }),
      missing_rank_check("is exiting"),
      {},
      /*quick=*/true,
  });

  hang::register_hang({
      "frozen_rank",
      "a rank is SIGSTOPped before a collective (a frozen host, a process stuck in the kernel)",
      "after the timeout the others name the rank that never arrived at the collective; every rank ends",
      3,
      train_with([](Rank& r) {
        r.fault("SIGSTOP before collective #" + std::to_string(r.plan.step));
        ::raise(SIGSTOP);
        // Resumed only by the launcher ending the job (SIGCONT before its SIGTERM): a frozen host
        // does nothing more, so neither does this rank.
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      }),
      missing_rank_check("never arrived at"),
  });

  // The others all-reduce 1024 float32 at the fault step; the victim issues `odd` instead.
  const auto mismatch = [&ar](std::string name, std::string description, std::string expected, std::string odd_text,
                              std::function<void(Rank&)> odd, bool quick) {
    hang::register_hang({std::move(name),
                         std::move(description),
                         std::move(expected),
                         2,
                         train_with([odd, odd_text](Rank& r) {
                           r.fault(odd_text + " instead of all_reduce (float32, 1024 elements, sum)");
                           odd(r);
                         }),
                         hang::mismatch_check(ar, odd_text),
                         {},
                         quick});
  };
  mismatch(
      "op_mismatch", "one rank calls all_gather where the others call all_reduce",
      "every rank raises: collective #N differs, all_reduce on one side and all_gather on the other",
      "all_gather (float32, 1024 elements)",
      [](Rank& r) {
        Tensor in = grad_like(r, 1024, DType::Float32), out = empty({1024 * r.world});
        r.pg->all_gather(out, in)->wait();
      },
      /*quick=*/true);
  mismatch(
      "shape_mismatch", "one rank all-reduces a tensor of another size (a model built with another config)",
      "every rank raises: collective #N differs, 1024 elements on one side and 1000 on the other",
      "all_reduce (float32, 1000 elements, sum)",
      [](Rank& r) {
        Tensor g = grad_like(r, 1000, DType::Float32);
        r.pg->all_reduce(g)->wait();
      },
      false);
  mismatch(
      "dtype_mismatch", "one rank all-reduces float64 where the others use float32 (a loss computed in double)",
      "every rank raises: collective #N differs, float32 on one side and float64 on the other",
      "all_reduce (float64, 1024 elements, sum)",
      [](Rank& r) {
        Tensor g = grad_like(r, 1024, DType::Float64);
        r.pg->all_reduce(g)->wait();
      },
      false);

  hang::register_hang({
      "barrier_skipped",
      "one rank skips a barrier the others enter and goes on to the next step's all_reduce",
      "every rank raises: collective #N differs, barrier on the others and all_reduce on the rank that skipped",
      3,
      [](Rank& r) {
        r.join();
        for (int i = 1; i <= r.plan.steps; ++i) {
          if (i == r.plan.step) {
            if (r.victim()) r.fault("skips the barrier");
            else r.pg->barrier()->wait();
            continue;  // the barrier is collective #step; the next step is all_reduce #step+1
          }
          r.step();
        }
      },
      hang::mismatch_check("barrier", ar),
  });

  hang::register_hang({
      "extra_collective",
      "one rank issues one all_reduce more than the others (a metric synced on one rank only), then the others "
      "finish and leave",
      "the extra collective is named on the rank that issued it: the others finished and left before it",
      3,
      [](Rank& r) {
        r.join();
        for (int i = 1; i <= r.plan.steps; ++i) {
          if (r.victim() && i == r.plan.step) {
            r.fault("an extra all_reduce at step " + std::to_string(i));
            r.step();
          }
          r.step();
        }
        r.pg.reset();  // the others leave the group cleanly; the victim never gets here
      },
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        // Identical calls line up one off until the others run out: the victim's last is the extra.
        const uint64_t S = uint64_t(o.plan.steps) + 1;
        const dist::Finding* f = o.finding(FindingKind::ExtraCollective, o.plan.victim, S);
        if (!f)
          return "the dumps do not name rank " + std::to_string(o.plan.victim) + "'s extra collective " + seq_text(S);
        diagnosis = f->text;
        return {};
      },
  });

  hang::register_hang({
      "rank_throws",
      "one rank throws an exception in the middle of a step (a bad batch)",
      "the rank's own error names the step; the launcher ends the others at once, long before the timeout",
      2,
      train_with([](Rank& r) {
        r.fault("throws in the middle of step " + std::to_string(r.plan.step));
        throw std::runtime_error("bad batch at step " + std::to_string(r.plan.step));
      }),
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        const std::string& e = o.errors[std::size_t(o.plan.victim)];
        const std::string want = "bad batch at step " + std::to_string(o.plan.step);
        if (e.find(want) == std::string::npos) return "the victim's error is '" + e + "', not '" + want + "'";
        for (int r = 0; r < o.world; ++r)
          if (r != o.plan.victim && !o.errors[std::size_t(r)].empty())
            return "rank " + std::to_string(r) + " raised too: " + o.errors[std::size_t(r)];
        if (o.launch.exit_code == 0) return "the job exited 0";
        diagnosis = "rank " + std::to_string(o.plan.victim) + " raised '" + e + "'; the launcher ended the job";
        return {};
      },
  });

  hang::register_hang({
      "rank_never_starts",
      "one rank never creates the process group (stuck before rendezvous: a data download, a wrong address)",
      "the others name the rank that never joined; every rank ends within the timeout + 15 s",
      2,
      [](Rank& r) {
        if (r.victim()) {
          r.fault("never creates the process group");
          std::this_thread::sleep_for(std::chrono::seconds(3600));
          return;
        }
        r.join();
        for (int i = 1; i <= r.plan.steps; ++i) r.step();
      },
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        const int v = o.plan.victim;
        if (o.backend == "mpi") {
          // MPI_Init waits for every rank with no timeout of its own; the engine watches it for the
          // group's timeout (Note [MPI rendezvous] in mpi_group.cpp): every other rank names the
          // missing one, long before the launcher's outer timeout.
          if (o.launch.timed_out) return "the job ran into the launcher's outer timeout";
          const std::string want = "MPI_Init did not complete in ";
          const std::string who = "rank " + std::to_string(v) + " never joined";
          for (int r = 0; r < o.world; ++r) {
            if (r == v) continue;
            const std::string& out = o.launch.rank_output[std::size_t(r)];
            const std::size_t at = out.find(want);
            if (at == std::string::npos || out.find(who, at) == std::string::npos)
              return "rank " + std::to_string(r) + " did not say '" + who +
                     "' after MPI_Init's timeout: " + out.substr(0, 400);
            if (diagnosis.empty())
              diagnosis = out.substr(out.rfind('\n', at) == std::string::npos ? 0 : out.rfind('\n', at) + 1);
          }
          diagnosis = diagnosis.substr(0, diagnosis.find('\n'));
          return {};
        }
        // Gloo: the rendezvous names the missing rank's address key, <prefix>/<group>/<rank>.
        for (int r = 0; r < o.world; ++r) {
          if (r == v) continue;
          const std::string& e = o.errors[std::size_t(r)];
          const std::regex key("rendezvous of rank " + std::to_string(r) + " of " + std::to_string(o.world) +
                               "[^\\n]*Wait timeout for key\\(s\\): [^ ;]*/" + std::to_string(v) + ";");
          if (!std::regex_search(e, key))
            return "rank " + std::to_string(r) + " did not report rank " + std::to_string(v) +
                   "'s missing rendezvous key: " + e;
          if (diagnosis.empty()) diagnosis = e;
        }
        return {};
      },
      {},
      false,
      false,
      /*outer_kill_expected=*/{},
  });

  hang::register_hang({
      "straggler",
      "one rank is slow before a collective (3/4 of the timeout: a slow data loader, a noisy neighbour) but "
      "not hung",
      "a straggler report names the rank, its lag and the collective; training goes on and every rank finishes",
      2,
      train_with([](Rank& r) {
        const double lag = 0.75 * r.ctx.timeout_s;
        r.fault("sleeps " + std::to_string(lag) + " s before collective #" + std::to_string(r.plan.step));
        std::this_thread::sleep_for(std::chrono::duration<double>(lag));
        r.step();
        r.diagnosed("the late collective completed: its straggler report is out");
      }),
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        if (o.launch.exit_code != 0)
          return "training did not go on: the job exited " + std::to_string(o.launch.exit_code);
        const std::regex line(
            "trainbench: straggler: rank (\\d+) arrived ([0-9.]+) s after the others at collective "
            "#(\\d+) (\\w+)[^\n]*");
        std::string all;
        for (const std::string& out : o.launch.rank_output) all += out;
        std::smatch m;
        if (!std::regex_search(all, m, line)) return "no straggler report";
        const double lag = std::stod(m[2]), want = 0.75 * o.timeout_s;
        if (std::stoi(m[1]) != o.plan.victim || std::stoull(m[3]) != uint64_t(o.plan.step) || m[4] != "all_reduce")
          return "the straggler report names another rank or collective: " + m.str();
        // The lag is measured from the last on-time arrival; the fault's own delay adds to it.
        if (lag < 0.8 * want || lag > want + 1.5)
          return "the reported lag " + m[2].str() + " s is not the injected ~" + std::to_string(want) +
                 " s: " + m.str();
        diagnosis = m.str();
        return {};
      },
  });

  register_ddp_hang_scenarios();
}

}  // namespace tb::suites
