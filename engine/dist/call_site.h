// Call-site labels: where the program issued a collective ("ddp/bucket 3 (12 params, 4.0 MiB)",
// "fsdp/blocks.0/all_gather", or a user's own tag), recorded with every flight-recorder entry
// (JSON key "label") and shown by the watchdog's diagnosis, the straggler line, DETAIL's mismatch
// errors and `trainbench analyze`. A CallSite guard sets this thread's label until it goes out of
// scope (nested guards: the innermost wins); calls issued with no guard have an empty label.
//   { tb::dist::CallSite site("eval/accuracy"); group->all_reduce(t)->wait(); }
// Cheap: the guard stores a view and the recorder copies it into a slot that keeps its capacity
// (Note [Recorder cost] in flight_recorder.cpp), so a steady-state call allocates nothing.
#pragma once
#include <string>
#include <string_view>

namespace tb::dist {

class CallSite {
 public:
  // A string literal (or any text that outlives the guard): kept by pointer.
  explicit CallSite(const char* label) : CallSite(std::string_view(label)) {}
  // Text that must outlive the guard (e.g. a label precomputed once per bucket): kept by view.
  explicit CallSite(std::string_view label);
  // A temporary: the guard keeps its own copy.
  explicit CallSite(std::string&& label);
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;

  // This thread's current label ("" when no guard is alive).
  static std::string_view current();

 private:
  std::string owned_;
  std::string_view label_;
  const CallSite* prev_;
};

}  // namespace tb::dist
