// `trainbench compare`'s reading, statistics and tables. See result_compare.h, Note [Compare
// statistics], and docs/compare.md.
#include "harness/result_compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

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

[[noreturn]] void fail(const std::string& source, const std::string& where, const std::string& what) {
  throw core::Error(kOp, source + ": " + where + (where.empty() ? "" : ": ") + what);
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

std::string first_line(const std::string& s, std::size_t max_chars = 160) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > max_chars ? checkpoint::text_excerpt(line, max_chars) : line;
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

double resampled_median(const std::vector<double>& v, Rng& rng, std::vector<double>& scratch) {
  scratch.resize(v.size());
  for (double& x : scratch) x = v[rng.below(v.size())];
  return median_of(scratch);
}

// The percentile bootstrap of prod(median(num_i)) / prod(median(den_i)) (Note [Compare statistics]).
RatioCI bootstrap(const std::vector<const std::vector<double>*>& num,
                  const std::vector<const std::vector<double>*>& den, const CompareOptions& opt, uint64_t seed) {
  RatioCI r;
  for (const auto* s : num)
    if (s->empty()) return r;
  for (const auto* s : den)
    if (s->empty()) return r;
  auto ratio_of = [&](auto&& med) {
    double x = 1;
    for (const auto* s : num) x *= med(*s);
    for (const auto* s : den) x /= med(*s);
    return x;
  };
  r.valid = true;
  r.ratio = ratio_of([](const std::vector<double>& s) { return median(s); });
  Rng rng{core::Generator(seed)};
  std::vector<double> scratch, ratios;
  const int n = std::max(1, opt.resamples);
  ratios.reserve(std::size_t(n));
  for (int i = 0; i < n; ++i)
    ratios.push_back(ratio_of([&](const std::vector<double>& s) { return resampled_median(s, rng, scratch); }));
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
  std::string status;
  std::vector<double> engine, reference;  // positive finite repetition times
  std::size_t dropped = 0;                // values that were not
};

std::vector<double> samples(const json& rec, const char* name, std::size_t& dropped) {
  std::vector<double> out;
  const auto s = rec.find("series");
  if (s == rec.end()) return out;
  const auto it = s->find(name);
  if (it == s->end()) return out;
  for (const json& v : *it) {  // types checked by parse_result_text
    const double x = v.is_number() ? v.get<double>() : NAN;
    if (std::isfinite(x) && x > 0) out.push_back(x);
    else ++dropped;
  }
  return out;
}

std::string record_key(const json& rec) {
  std::string k = rec["suite"].get<std::string>() + "/" + rec["case"].get<std::string>();
  const auto r = rec.find("rank");
  if (r != rec.end() && r->get<int64_t>() != 0) k += " (rank " + std::to_string(r->get<int64_t>()) + ")";
  return k;
}

// Records by key, in file order; a repeated key keeps its first record.
std::vector<std::pair<std::string, Entry>> entries_of(const json& result) {
  std::vector<std::pair<std::string, Entry>> out;
  std::set<std::string> seen;
  for (const json& rec : result["records"]) {
    std::string k = record_key(rec);
    if (!seen.insert(k).second) continue;
    Entry e;
    e.rec = &rec;
    e.status = rec["status"].get<std::string>();
    e.engine = samples(rec, "engine_time_s", e.dropped);
    e.reference = samples(rec, "reference_time_s", e.dropped);
    out.emplace_back(std::move(k), std::move(e));
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

std::string fmt_ratio(double r) {
  if (!std::isfinite(r)) return "-";
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(r >= 100 ? 0 : r >= 10 ? 1 : 2);
  os << r << 'x';
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
std::string table(const std::vector<std::vector<std::string>>& rows, bool markdown) {
  std::ostringstream os;
  if (rows.empty()) return "";
  if (markdown) {
    auto cell = [](std::string s) {
      std::string out;
      for (char c : s) {
        if (c == '|') out += "\\|";
        else if (c == '\n') out += ' ';
        else out += c;
      }
      return out;
    };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << '|';
      for (const std::string& c : rows[i]) os << ' ' << cell(c) << " |";
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
  os << (md ? "- " : "") << "BASE: " << (md ? "`" + c.base_source + "`" : c.base_source) << " (" << c.base_run << ")\n";
  os << (md ? "- " : "") << "NEW:  " << (md ? "`" + c.new_source + "`" : c.new_source) << " (" << c.new_run << ")\n";
  os << (md ? "- " : "") << "threshold " << percent(c.threshold) << "; NEW/BASE of the median time per call with its "
     << "95% bootstrap interval (" << c.resamples << " resamples); verdicts from "
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
    for (const std::string& k : keys) os << (md ? "- `" + k + "`" : "  " + k) << '\n';
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
  return suite + "/" + case_name + (rank ? " (rank " + std::to_string(rank) + ")" : "");
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
    const auto series = rec.find("series");
    if (series == rec.end()) continue;
    for (auto it = series->begin(); it != series->end(); ++it) {
      const std::string w = where + ".series." + checkpoint::text_excerpt(it.key(), 40);
      if (!it->is_array()) fail(source, w, std::string("is ") + type_name(*it) + ", not an array");
      if (it->size() > kMaxSeries) fail(source, w, "has more than " + std::to_string(kMaxSeries) + " values");
      for (const json& v : *it)
        if (!v.is_number() && !v.is_string())
          fail(source, w, std::string("holds ") + type_name(v) + ", not a number (or \"nan\"/\"inf\")");
    }
  }
  return doc;
}

json read_result_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(name, "", "is a directory, not a result file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(name, "", std::filesystem::exists(path, ec) ? "cannot be read" : "no such file");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
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
  c.resamples = std::max(1, opt.resamples);
  c.relative = opt.relative;
  const auto b = entries_of(base), n = entries_of(neu);
  std::map<std::string, const Entry*> in_base;
  for (const auto& [k, e] : b) in_base[k] = &e;
  std::set<std::string> in_new;
  for (const auto& [k, e] : n) {
    in_new.insert(k);
    const auto it = in_base.find(k);
    if (it == in_base.end()) {
      c.only_new.push_back(k);
      continue;
    }
    const Entry& be = *it->second;
    CaseComparison x;
    x.suite = (*e.rec)["suite"].get<std::string>();
    x.case_name = (*e.rec)["case"].get<std::string>();
    x.rank = int(e.rec->value("rank", int64_t(0)));
    x.base_status = be.status;
    x.new_status = e.status;
    x.new_message = e.rec->value("message", std::string());
    if (be.status != e.status) c.status_changes.push_back(x);
    const bool bench = (*e.rec)["kind"] == "benchmark" && (*be.rec)["kind"] == "benchmark";
    if (!bench || e.status != "pass" || be.status != "pass") continue;
    // A record that timed only a reference (a torch peer's) compares that; any other its engine.
    const bool engine = !be.engine.empty() || !e.engine.empty() || (be.reference.empty() && e.reference.empty());
    const std::vector<double>& bs = engine ? be.engine : be.reference;
    const std::vector<double>& ns = engine ? e.engine : e.reference;
    x.series = engine ? "engine_time_s" : "reference_time_s";
    x.base_n = bs.size();
    x.new_n = ns.size();
    x.base_median_s = median(bs);
    x.new_median_s = median(ns);
    const uint64_t seed = hash(k, opt.seed);
    x.time = bootstrap({&ns}, {&bs}, opt, seed);
    if (engine && !be.reference.empty() && !e.reference.empty() && !bs.empty() && !ns.empty()) {
      x.base_engine_over_ref = median(bs) / median(be.reference);
      x.new_engine_over_ref = median(ns) / median(e.reference);
      x.vs_reference = bootstrap({&ns, &be.reference}, {&e.reference, &bs}, opt, seed ^ 0x5bd1e995u);
    }
    x.verdict = verdict_of(opt.relative && x.vs_reference.valid ? x.vs_reference : x.time, opt.threshold);
    if (be.dropped + e.dropped)
      x.note = std::to_string(be.dropped + e.dropped) + " non-finite or non-positive times ignored";
    if (x.verdict == Verdict::NoSamples && x.note.empty()) x.note = "no series." + x.series + " to compare";
    c.benchmarks.push_back(std::move(x));
  }
  for (const auto& [k, e] : b)
    if (!in_new.count(k)) c.only_base.push_back(k);
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
    if (m == rec.end()) continue;
    auto num = [&](const char* k) {
      const auto it = m->find(k);
      return it != m->end() && it->is_number() ? it->get<double>() : NAN;
    };
    // The smaller of the median and the fastest-repetition ratios: a burst of load on this shared
    // machine inflates one of them, a real slowdown both.
    const double med = num("engine_median_s") / num("reference_median_s");
    const double fastest = num("engine_min_s") / num("reference_min_s");
    double ratio = std::isfinite(med) && med > 0 ? med : NAN;
    if (std::isfinite(fastest) && fastest > 0) ratio = std::isnan(ratio) ? fastest : std::min(ratio, fastest);
    if (std::isnan(ratio)) continue;
    BoundsRow row;
    row.case_name = rec["case"].get<std::string>();
    row.family = row.case_name.substr(0, row.case_name.find('/'));
    row.ratio = ratio;
    row.bound = bounds.bound_for(row.family);
    c.rows.push_back(std::move(row));
  }
  std::stable_sort(c.rows.begin(), c.rows.end(),
                   [](const BoundsRow& l, const BoundsRow& r) { return l.ratio / l.bound > r.ratio / r.bound; });
  return c;
}

std::string bounds_text(const BoundsCheck& c, const PerfBounds& b, bool markdown) {
  std::ostringstream os;
  os << (markdown ? "## " : "") << "trainbench compare --bounds: suite " << b.suite << ", " << c.rows.size()
     << " benchmark rows, " << c.over() << " over their family's bound (engine/LibTorch time, same run)\n\n";
  std::vector<std::vector<std::string>> rows = {{"case", "engine/LibTorch", "bound", "verdict"}};
  const std::size_t shown = std::max<std::size_t>(c.over(), std::min<std::size_t>(5, c.rows.size()));
  for (std::size_t i = 0; i < shown && i < c.rows.size(); ++i) {
    const BoundsRow& r = c.rows[i];
    rows.push_back({r.case_name, fmt_ratio(r.ratio), fmt_ratio(r.bound), r.over() ? "OVER" : "within"});
  }
  if (rows.size() > 1) os << (c.over() ? "" : "closest to their bounds:\n") << table(rows, markdown) << '\n';
  if (c.not_passed) os << c.not_passed << " benchmark rows did not pass (no figure to check)\n";
  if (c.rows.empty()) os << "no passed benchmark rows of suite " << b.suite << " to check\n";
  return os.str();
}

}  // namespace tb::harness
