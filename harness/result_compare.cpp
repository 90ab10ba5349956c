// `trainbench compare`'s reading, statistics and tables. See result_compare.h, Note [Compare
// statistics], and docs/compare.md.
#include "harness/result_compare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>

#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace tb::harness {

namespace {

using nlohmann::json;

constexpr const char* kOp = "compare";
constexpr const char* kSchema = "trainbench.result/1";
constexpr const char* kBoundsSchema = "trainbench.perf_bounds/1";
// More repetitions than any run makes; a bound keeps a hostile file's bootstrap short.
constexpr std::size_t kMaxSeries = 10000;
// Past CompareOptions::work_budget the resamples are cut, down to this; past that, compare
// refuses (Note [Compare statistics]).
constexpr int kMinResamples = 200;
// Fewer repetitions than this on a side give no verdict: one value has no spread, so its bootstrap
// interval is the point itself (1.94x [1.94x, 1.94x]: two runs of one binary read as a regression,
// swapped as a speed-up), and two leave three possible medians.
constexpr std::size_t kMinRepetitions = 3;
// The cost, in resampling steps, of drawing one long series' resampled median.
constexpr double kOrderStatisticCost = 16;
// kMinTime to kMaxTime in words.
constexpr const char* kTimeRange = "1e-12 s to 1e6 s";

// Text from a file as it goes into a terminal or a table: control characters (a newline, a
// terminal's escape, C1 controls) written as escapes, so a case name is one line of text.
std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
             static_cast<unsigned char>(s[i + 1]) <= 0x9f) {  // U+0080..U+009F
      const auto d = static_cast<unsigned char>(s[++i]);
      out += std::string("\\u00") + hex[d >> 4] + hex[d & 15];
    } else out += char(c);
  }
  return out;
}

[[noreturn]] void fail(const std::string& source, const std::string& where, const std::string& what) {
  throw core::Error(kOp, printable(source) + ": " + where + (where.empty() ? "" : ": ") + what);
}

