// Option checks shared by the subcommands' CLIs (CLI11 validators).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tb::harness {

// A range check that reads "--timeout: must be between 1 and 86400 seconds (got 0)" and refuses
// nan and inf (CLI11's own Range lets nan through). `integer`: whole numbers only.
CLI::Validator between(double lo, double hi, const std::string& unit, bool integer = false);

// --hostfile: an existing regular file that names at least one host.
CLI::Validator hostfile_check();

}  // namespace tb::harness
