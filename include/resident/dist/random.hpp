#pragma once
/// @file random.hpp
/// Random fills of sharded arrays: shard r is filled at offset + its first element's place in the
/// whole array, so the values are exactly those of a one-device fill of the same length (the counter
/// is global). One kernel per shard, all shards at once; asynchronous.

#include <concepts>
#include <cstdint>

#include "resident/dist/sharded_array.hpp"
#include "resident/random/random.hpp"

namespace resident::dist::random {

/// a[i] = value i of the uniform stream (seed, offset) in [low, high), i over the whole array.
/// @throws invalid_argument as rs::random::fill_uniform, before any work.
template <class T>
void fill_uniform(sharded_array<T>& a, std::uint64_t seed, std::uint64_t offset = 0, T low = T(0), T high = T(1)) {
  (void)resident::random::uniform<T>(seed, offset, low, high);  // checked on every process, shards or none
  for_each_shard(a, [&](array_ref<T> s, shard_extent e) { resident::random::fill_uniform(s, seed, offset + e.offset, low, high); });
}

/// a[i] = value i of the normal stream (seed, offset), i over the whole array.
/// @throws invalid_argument as rs::random::fill_normal, before any work.
template <class T>
void fill_normal(sharded_array<T>& a, std::uint64_t seed, std::uint64_t offset = 0, T mean = T(0), T sd = T(1)) {
  (void)resident::random::normal<T>(seed, offset, mean, sd);
  for_each_shard(a, [&](array_ref<T> s, shard_extent e) { resident::random::fill_normal(s, seed, offset + e.offset, mean, sd); });
}

/// a[i] = an integer uniform in [low, high) (value i of the stream), i over the whole array.
/// @throws invalid_argument as rs::random::fill_integers, before any work.
template <class T, std::integral L, std::integral H>
void fill_integers(sharded_array<T>& a, std::uint64_t seed, std::uint64_t offset, L low, H high) {
  (void)resident::random::integers<T>(seed, offset, low, high);
  for_each_shard(a, [&](array_ref<T> s, shard_extent e) { resident::random::fill_integers(s, seed, offset + e.offset, low, high); });
}

/// a[i] = raw word i of the stream (seed, offset), i over the whole array (uint32_t arrays).
template <class T>
void fill_bits(sharded_array<T>& a, std::uint64_t seed, std::uint64_t offset = 0) {
  for_each_shard(a, [&](array_ref<T> s, shard_extent e) { resident::random::fill_bits(s, seed, offset + e.offset); });
}

}  // namespace resident::dist::random
