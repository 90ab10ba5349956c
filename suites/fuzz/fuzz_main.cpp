// The mutation driver linked into every fuzz target when it is not built with libFuzzer: runs
// the target's LLVMFuzzerTestOneInput over its seeds (tb_fuzz_seeds), then over a seeded,
// deterministic stream of mutants of them for a budget of iterations and seconds. A crash
// (sanitizer report, signal, uncaught exception) or an input that runs longer than --timeout
// saves the input to a file and names it with the command that replays it. See README.md here.
//
//   fuzz_<name> [--seed N] [--iterations N] [--seconds S] [--timeout S] [--max-len BYTES]
//               [--artifacts DIR] [--write-seeds DIR] [FILE...]
// FILE arguments replay those inputs only (a reproducer); --write-seeds writes the seed inputs
// as files (a corpus for the libFuzzer build) and exits. Defaults come from TB_FUZZ_SEED,
// TB_FUZZ_ITERATIONS, TB_FUZZ_SECONDS, TB_FUZZ_ARTIFACTS; the CLI wins.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target: seed inputs, and a counter it bumps when the parser accepts an input
// (so a run can show that inputs get past the first bytes).
extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) __attribute__((weak));
extern "C" size_t tb_fuzz_accepted __attribute__((weak));
// Provided by the sanitizer runtimes when linked; called when a sanitizer ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

// UB must end the run like a crash (abort: the SIGABRT handler saves the input), whatever the
// compile flags say.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:abort_on_error=1:print_stacktrace=1"; }

namespace {

// The input being run, for the crash handlers (which may only make async-signal-safe calls).
std::atomic<const uint8_t*> g_data{nullptr};
std::atomic<size_t> g_size{0};
std::atomic<uint64_t> g_iteration{0};
char g_artifact_prefix[4096];  // "<dir>/crash-<target>-seed<N>-iter"
std::atomic<bool> g_saved{false};

void put(const char* s) { (void)!::write(2, s, std::strlen(s)); }

// Writes the current input to <prefix><iteration>.bin once; async-signal-safe.
void save_current_input() {
  if (g_saved.exchange(true)) return;
  const uint8_t* data = g_data.load();
  const size_t size = g_size.load();
  char path[4200];
  std::strcpy(path, g_artifact_prefix);
  char digits[24];
  int n = 0;
  uint64_t it = g_iteration.load();
  do digits[n++] = char('0' + it % 10), it /= 10;
  while (it);
  size_t at = std::strlen(path);
  while (n) path[at++] = digits[--n];
  std::strcpy(path + at, ".bin");
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    put("\nfuzz: could not save the crashing input to ");
    put(path);
    put("\n");
    return;
  }
  for (size_t done = 0; data && done < size;) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  ::close(fd);
  put("\nfuzz: the input that failed is saved in ");
  put(path);
  put("\nfuzz: replay it with: <this program> ");
  put(path);
  put("\n");
}

void on_fatal_signal(int sig) {
  save_current_input();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// splitmix64: a small, fast generator whose stream depends only on the seed.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
  bool coin() { return next() & 1; }
};

// Tokens that steer text parsers toward their edge cases, plus every short quoted string of the
// seeds (keys such as "dtype" and "data_offsets"), collected at start.
std::vector<std::string> base_dictionary() {
  return {"{",
          "}",
          "[",
          "]",
          "\"",
          ":",
          ",",
          "\\",
          "\\u0000",
          "\\ud800",
          "true",
          "false",
          "null",
          "-",
          "0",
          "-0",
          "1e999",
          "-1e999",
          "1e-400",
          "18446744073709551615",
          "18446744073709551616",
          "9223372036854775807",
          "9223372036854775808",
          "-9223372036854775809",
          "4294967296",
          "0.5",
          "NaN",
          "\xff",
          "\xc3\x28",
          "\xed\xa0\x80",
          std::string("\0", 1),
          "{}",
          "[]",
          "\"\"",
          "{\"\":{}}"};
}

void add_quoted_strings(const std::string& s, std::vector<std::string>& dict) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '"') continue;
    const size_t end = s.find('"', i + 1);
    if (end == std::string::npos) break;
    if (end - i <= 40) {
      std::string tok = s.substr(i, end - i + 1);
      if (std::find(dict.begin(), dict.end(), tok) == dict.end()) dict.push_back(tok);
    }
    i = end;
  }
}

