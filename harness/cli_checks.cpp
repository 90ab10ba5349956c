// Option checks shared by the subcommands' CLIs (cli_checks.h).
#include "harness/cli_checks.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tb::harness {
namespace fs = std::filesystem;
namespace {

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

// A range check that reads "--timeout: must be between 1 and 86400 seconds (got 0)" where CLI11's
// own prints the type's limits (a 309-digit bound for PositiveNumber), and that refuses nan and
// inf, which a plain range check lets through. `integer`: whole numbers only.
CLI::Validator between(double lo, double hi, const std::string& unit, bool integer) {
  const std::string range = number_text(lo) + " and " + number_text(hi) + (unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::size_t used = 0;
        double v = NAN;
        try {
          v = integer ? static_cast<double>(std::stoll(text, &used)) : std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(v) || v < lo || v > hi)
          return std::string("must be ") + (integer ? "a whole number " : "") + "between " + range + " (got '" + text +
                 "')";
        return {};
      },
      "[" + number_text(lo) + "-" + number_text(hi) + "]");
}

// --hostfile: mpirun reads it only after the run folder exists and answers a missing file with
// "an internal error has occurred in ORTE", a directory with a flex scanner error, and an empty
// path not at all (every rank then runs here): checked up front, as a usage error.
CLI::Validator hostfile_check() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "an empty path (leave --hostfile out to run every rank on this host)";
        std::error_code ec;
        const fs::file_status st = fs::status(path, ec);
        if (ec || !fs::exists(st)) return "no such file: '" + path + "'";
        if (fs::is_directory(st)) return "'" + path + "' is a directory, not a hostfile";
        if (!fs::is_regular_file(st)) return "'" + path + "' is not a regular file";
        std::ifstream f(path);
        if (!f) return "cannot read '" + path + "'";
        std::string line;
        for (int n = 0; n < 100000 && std::getline(f, line); ++n) {  // mpirun's syntax: HOST [slots=N], # comments
          const std::string host = line.substr(0, line.find('#'));
          if (host.find_first_not_of(" \t\r") != std::string::npos) return {};
        }
        return "'" + path + "' names no host (every line is blank or a comment)";
      },
      "PATH");
}

}  // namespace tb::harness
