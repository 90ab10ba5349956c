// The checkpoint suite's limits on hostile input and on the filesystem: JSON nested past
// kMaxJsonDepth anywhere in a safetensors header or a state.json is a clear error (it overflowed
// the stack), error messages stay short whatever the input quotes, header parsing scales
// linearly with the number of tensors, a killed save's temporaries are removed by the next
// save (and only provably stale ones), and files and directories get the umask's permissions.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/tests/error_of.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/checkpoint/checkpoint_util.h"

namespace tb::suites::ckpt {

namespace {

namespace fs = std::filesystem;
using checkpoint::NamedTensors;
using tb::testing::error_of;

std::string with_length(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string f(8, '\0');
  std::memcpy(f.data(), &n, 8);
  return f + header + data;
}

std::string nest(size_t depth, bool object, const std::string& inner = "0") {
  std::string s;
  s.reserve(depth * 6 + inner.size());
  for (size_t i = 0; i < depth; ++i) s += object ? "{\"k\":" : "[";
  s += inner;
  for (size_t i = 0; i < depth; ++i) s += object ? "}" : "]";
  return s;
}

const std::string kDeep = "nested deeper than 128";

}  // namespace

void deep_json_case(harness::Record& r) {
  int checked = 0;
  // json_depth against depths counted by hand; brackets inside strings (escaped quotes
  // included) do not count, an unmatched close ends the scan.
  const std::pair<std::string, size_t> depths[] = {{"", 0},
                                                   {"0", 0},
                                                   {"[]", 1},
                                                   {"{\"a\":[{}]}", 3},
                                                   {"[[],[[]]]", 3},
                                                   {"{\"[[[\":\"]]]{{\"}", 1},
                                                   {"[\"\\\"[[\"]", 1},
                                                   {"[\"\\\\\",[[]]]", 3},
                                                   {"]]][[", 0},
                                                   {"[[]]][[[[", 2}};
  for (const auto& [text, want] : depths) {
    ++checked;
    expect(checkpoint::json_depth(text) == want, "json_depth(" + text +
                                                     ") = " + std::to_string(checkpoint::json_depth(text)) +
                                                     ", expected " + std::to_string(want));
  }

  // Every field of a safetensors header, nested as arrays and as objects, far past the limit
  // (150,000 levels overflowed the stack) and just past it; the same at the limit is no depth error.
  const std::string data(4, '\x01');
  auto header_with = [&](const std::string& where, const std::string& v) {
    if (where == "__metadata__ value")
      return "{\"__metadata__\":{\"a\":" + v + "},\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    if (where == "__metadata__")
      return "{\"__metadata__\":" + v + ",\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    if (where == "dtype") return "{\"t\":{\"dtype\":" + v + ",\"shape\":[1],\"data_offsets\":[0,4]}}";
    if (where == "shape") return "{\"t\":{\"dtype\":\"I32\",\"shape\":" + v + ",\"data_offsets\":[0,4]}}";
    if (where == "data_offsets") return "{\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":" + v + "}}";
    if (where == "tensor entry") return "{\"t\":" + v + "}";
    return "{\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":" + v + "}}";  // unknown key
  };
  // The header's own levels above the value: 1 (root) + 1 (__metadata__ or entry) for most.
  const std::pair<std::string, size_t> fields[] = {
      {"__metadata__ value", 2}, {"__metadata__", 1}, {"dtype", 2},      {"shape", 2},
      {"data_offsets", 2},       {"tensor entry", 1}, {"unknown key", 2}};
  for (const auto& [where, above] : fields)
    for (const bool object : {false, true})
      for (const size_t depth :
           {size_t(150000), checkpoint::kMaxJsonDepth + 1 - above, checkpoint::kMaxJsonDepth - above}) {
        const std::string file = with_length(header_with(where, nest(depth, object)), data);
        const std::string what = where + (object ? " as objects " : " as arrays ") + std::to_string(depth + above) +
                                 " deep";
        const std::string msg = error_of([&] { checkpoint::load_bytes(file, {}, "deep.safetensors"); });
        ++checked;
        if (depth + above > checkpoint::kMaxJsonDepth) {
          expect(msg.find(kDeep) != std::string::npos && msg.find("deep.safetensors") != std::string::npos,
                 what + ": expected the depth error naming the file, got: " + (msg.empty() ? "it loaded" : msg));
        } else {
          expect(msg.find(kDeep) == std::string::npos, what + ": refused at the limit: " + msg);
        }
        expect(msg.size() < 600, what + ": a " + std::to_string(msg.size()) + "-byte message quotes too much input");
      }

  // Messages quote bounded excerpts of what they reject, however large: a 200,001-entry shape,
  // a 1 MB dtype, a 1 MB duplicate key, a 1 MB tensor name, a large non-string metadata value.
  {
    std::string shape = "[";
    for (int i = 0; i < 200000; ++i) shape += "1,";
    shape += "-1]";
    const std::string mb(1 << 20, 'x');
    const std::string entry = "{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}";
    const std::string headers[] = {"{\"t\":{\"dtype\":\"I32\",\"shape\":" + shape + ",\"data_offsets\":[0,4]}}",
                                   "{\"t\":{\"dtype\":\"" + mb + "\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                   "{\"" + mb + "\":" + entry + ",\"" + mb + "\":" + entry + "}",
                                   "{\"" + mb + "\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
                                   "{\"__metadata__\":{\"k\":" + shape + "},\"t\":" + entry + "}"};
    for (const std::string& h : headers) {
      const std::string msg = error_of([&] { checkpoint::load_bytes(with_length(h, data)); });
      ++checked;
      expect(!msg.empty() && msg.size() < 600,
             "a huge field gives a " + std::to_string(msg.size()) + "-byte message: " + msg.substr(0, 200));
    }
  }

  // state.json: deep `extra` and `format` (each crashed load_checkpoint), and the save side
  // refuses state it could not load back.
  TempDir dir;
  const std::string root = dir / "run";
  checkpoint::TrainingState s;
  s.model = {{"w", ones({2})}};
  s.step = 1;
  s.extra = nlohmann::json::array();
  for (size_t i = 0; i + 2 < checkpoint::kMaxJsonDepth; ++i)
    s.extra = nlohmann::json::array({s.extra});  // 127 levels + root
  checkpoint::save_checkpoint(root, s);
  const std::string state_path = root + "/step-1/state.json";
  const std::string good = checkpoint::read_small_file(state_path);
  expect(checkpoint::load_checkpoint(root).extra == s.extra, "extra nested to the limit does not round-trip");
  ++checked;
  const std::string edits[][2] = {{"\"extra\":", nest(150000, false) + ",\"extra0\":"},
                                  {"\"extra\":", nest(150000, true) + ",\"extra0\":"},
                                  {"\"format\":", nest(150000, false) + ",\"format0\":"},
                                  {"\"optimizer\":", nest(128, true) + ",\"optimizer0\":"}};
  for (const auto& [key, insert] : edits) {
    std::string text = good;
    const size_t at = text.find(key);
    expect(at != std::string::npos, "test setup: " + key + " not in state.json");
    text.insert(at + key.size(), insert);
    checkpoint::write_file_atomic(state_path, text);
    const std::string msg = error_of([&] { checkpoint::load_checkpoint(root); });
    ++checked;
    expect(msg.find(kDeep) != std::string::npos && msg.find("state.json") != std::string::npos,
           "state.json with " + key + " too deep: " + (msg.empty() ? "it loaded" : msg.substr(0, 300)));
  }
  s.extra = nlohmann::json::array({s.extra});  // one level more than loads
  const std::string msg = error_of([&] { checkpoint::save_checkpoint(root, s); });
  ++checked;
  expect(msg.find("nests deeper than 127") != std::string::npos,
         "saving too deep a state: " + (msg.empty() ? "it saved" : msg));
  r.metrics["limit"] = checkpoint::kMaxJsonDepth;
  r.metrics["checked"] = checked;
}