const char* type_name(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

void need_string(const json& rec, const char* key, const std::string& source, const std::string& where) {
  const auto it = rec.find(key);
  if (it == rec.end()) fail(source, where, std::string("no \"") + key + "\"");
  if (!it->is_string()) fail(source, where + "." + key, std::string("is ") + type_name(*it) + ", not a string");
}

const std::set<std::string>& statuses() {
  static const std::set<std::string> s = {"pass", "skip", "fail", "error"};
  return s;
}

// A name from a file in an error message: printable and cut short.
std::string quoted(const std::string& s, std::size_t max_chars = 80) {
  return checkpoint::text_excerpt(printable(s), max_chars);
}

std::string first_line(const std::string& s, std::size_t max_chars = 160) {
  std::string line = printable(s.substr(0, s.find('\n')));
  return line.size() > max_chars ? checkpoint::text_excerpt(line, max_chars) : line;
}

// Markdown text (a table cell, a header): printable, and the characters that would end a cell,
// start code or open HTML (a comment would hide the rest of a pull-request comment) escaped.
std::string md_text(const std::string& s) {
  std::string out;
  for (char c : printable(s)) {
    if (c == '|') out += "\\|";
    else if (c == '`') out += "\\`";
    else if (c == '<') out += "&lt;";
    else out += c;
  }
  return out;
}

// A Markdown code span of `s` (printable): fenced with one backtick more than the longest run of
// backticks in it, as CommonMark reads it.
std::string md_code(const std::string& s) {
  const std::string t = printable(s);
  std::size_t run = 0, longest = 0;
  for (char c : t) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !t.empty() && (t.front() == '`' || t.back() == '`');
  return fence + (pad ? " " : "") + t + (pad ? " " : "") + fence;
}

// The engine's counter-based generator: the same stream on every platform (std's distributions
// are not), so a comparison's intervals are reproducible anywhere.
struct Rng {
  core::Generator g;
  uint64_t next() {
    const auto b = g.block(g.reserve(1));
    return (uint64_t(b[0]) << 32) | b[1];
  }
  std::size_t below(std::size_t n) { return std::size_t((static_cast<unsigned __int128>(next()) * n) >> 64); }
  // The long series' draws (Note [Compare statistics]): uniform in (0, 1), standard normal
  // (Box-Muller), gamma(a >= 1) (Marsaglia and Tsang's method) and beta.
  double unit_open() { return (double(next() >> 11) + 0.5) * 0x1p-53; }
  double normal() {
    const double u1 = unit_open(), u2 = unit_open();
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double gamma(double a) {
    const double d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x = 0, v = 0;
      do {
        x = normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = unit_open();
      if (u < 1 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
    }
  }
  double beta(double a, double b) {
    const double x = gamma(a);
    return x / (x + gamma(b));
  }
};

uint64_t hash(const std::string& s, uint64_t seed) {  // FNV-1a
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

double median_of(std::vector<double>& v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(mid), v.end());
  const double hi = v[mid];
  if (n % 2) return hi;
  return 0.5 * (*std::max_element(v.begin(), v.begin() + std::ptrdiff_t(mid)) + hi);
}

double median(std::vector<double> v) { return v.empty() ? 0.0 : median_of(v); }

// A series as the bootstrap resamples it: a long one (over `direct` values) sorted once.
struct Resampled {
  const std::vector<double>* values = nullptr;
  std::vector<double> sorted;
};

double resampled_median(const Resampled& s, Rng& rng, std::vector<double>& scratch) {
  const std::vector<double>& v = *s.values;
  const std::size_t n = v.size();
  if (s.sorted.empty()) {
    scratch.resize(n);
    for (double& x : scratch) x = v[rng.below(n)];
    return median_of(scratch);
  }
  // The median of n draws from the sorted values is sorted[floor(n * U)] for U the middle order
  // statistic of n uniforms, Beta(k, n + 1 - k) for the k-th; for an even n the next one above
  // it is U + (1 - U) times the least of the n - k uniforms above U (1 - V^(1 / (n - k))).
  auto at = [&](double u) { return s.sorted[std::min(n - 1, std::size_t(u * double(n)))]; };
  const std::size_t k = (n + 1) / 2;
  const double u = rng.beta(double(k), double(n + 1 - k));
  if (n % 2) return at(u);
  const double next = u + (1 - u) * (1 - std::pow(rng.unit_open(), 1 / double(n - k)));
  return 0.5 * (at(u) + at(next));
}

// Resampling steps of one bootstrap resample over these series (Note [Compare statistics]).
double resample_cost(const std::vector<const std::vector<double>*>& series, std::size_t direct) {
  double c = 0;
  for (const auto* s : series) c += s->size() <= direct ? double(s->size()) : kOrderStatisticCost;
  return c;
}

// The percentile bootstrap of prod(median(num_i)) / prod(median(den_i)) (Note [Compare statistics]).
RatioCI bootstrap(const std::vector<const std::vector<double>*>& num,
                  const std::vector<const std::vector<double>*>& den, int resamples, std::size_t direct,
                  uint64_t seed) {
  RatioCI r;
  for (const auto* s : num)
    if (s->empty()) return r;
  for (const auto* s : den)
    if (s->empty()) return r;
  auto prepare = [&](const std::vector<const std::vector<double>*>& in) {
    std::vector<Resampled> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      out[i].values = in[i];
      if (in[i]->size() > direct) {
        out[i].sorted = *in[i];
        std::sort(out[i].sorted.begin(), out[i].sorted.end());
      }
    }
    return out;
  };
  const std::vector<Resampled> rnum = prepare(num), rden = prepare(den);
  auto ratio_of = [&](auto&& med) {
    double x = 1;
    for (const Resampled& s : rnum) x *= med(s);
    for (const Resampled& s : rden) x /= med(s);
    return x;
  };
  r.valid = true;
  r.ratio = ratio_of([](const Resampled& s) { return median(*s.values); });
  Rng rng{core::Generator(seed)};
  std::vector<double> scratch, ratios;
  const int n = std::max(1, resamples);
  ratios.reserve(std::size_t(n));
  for (int i = 0; i < n; ++i)
    ratios.push_back(ratio_of([&](const Resampled& s) { return resampled_median(s, rng, scratch); }));
  std::sort(ratios.begin(), ratios.end());
  auto at = [&](double q) {
    return ratios[std::min(ratios.size() - 1, std::size_t(q * double(ratios.size() - 1) + 0.5))];
  };
  r.lo = std::min(at(0.025), r.ratio);
  r.hi = std::max(at(0.975), r.ratio);
  return r;
}

Verdict verdict_of(const RatioCI& ci, double t) {
  if (!ci.valid) return Verdict::NoSamples;
  if (ci.lo > 1 + t) return Verdict::Slower;
  if (ci.hi < 1 / (1 + t)) return Verdict::Faster;
  if (ci.lo >= 1 / (1 + t) && ci.hi <= 1 + t) return Verdict::Same;
  return Verdict::TooNoisy;
}

// One record as compare sees it.
struct Entry {
  const json* rec = nullptr;
  std::string key, status;                // key: record_key, the name shown
  std::vector<double> engine, reference;  // repetition times in [kMinTime, kMaxTime]
  std::size_t dropped = 0;                // values not finite and positive
  std::size_t out_of_range = 0;           // finite positive values outside [kMinTime, kMaxTime]
};

void samples(const json& rec, const char* name, std::vector<double>& out, Entry& e) {
  const auto s = rec.find("series");
  if (s == rec.end()) return;
  const auto it = s->find(name);
  if (it == s->end()) return;
  for (const json& v : *it) {  // types checked by parse_result_text
    const double x = v.is_number() ? v.get<double>() : NAN;
    if (!(std::isfinite(x) && x > 0)) ++e.dropped;
    else if (x < kMinTime || x > kMaxTime) ++e.out_of_range;
    else out.push_back(x);
  }
}

std::string record_key(const json& rec) {
  std::string k = rec["suite"].get<std::string>() + "/" + rec["case"].get<std::string>();
  const auto r = rec.find("rank");
  if (r != rec.end() && r->get<int64_t>() != 0) k += " (rank " + std::to_string(r->get<int64_t>()) + ")";
  return k;
}

// What makes a record one case: suite, case, rank and kind (a correctness and a benchmark record
// of the ops suite share their names). parse_result_text refuses a file that repeats one.
using Identity = std::tuple<std::string, std::string, int64_t, std::string>;
Identity identity(const json& rec) {
  return {rec["suite"].get<std::string>(), rec["case"].get<std::string>(), rec.value("rank", int64_t(0)),
          rec["kind"].get<std::string>()};
}

// Records in file order.
std::vector<std::pair<Identity, Entry>> entries_of(const json& result) {
  std::vector<std::pair<Identity, Entry>> out;
  for (const json& rec : result["records"]) {
    Entry e;
    e.rec = &rec;
    e.key = record_key(rec);
    e.status = rec["status"].get<std::string>();
    samples(rec, "engine_time_s", e.engine, e);
    samples(rec, "reference_time_s", e.reference, e);
    out.emplace_back(identity(rec), std::move(e));
  }
  return out;
}

std::string run_line(const json& result) {
  const json& run = result["run"];
  auto field = [&](const char* k) {
    const auto it = run.find(k);
    return it != run.end() && it->is_string() ? first_line(it->get<std::string>(), 60) : std::string("?");
  };
  return field("time") + ", git " + field("git_revision") + ", host " + field("host");
}

bool is_bad(const std::string& status) { return status == "fail" || status == "error"; }

std::string fmt_time(double s) {
  if (!(s > 0) || !std::isfinite(s)) return "-";
  const char* unit = "s";
  double v = s;
  if (s < 1e-6) v = s * 1e9, unit = "ns";
  else if (s < 1e-3) v = s * 1e6, unit = "us";
  else if (s < 1) v = s * 1e3, unit = "ms";
  std::ostringstream os;
  os.precision(3);
  os << v << ' ' << unit;
  return os.str();
}

// Ratios from 0.005 to 1e5 in fixed notation; others (a bound of 1e300, two extreme times) in
// three significant digits, so no figure is wider than a table's column.
std::string fmt_ratio(double r) {
  if (!std::isfinite(r)) return "-";
  std::ostringstream os;
  if (r >= 1e5 || (r > 0 && r < 0.005)) {
    os.precision(3);
  } else {
    os.setf(std::ios::fixed);
    os.precision(r >= 100 ? 0 : r >= 10 ? 1 : 2);
  }
  os << r << 'x';
  return os.str();
}

std::string fmt_number(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

std::string fmt_ci(const RatioCI& c) {
  if (!c.valid) return "-";
  return fmt_ratio(c.ratio) + " [" + fmt_ratio(c.lo) + ", " + fmt_ratio(c.hi) + "]";
}

std::string fmt_vs_ref(const CaseComparison& x) {
  if (!(x.base_engine_over_ref > 0 && x.new_engine_over_ref > 0)) return "-";
  return fmt_ratio(x.base_engine_over_ref) + " -> " + fmt_ratio(x.new_engine_over_ref) + " (" + fmt_ci(x.vs_reference) +
         ")";
}

// A table as aligned text (markdown false) or GitHub Markdown; the first row is the header.
// Cells are escaped here (printable, md_text): text from files may hold anything.
std::string table(std::vector<std::vector<std::string>> rows, bool markdown) {
  std::ostringstream os;
  if (rows.empty()) return "";
  for (auto& r : rows)
    for (std::string& c : r) c = markdown ? md_text(c) : printable(c);
  if (markdown) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << '|';
      for (const std::string& c : rows[i]) os << ' ' << c << " |";
      os << '\n';
      if (i == 0) {
        os << '|';
        for (std::size_t j = 0; j < rows[0].size(); ++j) os << (j == 0 ? "---|" : "---:|");
        os << '\n';
      }
    }
    return os.str();
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t j = 0; j < r.size() && j < width.size(); ++j) width[j] = std::max(width[j], r[j].size());
  for (const auto& r : rows) {
    std::string line = " ";
    for (std::size_t j = 0; j < r.size(); ++j) {
      line += ' ' + r[j];
      if (j + 1 < r.size()) line += std::string(width[j] - r[j].size() + 1, ' ');
    }
    os << line << '\n';
  }
  return os.str();
}

std::string percent(double t) {
  std::ostringstream os;
  os << t * 100 << '%';
  return os.str();
}

std::string render(const Comparison& c, bool md) {
  std::ostringstream os;
  const std::string h2 = md ? "### " : "", b = md ? "**" : "";
  os << (md ? "## " : "") << "trainbench compare\n\n";
  auto source = [&](const std::string& s) { return md ? md_code(s) : printable(s); };
  auto text = [&](const std::string& s) { return md ? md_text(s) : printable(s); };
  os << (md ? "- " : "") << "BASE: " << source(c.base_source) << " (" << text(c.base_run) << ")\n";
  os << (md ? "- " : "") << "NEW:  " << source(c.new_source) << " (" << text(c.new_run) << ")\n";
  os << (md ? "- " : "") << "threshold " << percent(c.threshold) << "; NEW/BASE of the median time per call with its "
     << "95% bootstrap interval (" << c.resamples << " resamples"
     << (c.resamples < c.resamples_asked
             ? ", cut from " + std::to_string(c.resamples_asked) + " to bound the work of " +
                   std::to_string(c.benchmarks.size()) + " benchmark cases: docs/compare.md"
             : std::string())
     << "); verdicts from "
     << (c.relative ? "the engine/LibTorch ratio's change (--relative; engine time where LibTorch was not timed)"
                    : "engine time")
     << "\n\n";

  if (!c.status_changes.empty()) {
    os << h2 << "Status changes (" << c.status_changes.size() << ")\n\n";
    std::vector<std::vector<std::string>> rows = {{"case", "BASE", "NEW", "NEW message"}};
    for (const CaseComparison& x : c.status_changes)
      rows.push_back({x.key(), x.base_status,
                      (is_bad(x.new_status) && !is_bad(x.base_status) ? b : "") + x.new_status +
                          (is_bad(x.new_status) && !is_bad(x.base_status) ? b : ""),
                      x.new_message.empty() ? "" : first_line(x.new_message)});
    os << table(rows, md) << '\n';
  }

  os << h2 << "Benchmarks in both (" << c.benchmarks.size() << "): " << b << c.count(Verdict::Slower) << " slower" << b
     << ", " << c.count(Verdict::Faster) << " faster, " << c.count(Verdict::Same) << " same, "
     << c.count(Verdict::TooNoisy) << " too noisy to tell";
  if (c.count(Verdict::NoSamples)) os << ", " << c.count(Verdict::NoSamples) << " without repetition times";
  os << "\n\n";
  if (!c.benchmarks.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"case", "BASE", "NEW", "NEW/BASE [95% CI]", "engine/LibTorch BASE -> NEW (change [95% CI])", "verdict"}};
    for (const CaseComparison& x : c.benchmarks) {
      std::string v = to_string(x.verdict);
      if (x.verdict == Verdict::Slower) v = b + v + b;
      if (!x.note.empty()) v += " (" + x.note + ")";
      rows.push_back({x.key() + (x.series == "reference_time_s" ? " [reference]" : ""), fmt_time(x.base_median_s),
                      fmt_time(x.new_median_s), fmt_ci(x.time), fmt_vs_ref(x), v});
    }
    os << table(rows, md) << '\n';
  }
  auto list = [&](const char* title, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    os << h2 << title << " (" << keys.size() << ")\n\n";
    for (const std::string& k : keys) os << (md ? "- " + md_code(k) : "  " + printable(k)) << '\n';
    os << '\n';
  };
  list("Only in BASE", c.only_base);
  list("Only in NEW", c.only_new);
  os << (c.regression() ? "Result: REGRESSION (" : "Result: no regression (") << c.count(Verdict::Slower)
     << " significantly slower beyond " << percent(c.threshold) << ", "
     << std::count_if(c.status_changes.begin(), c.status_changes.end(),
                      [](const CaseComparison& x) { return is_bad(x.new_status) && !is_bad(x.base_status); })
     << " newly failing)\n";
  return os.str();
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Slower: return "slower";
    case Verdict::Faster: return "faster";
    case Verdict::TooNoisy: return "too noisy to tell";
    case Verdict::Same: return "same";
    case Verdict::NoSamples: return "no repetition times";
  }
  return "?";
}

