#pragma once
// Bindings of streaming (streaming.cpp), the profile as an object (profile.cpp) and several devices
// (dist.cpp): each file defines one bind_* function, called once from NB_MODULE.
#include <nanobind/nanobind.h>

#include "bindings.hpp"

#include <optional>
#include <string>

#include "resident/insight/detail/call_scope.hpp"
#include "resident/insight/profile.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::py {

void bind_streaming(nanobind::module_& m);
void bind_profile(nanobind::module_& m);
void bind_dist(nanobind::module_& m);
void bind_pool(nanobind::module_& m);

/// The user's Python line as the call site of the calls made while this lives (bindings.hpp's).
using python_call_site = python_site;

}  // namespace resident::py
