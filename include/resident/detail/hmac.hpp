#pragma once
/// @file hmac.hpp
/// Internal: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), which verify the kernel cache's entries
/// against a per-user key before anything in them is loaded (src/jit/cache.cpp).

#include <array>
#include <string>
#include <string_view>

namespace resident::detail {

using digest256 = std::array<unsigned char, 32>;

/// SHA-256 of bytes.
digest256 sha256(std::string_view bytes);
/// HMAC-SHA256 of message under key.
digest256 hmac_sha256(std::string_view key, std::string_view message);
/// The digest as 64 lowercase hex digits.
std::string hex(const digest256& d);
/// Compares two byte strings in time that depends on their length only.
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace resident::detail
