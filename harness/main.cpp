// The `trainbench` executable: registers the suites, then hands over to the harness CLI.
#include <exception>
#include <iostream>

#include "harness/cli.h"
#include "suites/register_all.h"

int main(int argc, char** argv) {
  try {
    tb::suites::register_all();
    return tb::harness::main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "trainbench: error: " << e.what() << '\n';
  } catch (...) {
    std::cerr << "trainbench: error: unknown exception\n";
  }
  return 2;
}
