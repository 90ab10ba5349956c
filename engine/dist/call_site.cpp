#include "engine/dist/call_site.h"

namespace tb::dist {

namespace {
thread_local const CallSite* t_current = nullptr;
}

CallSite::CallSite(std::string_view label) : label_(label), prev_(t_current) { t_current = this; }

CallSite::CallSite(std::string&& label) : owned_(std::move(label)), prev_(t_current) {
  label_ = owned_;
  t_current = this;
}

CallSite::~CallSite() { t_current = prev_; }

std::string_view CallSite::current() { return t_current ? t_current->label_ : std::string_view(); }

}  // namespace tb::dist
