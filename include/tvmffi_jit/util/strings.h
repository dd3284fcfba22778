// Small string helpers used across layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tvmffi_jit::util {

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
std::string_view trim(std::string_view s);
std::string to_lower(std::string_view s);
// Splits on any of `delims`, dropping empty pieces.
std::vector<std::string> split_any(std::string_view s, std::string_view delims);
std::vector<std::string> split_lines(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// `s` padded with spaces to `width` (never cut): columns of a text table.
std::string pad_right(std::string_view s, size_t width);
std::string pad_left(std::string_view s, size_t width);

// Quotes one argument for display so a user can paste the command into a shell.
// (Display only: processes are always spawned with an argv, never a shell.)
std::string shell_quote(std::string_view arg);
std::string format_command(const std::vector<std::string>& argv);

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

// "12.3 MiB" style.
std::string format_bytes(uint64_t bytes);
// "500M", "2G", "1024", "10KiB" -> bytes; nullopt if malformed.
std::optional<uint64_t> parse_size(std::string_view text);
// "30s", "15m", "12h", "7d", "2w" -> seconds; nullopt if malformed.
std::optional<int64_t> parse_duration_seconds(std::string_view text);
// "250ms", "5s", "2m" (and every unit above) -> milliseconds; a bare number is
// seconds, as above. nullopt if malformed.
std::optional<int64_t> parse_duration_ms(std::string_view text);
// The boolean spellings every switch of the tool accepts (environment
// variables included), case-insensitively: 1/true/yes/on/y and
// 0/false/no/off/n. nullopt for anything else ("2", "", "enable"), which the
// caller refuses naming the variable: a typo must not silently pick a side.
std::optional<bool> parse_bool(std::string_view text);

std::string hex_encode(const uint8_t* data, size_t size);
// Lower-case hex (as hex_encode writes it) back to bytes; nullopt if malformed.
std::optional<std::string> hex_decode(std::string_view hex);

// Standard base64 (RFC 4648, padded). decode: nullopt for anything else
// (other characters, bad padding, whitespace, over 1 MiB of text).
std::string base64_encode(const std::string& bytes);
std::optional<std::string> base64_decode(const std::string& text);

}  // namespace tvmffi_jit::util
