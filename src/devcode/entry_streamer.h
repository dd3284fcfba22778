// Between the JSON and text printers (devcode/print_json.cpp,
// devcode/print_text.cpp): the writer of a long list of entries, formatted in
// chunks on several threads and written in order. Private to the devcode layer.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

// Formats entries [begin, end) of a list, appending to `out`.
using EntryFormatter = std::function<void(const std::vector<Entry>&, size_t, size_t, std::string&)>;
// Entries [first, second) of a list.
using EntryChunk = std::pair<size_t, size_t>;

// Streams the text of a list of entries (the elements of a JSON "entries"
// array, or the kernel tables of the text output) to `out`. The list is cut
// into chunks of about kChunkKernels kernels; with threads > 1, workers
// format chunks while this thread writes them in order (at most `window`
// chunks ahead of the writer, so memory stays flat), giving the same bytes
// as one thread.
class EntryStreamer {
 public:
  EntryStreamer(std::FILE* out, unsigned threads) : out_(out), threads_(std::max(1u, threads)) {}
  bool ok() const { return ok_; }

  void put(const std::string& text) {
    ok_ = ok_ && std::fwrite(text.data(), 1, text.size(), out_) == text.size();
  }

  // Formats `entries` chunk by chunk with `format` and writes the chunks in order.
  void write(const std::vector<Entry>& entries, const EntryFormatter& format);

 private:
  void write_in_parallel(const std::vector<Entry>& entries, const std::vector<EntryChunk>& chunks,
                         const EntryFormatter& format);
  static constexpr size_t kChunkKernels = 256;
  std::FILE* out_;
  unsigned threads_;
  bool ok_ = true;
};

}  // namespace tvmffi_jit::devcode
