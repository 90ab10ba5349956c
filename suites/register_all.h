// Registers every suite with the harness; called once by trainbench's main().
#pragma once

namespace tb::suites {
void register_all();
}
