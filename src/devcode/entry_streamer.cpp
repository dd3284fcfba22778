#include "devcode/entry_streamer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace tvmffi_jit::devcode {

namespace {

// [begin, end) ranges of entries holding about `kernels_per_chunk` kernels each.
std::vector<EntryChunk> chunk_entries(const std::vector<Entry>& entries, size_t kernels_per_chunk) {
  std::vector<EntryChunk> chunks;
  size_t begin = 0, kernels = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    kernels += 1 + entries[i].kernels.size();
    if (kernels >= kernels_per_chunk || i + 1 == entries.size()) {
      chunks.emplace_back(begin, i + 1);
      begin = i + 1;
      kernels = 0;
    }
  }
  return chunks;
}

}  // namespace

void EntryStreamer::write(const std::vector<Entry>& entries, const EntryFormatter& format) {
  const std::vector<EntryChunk> chunks = chunk_entries(entries, kChunkKernels);
  if (threads_ == 1 || chunks.size() < 2) {
    std::string text;
    for (auto [b, e] : chunks) {
      text.clear();
      format(entries, b, e, text);
      put(text);
    }
    return;
  }
  write_in_parallel(entries, chunks, format);
}

// Workers format chunks at most `window` ahead of this thread, which writes
// them in order; the first failure is rethrown once every chunk is taken.
void EntryStreamer::write_in_parallel(const std::vector<Entry>& entries, const std::vector<EntryChunk>& chunks,
                                      const EntryFormatter& format) {
  size_t workers = std::min<size_t>(threads_, chunks.size());
  size_t window = 4 * workers;
  struct Slot {
    std::string text;
    std::exception_ptr error;
    bool ready = false;
  };
  std::vector<Slot> slots(window);
  std::mutex mutex;
  std::condition_variable formatted, written_cv;
  size_t written = 0;  // chunks handed to fwrite (guarded by mutex)
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        written_cv.wait(lock, [&] { return i < written + window; });
      }
      std::string text;
      std::exception_ptr error;
      try {
        format(entries, chunks[i].first, chunks[i].second, text);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        Slot& slot = slots[i % window];
        slot.text = std::move(text);
        slot.error = error;
        slot.ready = true;
      }
      formatted.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < workers; ++t) pool.emplace_back(worker);
  std::exception_ptr first_error;
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::string text;
    {
      std::unique_lock<std::mutex> lock(mutex);
      Slot& slot = slots[i % window];
      formatted.wait(lock, [&] { return slot.ready; });
      text = std::move(slot.text);
      if (slot.error && !first_error) first_error = slot.error;
      slot = Slot{};
    }
    // Every chunk is taken even after a failure, so no worker waits forever.
    if (!first_error) put(text);
    {
      std::lock_guard<std::mutex> lock(mutex);
      written = i + 1;
    }
    written_cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace tvmffi_jit::devcode