const uint64_t kInterestingInts[] = {0,
                                     1,
                                     2,
                                     7,
                                     8,
                                     0x7f,
                                     0x80,
                                     0xff,
                                     0x100,
                                     0x7fff,
                                     0x8000,
                                     0xffff,
                                     0x7fffffff,
                                     0x80000000,
                                     0xffffffff,
                                     0x100000000ull,
                                     100000001,
                                     0x7fffffffffffffffull,
                                     0x8000000000000000ull,
                                     ~0ull};
const char* const kInterestingNumbers[] = {"0",
                                           "-1",
                                           "1",
                                           "65",
                                           "129",
                                           "4294967295",
                                           "4294967296",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "1e12",
                                           "1e308",
                                           "1e999",
                                           "-0",
                                           "0.5",
                                           "1E400",
                                           "99999999999999999999999999999999"};

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len, std::vector<std::string> corpus)
      : rng_{seed}, max_len_(max_len), corpus_(std::move(corpus)), dict_(base_dictionary()) {
    for (const std::string& s : corpus_) add_quoted_strings(s, dict_);
    if (corpus_.empty()) corpus_.push_back("");
  }

  // A base (a seed, or now and then an earlier mutant so edits stack up) with 1-4 edits.
  std::string next() {
    std::string s = (!recent_.empty() && rng_.below(4) == 0) ? recent_[rng_.below(recent_.size())]
                                                             : corpus_[rng_.below(corpus_.size())];
    for (size_t i = 0, n = 1 + rng_.below(4); i < n; ++i) mutate(s);
    if (s.size() > max_len_) s.resize(max_len_);
    if (recent_.size() < 64) recent_.push_back(s);
    else recent_[rng_.below(64)] = s;
    return s;
  }

 private:
  size_t pos(const std::string& s) { return rng_.below(s.size() + 1); }

  void mutate(std::string& s) {
    switch (rng_.below(14)) {
      case 0:  // bit flip
        if (!s.empty()) s[rng_.below(s.size())] ^= char(1 << rng_.below(8));
        break;
      case 1: {  // a byte set to a random or structural value
        static const char bytes[] = {0,   '\xff', '\x7f', '\x80', '"', '{', '}', '[',
                                     ']', ',',    ':',    '\\',   '0', '9', '-', ' '};
        if (!s.empty()) s[rng_.below(s.size())] = rng_.coin() ? char(rng_.next()) : bytes[rng_.below(sizeof bytes)];
        break;
      }
      case 2: {  // insert random bytes
        std::string ins(1 + rng_.below(8), '\0');
        for (char& c : ins) c = char(rng_.next());
        s.insert(pos(s), ins);
        break;
      }
      case 3: {  // delete a range
        if (s.empty()) break;
        const size_t at = rng_.below(s.size());
        s.erase(at, 1 + rng_.below(std::min<size_t>(s.size() - at, 64)));
        break;
      }
      case 4: {  // copy a range elsewhere
        if (s.empty()) break;
        const size_t at = rng_.below(s.size());
        const std::string chunk = s.substr(at, 1 + rng_.below(std::min<size_t>(s.size() - at, 128)));
        s.insert(pos(s), chunk);
        break;
      }
      case 5: {  // splice: a prefix of this with a suffix of another input
        const std::string& other = corpus_[rng_.below(corpus_.size())];
        s = s.substr(0, pos(s)) + other.substr(rng_.below(other.size() + 1));
        break;
      }
      case 6:  // a dictionary token
        s.insert(pos(s), dict_[rng_.below(dict_.size())]);
        break;
      case 7: {  // a number replaced by an extreme one
        std::vector<size_t> starts;
        for (size_t i = 0; i < s.size(); ++i)
          if ((s[i] >= '0' && s[i] <= '9') && (i == 0 || s[i - 1] < '0' || s[i - 1] > '9')) starts.push_back(i);
        if (starts.empty()) break;
        const size_t at = starts[rng_.below(starts.size())];
        size_t end = at;
        while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
        s.replace(at, end - at, kInterestingNumbers[rng_.below(std::size(kInterestingNumbers))]);
        break;
      }
      case 8:
      case 9: {  // deep nesting at a value position: after ':' or '[' when there is one
        static const size_t depths[] = {2, 20, 65, 129, 200, 1000, 10000, 150000};
        const size_t depth = depths[rng_.below(std::size(depths))];
        std::vector<size_t> spots;
        for (size_t i = 0; i < s.size(); ++i)
          if (s[i] == ':' || s[i] == '[') spots.push_back(i + 1);
        const size_t at = spots.empty() ? pos(s) : spots[rng_.below(spots.size())];
        const bool object = rng_.coin();
        std::string open, close;
        for (size_t i = 0; i < depth; ++i) open += object ? "{\"a\":" : "[", close += object ? "}" : "]";
        s.insert(at, open + "0" + (rng_.below(4) ? close : std::string()));
        break;
      }
      case 10:  // truncate
        s.resize(rng_.below(s.size() + 1));
        break;
      case 11: {  // a 4- or 8-byte integer written over the bytes (little- or big-endian)
        const size_t w = rng_.coin() ? 4 : 8;
        if (s.size() < w) break;
        uint64_t v = kInterestingInts[rng_.below(std::size(kInterestingInts))];
        if (rng_.below(4) == 0) v = s.size() + rng_.below(17) - 8;
        const size_t at = rng_.below(4) == 0 ? 0 : rng_.below(s.size() - w + 1);
        const bool big = rng_.coin();
        for (size_t i = 0; i < w; ++i) s[at + i] = char(v >> (8 * (big ? w - 1 - i : i)));
        break;
      }
      case 12: {  // a range repeated many times (many keys, long arrays)
        if (s.empty()) break;
        const size_t at = rng_.below(s.size());
        const std::string chunk = s.substr(at, 1 + rng_.below(std::min<size_t>(s.size() - at, 64)));
        const size_t times = 1 + rng_.below(rng_.coin() ? 8 : 4096);
        std::string rep;
        for (size_t i = 0; i < times && rep.size() < max_len_; ++i) rep += chunk;
        s.insert(at, rep);
        break;
      }
      case 13: {  // byte-level arithmetic
        if (!s.empty()) s[rng_.below(s.size())] += char(int(rng_.below(71)) - 35);
        break;
      }
    }
  }

  Rng rng_;
  size_t max_len_;
  std::vector<std::string> corpus_;
  std::vector<std::string> recent_;
  std::vector<std::string> dict_;
};

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (errno || *end || v[0] == '-') {
    std::fprintf(stderr, "fuzz: %s='%s' is not a non-negative integer\n", name, v);
    std::exit(2);
  }
  return x;
}

