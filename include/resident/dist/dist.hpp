#pragma once
/// @file dist.hpp
/// Beyond one device: communicators, sharded arrays, pipelines and random fills over shards.
#include "resident/dist/communicator.hpp"
#include "resident/dist/random.hpp"
#include "resident/dist/sharded_array.hpp"