std::string CaseComparison::key() const {
  return suite + "/" + case_name + (rank ? " (rank " + std::to_string(rank) + ")" : "") +
         (show_kind ? " (" + kind + ")" : "");
}

bool Comparison::worse_status() const {
  return std::any_of(status_changes.begin(), status_changes.end(),
                     [](const CaseComparison& x) { return is_bad(x.new_status) && !is_bad(x.base_status); });
}

std::size_t Comparison::count(Verdict v) const {
  return std::size_t(
      std::count_if(benchmarks.begin(), benchmarks.end(), [v](const CaseComparison& x) { return x.verdict == v; }));
}

json parse_result_text(std::string_view text, const std::string& source) {
  json doc = checkpoint::parse_untrusted_json(text, kOp, source);
  if (!doc.is_object())
    fail(source, "", std::string("not a trainbench result: the top level is ") + type_name(doc) + ", not an object");
  const auto schema = doc.find("schema");
  if (schema == doc.end()) fail(source, "", "not a trainbench result: no \"schema\" field");
  if (!schema->is_string() || schema->get<std::string>() != kSchema)
    fail(source, "", "schema is " + checkpoint::json_excerpt(*schema, 60) + ", compare reads \"" + kSchema + "\"");
  const auto run = doc.find("run");
  if (run == doc.end() || !run->is_object()) fail(source, "run", "missing or not an object");
  const auto records = doc.find("records");
  if (records == doc.end() || !records->is_array()) fail(source, "records", "missing or not an array");
  std::map<Identity, std::size_t> first;  // where each case was seen
  for (std::size_t i = 0; i < records->size(); ++i) {
    const json& rec = (*records)[i];
    const std::string where = "records[" + std::to_string(i) + "]";
    if (!rec.is_object()) fail(source, where, std::string("is ") + type_name(rec) + ", not an object");
    for (const char* k : {"suite", "case", "kind", "status"}) need_string(rec, k, source, where);
    if (!statuses().count(rec["status"].get<std::string>()))
      fail(source, where + ".status",
           checkpoint::json_excerpt(rec["status"], 40) + " is not pass, skip, fail or error");
    const auto rank = rec.find("rank");
    if (rank != rec.end() &&
        !(rank->is_number_integer() && rank->get<int64_t>() >= 0 && rank->get<int64_t>() < (1 << 24)))
      fail(source, where + ".rank", "is not a rank (a whole number from 0)");
    const auto msg = rec.find("message");
    if (msg != rec.end() && !msg->is_string()) fail(source, where + ".message", "is not a string");
    for (const char* obj : {"metrics", "series"}) {
      const auto it = rec.find(obj);
      if (it != rec.end() && !it->is_object()) fail(source, where + "." + obj, "is not an object");
    }
    // Two records of one case: compare would have to pick one of them (once it kept the first,
    // silently), so it reads neither.
    const auto [seen, fresh] = first.emplace(identity(rec), i);
    if (!fresh)
      fail(source, where,
           quoted(record_key(rec)) + " (" + quoted(rec["kind"].get<std::string>(), 20) + ") is already records[" +
               std::to_string(seen->second) + "]; a result holds each case once");
    const auto series = rec.find("series");
    if (series == rec.end()) continue;
    for (auto it = series->begin(); it != series->end(); ++it) {
      const std::string w = where + ".series." + quoted(it.key(), 40);
      if (!it->is_array()) fail(source, w, std::string("is ") + type_name(*it) + ", not an array");
      if (it->size() > kMaxSeries) fail(source, w, "has more than " + std::to_string(kMaxSeries) + " values");
      for (const json& v : *it)
        if (!v.is_number() && !v.is_string())
          fail(source, w, std::string("holds ") + type_name(v) + ", not a number (or \"nan\"/\"inf\")");
    }
  }
  return doc;
}

