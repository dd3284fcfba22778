#include "tvmffi_jit/util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tvmffi_jit::util {

void parallel_for(size_t count, int workers, const std::function<void(size_t)>& job) {
  if (count == 0) return;
  if (workers <= 0) workers = static_cast<int>(std::thread::hardware_concurrency());
  workers = std::max(1, std::min<int>(workers, static_cast<int>(count)));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex mutex;
  auto worker = [&] {
    for (;;) {
      if (failed.load()) return;
      size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  if (workers == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < workers; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace tvmffi_jit::util