void run_one(const std::string& input, uint64_t iteration) {
  g_iteration.store(iteration);
  g_size.store(input.size());
  g_data.store(reinterpret_cast<const uint8_t*>(input.data()));
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_data.store(nullptr);
  g_size.store(0);
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = env_u64("TB_FUZZ_SEED", 1);
  uint64_t iterations = env_u64("TB_FUZZ_ITERATIONS", 1'000'000);
  uint64_t seconds = env_u64("TB_FUZZ_SECONDS", 60);
  uint64_t timeout = 20;
  uint64_t max_len = 1 << 20;
  const char* art = std::getenv("TB_FUZZ_ARTIFACTS");
  std::string artifacts = art && *art ? art : ".";
  std::vector<std::string> files;
  std::string seeds_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      const unsigned long long x = std::strtoull(argv[++i], &end, 10);
      if (*end || argv[i][0] == '-' || !argv[i][0]) {
        std::fprintf(stderr, "fuzz: %s %s: expected a non-negative integer\n", a.c_str(), argv[i]);
        std::exit(2);
      }
      return x;
    };
    if (a == "--seed") seed = value();
    else if (a == "--iterations") iterations = value();
    else if (a == "--seconds") seconds = value();
    else if (a == "--timeout") timeout = value();
    else if (a == "--max-len") max_len = value();
    else if (a == "--artifacts" && i + 1 < argc) artifacts = argv[++i];
    else if (a == "--write-seeds" && i + 1 < argc) seeds_dir = argv[++i];
    else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: %s [--seed N] [--iterations N] [--seconds S] [--timeout S] [--max-len BYTES] "
          "[--artifacts DIR] [--write-seeds DIR] [FILE...]\n(FILEs: replay those inputs only)\n",
          argv[0]);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "fuzz: unknown option %s (see --help)\n", a.c_str());
      return 2;
    } else files.push_back(a);
  }
  std::string target = argv[0];
  target = target.substr(target.find_last_of('/') + 1);
  std::snprintf(g_artifact_prefix, sizeof g_artifact_prefix, "%s/crash-%s-seed%llu-iter", artifacts.c_str(),
                target.c_str(), static_cast<unsigned long long>(seed));

  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_current_input);
  // SIGSEGV and SIGBUS stay with AddressSanitizer when it is linked (its report, then the death
  // callback above); abort() (an uncaught exception, a failed assert) comes here.
  for (int sig : {SIGABRT, SIGFPE, SIGILL}) ::signal(sig, on_fatal_signal);
  if (!__sanitizer_set_death_callback)
    for (int sig : {SIGSEGV, SIGBUS}) ::signal(sig, on_fatal_signal);

  if (!seeds_dir.empty()) {
    // A seed corpus for libFuzzer (the libfuzzer preset's targets do not run tb_fuzz_seeds).
    std::vector<std::string> seeds;
    if (tb_fuzz_seeds) tb_fuzz_seeds(seeds);
    for (size_t k = 0; k < seeds.size(); ++k) {
      const std::string path = seeds_dir + "/seed-" + std::to_string(k);
      std::ofstream out(path, std::ios::binary);
      out.write(seeds[k].data(), std::streamsize(seeds[k].size()));
      if (!out) {
        std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
        return 2;
      }
    }
    std::printf("fuzz: %s: %zu seeds written to %s\n", target.c_str(), seeds.size(), seeds_dir.c_str());
    return 0;
  }
  if (!files.empty()) {
    for (const std::string& f : files) {
      std::snprintf(g_artifact_prefix, sizeof g_artifact_prefix, "%s.again-", f.c_str());
      const std::string input = read_whole(f);
      run_one(input, 0);
      std::printf("fuzz: %s: ran %s (%zu bytes) without a failure\n", target.c_str(), f.c_str(), input.size());
    }
    return 0;
  }

  // A hang is a failure too: a watchdog saves the input that has run longer than `timeout`.
  std::thread([timeout] {
    uint64_t last = ~0ull, same = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const uint64_t it = g_iteration.load();
      same = (it == last && g_data.load()) ? same + 1 : 0;
      last = it;
      if (same >= timeout) {
        put("\nfuzz: an input has run longer than the timeout (a hang, or a slow path a hostile input can trigger)\n");
        save_current_input();
        ::_exit(70);
      }
    }
  }).detach();

  std::vector<std::string> seeds;
  if (tb_fuzz_seeds) tb_fuzz_seeds(seeds);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::printf(
      "fuzz: %s: seed %llu, %zu seed inputs, budget %llu iterations or %llu s (replay a run with --seed %llu)\n",
      target.c_str(), static_cast<unsigned long long>(seed), seeds.size(), static_cast<unsigned long long>(iterations),
      static_cast<unsigned long long>(seconds), static_cast<unsigned long long>(seed));
  std::fflush(stdout);

  const bool counts = &tb_fuzz_accepted != nullptr;
  uint64_t it = 0;
  for (const std::string& s : seeds) run_one(s, it++);
  const size_t seeds_accepted = counts ? tb_fuzz_accepted : 0;
  if (counts)
    std::printf("fuzz: %s: %zu of %zu seeds accepted by the parser\n", target.c_str(), seeds_accepted, seeds.size());
  // A target whose valid seeds never parse fuzzes nothing but its first check.
  if (counts && !seeds.empty() && seeds_accepted == 0) {
    std::fprintf(stderr, "fuzz: %s: no seed input was accepted; the target does not reach its parser\n",
                 target.c_str());
    return 1;
  }

  Mutator mutator(seed, size_t(max_len), seeds);
  uint64_t mutants = 0;
  for (; mutants < iterations && elapsed() < double(seconds); ++mutants) run_one(mutator.next(), it++);
  const size_t mutants_accepted = counts ? tb_fuzz_accepted - seeds_accepted : 0;
  std::printf("fuzz: %s: %llu mutants in %.1f s, no failure", target.c_str(), static_cast<unsigned long long>(mutants),
              elapsed());
  if (counts) std::printf("; %zu accepted by the parser", mutants_accepted);
  std::printf("\n");
  return 0;
}