std::string read_input_file(const std::filesystem::path& path, const std::string& what) {
  const std::string name = path.string();
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; fstat refuses it
  // before any read, as it does a device (/dev/zero never ends) or a directory.
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    fail(name, "",
         err == ENOENT ? std::string("no such file") : "cannot be read: " + std::generic_category().message(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(name, "", "cannot be read: " + std::generic_category().message(errno));
  if (S_ISDIR(st.st_mode)) fail(name, "", "is a directory, not a " + what);
  if (!S_ISREG(st.st_mode))
    fail(name, "",
         std::string("is ") +
             (S_ISFIFO(st.st_mode)   ? "a FIFO"
              : S_ISCHR(st.st_mode)  ? "a character device"
              : S_ISBLK(st.st_mode)  ? "a block device"
              : S_ISSOCK(st.st_mode) ? "a socket"
                                     : "not a plain file") +
             ", not a " + what + " (compare reads regular files only)");
  auto too_large = [&] {
    fail(name, "",
         "is larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB, more than compare reads (a " + what +
             " is a few MiB at most)");
  };
  if (uint64_t(st.st_size) > kMaxInputBytes) too_large();
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  text.reserve(std::size_t(st.st_size));
  char buf[65536];
  for (;;) {  // the size may have changed since fstat: stop one read past the limit
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(name, "", "cannot be read: " + std::generic_category().message(errno));
    if (r == 0) break;
    text.append(buf, std::size_t(r));
    if (text.size() > kMaxInputBytes) too_large();
  }
  return text;
}

json read_result_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = read_input_file(path, "result file");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail(name, "", "empty file, not a trainbench result");
  return parse_result_text(text, name);
}

Comparison compare_results(const json& base, const json& neu, const CompareOptions& opt, const std::string& base_source,
                           const std::string& new_source) {
  TB_CHECK(std::isfinite(opt.threshold) && opt.threshold >= 0, kOp, "the threshold must be a percentage >= 0");
  Comparison c;
  c.base_source = base_source;
  c.new_source = new_source;
  c.base_run = run_line(base);
  c.new_run = run_line(neu);
  c.threshold = opt.threshold;
  c.resamples = c.resamples_asked = std::max(1, opt.resamples);
  c.relative = opt.relative;
  const auto b = entries_of(base), n = entries_of(neu);
  // A name that two kinds of record share (a correctness and a benchmark record) is shown with its kind.
  std::map<std::string, std::set<std::string>> kinds;
  for (const auto* entries : {&b, &n})
    for (const auto& [id, e] : *entries) kinds[e.key].insert(std::get<3>(id));
  auto shown = [&](const Identity& id, const Entry& e) {
    return kinds[e.key].size() > 1 ? e.key + " (" + std::get<3>(id) + ")" : e.key;
  };
  std::map<Identity, const Entry*> in_base;
  for (const auto& [id, e] : b) in_base.emplace(id, &e);
  std::set<Identity> in_new;
  // The bootstraps, run once their number of resamples is known.
  struct Pending {
    std::size_t index;  // into c.benchmarks
    std::vector<const std::vector<double>*> time_num, time_den, ref_num, ref_den;
    uint64_t seed;
  };
  std::vector<Pending> pending;
  double work = 0;  // resampling steps of one resample of every bootstrap
  for (const auto& [id, e] : n) {
    if (!in_new.insert(id).second) continue;
    const auto it = in_base.find(id);
    if (it == in_base.end()) {
      c.only_new.push_back(shown(id, e));
      continue;
    }
    ++c.in_both;
    const Entry& be = *it->second;
    CaseComparison x;
    x.suite = std::get<0>(id);
    x.case_name = std::get<1>(id);
    x.rank = int(std::get<2>(id));
    x.kind = std::get<3>(id);
    x.show_kind = kinds[e.key].size() > 1;
    x.base_status = be.status;
    x.new_status = e.status;
    x.new_message = e.rec->value("message", std::string());
    if (be.status != e.status) c.status_changes.push_back(x);
    if (x.kind != "benchmark" || e.status != "pass" || be.status != "pass") continue;
    // A record that timed only a reference (a torch peer's) compares that; any other its engine.
    const bool engine = !be.engine.empty() || !e.engine.empty() || (be.reference.empty() && e.reference.empty());
    const std::vector<double>& bs = engine ? be.engine : be.reference;
    const std::vector<double>& ns = engine ? e.engine : e.reference;
    x.series = engine ? "engine_time_s" : "reference_time_s";
    x.base_n = bs.size();
    x.new_n = ns.size();
    x.base_median_s = median(bs);
    x.new_median_s = median(ns);
    Pending p{c.benchmarks.size(), {&ns}, {&bs}, {}, {}, hash(e.key, opt.seed)};
    if (!bs.empty() && !ns.empty()) work += resample_cost({&ns, &bs}, opt.direct_resample);
    if (engine && !be.reference.empty() && !e.reference.empty() && !bs.empty() && !ns.empty()) {
      x.base_engine_over_ref = median(bs) / median(be.reference);
      x.new_engine_over_ref = median(ns) / median(e.reference);
      p.ref_num = {&ns, &be.reference};
      p.ref_den = {&e.reference, &bs};
      work += resample_cost({&ns, &be.reference, &e.reference, &bs}, opt.direct_resample);
    }
    std::vector<std::string> notes;
    if (be.dropped + e.dropped)
      notes.push_back(std::to_string(be.dropped + e.dropped) + " non-finite or non-positive times ignored");
    if (be.out_of_range + e.out_of_range)
      notes.push_back(std::to_string(be.out_of_range + e.out_of_range) + " times outside " + kTimeRange + " ignored");
    for (const std::string& s : notes) x.note += (x.note.empty() ? "" : ", ") + s;
    pending.push_back(std::move(p));
    c.benchmarks.push_back(std::move(x));
  }
  // Bounded work (Note [Compare statistics]): fewer resamples past the budget, none below the least
  // that still gives a 95% interval worth a verdict.
  if (work * double(c.resamples) > opt.work_budget) {
    const double fit = std::floor(opt.work_budget / work);
    if (fit < double(std::min(kMinResamples, c.resamples_asked)))
      throw core::Error(kOp, printable(base_source) + " and " + printable(new_source) + ": " +
                                 std::to_string(c.benchmarks.size()) +
                                 " benchmark cases with their repetition times are more than compare bootstraps in "
                                 "bounded time, even at " +
                                 std::to_string(kMinResamples) + " resamples; compare fewer records");
    c.resamples = int(fit);
  }
  for (const Pending& p : pending) {
    CaseComparison& x = c.benchmarks[p.index];
    x.time = bootstrap(p.time_num, p.time_den, c.resamples, opt.direct_resample, p.seed);
    if (!p.ref_num.empty())
      x.vs_reference = bootstrap(p.ref_num, p.ref_den, c.resamples, opt.direct_resample, p.seed ^ 0x5bd1e995u);
    const bool relative = opt.relative && x.vs_reference.valid;
    x.verdict = verdict_of(relative ? x.vs_reference : x.time, opt.threshold);
    if (x.verdict == Verdict::NoSamples && x.note.empty()) x.note = "no series." + x.series + " to compare";
    std::size_t fewest = std::min(x.base_n, x.new_n);
    if (relative)
      for (const std::vector<const std::vector<double>*>& side : {p.ref_num, p.ref_den})
        for (const std::vector<double>* v : side) fewest = std::min(fewest, v->size());
    if (x.verdict != Verdict::NoSamples && fewest < kMinRepetitions) {
      x.verdict = Verdict::TooNoisy;
      x.note += std::string(x.note.empty() ? "" : ", ") + std::to_string(fewest) +
                " repetition(s) on a side: " + "a verdict needs " + std::to_string(kMinRepetitions) +
                " (bench --repetitions)";
    }
  }
  std::set<Identity> listed;
  for (const auto& [id, e] : b)
    if (!in_new.count(id) && listed.insert(id).second) c.only_base.push_back(shown(id, e));
  // A pull-request comment leads with what needs attention: slower, then the rest by verdict.
  std::stable_sort(c.benchmarks.begin(), c.benchmarks.end(),
                   [](const CaseComparison& l, const CaseComparison& r) { return l.verdict < r.verdict; });
  std::stable_sort(c.status_changes.begin(), c.status_changes.end(),
                   [](const CaseComparison& l, const CaseComparison& r) {
                     return (is_bad(l.new_status) && !is_bad(l.base_status)) >
                            (is_bad(r.new_status) && !is_bad(r.base_status));
                   });
  return c;
}

std::string comparison_text(const Comparison& c) { return render(c, false); }
std::string comparison_markdown(const Comparison& c) { return render(c, true); }

// ---- bounds ----

double PerfBounds::bound_for(const std::string& family) const {
  for (const auto& [f, b] : families)
    if (f == family) return b;
  return default_bound;
}

PerfBounds parse_perf_bounds(std::string_view text, const std::string& source) {
  const json doc = checkpoint::parse_untrusted_json(text, kOp, source);
  if (!doc.is_object()) fail(source, "", "not a bounds file: the top level is not an object");
  if (doc.value("schema", json()) != kBoundsSchema)
    fail(source, "schema", std::string("must be \"") + kBoundsSchema + "\"");
  auto positive = [&](const json& v, const std::string& where) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 1)
      fail(source, where, "must be a number >= 1 (an engine/LibTorch time ratio)");
    return v.get<double>();
  };
  PerfBounds b;
  const auto suite = doc.find("suite");
  if (suite == doc.end() || !suite->is_string() || suite->get<std::string>().empty())
    fail(source, "suite", "must be a suite name");
  b.suite = suite->get<std::string>();
  const auto def = doc.find("default_max_ratio");
  if (def == doc.end()) fail(source, "default_max_ratio", "missing");
  b.default_bound = positive(*def, "default_max_ratio");
  const auto fam = doc.find("family_max_ratio");
  if (fam != doc.end()) {
    if (!fam->is_object()) fail(source, "family_max_ratio", "must be an object: family -> ratio");
    for (auto it = fam->begin(); it != fam->end(); ++it)
      b.families.emplace_back(it.key(), positive(*it, "family_max_ratio." + checkpoint::text_excerpt(it.key(), 40)));
  }
  return b;
}