// Parsing n tensors' header must cost ~n (n log n), not n^2: loading 10x more tensors may take
// at most 25x longer (a quadratic parser takes ~100x; it took 143x before).
// Timed in this thread's CPU seconds, not wall seconds: the files stay under the threaded-I/O
// threshold (safetensors.cpp kParallelBytes), so all the work is on this thread, and on a loaded
// machine a wall clock also counts the seconds the thread waited for a core (a 142x "superlinear"
// ratio was once seen with load 16 on 2 cores).
void header_scaling_case(harness::Record& r) {
  auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  auto file_of = [](int n) {
    TempDir dir(/*in_memory=*/true);
    NamedTensors ts;
    ts.reserve(size_t(n));
    for (int i = 0; i < n; ++i)
      ts.emplace_back("layers." + std::to_string(i) + ".weight", scalar_tensor(double(i), DType::Float32));
    const std::string path = dir / "many.safetensors";
    checkpoint::save_file(path, ts);
    return checkpoint::read_small_file(path, size_t(1) << 30);
  };
  auto best_load_s = [&cpu_now](const std::string& bytes, int n, int repeats) {
    double best = 1e30;
    for (int k = 0; k < repeats; ++k) {
      const double t0 = cpu_now();
      const checkpoint::LoadedFile f = checkpoint::load_bytes(bytes);
      best = std::min(best, cpu_now() - t0);
      expect(f.tensors.size() == size_t(n),
             "loaded " + std::to_string(f.tensors.size()) + " of " + std::to_string(n) + " tensors");
    }
    return best;
  };
  const int small = 5000, large = 50000;
  const double t0 = cpu_now();
  const std::string a = file_of(small);
  const double save_small = cpu_now() - t0;
  const double t1 = cpu_now();
  const std::string b = file_of(large);
  const double save_large = cpu_now() - t1;
  const double ts = best_load_s(a, small, 5), tl = best_load_s(b, large, 2);
  r.metrics["load_cpu_s_5000"] = ts;
  r.metrics["load_cpu_s_50000"] = tl;
  r.metrics["save_cpu_s_5000"] = save_small;
  r.metrics["save_cpu_s_50000"] = save_large;
  r.tolerances["time_ratio_10x_tensors"] = "< 25";
  expect(tl / ts < 25, "loading 10x more tensors took " + std::to_string(tl / ts) + "x longer (" + std::to_string(ts) +
                           " CPU s vs " + std::to_string(tl) + " CPU s): header parsing is superlinear");
  // The save side built the header in an ordered_json object, quadratic too; single runs, so
  // the bound is looser (the save includes file creation and fsync).
  expect(save_large / save_small < 40,
         "saving 10x more tensors took " + std::to_string(save_large / save_small) + "x longer");
}

