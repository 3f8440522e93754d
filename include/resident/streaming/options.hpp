#pragma once
/// @file streaming/options.hpp
/// Deprecated: include resident/out_of_core/options.hpp (out_of_core_options, out_of_core_summary);
/// the old names stream_options and stream_summary come with out_of_core/deprecated.hpp.
#include "resident/out_of_core/deprecated.hpp"
#include "resident/out_of_core/options.hpp"