std::size_t BoundsCheck::over() const {
  return std::size_t(std::count_if(rows.begin(), rows.end(), [](const BoundsRow& r) { return r.over(); }));
}

BoundsCheck check_bounds(const json& result, const PerfBounds& bounds) {
  BoundsCheck c;
  for (const json& rec : result["records"]) {
    if (rec["suite"] != bounds.suite || rec["kind"] != "benchmark") continue;
    if (rec["status"] != "pass") {
      ++c.not_passed;
      continue;
    }
    const auto m = rec.find("metrics");
    auto num = [&](const char* k) {
      if (m == rec.end()) return double(NAN);
      const auto it = m->find(k);
      return it != m->end() && it->is_number() ? it->get<double>() : double(NAN);
    };
    // The smaller of the median and the fastest-repetition ratios: a burst of load on this shared
    // machine inflates one of them, a real slowdown both. A pair of times is used when both are
    // numbers; one outside [kMinTime, kMaxTime] (0, 1e300) makes the row unusable, which counts
    // as over its bound: a ratio of 1e300 / 1e-300 is no reason to pass.
    BoundsRow row;
    row.ratio = NAN;
    bool any = false;
    for (const auto& [ek, rk] :
         {std::pair{"engine_median_s", "reference_median_s"}, {"engine_min_s", "reference_min_s"}}) {
      const double e = num(ek), r = num(rk);
      if (std::isnan(e) || std::isnan(r)) continue;
      any = true;
      if (!(e >= kMinTime && e <= kMaxTime && r >= kMinTime && r <= kMaxTime)) {
        if (row.problem.empty())
          row.problem = std::string(ek) + " " + fmt_number(e) + ", " + rk + " " + fmt_number(r) + ": not times from " +
                        kTimeRange;
        continue;
      }
      row.ratio = std::isnan(row.ratio) ? e / r : std::min(row.ratio, e / r);
    }
    row.case_name = rec["case"].get<std::string>();
    if (!any) {
      c.unchecked.push_back(row.case_name);
      continue;
    }
    if (!row.problem.empty()) row.ratio = NAN;
    row.family = row.case_name.substr(0, row.case_name.find('/'));
    row.bound = bounds.bound_for(row.family);
    c.rows.push_back(std::move(row));
  }
  // Unusable rows first, then by how far over (or near) their bound.
  std::stable_sort(c.rows.begin(), c.rows.end(), [](const BoundsRow& l, const BoundsRow& r) {
    if (l.problem.empty() != r.problem.empty()) return !l.problem.empty();
    return l.problem.empty() && l.ratio / l.bound > r.ratio / r.bound;
  });
  return c;
}