namespace {

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

// A child that saves `ts` to `path` over and over; returns its pid.
pid_t start_saver(const std::string& path, const NamedTensors& ts) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    tb::set_num_threads(1);  // an OpenMP team inherited from the parent would hang the child
    try {
      for (;;) checkpoint::save_file(path, ts);
    } catch (...) {
      ::_exit(3);
    }
  }
  expect(pid > 0, std::string("fork failed: ") + std::strerror(errno));
  return pid;
}

}  // namespace

void killed_save_temporaries_case(harness::Record& r) {
  TempDir dir;
  const std::string path = dir / "big.safetensors";
  const NamedTensors ts = {{"w", zeros({1 << 22})}};  // 16 MB: a save takes long enough to be caught in the middle
  int stale_seen = 0;
  std::string host;  // this host's tag in the temporaries' names
  for (int k = 0; k < 5; ++k) {
    const pid_t pid = start_saver(path, ts);
    // Kill it while a temporary of its own exists.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const std::string mine = ".big.safetensors.tmp-" + std::to_string(pid) + "-";
    bool caught = false;
    while (!caught && std::chrono::steady_clock::now() < deadline) {
      for (const std::string& t : temporaries(dir.path()))
        if (t.rfind(mine, 0) == 0) caught = true, host = t.substr(mine.size(), 8);  // <host>-<random>
      if (!caught) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    expect(caught, "the saving child never had a temporary file within 10 s");
    expect(WIFSIGNALED(status), "the saving child ended on its own (status " + std::to_string(status) + ")");
    stale_seen += int(!temporaries(dir.path()).empty());
  }
  expect(stale_seen > 0, "no kill left a temporary behind: the test did not exercise the cleanup");

  // Temporaries that are not provably stale survive: a live process's, another host's, and
  // names of another scheme (such as the mkstemp names of earlier versions).
  const pid_t live = ::fork();
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::vector<std::string> keep = {".big.safetensors.tmp-" + std::to_string(live) + "-00000000-abcdefgh",
                                         ".big.safetensors.tmp-999999999-0badf00d-abcdefgh",
                                         ".big.safetensors.tmp-Ab12Cd", ".other.safetensors.tmp-1-00000000-x"};
  for (const std::string& n : keep) std::ofstream(dir / n) << "x";
  // The live child's temporary carries this host's tag, so only its liveness protects it.
  expect(host.size() == 8, "could not read the host tag from a saver's temporary name");
  const std::string live_name = ".big.safetensors.tmp-" + std::to_string(live) + "-" + host + "-livelive";
  std::ofstream(dir / live_name) << "x";

  checkpoint::save_file(path, ts);
  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  std::vector<std::string> left = temporaries(dir.path());
  std::sort(left.begin(), left.end());
  std::vector<std::string> want = keep;
  want.push_back(live_name);
  std::sort(want.begin(), want.end());
  std::string got_list;
  for (const std::string& t : left) got_list += " " + t;
  expect(left == want, "after the next save the temporaries are [" + got_list +
                           " ]; expected exactly the live writer's, another host's and other names'");
  expect(checkpoint::load_file(path).tensors.size() == 1, "the file saved after the kills does not load");
  r.metrics["kills"] = 5;
  r.metrics["kills_that_left_a_temporary"] = stale_seen;
}

// Files get 0644 and directories 0755, less the umask, like any program's (step directories
// were 0700). Checked under two umasks in a child, since the umask is per process.
void permissions_case(harness::Record& r) {
  TempDir dir;
  int checked = 0;
  for (const mode_t mask : {mode_t(022), mode_t(027)}) {
    const std::string root = dir / ("umask" + std::to_string(mask));
    const pid_t pid = ::fork();
    if (pid == 0) {
      tb::set_num_threads(1);
      ::umask(mask);
      try {
        checkpoint::TrainingState s;
        s.model = {{"w", ones({2})}};
        s.step = 3;
        checkpoint::save_checkpoint(root, s);
        checkpoint::save_file(root + "/plain.safetensors", {{"x", ones({1})}});
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the saving child failed (status " + std::to_string(status) + ")");
    auto mode_of = [](const std::string& p) {
      struct stat st {};
      expect(::stat(p.c_str(), &st) == 0, "cannot stat " + p);
      return st.st_mode & 07777;
    };
    const mode_t dir_mode = 0755 & ~mask, file_mode = 0644 & ~mask;
    for (const std::string& d : {root, root + "/step-3"}) {
      ++checked;
      expect(mode_of(d) == dir_mode, d + " has mode " + std::to_string(mode_of(d)) + " (octal " +
                                         (std::ostringstream() << std::oct << mode_of(d)).str() + "), expected " +
                                         (std::ostringstream() << std::oct << dir_mode).str());
    }
    for (const std::string& f : {root + "/latest", root + "/plain.safetensors", root + "/step-3/state.json",
                                 root + "/step-3/model.safetensors", root + "/step-3/optimizer.safetensors"}) {
      ++checked;
      expect(mode_of(f) == file_mode, f + " has mode " + (std::ostringstream() << std::oct << mode_of(f)).str() +
                                          ", expected " + (std::ostringstream() << std::oct << file_mode).str());
    }
  }
  r.metrics["paths_checked"] = checked;
}

}  // namespace tb::suites::ckpt
