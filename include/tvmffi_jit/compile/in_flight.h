// Object keys being compiled right now in this process (batch builds).
#pragma once

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

namespace tvmffi_jit::compile {

// Object keys being compiled right now in this process, so that modules of
// a batch that share a translation unit compile it once: the second waits
// for the first, then takes its object from the store.
class InFlightUnits {
 public:
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& o) noexcept;
    Claim& operator=(Claim&& o) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim();  // releases an owned key
    // true: the caller compiles the unit. false: another thread did (or
    // failed to); look it up again.
    bool owned() const { return owned_; }

   private:
    friend class InFlightUnits;
    InFlightUnits* owner_ = nullptr;
    std::string key_;
    bool owned_ = false;
  };
  // Owns `key` when nobody does; else waits until its owner lets go.
  Claim claim(const std::string& key);

 private:
  void release(const std::string& key);
  std::mutex mutex_;
  std::condition_variable released_;
  std::set<std::string> busy_;
};

}  // namespace tvmffi_jit::compile