std::string nothing_to_check(const BoundsCheck& c, const PerfBounds& b, const std::string& source) {
  std::ostringstream os;
  os << printable(source) << ": no passed benchmark row of suite " << quoted(b.suite)
     << " with engine and LibTorch times (";
  if (c.not_passed == 0 && c.unchecked.empty()) os << "no benchmark record of that suite";
  else os << c.not_passed << " did not pass, " << c.unchecked.size() << " passed without the times";
  os << "): nothing to check";
  return os.str();
}

std::string bounds_text(const BoundsCheck& c, const PerfBounds& b, bool markdown) {
  std::ostringstream os;
  const std::string suite = markdown ? md_text(b.suite) : printable(b.suite);
  os << (markdown ? "## " : "") << "trainbench compare --bounds: suite " << suite << ", " << c.rows.size()
     << " benchmark rows, " << c.over() << " over their family's bound (engine/LibTorch time, same run)\n\n";
  std::vector<std::vector<std::string>> rows = {{"case", "engine/LibTorch", "bound", "verdict"}};
  const std::size_t shown = std::max<std::size_t>(c.over(), std::min<std::size_t>(5, c.rows.size()));
  for (std::size_t i = 0; i < shown && i < c.rows.size(); ++i) {
    const BoundsRow& r = c.rows[i];
    rows.push_back({r.case_name, fmt_ratio(r.ratio), fmt_ratio(r.bound),
                    !r.problem.empty() ? "OVER (no usable ratio: " + r.problem + ")"
                    : r.over()         ? "OVER"
                                       : "within"});
  }
  if (rows.size() > 1) os << (c.over() ? "" : "closest to their bounds:\n") << table(rows, markdown) << '\n';
  if (c.not_passed) os << c.not_passed << " benchmark rows did not pass (no figure to check)\n";
  if (!c.unchecked.empty()) {
    os << c.unchecked.size() << " passed benchmark rows without engine and LibTorch times (not checked):";
    for (std::size_t i = 0; i < c.unchecked.size() && i < 5; ++i)
      os << (i ? ", " : " ") << (markdown ? md_code(quoted(c.unchecked[i])) : quoted(c.unchecked[i]));
    if (c.unchecked.size() > 5) os << ", ...";
    os << '\n';
  }
  if (c.rows.empty()) os << "no passed benchmark rows of suite " << suite << " to check\n";
  return os.str();
}

}  // namespace tb::harness
