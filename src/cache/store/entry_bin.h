// entry.bin: the record of an entry's entry.json in a binary form, beside it
// in the entry directory, which a command-line hit reads instead of parsing
// the JSON text (a module's hundreds of header records made that parse most
// of a hit's CPU time; docs/cache.md, "entry.bin").
//
// It is a memo, never the truth: it names the full stamp (device, inode,
// size, mtime, ctime) of the entry.json it was derived from and is used only
// while entry.json has exactly that stamp; it is written only from an
// entry.json whose stamp had settled (util/stamp.h), so an in-place rewrite
// within one timestamp tick cannot keep it. Its record goes through the
// same checks as entry.json's (checked_entry), and every lookup checks the
// record against the files as for entry.json. Anything unreadable, foreign
// or of another version is ignored (then entry.json is parsed and, where the
// root is writable, entry.bin written again). Machine-local: never exported.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::cache {

inline constexpr const char* kEntryBinFileName = "entry.bin";

// The bytes of entry.bin for `record`, read from entry.json at `of`.
std::string entry_bin_bytes(const EntryRecord& record, const util::FullStamp& of);

// The record `bytes` hold, unchecked, when they are entry.bin bytes of this
// version derived from entry.json at exactly `of`; nullopt for anything else.
std::optional<EntryRecord> entry_from_bin(std::string_view bytes, const util::FullStamp& of);

}  // namespace tvmffi_jit::cache
