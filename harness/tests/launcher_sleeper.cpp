// A rank for launcher_test that hangs in a function with a known name, so the stacks read at the
// launch timeout can be checked to name it. `launcher_sleeper sleep`: every rank sleeps there;
// `launcher_sleeper stop R`: rank R stops itself (SIGSTOP, a frozen host) in another, the others
// sleep. Not inlined, and no tail call, so both functions keep a frame of their own.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace tb_launcher_test {

[[gnu::noinline]] void rank_sleeps_in_here() {
  for (;;) ::sleep(1000);
}

[[gnu::noinline]] void rank_stops_itself_here() {
  ::raise(SIGSTOP);
  for (;;) ::pause();
}

}  // namespace tb_launcher_test

int main(int argc, char** argv) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (argc == 3 && std::strcmp(argv[1], "stop") == 0 && rank && std::strcmp(rank, argv[2]) == 0)
    tb_launcher_test::rank_stops_itself_here();
  if (argc >= 2) tb_launcher_test::rank_sleeps_in_here();
  return 2;
}
