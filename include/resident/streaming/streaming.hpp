#pragma once
/// @file streaming/streaming.hpp
/// Deprecated: include resident/out_of_core/out_of_core.hpp (the out-of-core layer's header, which
/// also declares the old names stream_pipeline, stream_options and stream_summary as deprecated aliases).
#include "resident/out_of_core/out_of_core.hpp"
